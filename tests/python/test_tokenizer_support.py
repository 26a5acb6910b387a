"""Helpers for the tokenizer tests (no tests here): `kael tokenize --jsonl` run on a batch of
texts, and `kael tokenize|detokenize --jsonl` kept open as a coprocess asked one line at a time."""
import json
import subprocess

from conftest import GPT2_DIR, kael_binary


def tokenize_batch(kael, texts, *extra):
    """Ids of each text, all in one `kael tokenize --jsonl` run."""
    lines = "".join(json.dumps(text) + "\n" for text in texts).encode("utf-8")
    out = kael("tokenize", "--model", GPT2_DIR, "--jsonl", *extra, input=lines).stdout.decode("utf-8")
    answers = [json.loads(line) for line in out.splitlines()]
    assert len(answers) == len(texts)
    return answers


class JsonlProcess:
    """`kael <command> --jsonl` as a coprocess: ask(value) writes one JSON line, reads one back."""

    def __init__(self, command):
        self.process = subprocess.Popen([str(kael_binary()), command, "--model", str(GPT2_DIR), "--jsonl"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask(self, value):
        self.process.stdin.write(json.dumps(value).encode("utf-8") + b"\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"kael exited: {self.process.stderr.read().decode(errors='replace')}")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.stdout.close()
        self.process.stderr.close()
        assert self.process.wait(timeout=30) == 0
