"""scripts/download_gpt2.sh, offline: a local HTTP server (with byte-range support, so resumes
can be checked) serves small fake files whose checksums the test passes through the
KAEL_GPT2_SHA256_<NAME> overrides."""
import hashlib
import http.server
import os
import pathlib
import subprocess
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "download_gpt2.sh"
NAMES = ["model.safetensors", "vocab.json", "merges.txt"]


def fake_files():
    return {
        "model.safetensors": bytes(range(256)) * 400 + b"tail",  # ~100 KB
        "vocab.json": b'{"a": 0, "b": 1}',
        "merges.txt": b"#version: 0.2\na b\n",
    }


class Server:
    """Serves `files` under /gpt2/, honouring `Range: bytes=N-`; records each request."""

    def __init__(self, files):
        self.files = dict(files)
        self.requests = []  # (path, range header or None)
        self.cut_once = set()  # names whose next response is cut off halfway
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                name = self.path.rsplit("/", 1)[-1]
                body = server.files.get(name)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start = int(rng[len("bytes="):].split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                if name in server.cut_once:  # a dropped connection: half the promised bytes
                    server.cut_once.discard(name)
                    self.wfile.write(body[start:start + (len(body) - start) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/gpt2"

    def requests_for(self, name):
        return [r for r in self.requests if r[0].endswith("/" + name)]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server(fake_files())
    yield s
    s.close()


def run_script(*args, base_url, checksums=None):
    env = dict(os.environ, KAEL_GPT2_BASE_URL=base_url)
    for name, body in (checksums or fake_files()).items():
        env["KAEL_GPT2_SHA256_" + name.upper().replace(".", "_")] = hashlib.sha256(body).hexdigest()
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], env=env, capture_output=True, text=True, timeout=120)


def assert_complete(directory):
    for name, body in fake_files().items():
        assert (directory / name).read_bytes() == body
        assert not (directory / (name + ".part")).exists()


def test_help():
    result = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "usage:" in result.stdout
    assert "KAEL_GPT2_BASE_URL" in result.stdout


def test_unknown_option_fails():
    result = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "unknown option --bogus" in result.stderr


def test_fresh_download_is_verified(server, tmp_path):
    target = tmp_path / "gpt2"
    result = run_script(target, base_url=server.base_url)
    assert result.returncode == 0, result.stderr
    assert_complete(target)
    assert len(server.requests) == 3
    assert all(r[1] is None for r in server.requests)  # nothing to resume


def test_partial_download_is_resumed(server, tmp_path):
    body = fake_files()["model.safetensors"]
    (tmp_path / "model.safetensors.part").write_bytes(body[:40000])
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stdout
    assert server.requests_for("model.safetensors") == [("/gpt2/model.safetensors", "bytes=40000-")]
    assert_complete(tmp_path)


def test_interrupted_download_resumes_on_the_next_run(server, tmp_path):
    body = fake_files()["model.safetensors"]
    server.cut_once.add("model.safetensors")
    first = run_script(tmp_path, base_url=server.base_url)
    assert first.returncode != 0
    assert "run again to resume" in first.stderr
    assert not (tmp_path / "model.safetensors").exists()
    kept = (tmp_path / "model.safetensors.part").read_bytes()
    assert 0 < len(kept) < len(body) and body.startswith(kept)
    second = run_script(tmp_path, base_url=server.base_url)
    assert second.returncode == 0, second.stderr
    assert server.requests_for("model.safetensors")[-1] == ("/gpt2/model.safetensors", f"bytes={len(kept)}-")
    assert_complete(tmp_path)


def test_complete_part_file_is_renamed_without_fetching(server, tmp_path):
    (tmp_path / "merges.txt.part").write_bytes(fake_files()["merges.txt"])
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode == 0, result.stderr
    assert server.requests_for("merges.txt") == []
    assert_complete(tmp_path)


def test_verified_files_are_kept_without_network(tmp_path):
    for name, body in fake_files().items():
        (tmp_path / name).write_bytes(body)
    before = {name: (tmp_path / name).stat().st_mtime_ns for name in NAMES}
    # Port 9 (discard) on localhost: any fetch attempt would fail.
    result = run_script(tmp_path, base_url="http://127.0.0.1:9/none")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("checksum verified") == 3
    assert {name: (tmp_path / name).stat().st_mtime_ns for name in NAMES} == before


def test_corrupted_download_is_rejected_and_deleted(server, tmp_path):
    server.files["vocab.json"] = b'{"a": 0, "b": 2}'  # not what the checksum says
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode != 0
    assert "does not match SHA-256" in result.stderr
    assert not (tmp_path / "vocab.json").exists()
    assert not (tmp_path / "vocab.json.part").exists()


def test_corrupt_partial_is_discarded_and_fetched_again(server, tmp_path):
    body = fake_files()["model.safetensors"]
    (tmp_path / "model.safetensors.part").write_bytes(b"\xff" * 1000)  # a bad prefix
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode == 0, result.stderr
    ranges = [r[1] for r in server.requests_for("model.safetensors")]
    assert ranges == ["bytes=1000-", None]
    assert (tmp_path / "model.safetensors").read_bytes() == body
    assert_complete(tmp_path)


def test_oversized_partial_restarts(server, tmp_path):
    body = fake_files()["model.safetensors"]
    (tmp_path / "model.safetensors.part").write_bytes(body + b"extra")  # server answers 416
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode == 0, result.stderr
    assert_complete(tmp_path)


def test_existing_bad_file_is_replaced(server, tmp_path):
    (tmp_path / "merges.txt").write_bytes(b"stale")
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode == 0, result.stderr
    assert "does not match" in result.stderr
    assert_complete(tmp_path)


def test_missing_file_on_server_fails_clearly(server, tmp_path):
    del server.files["merges.txt"]
    result = run_script(tmp_path, base_url=server.base_url)
    assert result.returncode != 0
    assert "merges.txt failed" in result.stderr
    assert not (tmp_path / "merges.txt").exists()
    assert not (tmp_path / "merges.txt.part").exists()
