"""The `kael` command line as a whole (each subcommand has its own test file)."""


def test_an_unknown_subcommand_is_named_with_the_known_ones(kael):
    result = kael("frobnicate", check=False)
    assert result.returncode != 0
    message = result.stderr.decode()
    assert message.startswith("error: unknown subcommand 'frobnicate'"), message
    for known in ("generate", "inspect", "serve", "tokenize"):
        assert known in message, message
    assert kael("--version").returncode == 0  # options before a subcommand still reach CLI11
