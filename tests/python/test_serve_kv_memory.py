"""`kael serve --kv-memory-mb`: sequences take KV blocks from a pool of that size, a request is
admitted only when the blocks of its prompt + max_tokens are free (until then it waits in the
queue, and a full queue answers 503), and what a queued request generates equals what it
generates alone. /metrics reports the pool's blocks."""
import http.client
import json
import socket
import subprocess

from test_serve_support import HOST, Server, concurrent, kael_binary, sequential, wait_until

# The serve checkpoint (4 layers, 4 heads of 64): a block of 32 positions is 256 KiB, so 1 MiB
# holds 4 blocks, 128 positions: one request of prompt_for(i) (about 12 tokens) + 60 at a time.
TOKENS = 60


def test_requests_wait_for_kv_blocks_and_all_complete_unchanged(serve_model_dir, tmp_path):
    with Server(serve_model_dir, "--kv-memory-mb", 1, "--max-batch", 4, "--threads", 1, log_dir=tmp_path) as s:
        assert s.metric("kael_kv_blocks_total") == 4
        assert s.metric("kael_kv_block_positions") == 32
        assert s.metric("kael_kv_block_bytes") == 256 * 1024
        assert s.metric("kael_kv_blocks_free") == 4
        alone, _, _ = sequential(s, 3, TOKENS)
        sum_before, count_before = s.metric("kael_batch_size_sum"), s.metric("kael_batch_size_count")
        together, tokens, _ = concurrent(s, 3, TOKENS)
        sum_after, count_after = s.metric("kael_batch_size_sum"), s.metric("kael_batch_size_count")
        assert tokens == 3 * TOKENS
        assert together == alone, "a request that waited for KV memory generated something else"
        # Four batch slots, but memory for one request: they ran one after another.
        assert (sum_after - sum_before) / (count_after - count_before) == 1.0
        assert wait_until(lambda: s.metric("kael_kv_blocks_used") == 0, timeout=5)
        assert s.metric("kael_kv_blocks_free") == 4
        assert s.metric("kael_completions_finished_total", 'reason="length"') == 6

        # One that could never fit is refused at once, with the counts, as a client error that
        # no retry would mend (a 503 would send it round every replica behind nginx) and,
        # streamed, before the stream starts.
        for stream in (False, True):
            status, body = s.post_json("/v1/completions", {"prompt": "Too long:", "max_tokens": 200, "stream": stream})
            assert status == 400 and body["error"]["param"] == "max_tokens", body
            assert "needs 7 KV blocks of 32 positions" in body["error"]["message"] and "holds 4" in body["error"]["message"]
        assert s.complete(prompt="after", max_tokens=3, ignore_eos=True)["usage"]["completion_tokens"] == 3


def call(server, body):
    """POST /v1/completions: (status, headers, parsed body)."""
    connection = http.client.HTTPConnection(HOST, server.port, timeout=30)
    try:
        connection.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        connection.close()


def send_stream(port, body):
    """Sends a streaming request on a raw socket and returns the socket at once."""
    sock = socket.create_connection((HOST, port), timeout=30)
    data = json.dumps({**body, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


def test_a_full_queue_behind_the_kv_memory_answers_503(serve_model_dir, tmp_path):
    # 16 slots, one queue place: while one request holds every block, free slots are no room,
    # so one request waits and each of the others is refused with 503 and Retry-After.
    with Server(serve_model_dir, "--kv-memory-mb", 1, "--max-batch", 16, "--max-queue", 1, "--threads", 1,
                log_dir=tmp_path) as s:
        long = {"prompt": "Go on:", "max_tokens": 120, "ignore_eos": True}
        running = send_stream(s.port, long)
        assert wait_until(lambda: s.get_json("/health")["active"] == 1, timeout=10)
        assert s.metric("kael_kv_blocks_used") == 4
        waiting = [send_stream(s.port, long)]
        assert wait_until(lambda: s.get_json("/health")["queued"] == 1, timeout=10)
        for _ in range(5):
            status, headers, body = call(s, {"prompt": "one more", "max_tokens": 2})
            assert status == 503 and "busy" in body["error"]["message"] and headers["Retry-After"] == "1", body
        health = s.get_json("/health")
        assert health["active"] == 1 and health["queued"] == 1, health
        for sock in [running, *waiting]:
            sock.close()
        assert wait_until(lambda: s.get_json("/health")["active"] == 0 and s.get_json("/health")["queued"] == 0,
                          timeout=10)
        assert s.metric("kael_kv_blocks_used") == 0


def test_bad_kv_memory_is_an_error(serve_model_dir):
    for value in ("-1", "abc"):
        result = subprocess.run([str(kael_binary()), "serve", "--model", str(serve_model_dir), "--port", "0",
                                 "--kv-memory-mb", value], capture_output=True, timeout=60)
        assert result.returncode != 0 and b"kv-memory-mb" in result.stderr, result.stderr
