"""classify --json, harness.load, harness ui: through the real entry points."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import harness
from tests.app.conftest import REPO, fixture_target, run_cli, write_matrix

KEYS = {"file", "outcome", "first_error_line", "failing_bs", "failing_rank", "shapes_captured", "capture_s",
        "signature"}


def test_classify_json_one_object_per_file(tmp_path):
    crash = tmp_path / "crash.log"
    crash.write_text("INFO 11-29 10:00:00 [core.py:1] starting\n"
                     "(Worker_TP1 pid=7) ERROR 11-29 10:00:01 [multiproc_executor.py:1] "
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    ready = tmp_path / "ready.log"
    ready.write_text("INFO:     Application startup complete.\n")
    proc = run_cli("classify", "--json", str(crash), str(ready), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x["file"] for x in lines] == [str(crash), str(ready)]
    assert all(KEYS <= set(x) for x in lines)
    assert lines[0]["outcome"] == "IMA" and lines[0]["failing_rank"] == "TP1"
    assert lines[1]["outcome"] == "READY" and lines[1]["signature"] is None


def test_classify_missing_file_exits_2(tmp_path):
    proc = run_cli("classify", str(tmp_path / "nope.log"), cwd=tmp_path)
    assert proc.returncode == 2 and "no such file" in proc.stdout


def test_load_returns_one_row_per_trial(project):
    write_matrix(project, "small", {"target": fixture_target("ready"), "repeats": 3,
                                    "axes": {"a": {"x": {}, "y": {"env": {"Y": "1"}}}}})
    assert run_cli("run", "matrix=small", "tracking.enabled=false", cwd=project).returncode == 0
    df = harness.load("small", runs_dir=str(project / "runs"))
    assert len(df) == 6 and set(df["outcome"]) == {"READY"}
    assert sorted(df["level.a"]) == ["x", "x", "x", "y", "y", "y"]
    assert df.groupby("label")["ready"].sum().to_dict() == {"A": 3, "B": 3}


def test_ui_serves_mlflow_on_localhost(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "runs").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "ui", "--port", str(port), "--runs-dir",
                             str(tmp_path / "runs")], cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline, status = time.monotonic() + 90, None
        while time.monotonic() < deadline and status is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    status = r.status
            except OSError:
                time.sleep(0.5)
        assert status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # uvicorn workers that outlived the parent
        except ProcessLookupError:
            pass
