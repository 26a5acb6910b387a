"""kael as a library others build on: `cmake --install` into a temporary prefix, then a project
outside the tree (tests/consumer) finds it with find_package(kael) and with pkg-config, and its
greedy tokens equal `kael generate --greedy --json`. The installed headers are the public ones
only, each compiles on its own, and every version agrees with CMakeLists.txt."""
import json
import os
import pathlib
import shutil
import struct
import subprocess

import pytest

from conftest import ROOT
from install_support import build_against, installed_prefix, project_version, run  # noqa: F401 (fixture)

PROMPT_IDS = [464, 3616, 286, 1204, 318]  # "The meaning of life is"
TOKENS = 16


@pytest.fixture(scope="module")
def cli_greedy_ids(kael, gpt2_f16_dir):
    result = kael("generate", "--model", gpt2_f16_dir, "--ids", ",".join(map(str, PROMPT_IDS)), "--greedy", "--json",
                  "--max-tokens", TOKENS, "--threads", 1)
    out = json.loads(result.stdout)
    assert out["prompt_ids"] == PROMPT_IDS and len(out["ids"]) == TOKENS
    return out["ids"]


@pytest.fixture(scope="module")
def consumer_build(installed_prefix, tmp_path_factory) -> pathlib.Path:
    """tests/consumer built once against the installed kael."""
    return build_against(installed_prefix, ROOT / "tests" / "consumer", tmp_path_factory.mktemp("consumer"))


def parse_consumer(stdout: str) -> dict:
    lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in stdout.splitlines())
    return {"version": lines["version"], "generate": [int(x) for x in lines["generate"].split()],
            "session": [int(x) for x in lines["session"].split()]}


def test_installed_files(installed_prefix):
    p = installed_prefix
    for path in ["bin/kael", "lib/libkael.a", "lib/libkael.so", "include/kael/kael.hpp", "include/kael/version.hpp",
                 "lib/cmake/kael/kaelConfig.cmake", "lib/cmake/kael/kaelConfigVersion.cmake",
                 "lib/cmake/kael/kaelTargets.cmake", "lib/pkgconfig/kael.pc"]:
        assert (p / path).exists(), f"{path} was not installed"
    headers = sorted(str(h.relative_to(p / "include")) for h in (p / "include").rglob("*") if h.is_file())
    public = sorted(str(h.relative_to(ROOT / "include")) for h in (ROOT / "include").rglob("*.hpp"))
    assert headers == sorted(public + ["kael/version.hpp"])  # the public headers, nothing from src/
    version = run([p / "bin" / "kael", "--version"]).stdout.strip()
    assert version == f"kael {project_version()}"


def test_each_public_header_compiles_alone(installed_prefix, tmp_path):
    """Against the installed include/ only: a header that reached into src/ (or forgot an include) fails."""
    include = installed_prefix / "include"
    units = []
    for i, header in enumerate(sorted(include.rglob("*.hpp"))):
        units.append(tmp_path / f"unit{i}.cpp")
        units[-1].write_text(f'#include "{header.relative_to(include)}"\n')
    run(["g++", "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", f"-I{include}", *units])


def test_cmake_consumer_generates_the_cli_tokens(installed_prefix, consumer_build, gpt2_f16_dir, cli_greedy_ids):
    build = consumer_build
    ids = ",".join(map(str, PROMPT_IDS))
    for program in ["consumer", "consumer_static"]:
        out = parse_consumer(run([build / program, gpt2_f16_dir, TOKENS, ids]).stdout)
        assert out == {"version": project_version(), "generate": cli_greedy_ids, "session": cli_greedy_ids}, program
    # the shared one really is linked to the installed libkael.so
    ldd = run(["ldd", build / "consumer"]).stdout
    assert str(installed_prefix / "lib" / "libkael.so") in ldd, ldd


def book_snippet_bytes() -> bytes:
    """The 160 bytes the book shows for save_safetensors(path, {{"b", ones({2, 2})}, {"a", arange(0, 3, 1, I64)}}),
    from the format's rules: a little-endian u64 header length, the JSON header with the names sorted and no
    spaces, then each tensor's little-endian data in the header's order ("a" first)."""
    header = ('{"a":{"data_offsets":[0,24],"dtype":"I64","shape":[3]},'
              '"b":{"data_offsets":[24,40],"dtype":"F32","shape":[2,2]}}').encode()
    assert len(header) == 112  # a multiple of 8 already, so no padding
    data = struct.pack("<3q", 0, 1, 2) + struct.pack("<4f", 1.0, 1.0, 1.0, 1.0)
    return struct.pack("<Q", len(header)) + header + data


def test_book_snippet_writes_the_books_bytes(consumer_build, tmp_path):
    """tests/consumer/book_snippet.cpp, the book's first snippet through kael/kael.hpp, built against the
    installed kael: every byte of the file it writes, and the safetensors package reads it back."""
    expected = book_snippet_bytes()
    assert len(expected) == 160
    path = tmp_path / "book.safetensors"
    run([consumer_build / "book_snippet", path])
    written = path.read_bytes()
    assert len(written) == len(expected), (len(written), written)
    first = next((i for i, (x, y) in enumerate(zip(written, expected)) if x != y), None)
    assert first is None, f"byte {first} differs: {written[first:first + 16]!r} vs {expected[first:first + 16]!r}"
    try:
        from safetensors.numpy import load_file
    except ImportError:
        return
    loaded = load_file(str(path))
    assert sorted(loaded) == ["a", "b"]
    assert loaded["a"].dtype.str == "<i8" and loaded["a"].tolist() == [0, 1, 2]
    assert loaded["b"].dtype.str == "<f4" and loaded["b"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_the_books_pipeline_generates_text(consumer_build, gpt2_small_dir, kael):
    """tests/consumer/book_pipeline.cpp, the chapter's generation pipeline on GPT-2 small's shape: seeded
    sampling prints the prompt and new text, the same twice; greedy equals the engine's greedy text."""
    prompt = b"The meaning of life is"
    sampled = run([consumer_build / "book_pipeline", gpt2_small_dir], text=False).stdout  # may split a character
    assert sampled.startswith(prompt) and len(sampled) > len(prompt) + 1, sampled
    assert run([consumer_build / "book_pipeline", gpt2_small_dir], text=False).stdout == sampled
    greedy = run([consumer_build / "book_pipeline", gpt2_small_dir, "0"], text=False).stdout
    engine = kael("generate", "--model", gpt2_small_dir, prompt.decode(), "--greedy", "--max-tokens", 12, "--threads", 1,
                  "--ignore-eos").stdout
    assert greedy == prompt + engine + b"\n"


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config_consumer(installed_prefix, gpt2_f16_dir, cli_greedy_ids, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(installed_prefix / "lib" / "pkgconfig"))
    assert run(["pkg-config", "--modversion", "kael"], env=env).stdout.strip() == project_version()
    flags = run(["pkg-config", "--cflags", "--libs", "kael"], env=env).stdout.split()
    program = tmp_path / "consumer"
    run(["g++", "-std=c++20", "-O1", ROOT / "tests" / "consumer" / "main.cpp", "-o", program, *flags])
    env["LD_LIBRARY_PATH"] = str(installed_prefix / "lib")
    out = parse_consumer(run([program, gpt2_f16_dir, TOKENS, ",".join(map(str, PROMPT_IDS))], env=env).stdout)
    assert out["generate"] == cli_greedy_ids and out["session"] == cli_greedy_ids


def test_python_versions_agree():
    import importlib.metadata

    import kael

    assert kael.__version__ == project_version()
    assert importlib.metadata.version("kael") == project_version()  # pyproject.toml reads CMakeLists.txt


def test_installed_kael_finds_and_checks_the_bundled_model(installed_prefix, tmp_path):
    """Without --model and without data/gpt2, the installed kael uses <prefix>/share/kael/models/kael-tiny-kjv
    (found from its own place, whatever the working directory), and refuses a damaged copy there."""
    source = ROOT / "models" / "kael-tiny-kjv"
    bundle = installed_prefix / "share" / "kael" / "models" / "kael-tiny-kjv"
    assert sorted(p.name for p in bundle.iterdir()) == sorted(p.name for p in source.iterdir())
    args = ["generate", "In the beginning", "--greedy", "--max-tokens", "8", "--threads", "1"]
    result = run([installed_prefix / "bin" / "kael", *args], cwd=tmp_path)
    assert f"model: {bundle} (the bundled kael-tiny-kjv" in result.stderr, result.stderr
    assert result.stdout.strip()

    moved = tmp_path / "moved-prefix"  # a prefix moved elsewhere still finds its model
    shutil.copytree(installed_prefix / "bin", moved / "bin")
    shutil.copytree(installed_prefix / "share", moved / "share")
    weights = moved / "share" / "kael" / "models" / "kael-tiny-kjv" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of the last weight
    weights.write_bytes(data)
    damaged = subprocess.run([moved / "bin" / "kael", *args], cwd=tmp_path, capture_output=True, text=True)
    assert damaged.returncode != 0 and damaged.stdout == ""
    assert f"'{weights}' is damaged" in damaged.stderr, damaged.stderr
