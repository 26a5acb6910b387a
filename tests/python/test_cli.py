"""The `kael` command line as a whole (each subcommand has its own test file)."""


def test_an_unknown_subcommand_is_named_with_the_known_ones(kael):
    result = kael("frobnicate", check=False)
    assert result.returncode != 0
    message = result.stderr.decode()
    assert message.startswith("error: unknown subcommand 'frobnicate'"), message
    for known in ("generate", "inspect", "serve", "tokenize"):
        assert known in message, message
    assert kael("--version").returncode == 0  # options before a subcommand still reach CLI11


def test_no_subcommand_lists_the_known_ones(kael):
    result = kael(check=False)
    message = result.stderr.decode()
    assert result.returncode == 1 and message.startswith("error: no subcommand"), message
    for known in ("generate", "inspect", "serve", "tokenize"):
        assert known in message, message


def test_generate_json_has_one_shape_in_every_mode(kael, gpt2_f16_dir):
    """{"prompt_ids", "choices": [...], "ids", "text"} for one choice, --n and --beams; the top-level
    ids and text (the one-choice shape of earlier releases) are the first choice's."""
    import json

    base = ["generate", "--model", gpt2_f16_dir, "--ids", "464,3616,286", "--max-tokens", 4, "--threads", 1, "--json"]
    for mode in (["--greedy"], ["--n", 2, "--seed", 3], ["--beams", 2]):
        out = json.loads(kael(*base, *mode).stdout)
        assert list(out) == ["prompt_ids", "choices", "ids", "text"], (mode, out)
        assert out["prompt_ids"] == [464, 3616, 286]
        first = out["choices"][0]
        assert {"ids", "text", "finish_reason"} <= set(first) and out["ids"] == first["ids"], mode
        assert out["text"] == first["text"], mode


def test_statistics_start_their_own_line_when_both_streams_share_a_file(kael, gpt2_f16_dir, tmp_path):
    """2>&1 into one file (or a terminal): the text ends its line before the statistics line."""
    import subprocess

    from conftest import kael_binary

    log = tmp_path / "both.txt"
    with open(log, "wb") as both:
        subprocess.run([str(kael_binary()), "generate", "--model", str(gpt2_f16_dir), "--ids", "464,3616",
                        "--max-tokens", "3", "--threads", "1", "--greedy", "--ignore-eos"], stdout=both, stderr=both,
                       check=True, timeout=120)
    lines = log.read_bytes().decode(errors="replace").splitlines()
    assert lines[-1].startswith("prompt: 2 tokens"), lines
