"""Continuous batching in `kael serve`: 16 concurrent streams all complete with the right
text and are decoded together (throughput printed against one client), a short request is not
held up by a long one, a client that hangs up is cancelled and frees its slot (mid-stream and
during a queued wait), a full queue answers 503, and the per-request timeout ends a request."""
import http.client
import json
import socket
import threading
import time

import pytest

from test_serve_support import HOST, Server, joined_text, parse_sse, raw_stream, small_checkpoint, wait_until

CLIENTS = 16
TOKENS = 192


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return small_checkpoint(tmp_path_factory.mktemp("serve_batch_model"))


@pytest.fixture(scope="module")
def server(model_dir):
    with Server(model_dir, "--max-batch", CLIENTS) as s:
        yield s
        assert s.alive(), "the server died during the tests"


def prompt_for(i):
    return f"Client {i} says: the number {i * 7919} is"


def one_stream(server, i, pause=0.0):
    """(text, completion tokens) of client i's greedy stream."""
    raw = raw_stream(server.port, {"prompt": prompt_for(i), "max_tokens": TOKENS, "temperature": 0,
                                   "ignore_eos": True}, pause=pause)
    payloads = parse_sse(raw)
    return joined_text(payloads), payloads[-1]["usage"]["completion_tokens"]


def sequential(server, n):
    """Clients 0..n-1 one after another: (texts, total tokens, wall seconds)."""
    began = time.perf_counter()
    results = [one_stream(server, i) for i in range(n)]
    return [r[0] for r in results], sum(r[1] for r in results), time.perf_counter() - began


def concurrent(server, n):
    """Clients 0..n-1 all at once: (texts, total tokens, wall seconds)."""
    results = [None] * n
    barrier = threading.Barrier(n + 1)

    def client(i):
        barrier.wait()
        # Reading every 10 ms instead of at every token keeps 16 Python threads from
        # competing with the server for the CPU; it can only delay the last read, which
        # counts against the aggregate figure, never for it.
        results[i] = one_stream(server, i, pause=0.01)

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


def batch_stats(server):
    return server.metric("kael_batch_size_sum"), server.metric("kael_batch_size_count")


def test_sixteen_concurrent_streams(server):
    one_stream(server, 0)  # warm-up (page faults, thread pool)
    # One client making the 16 requests in a row gives the single-client figure and each
    # request's text run alone; both figures then cover the same tokens and about as long a
    # time (on a shared machine a short burst gets more CPU than a long run).
    expected, tokens, wall = sequential(server, CLIENTS)
    single = tokens / wall
    sum_before, count_before = batch_stats(server)
    texts, tokens, wall = concurrent(server, CLIENTS)
    sum_after, count_after = batch_stats(server)
    aggregate = tokens / wall
    mean_batch = (sum_after - sum_before) / (count_after - count_before)

    print(f"\nkael serve, greedy streams of {TOKENS} tokens: 1 client {single:.1f} tokens/s; "
          f"{CLIENTS} clients {aggregate:.1f} tokens/s aggregate ({aggregate / single:.2f}x); "
          f"mean decode batch {mean_batch:.1f}")
    assert texts == expected, "a batched stream differs from the same request run alone"
    assert tokens == CLIENTS * TOKENS
    # Continuous batching: the 16 streams were decoded together, not one after another.
    assert mean_batch >= CLIENTS / 2, mean_batch
    # GPT2::forward_batch reads each weight once per step for the whole batch. On this
    # model it alone decodes about 2.2x faster at batch 16 than at batch 1 (measured on a
    # shared 2-core machine; more on wider ones); after HTTP, sampling and the batch's
    # ramp-up and ramp-down, the server must keep a clear part of that.
    assert aggregate >= 1.3 * single, (aggregate, single)


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


def test_disconnect_during_prefill_stops_it(model_dir, tmp_path):
    """With one prompt token prefilled per scheduler step, a 480-token prompt takes hundreds
    of steps: a client that leaves meanwhile is dropped between two of them, and a short
    request sent during the prefill is answered before the long prompt is done."""
    with Server(model_dir, "--prefill-chunk", 1, "--threads", 1, log_dir=tmp_path) as s:
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


def test_full_queue_answers_503_and_queued_clients_can_leave(model_dir, tmp_path):
    with Server(model_dir, "--max-batch", 1, "--max-queue", 1, "--threads", 1, log_dir=tmp_path) as s:
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


def test_request_timeout(model_dir, tmp_path):
    with Server(model_dir, "--timeout", 0.05, "--threads", 1, log_dir=tmp_path) as s:
        status, body = s.post_json("/v1/completions", {"prompt": "Slowly:", "max_tokens": 500, "ignore_eos": True})
        assert status == 504 and "timed out" in body["error"]["message"], body
        payloads, _ = s.stream(prompt="Slowly:", max_tokens=500, ignore_eos=True)
        assert "timed out" in payloads[-1]["error"]["message"]
        assert s.metric("kael_completions_finished_total", 'reason="timeout"') == 2
        assert wait_until(lambda: s.get_json("/health")["active"] == 0, timeout=5)
