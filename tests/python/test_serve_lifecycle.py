"""Readiness and drain: /health is 503 while the model loads and once SIGTERM or SIGINT started
the drain; running streams then finish (within --drain-timeout) and the process exits 0; what
still runs at the timeout ends cleanly. The rules are in docs/behaviour.md ("Server lifecycle")."""
import http.client
import json
import signal
import socket
import subprocess
import time

import pytest

from conftest import kael_binary
from test_serve_support import HOST, Server, dechunk, free_port, joined_text, parse_sse, wait_until

# Tokens: a stream still running well after the drain timeout (0.1 s) below. The small checkpoint
# (512 positions) decodes 200 tokens in 0.25-0.29 s on a Zen 4 (`kael bench --prompt-tokens 5
# --max-tokens 200`), so with 200 and a 0.3 s timeout the stream sometimes ended before the
# timeout did; 480 take over twice as long.
LONG = 480


class OpenStream:
    """A greedy stream whose first event has arrived; read() takes the rest as SSE payloads."""

    def __init__(self, port, tokens, prompt="The drain test says"):
        body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
                           "stream": True}).encode()
        self.sock = socket.create_connection((HOST, port), timeout=60)
        self.sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: kael\r\nConnection: close\r\n"
                          b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                          + b"\r\n\r\n" + body)
        self.data = b""
        while b"data: " not in self.data:
            chunk = self.sock.recv(1 << 16)
            assert chunk, self.data
            self.data += chunk

    def read(self):
        while chunk := self.sock.recv(1 << 16):
            self.data += chunk
        self.sock.close()
        head, _, rest = self.data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        return parse_sse(dechunk(rest))


def stop_status(server, timeout=30):
    """The exit code once the process ended by itself."""
    return server.process.wait(timeout=timeout)


def get(port, path, body=None):
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        if body is None:
            connection.request("GET", path)
        else:
            connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.getheader("Retry-After"), response.read()
    finally:
        connection.close()


def test_health_is_503_until_the_model_is_loaded(serve_model_dir, tmp_path):
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    process = subprocess.Popen([str(kael_binary()), "serve", "--model", str(serve_model_dir), "--host", HOST,
                                "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        health, completions = [], []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (health and health[-1][0] == 200):
            assert process.poll() is None
            try:
                health.append(get(port, "/health"))
                completions.append(get(port, "/v1/completions", {"prompt": "Hi", "max_tokens": 1}))
            except OSError:
                time.sleep(0.002)  # not bound yet
        # It listens before it loads: the first answer is "loading", with a Retry-After.
        status, retry_after, body = health[0]
        assert (status, json.loads(body)) == (503, {"status": "loading"}) and retry_after, health[0]
        assert health[-1][0] == 200 and json.loads(health[-1][2])["status"] == "ok"
        assert all(s in (503, 200) for s, _, _ in health)
        loading = [c for c in completions if c[0] == 503]
        assert loading, "no completion was sent while loading"
        for status, retry_after, body in loading:
            assert retry_after and "the model is still loading" in json.loads(body)["error"]["message"]
        assert all(c[0] in (503, 200) for c in completions)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        log.close()


def test_sigterm_drains_running_streams_then_exits_0(serve_model_dir, tmp_path):
    server = Server(serve_model_dir, "--drain-timeout", 60, log_dir=tmp_path)
    with server:
        alone = joined_text(server.stream(prompt="The drain test says", max_tokens=LONG, temperature=0,
                                          ignore_eos=True)[0])
        streams = [OpenStream(server.port, LONG), OpenStream(server.port, 40, prompt="A short one")]
        server.process.send_signal(signal.SIGTERM)
        # Draining: not ready, and new requests are refused with a Retry-After.
        assert wait_until(lambda: get(server.port, "/health")[0] == 503, timeout=5)
        status, retry_after, body = get(server.port, "/health")
        assert (status, json.loads(body)) == (503, {"status": "draining"}) and retry_after
        status, retry_after, body = get(server.port, "/v1/completions", {"prompt": "Hi", "max_tokens": 1})
        assert status == 503 and retry_after == "1" and "shutting down" in json.loads(body)["error"]["message"]
        assert get(server.port, "/metrics")[0] == 200  # still scraped while draining
        # Both streams run to their end, whole and unchanged.
        long_payloads, short_payloads = streams[0].read(), streams[1].read()
        assert joined_text(long_payloads) == alone
        assert long_payloads[-1]["choices"][0]["finish_reason"] == "length"
        assert short_payloads[-1]["choices"][0]["finish_reason"] == "length"
        assert stop_status(server) == 0
    log = server.log()
    assert "SIGTERM: draining" in log and "drained: every running request finished" in log, log


@pytest.mark.parametrize("ended_by", ["the drain timeout", "a second signal"])
def test_what_still_runs_when_the_drain_ends_ends_cleanly(serve_model_dir, tmp_path, ended_by):
    by_timeout = ended_by == "the drain timeout"
    server = Server(serve_model_dir, "--drain-timeout", 0.1 if by_timeout else 600, log_dir=tmp_path)
    with server:
        stream = OpenStream(server.port, LONG)
        server.process.send_signal(signal.SIGINT if by_timeout else signal.SIGTERM)
        if not by_timeout:
            assert wait_until(lambda: get(server.port, "/health")[0] == 503, timeout=5)
            server.process.send_signal(signal.SIGTERM)
        began = time.monotonic()
        payloads = stream.read()  # parse_sse checks the framing: whole events, [DONE] last
        assert time.monotonic() - began < 10
        assert "shutting down" in payloads[-1]["error"]["message"]
        assert all("choices" in p for p in payloads[:-1])
        assert stop_status(server) == 0
    log = server.log()
    assert "drain ended with 1 requests still running" in log, log
    assert ("SIGINT: draining" if by_timeout else "second stop signal") in log, log


def test_drain_timeout_is_checked(serve_model_dir):
    result = subprocess.run([str(kael_binary()), "serve", "--model", str(serve_model_dir), "--drain-timeout", "-1"],
                            capture_output=True, timeout=30)
    assert result.returncode != 0 and b"--drain-timeout must be in [0, 3600] seconds, found -1" in result.stderr
