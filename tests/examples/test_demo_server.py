"""The bundled demo target against a real process: it serves when patched and races when not."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"
READY_LINE = "INFO:     Application startup complete."
IMA_LINE = re.compile(
    r"^ERROR \d\d-\d\d \d\d:\d\d:\d\d \[demo_server\.py:\d+\] RuntimeError: demo device error: "
    r"an illegal memory access was encountered \(expert_map index \d+ out of range for 64 experts\)$",
    re.M)
FAILING_BS = re.compile(r"Worker compute stream failed while capturing bs=(\d+)")

# Unpatched launches fail with probability p = 0.43 (39/90 launches on a 2-core VM, half of them
# with both cores busy; 0.40-0.66 under other background load), and up to every launch while a
# compiler keeps the other core busy (16/16 seen): the rate depends on the machine, so the test
# asserts only that a crash comes, with the log's shape, and that any READY launch reads right.
# It fails falsely only if MAX_LAUNCHES launches in a row are READY: (1-p)**16 = 1.2e-4 at
# p = 0.43, < 1e-3 for any p >= 0.36. It stops at the first crash: usually 1-3 launches of ~1.2 s.
MAX_LAUNCHES = 16
STARTUP_TIMEOUT_S = 30.0


def _load_demo_module():
    spec = importlib.util.spec_from_file_location("demo_server_under_test", DEMO / "demo_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _post(port: int, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status, json.loads(r.read())


class Server:
    """One demo_server process in its own process group; `stop` always reaps it."""

    def __init__(self, server_dir: Path, log_path: Path, *extra: str) -> None:
        self.port = _free_port()
        self.log_path = log_path
        env = dict(os.environ, PYTHONPATH=str(server_dir))
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "demo_server", "--port", str(self.port), *extra],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait(self, timeout_s: float = STARTUP_TIMEOUT_S) -> tuple[str, list[int]]:
        """Poll /health until 200 or exit; return ("READY" | "EXITED", statuses seen)."""
        deadline = time.monotonic() + timeout_s
        seen: list[int] = []
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "EXITED", seen
            try:
                status, _ = _get(self.port, "/health")
                seen.append(status)
                if status == 200:
                    return "READY", seen
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.02)
        raise AssertionError(f"demo_server neither ready nor exited in {timeout_s}s:\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> int:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                return self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self.proc.wait(timeout=timeout_s)


@pytest.fixture(scope="module")
def patched_dir(tmp_path_factory) -> Path:
    """A copy of the demo laid out as in the repository, with fix-record-stream.diff applied."""
    root = tmp_path_factory.mktemp("patched")
    (root / "examples" / "demo").mkdir(parents=True)
    shutil.copy2(DEMO / "demo_server.py", root / "examples" / "demo" / "demo_server.py")
    diff = str(DEMO / "fix-record-stream.diff")
    subprocess.run(["git", "apply", "--check", diff], cwd=root, check=True, timeout=30)
    subprocess.run(["git", "apply", diff], cwd=root, check=True, timeout=30)
    return root / "examples" / "demo"


def test_patched_server_gets_ready_serves_and_stops_on_sigterm(patched_dir, tmp_path):
    server = Server(patched_dir, tmp_path / "server.log", "--served-model-name", "tiny")
    try:
        outcome, seen = server.wait()
        assert outcome == "READY", server.log()
        assert 503 in seen, "/health must answer 503 until the engine is ready"
        assert _get(server.port, "/health")[0] == 200
        status, body = _get(server.port, "/v1/models")
        assert status == 200 and json.loads(body)["data"][0]["id"] == "tiny"
        status, resp = _post(server.port, "/v1/completions",
                             {"model": "tiny", "prompt": "one two three", "max_tokens": 2})
        assert status == 200
        assert resp["choices"] == [{"index": 0, "text": " three two", "logprobs": None,
                                    "finish_reason": "stop"}]
        assert resp["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        assert server.stop(signal.SIGTERM) == 0
    finally:
        server.stop(signal.SIGKILL)
    log = server.log()
    assert READY_LINE in log
    assert "Capturing CUDA graphs (decode, FULL): 7/7 bs=1" in log
    assert "Shutting down demo API server" in log and "Traceback" not in log


def test_sigterm_during_startup_exits_cleanly(patched_dir, tmp_path):
    server = Server(patched_dir, tmp_path / "server.log")
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while "Loading weights for" not in server.log() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.stop(signal.SIGTERM) == 0
    finally:
        server.stop(signal.SIGKILL)
    assert "Shutting down demo API server" in server.log()


def test_unpatched_server_crashes_with_ima_during_capture(tmp_path):
    outcomes: list[str] = []
    crash_log = None
    for i in range(MAX_LAUNCHES):
        server = Server(DEMO, tmp_path / f"server{i}.log")
        try:
            outcome, _ = server.wait()
            rc = server.stop(signal.SIGTERM)
        finally:
            server.stop(signal.SIGKILL)
        outcomes.append(outcome)
        if outcome == "EXITED":
            assert rc == 1, server.log()
            crash_log = server.log()
            assert IMA_LINE.search(crash_log), crash_log
        else:
            assert rc == 0 and READY_LINE in server.log()
        if outcome == "EXITED":
            break
    assert "EXITED" in outcomes, outcomes
    lines = crash_log.splitlines()
    error_at = next(i for i, line in enumerate(lines) if FAILING_BS.search(line))
    assert lines[error_at].startswith("ERROR ")
    assert int(FAILING_BS.search(lines[error_at]).group(1)) in (32, 24, 16, 8, 4, 2, 1)
    assert lines[error_at + 1].endswith("Traceback (most recent call last):")
    ima_at = next(i for i, line in enumerate(lines) if IMA_LINE.match(line))
    assert lines[ima_at + 1].endswith("EngineCore failed to start.")
    assert READY_LINE not in crash_log


def test_toy_model_and_capture_sizes():
    demo = _load_demo_module()
    assert demo.complete("a b c", 16) == " c b a"
    assert demo.complete("a b c", 0) == ""
    assert demo.capture_sizes(32) == [32, 24, 16, 8, 4, 2, 1]
    assert demo.capture_sizes(3) == [2, 1]
