"""Who may use `kael serve`: API keys (--api-key, --api-key-file), the metrics key, and CORS
origins (--cors-origin). The rules are in docs/behaviour.md ("Server access")."""
import http.client
import json
import os
import subprocess

import pytest

from conftest import kael_binary
from test_serve_support import HOST, Server, free_port, parse_sse, joined_text

KEY_A = "sk-kael-alpha-0123456789"
KEY_FILE_KEYS = ["sk-kael-bravo", "sk-kael-charlie-with-a-much-longer-tail-0123456789abcdef"]
METRICS_KEY = "metrics-delta"
ALLOWED = "https://app.example.com"


@pytest.fixture(scope="module")
def model_dir(serve_model_dir):
    return serve_model_dir


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "api-keys"
    path.write_text("# the team's keys\n\n  " + KEY_FILE_KEYS[0] + "  \n# " + "sk-commented-out\n\t\n"
                    + KEY_FILE_KEYS[1] + "\r\n")
    return path


@pytest.fixture(scope="module")
def locked(model_dir, key_file, tmp_path_factory):
    """A server with keys from both options, a metrics key and one allowed origin."""
    with Server(model_dir, "--api-key", KEY_A, "--api-key-file", key_file, "--metrics-key", METRICS_KEY,
                "--cors-origin", ALLOWED, "--cors-origin", "http://localhost:3000",
                log_dir=tmp_path_factory.mktemp("locked"),
                headers={"Authorization": f"Bearer {METRICS_KEY}"}) as server:
        yield server


@pytest.fixture(scope="module")
def open_server(model_dir, tmp_path_factory):
    with Server(model_dir, log_dir=tmp_path_factory.mktemp("open")) as server:
        yield server


def call(server, method, path, body=None, **headers):
    """(status, header dict with lower-case names, body bytes), without the server's default headers."""
    connection = http.client.HTTPConnection(HOST, server.port, timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        connection.request(method, path, body=data, headers={k.replace("_", "-"): v for k, v in headers.items()})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


GUARDED = [("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}), ("GET", "/v1/models", None),
           ("POST", "/tokenize", {"text": "Hi"}), ("POST", "/detokenize", {"ids": [15496]}),
           ("GET", "/v1/no-such-route", None)]


@pytest.mark.parametrize("method, path, body", GUARDED)
def test_guarded_routes_need_a_key(locked, method, path, body):
    for authorization in [None, "Bearer wrong", f"Bearer {KEY_A}x", f"Bearer {KEY_A[:-1]}", f"Basic {KEY_A}",
                          f"Bearer{KEY_A}", "Bearer ", f"Bearer {METRICS_KEY}", "Bearer sk-commented-out"]:
        headers = {} if authorization is None else {"Authorization": authorization}
        status, response_headers, data = call(locked, method, path, body, **headers)
        assert status == 401, (authorization, status, data)
        assert response_headers["www-authenticate"].startswith("Bearer")
        error = json.loads(data)["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
        assert "Authorization: Bearer KEY" in error["message"]
        assert KEY_A not in data.decode() and METRICS_KEY not in data.decode()
    for key in [KEY_A, *KEY_FILE_KEYS]:
        for scheme in ["Bearer", "bearer"]:
            status, _, data = call(locked, method, path, body, Authorization=f"{scheme} {key}")
            assert status == (404 if "no-such" in path else 200), (key, status, data)


def test_probes_need_the_metrics_key_when_it_is_set(locked, open_server):
    for path in ["/health", "/metrics"]:
        assert call(locked, "GET", path)[0] == 401
        assert call(locked, "GET", path, Authorization=f"Bearer {KEY_A}")[0] == 401  # an API key is not it
        assert call(locked, "GET", path, Authorization=f"Bearer {METRICS_KEY}")[0] == 200
        assert call(open_server, "GET", path)[0] == 200  # open without --metrics-key
    # The page itself is open; what it fetches is guarded.
    assert call(locked, "GET", "/")[0] == 200


def test_keys_never_reach_the_log(locked):
    call(locked, "GET", "/v1/models", Authorization=f"Bearer {KEY_A}")
    call(locked, "GET", "/v1/models", Authorization=f"Bearer {KEY_A}-almost")
    log = locked.log()
    for secret in [KEY_A, *KEY_FILE_KEYS, METRICS_KEY]:
        assert secret not in log
    assert "3 API keys, a metrics key, 2 CORS origins" in log


def test_without_keys_everything_is_open(open_server):
    for method, path, body in GUARDED[:4]:
        assert call(open_server, method, path, body)[0] == 200


def run_serve(*args, timeout=60):
    return subprocess.run([str(kael_binary()), "serve", "--host", HOST, "--port", str(free_port()), *map(str, args)],
                          capture_output=True, timeout=timeout)


@pytest.mark.parametrize("make_args, message", [
    (lambda d: ["--api-key-file", d / "missing"], "--api-key-file not found: '{d}/missing'"),
    (lambda d: ["--api-key-file", d], "--api-key-file '{d}' is not a regular file (it is a directory)"),
    (lambda d: ["--api-key-file", d / "fifo"], "--api-key-file '{d}/fifo' is not a regular file (it is a FIFO)"),
    (lambda d: ["--api-key-file", "/dev/zero"], "--api-key-file '/dev/zero' is not a regular file (it is a character device)"),
    (lambda d: ["--api-key-file", d / "huge"], "--api-key-file '{d}/huge' is larger than the limit of 1048576 bytes"),
    (lambda d: ["--api-key-file", d / "comments"], "holds no key (blank lines and # comments only)"),
    (lambda d: ["--api-key", "has a space"], "--api-key key 1 of 1 is empty or holds a character outside printable ASCII"),
    (lambda d: ["--api-key", "ok", "--api-key", ""], "--api-key key 2 of 2 is empty"),
    (lambda d: ["--metrics-key", "tab\there"], "--metrics-key key 1 of 1 is empty or holds"),
    (lambda d: ["--cors-origin", "*"], "--cors-origin must be an origin such as https://app.example.com"),
    (lambda d: ["--cors-origin", "https://app.example.com/path"], "no path, no wildcard"),
])
def test_bad_access_options_are_clear_errors(model_dir, tmp_path, make_args, message):
    (tmp_path / "comments").write_text("# only a comment\n\n   \n")
    os.mkfifo(tmp_path / "fifo")  # no writer: an open() that waited for one would never return
    with open(tmp_path / "huge", "wb") as huge:
        huge.truncate((1 << 20) + 1)
    result = run_serve("--model", model_dir, *make_args(tmp_path))
    stderr = result.stderr.decode()
    assert result.returncode != 0 and message.format(d=tmp_path) in stderr, stderr
    assert "has a space" not in stderr and "tab\there" not in stderr  # a rejected key is not quoted


# ---- CORS

def test_no_cross_origin_access_by_default(open_server):
    status, headers, data = call(open_server, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 1},
                                 Origin="https://evil.example")
    assert status == 403 and json.loads(data)["error"]["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in headers
    status, headers, _ = call(open_server, "OPTIONS", "/v1/completions", Origin="https://evil.example",
                              Access_Control_Request_Method="POST")
    assert status == 403 and "access-control-allow-origin" not in headers
    assert call(open_server, "GET", "/v1/models", Origin="null")[0] == 403
    # The server's own page posts with its own origin: allowed, and no CORS header is needed.
    status, headers, _ = call(open_server, "GET", "/v1/models", Origin=f"http://{HOST}:{open_server.port}")
    assert status == 200 and "access-control-allow-origin" not in headers


def test_an_allowed_origin_gets_exactly_its_own_name(locked):
    auth = {"Authorization": f"Bearer {KEY_A}"}
    # Preflight: no credentials needed, the allowed methods and headers named.
    status, headers, _ = call(locked, "OPTIONS", "/v1/completions", Origin=ALLOWED,
                              Access_Control_Request_Method="POST",
                              Access_Control_Request_Headers="authorization, content-type")
    assert status == 204, headers
    assert headers["access-control-allow-origin"] == ALLOWED and headers["vary"] == "Origin"
    assert "Authorization" in headers["access-control-allow-headers"]
    assert "POST" in headers["access-control-allow-methods"]
    # A stream from the allowed origin names it; a 401 too (so the page can read why).
    connection = http.client.HTTPConnection(HOST, locked.port, timeout=60)
    connection.request("POST", "/v1/completions", body=json.dumps({"prompt": "Hi", "max_tokens": 4, "stream": True,
                                                                   "temperature": 0}),
                       headers={"Content-Type": "application/json", "Origin": ALLOWED, **auth})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Access-Control-Allow-Origin") == ALLOWED
    assert joined_text(parse_sse(response.read()))
    connection.close()
    status, headers, _ = call(locked, "GET", "/v1/models", Origin=ALLOWED)
    assert status == 401 and headers["access-control-allow-origin"] == ALLOWED
    # Any other origin: refused, never reflected, never a wildcard.
    for origin in ["https://app.example.com.evil.example", "https://APP.example.com", "http://app.example.com",
                   "https://evil.example"]:
        status, headers, _ = call(locked, "GET", "/v1/models", Origin=origin, **auth)
        assert status == 403 and "access-control-allow-origin" not in headers, origin
    assert call(locked, "GET", "/v1/models", Origin="http://localhost:3000", **auth)[1][
        "access-control-allow-origin"] == "http://localhost:3000"
