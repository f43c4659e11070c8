"""Secrets never reach the store, logs or MLflow; a broken tracking server loses no trial."""
from __future__ import annotations

import json
import socket

from tests.app.conftest import run_cli, write_matrix

SECRET = "hf_TopSecretValue9876"
PRINTER = ("import os, sys, time; print('token is ' + os.environ['HF_TOKEN'] + ' argv ' + sys.argv[-1], flush=True); "
           "print('INFO:     Application startup complete.', flush=True); time.sleep(60)")


def printer_target(**extra):
    return {"engine": "command", "command": ["{python}", "-c", PRINTER], "args": ["--api-key", SECRET],
            "env": {"HF_TOKEN": SECRET, "PLAIN": "visible"},
            "ready": {"http_path": None, "log_marker": "startup complete"}, "startup_timeout_s": 20,
            "stop_timeout_s": 2, **extra}


def all_bytes(root):
    for p in root.rglob("*"):
        if p.is_file():
            yield p, p.read_bytes()


def test_secret_never_written(project):
    write_matrix(project, "sec", {"target": printer_target(), "repeats": 2})
    proc = run_cli("run", "matrix=sec", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    rs = [json.loads(p.read_text()) for p in (project / "runs" / "sec").glob("*/*/result.json")]
    assert [r["outcome"] for r in rs] == ["READY", "READY"]
    assert rs[0]["env"]["HF_TOKEN"] == "***" and rs[0]["env"]["PLAIN"] == "visible"
    log = next((project / "runs" / "sec").glob("*/1/server.log")).read_text()
    assert "token is ***" in log
    leaks = [str(p) for p, data in all_bytes(project / "runs") if SECRET.encode() in data]
    assert leaks == []


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broken_tracking_server_loses_nothing_then_sync(project):
    write_matrix(project, "trk", {"target": printer_target(), "repeats": 2})
    port = closed_port()
    proc = run_cli("run", "matrix=trk", f"tracking.uri=http://127.0.0.1:{port}", cwd=project, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "tracking failed" in proc.stdout and "harness sync matrix=trk" in proc.stdout
    assert len(list((project / "runs" / "trk").glob("*/*/result.json"))) == 2
    synced = run_cli("sync", "matrix=trk", cwd=project)
    assert synced.returncode == 0, synced.stderr
    assert "logged 2" in synced.stdout
    again = run_cli("sync", "matrix=trk", cwd=project)
    assert "logged 0, already there 2" in again.stdout
    import mlflow
    client = mlflow.MlflowClient(f"sqlite:///{project / 'runs' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("trk")
    assert len(client.search_runs([exp.experiment_id])) == 3   # one arm run, two trial runs
