"""Continuous batching in `kael serve`: 16 concurrent streams all complete with the right
text and are decoded together (the throughput is bench/serve_concurrency.py's to judge), a short request is not
held up by a long one, a client that hangs up is cancelled and frees its slot (mid-stream and
during a queued wait), a full queue answers 503, and the per-request timeout ends a request."""
import http.client
import json
import socket
import threading
import time

import pytest

from test_serve_support import HOST, Server, sequential_then_concurrent, wait_until

CLIENTS = 16
TOKENS = 192
SERVER_ARGS = ("--max-batch", CLIENTS)  # for conftest's `server`


def test_sixteen_concurrent_streams(server):
    run = sequential_then_concurrent(server, CLIENTS, TOKENS)
    print(f"\nkael serve, greedy streams of {TOKENS} tokens: 1 client {run['single']:.1f} tokens/s; "
          f"{CLIENTS} clients {run['aggregate']:.1f} tokens/s aggregate ({run['aggregate'] / run['single']:.2f}x); "
          f"mean decode batch {run['mean_batch']:.1f}")
    assert run["together"] == run["alone"], "a batched stream differs from the same request run alone"
    assert run["tokens"] == CLIENTS * TOKENS
    # Continuous batching: the 16 streams were decoded together, not one after another. How much
    # faster that is is a timing on a shared machine, so bench/serve_concurrency.py reports it.
    assert run["mean_batch"] >= CLIENTS / 2, run["mean_batch"]


def test_short_request_is_not_blocked_by_long_one(server):
    done = {}

    def long_request():
        server.stream(prompt="A long story:", max_tokens=480, temperature=0, ignore_eos=True)
        done["long"] = time.perf_counter()

    thread = threading.Thread(target=long_request)
    thread.start()
    assert wait_until(lambda: server.get_json("/health")["active"] >= 1, timeout=10)
    began = time.perf_counter()
    short = server.complete(prompt="Short:", max_tokens=4, temperature=0, ignore_eos=True)
    done["short"] = time.perf_counter()
    thread.join(timeout=120)
    assert short["usage"]["completion_tokens"] == 4
    assert done["short"] < done["long"], "the short request waited for the long one"
    print(f"\nshort request answered in {done['short'] - began:.3f} s while a 480-token stream ran")


def open_stream(port, body):
    """A raw streaming request on a socket; returns the socket after the first chunk arrived."""
    sock = socket.create_connection((HOST, port), timeout=30)
    data = json.dumps({**body, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    received = b""
    while b"data: " not in received:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the stream"
        received += chunk
    return sock


def test_disconnect_mid_stream_frees_the_slot(server):
    cancelled = server.metric("kael_completions_finished_total", 'reason="cancelled"')
    generated = server.metric("kael_generated_tokens_total")
    sock = open_stream(server.port, {"prompt": "Tell me everything:", "max_tokens": 400, "ignore_eos": True})
    assert server.get_json("/health")["active"] == 1
    sock.close()
    assert wait_until(lambda: server.get_json("/health")["active"] == 0, timeout=5), "the slot was not freed"
    assert server.metric("kael_completions_finished_total", 'reason="cancelled"') == cancelled + 1
    assert server.metric("kael_generated_tokens_total") - generated < 400, "it ran to the end anyway"
    # The freed slot serves the next request.
    assert server.complete(prompt="next", max_tokens=3, ignore_eos=True)["usage"]["completion_tokens"] == 3


def test_disconnect_of_non_streamed_request_cancels_it(server):
    cancelled = server.metric("kael_completions_finished_total", 'reason="cancelled"')
    sock = socket.create_connection((HOST, server.port), timeout=30)
    data = json.dumps({"prompt": "Tell me everything:", "max_tokens": 500, "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    assert wait_until(lambda: server.get_json("/health")["active"] == 1, timeout=5)
    sock.close()
    assert wait_until(lambda: server.get_json("/health")["active"] == 0, timeout=5)
    assert server.metric("kael_completions_finished_total", 'reason="cancelled"') == cancelled + 1


def test_disconnect_during_prefill_stops_it(serve_model_dir, tmp_path):
    """With one prompt token prefilled per scheduler step, a 480-token prompt takes hundreds
    of steps: a client that leaves meanwhile is dropped between two of them, and a short
    request sent during the prefill is answered before the long prompt is done."""
    with Server(serve_model_dir, "--prefill-chunk", 1, "--threads", 1, log_dir=tmp_path) as s:
        long_prompt = [464] * 480
        sock = socket.create_connection((HOST, s.port), timeout=30)
        data = json.dumps({"prompt": long_prompt, "max_tokens": 8, "stream": True}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        assert wait_until(lambda: s.metric("kael_prompt_tokens_total") >= 10, timeout=10)
        short = s.complete(prompt="quick", max_tokens=2, ignore_eos=True)
        assert short["usage"]["completion_tokens"] == 2
        prefilled_when_short_done = s.metric("kael_prompt_tokens_total")
        sock.close()
        assert wait_until(lambda: s.get_json("/health")["active"] == 0, timeout=5), "the prefill was not dropped"
        prefilled = s.metric("kael_prompt_tokens_total")
        print(f"\nprefill: short request done after {prefilled_when_short_done:.0f} prompt tokens; "
              f"cancelled after {prefilled:.0f} of 481")
        assert prefilled < 480, "the cancelled prompt was prefilled to the end"
        assert s.metric("kael_generated_tokens_total") == 2  # only the short request's
        assert s.metric("kael_completions_finished_total", 'reason="cancelled"') == 1


def test_full_queue_answers_503_and_queued_clients_can_leave(serve_model_dir, tmp_path):
    with Server(serve_model_dir, "--max-batch", 1, "--max-queue", 1, "--threads", 1, log_dir=tmp_path) as s:
        long = {"prompt": "Go on:", "max_tokens": 500, "ignore_eos": True}
        running = open_stream(s.port, long)
        queued = socket.create_connection((HOST, s.port), timeout=30)
        data = json.dumps({**long, "stream": True}).encode()
        queued.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        assert wait_until(lambda: s.get_json("/health")["queued"] == 1, timeout=5)
        status, body = s.post_json("/v1/completions", {"prompt": "one more", "max_tokens": 2})
        assert status == 503 and body["error"]["type"] == "server_error" and "busy" in body["error"]["message"]
        assert s.metric("kael_rejected_total") == 1
        queued.close()  # leaves while waiting: dropped from the queue without running
        assert wait_until(lambda: s.get_json("/health")["queued"] == 0, timeout=5)
        running.close()
        assert wait_until(lambda: s.get_json("/health")["active"] == 0, timeout=5)
        assert s.complete(prompt="after", max_tokens=2, ignore_eos=True)["usage"]["completion_tokens"] == 2
        assert s.metric("kael_completions_finished_total", 'reason="cancelled"') == 2


def test_request_timeout(serve_model_dir, tmp_path):
    with Server(serve_model_dir, "--timeout", 0.05, "--threads", 1, log_dir=tmp_path) as s:
        status, body = s.post_json("/v1/completions", {"prompt": "Slowly:", "max_tokens": 500, "ignore_eos": True})
        assert status == 504 and "timed out" in body["error"]["message"], body
        payloads, _ = s.stream(prompt="Slowly:", max_tokens=500, ignore_eos=True)
        assert "timed out" in payloads[-1]["error"]["message"]
        assert s.metric("kael_completions_finished_total", 'reason="timeout"') == 2
        assert wait_until(lambda: s.get_json("/health")["active"] == 0, timeout=5)
