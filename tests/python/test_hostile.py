"""What a hostile client or a changing file can do to `kael serve` and the CLI, one test per
case of the probe that found them. Every test starts its own server or process, asserts the
status or error, and that a server still answers /health within a second afterwards with its
memory (VmRSS) under a stated bound."""
import json
import os
import pathlib
import select
import shutil
import socket
import subprocess
import time

import pytest

from conftest import kael_binary
from test_serve_support import HOST, Server, parse_sse, small_checkpoint, wait_until

# A server's memory may grow this much over its idle size during a test: far below what the
# attacks cost before (2.7 GB for four chunked uploads, 2 GB for one 50 MB word).
RSS_GROWTH_BOUND = 96 << 20
HEALTH_WITHIN = 1.0  # seconds


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return small_checkpoint(tmp_path_factory.mktemp("hostile_model"), n_layer=2, n_embd=64, n_head=2,
                            n_positions=128)


def rss_bytes(process) -> int:
    for line in pathlib.Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Guarded(Server):
    """A server that remembers its idle memory and can assert it is still healthy."""

    def __enter__(self):
        super().__enter__()
        self.idle_rss = rss_bytes(self.process)
        return self

    def assert_healthy(self):
        assert self.alive(), self.log()
        start = time.monotonic()
        status, body = self.request("GET", "/health", timeout=HEALTH_WITHIN)
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert time.monotonic() - start < HEALTH_WITHIN
        rss = rss_bytes(self.process)
        assert rss < self.idle_rss + RSS_GROWTH_BOUND, (rss, self.idle_rss)


def exchange(port, data: bytes, timeout=5.0) -> bytes:
    """Sends `data` on a fresh connection and reads until the server closes it."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was read: the answer is waiting
        return read_all(sock)


def read_all(sock) -> bytes:
    parts = []
    try:
        while chunk := sock.recv(1 << 16):
            parts.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(parts)


class Outcome:
    def __init__(self, completed):
        self.returncode = completed.returncode
        self.stderr = completed.stderr.decode(errors="replace")


def cli(kael, *args, timeout=120) -> Outcome:
    """Runs the kael CLI, whatever its exit code; stderr as text."""
    return Outcome(kael(*args, check=False, timeout=timeout))


def all_answer_health(sockets) -> bool:
    """Sends GET /health on each open connection; true when every one answers 200."""
    for sock in sockets:
        sock.sendall(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    return all(status_of(read_all(sock)) == 200 for sock in sockets)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def error_message(response: bytes) -> str:
    return json.loads(response.partition(b"\r\n\r\n")[2])["error"]["message"]


# ---- 1. a model file truncated or rewritten under a running server or a CLI reader

def test_server_survives_its_model_file_being_truncated_and_rewritten(model_dir, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    weights = copy / "model.safetensors"
    with Guarded(copy) as server:
        before = server.complete(prompt="Hello", max_tokens=8, temperature=0)
        with open(weights, "r+b") as f:  # in place: the same inode, as the probe did
            f.truncate(64)
        assert server.complete(prompt="Hello", max_tokens=8, temperature=0)["choices"] == before["choices"]
        with open(weights, "r+b") as f:
            f.write(os.urandom(4096))
        assert server.complete(prompt="Hello", max_tokens=8, temperature=0)["choices"] == before["choices"]
        server.assert_healthy()


def test_cli_readers_never_die_when_the_file_shrinks_during_the_read(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    original = tmp_path / "big.safetensors"
    save_file({f"t{i}": np.full(1 << 20, i, dtype=np.float32) for i in range(24)}, str(original))
    for delay in (0.0, 0.02, 0.05, 0.1, 0.3):
        victim = tmp_path / "victim.safetensors"
        shutil.copy(original, victim)
        process = subprocess.Popen([str(kael_binary()), "inspect", "--stats", str(victim)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        with open(victim, "r+b") as f:
            f.truncate(1 << 16)
        out, err = process.communicate(timeout=120)
        assert process.returncode in (0, 1), (process.returncode, err)  # never a signal (SIGBUS)
        # Finished before the cut, or an error naming the file: the validation (truncated before
        # the open), "changed size" (while read) or "shrank while it was mapped" (while mapped).
        if process.returncode == 1:
            assert err.startswith(b"error: ") and str(victim).encode() in err, err


# ---- 2. FIFOs, sockets and devices given as files

def test_non_regular_files_are_refused_at_once(model_dir, tmp_path, kael):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = cli(kael, "inspect", fifo, timeout=10)
    assert result.returncode == 1 and "is not a regular file (it is a FIFO)" in result.stderr
    result = cli(kael, "inspect", "/dev/zero", timeout=10)
    assert result.returncode == 1 and "character device" in result.stderr
    result = cli(kael, "tokenize", "--model", model_dir, "--file", fifo, timeout=10)
    assert result.returncode == 1 and "FIFO" in result.stderr
    for name in ("vocab.json", "merges.txt", "config.json", "model.safetensors"):
        broken = tmp_path / f"broken-{name}"
        shutil.copytree(model_dir, broken)
        (broken / name).unlink()
        os.mkfifo(broken / name)
        result = cli(kael, "generate", "--model", broken, "hi", "--max-tokens", "1", timeout=20)
        assert result.returncode == 1 and "is not a regular file (it is a FIFO)" in result.stderr, (name, result.stderr)
    assert time.monotonic() - start < 60


# ---- 3. slowloris: a deadline for the whole head, and a cap on connections

def test_slow_heads_time_out_and_never_starve_others(model_dir):
    with Guarded(model_dir, "--max-batch", 1, "--max-queue", 1, "--head-timeout", 2) as server:
        slow = [socket.create_connection((HOST, server.port), timeout=10) for _ in range(24)]
        try:
            opened = time.monotonic()
            while time.monotonic() - opened < 1.2:  # a header byte per socket every 0.3 s
                for sock in slow:
                    try:
                        sock.sendall(b"G")
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # already answered (a loaded machine ran past the deadline)
                server.assert_healthy()
                time.sleep(0.3)
            answers = []
            for sock in slow:  # the whole head was due 2 s after its first byte
                answers.append(read_all(sock))
            assert all(status_of(a) == 408 for a in answers), answers[:2]
            assert "did not arrive within 2000 ms" in error_message(answers[0])
        finally:
            for sock in slow:
                sock.close()
        server.assert_healthy()


def hold_connections(port, count, first_bytes=b"", wait=0.2, timeout=10.0):
    """`count` open connections the server admitted, each sent `first_bytes` (which must not
    complete a request). Right after start-up the connection of the readiness probe may still
    hold a slot for a moment; one refused for it is opened again."""
    held = []
    deadline = time.monotonic() + timeout
    while len(held) < count:
        sock = socket.create_connection((HOST, port), timeout=10)
        if first_bytes:
            sock.sendall(first_bytes)
        refused, _, _ = select.select([sock], [], [], wait)  # a 503 arrives at once, or nothing
        if not refused:
            held.append(sock)
            continue
        sock.close()
        if time.monotonic() > deadline:
            for kept in held:
                kept.close()
            raise AssertionError(f"the server admitted only {len(held)} of {count} connections")
        time.sleep(0.1)
    return held


def test_connections_past_the_cap_are_refused_at_once(model_dir):
    with Guarded(model_dir, "--max-connections", 4) as server:
        idle = hold_connections(server.port, 4)
        try:
            start = time.monotonic()
            refused = exchange(server.port, b"", timeout=5)
            assert status_of(refused) == 503 and time.monotonic() - start < HEALTH_WITHIN
            assert "too many open connections (the limit is 4)" in error_message(refused)
            # A flood past the cap: each one refused cleanly, with a Retry-After.
            flood = [socket.create_connection((HOST, server.port), timeout=10) for _ in range(64)]
            for sock in flood:
                try:
                    sock.sendall(b"GET /health HTTP/1.1\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass
                response = read_all(sock)
                sock.close()
                assert status_of(response) == 503 and b"Retry-After: 1" in response, response[:200]
            # The four admitted connections are still served.
            assert all_answer_health(idle)
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.5)  # the four threads see their clients leave
        server.assert_healthy()


# ---- 4. chunked bodies count against --max-body as they arrive

def test_chunked_body_past_the_limit_is_413(model_dir):
    with Guarded(model_dir, "--max-body", 65536) as server:
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(b"POST /tokenize HTTP/1.1\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"1000\r\n" + b"x" * 4096 + b"\r\n"
            try:
                for _ in range(64):  # 256 KiB offered, four times the limit
                    sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            response = read_all(sock)
        assert status_of(response) == 413, response[:200]
        assert "the chunked body exceeds the limit of 65536 bytes" in error_message(response)
        # Within the limit, chunked works.
        body = json.dumps({"text": "Hello, world!"}).encode()
        response = exchange(server.port, b"POST /tokenize HTTP/1.1\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                            + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        assert status_of(response) == 200 and json.loads(response.partition(b"\r\n\r\n")[2])["ids"] == [15496, 11, 995, 0]
        server.assert_healthy()


# ---- 5. tokenizing one huge word

def test_tokenizer_input_is_bounded_and_long_words_are_cheap(model_dir):
    with Guarded(model_dir, "--max-body", 8 << 20) as server:
        status, body = server.post_json("/tokenize", {"text": "a" * ((1 << 20) + 1)})
        assert status == 413 and "the server tokenizes at most 1048576 bytes per request" in body["error"]["message"]
        status, body = server.post_json("/v1/completions", {"prompt": "b" * ((1 << 20) + 1), "max_tokens": 1})
        assert status == 413 and body["error"]["param"] == "prompt"
        start = time.monotonic()
        status, body = server.post_json("/tokenize", {"text": "q" * (1 << 20)}, timeout=60)
        assert status == 200 and body["count"] > 0
        assert time.monotonic() - start < 30
        server.assert_healthy()


# ---- 6. stop + logprobs: the tokens spell exactly the text

def check_logprobs_spell_text(text, logprobs):
    n = len(logprobs["tokens"])
    assert len(logprobs["bytes"]) == len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"]) == n
    assert len(logprobs["text_offset"]) == n
    assert bytes(b for token in logprobs["bytes"] for b in token).decode("utf-8", "replace") == text


def test_stop_cuts_logprobs_where_it_cuts_the_text(model_dir):
    with Guarded(model_dir) as server:
        request = {"prompt": "The", "max_tokens": 24, "temperature": 0, "logprobs": 2}
        full = server.complete(**request)["choices"][0]
        tokens = [bytes(t) for t in full["logprobs"]["bytes"]]
        raw = b"".join(tokens)
        # A stop string that starts inside a token (its second byte) and first occurs there or
        # later than the start of the text.
        for index in range(1, len(tokens)):
            start = len(b"".join(tokens[:index])) + 1
            stop_bytes = raw[start:start + 2]
            if len(tokens[index]) >= 3 and tokens[index].isascii() and raw.find(stop_bytes) > 0:
                break
        else:
            pytest.fail(f"no token to cut inside in {tokens}")
        stop = stop_bytes.decode()
        cut = raw.find(stop_bytes)
        choice = server.complete(**request, stop=[stop])["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["text"] == raw[:cut].decode("utf-8", "replace")
        check_logprobs_spell_text(choice["text"], choice["logprobs"])
        assert len(choice["logprobs"]["tokens"]) <= index + 1
        payloads, _ = server.stream(**request, stop=[stop])
        streamed = {"tokens": [], "bytes": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for p in payloads:
            if p["choices"][0]["logprobs"]:
                for key in streamed:
                    streamed[key] += p["choices"][0]["logprobs"][key]
        assert streamed == choice["logprobs"]
        server.assert_healthy()


# ---- 7. a stop string holding U+FFFD

def test_stop_string_with_replacement_character_matches(model_dir):
    with Guarded(model_dir) as server:
        for seed in range(40):
            request = {"prompt": "x", "max_tokens": 48, "temperature": 1.5, "seed": seed}
            text = server.complete(**request)["choices"][0]["text"]
            at = text.find("\ufffd")
            if at > 0:
                break
        else:
            pytest.skip("no seed gave a completion with invalid UTF-8")
        stop = text[at - 1:at + 1]  # the character before it and U+FFFD
        choice = server.complete(**request, stop=[stop])["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["text"] == text[:text.find(stop)]
        server.assert_healthy()


# ---- 8. pipelined requests

def test_pipelined_requests_are_answered_in_order(model_dir):
    with Guarded(model_dir) as server:
        body = json.dumps({"text": "Hello, world!"}).encode()
        data = (b"GET /health HTTP/1.1\r\nHost: k\r\n\r\n"
                b"POST /tokenize HTTP/1.1\r\nHost: k\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body +
                b"GET /v1/models HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n")
        start = time.monotonic()
        response = exchange(server.port, data)
        assert time.monotonic() - start < 3
        answers = []
        while response:
            head, _, rest = response.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
            answers.append((status_of(head), json.loads(rest[:length])))
            response = rest[length:]
        assert [status for status, _ in answers] == [200, 200, 200]
        assert answers[0][1]["status"] == "ok"
        assert answers[1][1]["ids"] == [15496, 11, 995, 0]
        assert answers[2][1]["object"] == "list"
        server.assert_healthy()


# ---- 9. HTTP/1.0 streaming

def test_http10_stream_is_close_delimited_http10(model_dir):
    with Guarded(model_dir) as server:
        body = json.dumps({"prompt": "Hi", "max_tokens": 4, "stream": True}).encode()
        response = exchange(server.port, b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body, timeout=60)
        head, _, sse = response.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200"), head
        assert b"transfer-encoding" not in head.lower() and b"connection: close" in head.lower()
        payloads = parse_sse(sse)
        assert payloads[-1]["choices"][0]["finish_reason"] == "length"
        server.assert_healthy()


# ---- 10. Content-Length

@pytest.mark.parametrize("value, status, message", [
    (b"-1", 400, "Content-Length must be a decimal number"),
    (b"12abc", 400, "Content-Length must be a decimal number"),
    (b"abc", 400, "Content-Length must be a decimal number"),
    (b"", 400, "Content-Length must be a decimal number"),
    (b"99999999999999999999", 413, "exceeds the limit"),
    (None, 411, "needs a Content-Length"),
])
def test_bad_content_length_is_refused_at_once(model_dir, value, status, message):
    with Guarded(model_dir) as server:
        length = b"" if value is None else b"Content-Length: " + value + b"\r\n"
        start = time.monotonic()
        response = exchange(server.port, b"POST /tokenize HTTP/1.1\r\nContent-Type: application/json\r\n" + length +
                            b"\r\n{\"text\": \"hi\"}")
        assert time.monotonic() - start < HEALTH_WITHIN
        assert status_of(response) == status and message in error_message(response), response
        server.assert_healthy()


# ---- 11. messages that say what is wrong

def test_messages_name_the_real_problem(model_dir, tmp_path, kael):
    with Guarded(model_dir) as server:
        for field in ("seed", "max_tokens"):
            status, body = server.request("POST", "/v1/completions",
                                          f'{{"prompt": "hi", "{field}": 18446744073709551616}}'.encode())
            assert status == 400
            assert "too large for 64 bits" in json.loads(body)["error"]["message"], body
        status, body = server.request("POST", "/v1/completions", b'{"prompt": [18446744073709551616]}')
        assert status == 400 and "too large for 64 bits" in json.loads(body)["error"]["message"]
        server.assert_healthy()

    config = json.loads((model_dir / "config.json").read_text())
    for key in ("n_positions", "vocab_size"):
        broken = tmp_path / f"big-{key}"
        shutil.copytree(model_dir, broken)
        (broken / "config.json").write_text(json.dumps({**config, key: 1 << 40}))
        result = cli(kael, "generate", "--model", broken, "hi")
        assert result.returncode == 1 and f"{key} is 1099511627776, which is too large" in result.stderr, result.stderr

    directory = tmp_path / "vocab-dir"
    shutil.copytree(model_dir, directory)
    (directory / "vocab.json").unlink()
    (directory / "vocab.json").mkdir()
    result = cli(kael, "tokenize", "--model", directory, "hi")
    assert result.returncode == 1 and "is not a regular file (it is a directory)" in result.stderr

    huge = tmp_path / "huge-merges"
    shutil.copytree(model_dir, huge)
    with open(huge / "merges.txt", "a") as f:
        f.write("a" * (5 << 20) + " b\n")
    result = cli(kael, "tokenize", "--model", huge, "hi")
    assert result.returncode == 1 and len(result.stderr) < 2000, len(result.stderr)

    no_config = tmp_path / "no-config"
    shutil.copytree(model_dir, no_config)
    (no_config / "config.json").unlink()
    result = cli(kael, "generate", "--model", no_config, "hi")
    assert result.returncode == 1 and "there is no config.json" in result.stderr
    assert "GPT-2 small's configuration was assumed" in result.stderr


# ---- 12. --threads and header counts

def test_threads_are_capped_with_a_warning(model_dir, kael):
    result = cli(kael, "generate", "--model", model_dir, "hi", "--max-tokens", "2", "--threads", "10000")
    assert result.returncode == 0, result.stderr
    assert "warning: --threads 10000 is more than" in result.stderr and "(4 per CPU)" in result.stderr


def test_too_many_headers_is_431(model_dir):
    with Guarded(model_dir, "--threads", 100000) as server:
        assert "warning: --threads 100000 is more than" in server.log()
        start = time.monotonic()
        response = exchange(server.port, b"GET /health HTTP/1.1\r\n" + b"X-Filler: y\r\n" * 100_000 + b"\r\n")
        assert time.monotonic() - start < 3
        assert status_of(response) == 431, response[:200]
        response = exchange(server.port, b"GET /health HTTP/1.1\r\n" + b"X-Filler: y\r\n" * 101 + b"\r\n")
        assert status_of(response) == 431 and "too many header fields: 101" in error_message(response)
        server.assert_healthy()


# ---- 13. bad input in front of a production server: each gets a clean error or close, and
# the server keeps serving the others meanwhile

def test_one_oversized_header_is_431_at_once(model_dir):
    with Guarded(model_dir) as server:
        start = time.monotonic()
        response = exchange(server.port, b"GET /health HTTP/1.1\r\nX-Big: " + b"z" * (40 << 10) + b"\r\n\r\n")
        assert status_of(response) == 431 and "the request head exceeds 32768 bytes" in error_message(response)
        # Never ending: no blank line ever comes, and the cap still applies.
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nX-Big: ")
            try:
                for _ in range(64):
                    sock.sendall(b"z" * 1024)
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert status_of(read_all(sock)) == 431
        assert time.monotonic() - start < 5
        server.assert_healthy()


def test_a_body_that_never_ends_times_out_and_frees_its_connection(model_dir):
    with Guarded(model_dir, "--max-connections", 3, "--body-timeout", 1) as server:
        # every connection slot held by a body that stops after 10 of 100 bytes
        stuck = hold_connections(server.port, 3, b"POST /tokenize HTTP/1.1\r\nContent-Type: application/json\r\n"
                                                 b'Content-Length: 100\r\n\r\n{"text": "', wait=0.1)
        try:  # within the 1 s body timeout of the first
            assert status_of(exchange(server.port, b"GET /health HTTP/1.1\r\n\r\n")) == 503  # the cap, at once
            began = time.monotonic()
            answers = [read_all(sock) for sock in stuck]
            assert time.monotonic() - began < 5
            assert all(status_of(a) == 408 for a in answers), answers[:1]
            assert "the request body did not arrive within 1000 ms" in error_message(answers[0])
        finally:
            for sock in stuck:
                sock.close()
        time.sleep(0.2)
        server.assert_healthy()  # the slots are free again


def test_headers_with_invalid_utf8_get_clean_answers(model_dir):
    with Guarded(model_dir, "--api-key", "sk-test") as server:
        bad = b"\xff\xfe\xc3\x28\xe2\x82 \x80"
        cases = [
            (b"X-Anything: " + bad, 401),                    # ignored; the key is still missing
            (b"Authorization: Bearer " + bad, 401),          # not a key (and not echoed)
            (b"Authorization: Bearer sk-test\r\nUser-Agent: " + bad, 200),
            (b"Authorization: Bearer sk-test\r\nOrigin: https://" + bad, 403),
            (b"Authorization: Bearer sk-test\r\nHost: " + bad, 200),
            (b"X-" + bad + b": 1", 400),                     # not a header name at all
        ]
        for header, status in cases:
            response = exchange(server.port, b"GET /v1/models HTTP/1.1\r\nConnection: close\r\n" + header + b"\r\n\r\n")
            assert status_of(response) == status, (header, response[:300])
            body = response.partition(b"\r\n\r\n")[2]
            json.loads(body.decode("utf-8"))  # valid UTF-8 JSON, whatever the request held
            assert b"\xff" not in body
        server.assert_healthy()


def test_the_accept_queue_is_as_long_as_the_connection_cap(model_dir):
    # With a backlog of 5 (the server's old HTTP library had one) a burst of clients waits on SYN
    # retries and may end in a reset (bench/serve_load.py's 256 clients met it). ss shows a listening
    # socket's backlog in its Send-Q column.
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("ss (iproute2) is not installed")
    with Guarded(model_dir, "--max-connections", 300) as server:
        listing = subprocess.run([ss, "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True).stdout.split()
        assert listing and listing[0] == "LISTEN" and int(listing[2]) >= 300, listing
        flood = [socket.create_connection((HOST, server.port), timeout=30) for _ in range(200)]
        try:
            assert all_answer_health(flood)
        finally:
            for sock in flood:
                sock.close()
        server.assert_healthy()


# ---- 14. a body over --max-body that the client sends whole before it reads

def test_a_client_that_sends_its_whole_oversized_body_reads_the_413(model_dir, tmp_path):
    import http.client
    body = b'{"text": "' + b"x" * (50 << 20) + b'"}'  # 50 MB against a 1 MiB limit
    with Guarded(model_dir) as server:
        # http.client writes the whole body before reading: the server reads and drops the rest
        # after its answer (a lingering close) instead of resetting the connection under it.
        connection = http.client.HTTPConnection(HOST, server.port, timeout=60)
        try:
            connection.request("POST", "/tokenize", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            assert response.status == 413
            assert "exceeds the limit of 1048576 bytes" in json.loads(response.read())["error"]["message"]
        finally:
            connection.close()

        # Expect: 100-continue: the 413 comes at once, no 100 Continue before it, no body read.
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(b"POST /tokenize HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\n"
                         b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
            response = read_all(sock)
        assert response.startswith(b"HTTP/1.1 413"), response[:200]

        # curl, with its Expect: 100-continue and without it (then it sends the whole body).
        curl = shutil.which("curl")
        if curl is not None:
            upload = tmp_path / "big.json"
            upload.write_bytes(body)
            for extra in ([], ["-H", "Expect:"]):
                result = subprocess.run([curl, "-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
                                         *extra, "--data-binary", f"@{upload}", f"http://{HOST}:{server.port}/tokenize"],
                                        capture_output=True, timeout=60)
                answer, _, code = result.stdout.rpartition(b"\n")
                assert code == b"413" and b"exceeds the limit" in answer, (extra, result.stdout[-300:], result.stderr)
        server.assert_healthy()


# ---- 15. JSON nested deeper than any message, copy or comparison can walk

DEEP = "[" * 50_000 + "]" * 50_000  # about 100 KB, far under --max-body


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", '{"prompt": "Hi", "logit_bias": {"1": ' + DEEP + "}}"),
    ("/v1/completions", '{"prompt": "Hi", "max_tokens": 2, "use_beam_search": true, "best_of": 2, "early_stopping": '
     + DEEP + "}"),
    ("/v1/completions", '{"prompt": ' + DEEP + "}"),
    ("/tokenize", '{"text": ' + DEEP + "}"),
    ("/detokenize", '{"ids": ' + DEEP + "}"),
])
def test_deeply_nested_json_is_a_400_not_a_crash(model_dir, path, body):
    with Guarded(model_dir) as server:
        status, answer = server.request("POST", path, body.encode(), headers={"Content-Type": "application/json"})
        assert status == 400, answer[:300]
        assert "the request body nests deeper than 64 levels" in json.loads(answer)["error"]["message"]
        server.assert_healthy()


def test_a_deeply_nested_config_json_is_a_clear_error(model_dir, tmp_path, kael):
    deep = tmp_path / "deep-config"
    shutil.copytree(model_dir, deep)
    config = json.loads((model_dir / "config.json").read_text())
    (deep / "config.json").write_text(json.dumps(config)[:-1] + ', "n_layer": ' + DEEP + "}")
    result = cli(kael, "generate", "--model", deep, "hi")
    assert result.returncode == 1 and "config.json' nests deeper than 64 levels" in result.stderr, result.stderr
    result = subprocess.run([str(kael_binary()), "serve", "--model", str(deep), "--port", "0"], capture_output=True,
                            timeout=60)
    assert result.returncode == 1 and b"nests deeper than 64 levels" in result.stderr, result.stderr


# ---- 16. a chunked body whose framing never ends

@pytest.mark.parametrize("framing", [
    b"5;ext=",                        # a chunk extension that never ends
    b"3\r\nabc\r\n0\r\nX-Trailer: ",  # a trailer that never ends
])
def test_a_chunk_line_or_trailer_that_never_ends_is_cut_off(model_dir, framing):
    with Guarded(model_dir) as server:
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(b"POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + framing)
            try:
                for _ in range(256):  # 16 MiB offered; before, each byte stayed in the connection's buffer
                    sock.sendall(b"x" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
            response = read_all(sock)
        assert status_of(response) == 413, response[:300]
        assert "a chunk-size line or the trailer of the chunked body exceeds 49152 bytes" in error_message(response)
        server.assert_healthy()


# ---- 17. framing and line endings: the status says what is wrong

@pytest.mark.parametrize("head, status, message", [
    (b"POST /tokenize HTTP/1.1\r\nContent-Length: 14\r\nContent-Length: 15\r\n\r\n", 400, "conflicting Content-Length"),
    (b"POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 14\r\n\r\n", 400,
     "not carry both Content-Length and Transfer-Encoding"),
    (b"POST /tokenize HTTP/1.1\r\nContent-Length: 14\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
     "not both it and Content-Length"),
    (b"POST /tokenize HTTP/1.1\nContent-Length: 14\n\n", 400, "must end with CRLF, not a bare LF"),
    (b"POST /tokenize HTTP/1.1\r\nContent-Length: 5000000\r\n\r\n", 413,
     "Content-Length '5000000' exceeds the limit of 1048576 bytes"),
])
def test_framing_errors_get_the_status_that_names_them(model_dir, head, status, message):
    with Guarded(model_dir) as server:
        response = exchange(server.port, head + b'{"text": "hi"}')
        assert status_of(response) == status and message in error_message(response), response
        server.assert_healthy()


# ---- 18. integer options out of range

@pytest.mark.parametrize("args, message", [
    (["generate", "hi", "--seed", "18446744073709551616"],
     "--seed: 18446744073709551616 is out of range: expected an integer in [0, 18446744073709551615]"),
    (["serve", "--max-body", "-1"], "--max-body: '-1' is not a decimal integer in [0, 18446744073709551615]"),
    (["serve", "--max-body", "0x100000"], "'0x100000' is not a decimal integer"),
])
def test_integer_options_past_their_range_are_option_errors(kael, args, message):
    result = cli(kael, *args, timeout=30)
    assert result.returncode != 0 and message in result.stderr, result.stderr


# ---- 19. timeouts in /metrics: n candidates past --timeout

def test_timed_out_candidates_count_as_timeouts_and_in_the_duration_histogram(serve_model_dir):
    with Guarded(serve_model_dir, "--timeout", 0.05, "--threads", 1) as server:
        status, body = server.request("POST", "/v1/completions",
                                      json.dumps({"prompt": "Slowly:", "max_tokens": 500, "n": 3, "ignore_eos": True}).encode())
        assert status == 504 and "timed out" in json.loads(body)["error"]["message"], body
        assert wait_until(lambda: server.get_json("/health")["active"] == 0, timeout=5)
        assert server.metric("kael_completions_finished_total", 'reason="timeout"') == 3
        assert server.metric("kael_completions_finished_total", 'reason="cancelled"') == 0
        assert server.metric("kael_request_duration_seconds_count") == 3
        server.assert_healthy()


# ---- 20. a client that half-closes after its request (shutdown(SHUT_WR), `nc -N`)

def test_a_half_closed_client_gets_immediate_answers_and_its_completion_is_cancelled(serve_model_dir):
    # docs/behaviour.md, "Server access": its end of file cannot be told from a client that left.
    with Guarded(serve_model_dir, "--threads", 1) as server:
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: k\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)
            assert status_of(read_all(sock)) == 200
        body = json.dumps({"prompt": "Go on:", "max_tokens": 500, "ignore_eos": True}).encode()
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: k\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\n\r\n" + body)
            sock.shutdown(socket.SHUT_WR)
            assert read_all(sock) == b""
        assert wait_until(lambda: server.metric("kael_completions_finished_total", 'reason="cancelled"') == 1, timeout=5)
        server.assert_healthy()
