"""Helpers for the `kael serve` tests (no tests here): start the server on a free loopback
port, wait for /health, stop it for sure; small HTTP and SSE clients on the standard library
so a test sees exactly the bytes the server sent."""
import contextlib
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time

from conftest import kael_binary

HOST = "127.0.0.1"
START_TIMEOUT = 60  # seconds for the model to load and /health to answer


def free_port() -> int:
    """A port free on the loopback now (the kernel picks it; the server binds it just after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def small_checkpoint(directory, *, n_layer=4, n_head=4, n_embd=256, n_positions=512, seed=11):
    """A seeded GPT-2 checkpoint small enough that CI runs many requests quickly."""
    import gpt2_reference

    return gpt2_reference.make_checkpoint(directory, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                                          n_positions=n_positions, seed=seed)


class Server:
    """`kael serve` as a subprocess. Use as a context manager: it stops the server (SIGTERM,
    then SIGKILL) even when the test fails."""

    def __init__(self, model_dir, *args, log_dir=None, headers=None):
        """`headers`: sent with every request this object makes (an Authorization, say)."""
        self.headers = dict(headers or {})
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.log_path = pathlib.Path(log_dir or model_dir) / f"serve-{self.port}.log"
        self.args = [str(kael_binary()), "serve", "--model", str(model_dir), "--host", HOST,
                     "--port", str(self.port), *map(str, args)]
        self.process = None

    def __enter__(self):
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"kael serve exited with {self.process.returncode}: {self.log()}")
            with contextlib.suppress(OSError):
                status, body = self.request("GET", "/health", timeout=2)
                if status == 200 and json.loads(body)["status"] == "ok":
                    return self
            time.sleep(0.1)
        self.__exit__(None, None, None)
        raise AssertionError(f"kael serve did not answer /health within {START_TIMEOUT} s: {self.log()}")

    def __exit__(self, exc_type, *exc):
        stopped_cleanly = True
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                stopped_cleanly = False
                self.process.kill()
                self.process.wait(timeout=20)
        self._log.close()
        if exc_type is None:  # SIGTERM is a clean stop: exit code 0, within the time allowed
            assert stopped_cleanly, f"kael serve ignored SIGTERM: {self.log()}"
            assert self.process.returncode == 0, f"kael serve exited with {self.process.returncode}: {self.log()}"
        return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, method, path, body=None, *, headers=None, timeout=120):
        """(status, body bytes). `body`: bytes sent as is, or an object sent as JSON."""
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            if body is not None and not isinstance(body, (bytes, bytearray)):
                body = json.dumps(body).encode()
            all_headers = {"Content-Type": "application/json"} if body is not None else {}
            all_headers.update(self.headers)
            all_headers.update(headers or {})
            connection.request(method, path, body=body, headers=all_headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def post_json(self, path, body, **kwargs):
        status, data = self.request("POST", path, body, **kwargs)
        return status, json.loads(data)

    def get_json(self, path):
        status, data = self.request("GET", path)
        assert status == 200, (path, status, data)
        return json.loads(data)

    def complete(self, **fields):
        """A non-streamed completion that must succeed; the response object."""
        status, body = self.post_json("/v1/completions", fields)
        assert status == 200, (status, body)
        return body

    def stream(self, **fields):
        """A streamed completion that must succeed: (list of event payloads as parsed JSON,
        raw bytes). Checks the SSE framing: only `data:` events, [DONE] last and once."""
        connection = http.client.HTTPConnection(HOST, self.port, timeout=120)
        try:
            connection.request("POST", "/v1/completions", body=json.dumps({**fields, "stream": True}).encode(),
                               headers={"Content-Type": "application/json", **self.headers})
            response = connection.getresponse()
            raw = response.read()
            assert response.status == 200, (response.status, raw)
            assert response.getheader("Content-Type").startswith("text/event-stream")
        finally:
            connection.close()
        return parse_sse(raw), raw

    def metric(self, name, labels="") -> float:
        """The value of one sample in /metrics (0 when absent)."""
        status, text = self.request("GET", "/metrics")
        assert status == 200
        key = f"{name}{{{labels}}}" if labels else name
        for line in text.decode().splitlines():
            if line.startswith(key + " "):
                return float(line.split()[-1])
        return 0.0


def raw_stream(port, body, timeout=120, pause=0.0):
    """A streamed completion read with plain socket calls and decoded at the end: the
    cheapest client Python can be, so many of them measure the server, not the GIL. With
    `pause`, it sleeps that long between reads (the kernel buffers the stream meanwhile), so
    16 client threads wake far less often than once per token.
    Returns the SSE body bytes (chunked transfer encoding removed); asserts status 200."""
    data = json.dumps({**body, "stream": True}).encode()
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: kael\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode() +
                     b"\r\n\r\n" + data)
        parts = []
        while chunk := sock.recv(1 << 16):
            parts.append(chunk)
            if pause:
                time.sleep(pause)
    response = b"".join(parts)
    head, _, rest = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"transfer-encoding: chunked" in head.lower(), head
    return dechunk(rest)


def dechunk(rest: bytes) -> bytes:
    """A complete chunked body (after the response head) without its framing; asserts the framing."""
    body_bytes = bytearray()
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return bytes(body_bytes)
        body_bytes += rest[:size]
        assert rest[size:size + 2] == b"\r\n"
        rest = rest[size + 2:]


def parse_sse(raw: bytes):
    """The JSON payloads of an SSE body; asserts the framing OpenAI clients rely on."""
    text = raw.decode("utf-8")  # the whole stream is valid UTF-8, every chunk included
    events = [e for e in text.split("\n\n")]
    assert events[-1] == "", "the stream must end with a blank line"
    events = events[:-1]
    assert events and events[-1] == "data: [DONE]", events[-3:]
    payloads = []
    for event in events[:-1]:
        lines = [line for line in event.split("\n") if not line.startswith(":")]
        assert len(lines) == 1 and lines[0].startswith("data: "), event
        payloads.append(json.loads(lines[0][len("data: "):]))
    return payloads


def joined_text(payloads) -> str:
    return "".join(p["choices"][0]["text"] for p in payloads if "choices" in p)


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Polls predicate() until it is true or `timeout` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# Many clients at once against one after another (test_serve_concurrency.py checks what they
# get; bench/serve_concurrency.py reports the throughput).

def prompt_for(i):
    return f"Client {i} says: the number {i * 7919} is"


def one_stream(server, i, tokens, pause=0.0):
    """(text, completion tokens) of client i's greedy stream of `tokens` tokens."""
    raw = raw_stream(server.port, {"prompt": prompt_for(i), "max_tokens": tokens, "temperature": 0,
                                   "ignore_eos": True}, pause=pause)
    payloads = parse_sse(raw)
    return joined_text(payloads), payloads[-1]["usage"]["completion_tokens"]


def sequential(server, n, tokens):
    """Clients 0..n-1 one after another: (texts, total tokens, wall seconds)."""
    began = time.perf_counter()
    results = [one_stream(server, i, tokens) for i in range(n)]
    return [r[0] for r in results], sum(r[1] for r in results), time.perf_counter() - began


def concurrent(server, n, tokens):
    """Clients 0..n-1 all at once: (texts, total tokens, wall seconds)."""
    results = [None] * n
    barrier = threading.Barrier(n + 1)

    def client(i):
        barrier.wait()
        # Reading every 10 ms instead of at every token keeps many Python threads from
        # competing with the server for the CPU; it can only delay the last read, which
        # counts against the aggregate figure, never for it.
        results[i] = one_stream(server, i, tokens, pause=0.01)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    began = time.perf_counter()
    for t in threads:
        t.join(timeout=300)
    wall = time.perf_counter() - began
    assert all(r is not None for r in results), "a client did not finish"
    return [r[0] for r in results], sum(r[1] for r in results), wall


def sequential_then_concurrent(server, n, tokens):
    """The same n greedy requests made one after another by one client, then by n clients at
    once (after a warm-up request). Both runs cover the same tokens and about as long a time (on
    a shared machine a short burst gets more CPU than a long run). Returns a dict: alone (texts
    run alone), together (texts run concurrently), tokens (of the concurrent run), single and
    aggregate (tokens/s), mean_batch (the server's mean decode batch during the concurrent run)."""
    one_stream(server, 0, tokens)  # warm-up (page faults, thread pool)
    alone, single_tokens, single_wall = sequential(server, n, tokens)
    sum_before, count_before = server.metric("kael_batch_size_sum"), server.metric("kael_batch_size_count")
    together, total, wall = concurrent(server, n, tokens)
    sum_after, count_after = server.metric("kael_batch_size_sum"), server.metric("kael_batch_size_count")
    return {"alone": alone, "together": together, "tokens": total, "single": single_tokens / single_wall,
            "aggregate": total / wall, "mean_batch": (sum_after - sum_before) / (count_after - count_before)}
