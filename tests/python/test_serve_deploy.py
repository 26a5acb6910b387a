"""deploy/: Debian's nginx runs deploy/nginx/kael.conf (its ports rewritten to free loopback
ports) in front of two `kael serve` replicas: requests spread over both, and a stream arrives
through the proxy token by token with the same text as straight from a replica. The systemd
unit's and the Kubernetes manifest's timings are checked against each other."""
import configparser
import http.client
import json
import pathlib
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import kael_binary
from test_serve_support import HOST, Server, free_port, joined_text, parse_sse, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NGINX = shutil.which("nginx") or next((p for p in ["/usr/sbin/nginx"] if pathlib.Path(p).exists()), None)
STREAM_TOKENS = 120


def nginx_config(work: pathlib.Path, listen_port: int, replica_ports) -> pathlib.Path:
    """deploy/nginx/kael.conf with its replicas and listen port rewritten, inside a minimal
    nginx.conf that keeps every file nginx writes under `work`."""
    text = (DEPLOY / "nginx" / "kael.conf").read_text()
    template_ports = re.findall(r"^\s*server 127\.0\.0\.1:(\d+) max_fails=\d+ fail_timeout=\w+;$", text, re.M)
    assert len(template_ports) == len(replica_ports), template_ports
    for old, new in zip(template_ports, replica_ports):
        text = text.replace(f"server 127.0.0.1:{old} ", f"server 127.0.0.1:{new} ")
    text, listens = re.subn(r"^(\s*)listen 80;$", rf"\g<1>listen {HOST}:{listen_port};", text, flags=re.M)
    assert listens == 1
    (work / "kael.conf").write_text(text)
    for name in ["body", "proxy", "fastcgi", "uwsgi", "scgi"]:
        (work / name).mkdir(exist_ok=True)
    main = work / "nginx.conf"
    main.write_text(f"""
daemon off;
master_process off;
pid {work}/nginx.pid;
error_log {work}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {work}/access.log;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    include {work}/kael.conf;
}}
""")
    return main


@pytest.fixture(scope="module")
def cluster(serve_model_dir, tmp_path_factory):
    """(nginx port, [replica Server, replica Server])."""
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/install_deps.sh --test installs Debian's)")
    work = tmp_path_factory.mktemp("nginx")
    with Server(serve_model_dir, log_dir=work) as first, Server(serve_model_dir, log_dir=work) as second:
        port = free_port()
        config = nginx_config(work, port, [first.port, second.port])
        check = subprocess.run([NGINX, "-t", "-p", str(work), "-e", str(work / "error.log"), "-c", str(config)],
                               capture_output=True, timeout=30)
        assert check.returncode == 0, check.stderr.decode()
        nginx = subprocess.Popen([NGINX, "-p", str(work), "-e", str(work / "error.log"), "-c", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def listening():
                with socket.socket() as s:
                    return s.connect_ex((HOST, port)) == 0
            assert wait_until(listening, timeout=20), (work / "error.log").read_text()
            yield port, [first, second]
        finally:
            nginx.terminate()
            nginx.wait(timeout=20)


def completions_served(server) -> float:
    return server.metric("kael_http_requests_total", 'route="/v1/completions",status="200"')


def post(port, body):
    connection = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        connection.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_requests_spread_over_both_replicas(cluster):
    port, replicas = cluster
    before = [completions_served(r) for r in replicas]
    for i in range(8):  # one after another: least_conn sees equal counts and alternates
        status, body = post(port, {"prompt": f"Request {i}", "max_tokens": 2})
        assert status == 200, body
    # At once: each stream holds a connection, so least_conn sends the next one elsewhere.
    threads = [threading.Thread(target=post, args=(port, {"prompt": f"Together {i}", "max_tokens": 24, "stream": True}))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    served = [completions_served(r) - b for r, b in zip(replicas, before)]
    assert sum(served) == 14 and min(served) >= 4, served


def timed_stream(port, body):
    """(SSE payloads, arrival time of each data line relative to the request, total seconds)."""
    connection = http.client.HTTPConnection(HOST, port, timeout=60)
    began = time.monotonic()
    connection.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}),
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    raw, arrivals = b"", []
    while line := response.readline():
        raw += line
        if line.startswith(b"data: "):
            arrivals.append(time.monotonic() - began)
    connection.close()
    return parse_sse(raw), arrivals, time.monotonic() - began


def test_streaming_through_nginx_is_incremental_and_intact(cluster):
    port, replicas = cluster
    body = {"prompt": "Through the proxy,", "max_tokens": STREAM_TOKENS, "temperature": 0, "ignore_eos": True}
    direct = joined_text(replicas[0].stream(**body)[0])
    payloads, arrivals, total = timed_stream(port, body)
    assert joined_text(payloads) == direct
    assert payloads[-1]["choices"][0]["finish_reason"] == "length"
    # Token by token, not buffered to the end: the first event came long before the last.
    assert len(arrivals) > STREAM_TOKENS // 2
    assert arrivals[0] < 0.5 * total, (arrivals[0], arrivals[-1], total)


def test_health_reaches_a_replica_through_nginx(cluster):
    port, _ = cluster
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    connection.request("GET", "/health")
    response = connection.getresponse()
    assert response.status == 200 and json.loads(response.read())["status"] == "ok"
    connection.close()


def test_a_second_server_cannot_take_a_bound_port(serve_model_dir, tmp_path):
    with Server(serve_model_dir, log_dir=tmp_path) as server:
        result = subprocess.run([str(kael_binary()), "serve", "--model", str(serve_model_dir), "--host", HOST,
                                 "--port", str(server.port)], capture_output=True, timeout=30)
        assert result.returncode == 1 and b"cannot listen on" in result.stderr, result.stderr


# ---- the timings in deploy/ agree with each other

def drain_timeout(args: str) -> float:
    match = re.search(r"--drain-timeout[ ,\"']+(\d+)", args)
    assert match, args
    return float(match.group(1))


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|min)?", value.strip())
    assert match, value
    return float(match.group(1)) * (60 if match.group(2) == "min" else 1)


def test_systemd_unit_outlasts_the_drain():
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string((DEPLOY / "systemd" / "kael@.service").read_text().replace("\\\n", " "))
    service = parser["Service"]
    assert seconds(service["TimeoutStopSec"]) > drain_timeout(service["ExecStart"])
    assert service["KillSignal"] == "SIGTERM" and service["Restart"] == "on-failure"
    for key, value in [("DynamicUser", "yes"), ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict")]:
        assert service[key] == value, key
    assert "--api-key-file" in service["ExecStart"] and "--port %i" in service["ExecStart"]


def test_kubernetes_probes_and_grace_period():
    yaml = pytest.importorskip("yaml")
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "kael.yaml").read_text()))
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    assert any(d["kind"] == "Service" for d in documents)
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > float(pre_stop[1]) + drain_timeout(json.dumps(container["args"]))
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    # /health is 503 while loading and draining: a liveness probe on it would kill the pod then.
    assert "httpGet" not in container["livenessProbe"] or container["livenessProbe"]["httpGet"]["path"] != "/health"


def test_nginx_waits_for_the_longest_request():
    text = (DEPLOY / "nginx" / "kael.conf").read_text()
    assert "least_conn;" in text and "proxy_buffering off;" in text and "proxy_http_version 1.1;" in text
    read_timeout = seconds(re.search(r"proxy_read_timeout (\w+);", text).group(1))
    assert read_timeout >= 600  # kael serve's default --timeout
