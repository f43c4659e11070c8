"""Secrets never reach the store, logs or MLflow; a broken tracking server loses no trial."""
from __future__ import annotations

import json
import socket

from tests.app.conftest import FIXTURE_SERVER, run_cli, write_matrix

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
    # The campaign's report went to MLflow too (its artifacts and tags are scanned with the rest).
    assert sorted(p.name for p in (project / "runs" / "mlflow-artifacts" / "sec").glob("*/artifacts/report.*")) == [
        "report.html", "report.json", "report.md"]
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
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags["harness.kind"] for r in runs) == ["arm", "campaign", "trial", "trial"]
    (arm,) = [r for r in runs if r.data.tags["harness.kind"] == "arm"]
    assert arm.data.tags["ready"] == "2/2" and arm.data.metrics["ready_rate"] == 1.0   # sync published the report


def flip_matrix(project, mode_file):
    write_matrix(project, "flip", {"target": {
        "engine": "command", "command": ["{python}", str(FIXTURE_SERVER), "--host", "{host}", "--port", "{port}",
                                         "--mode-file", str(mode_file)],
        "startup_timeout_s": 60, "quiet_timeout_s": 30, "fatal_grace_s": 0.5, "stop_timeout_s": 10}, "repeats": 2})


def test_a_relaunched_trial_shows_only_its_own_launch_in_mlflow(project):
    mode = project / "mode"
    mode.write_text("ready\n")
    flip_matrix(project, mode)
    assert run_cli("run", "matrix=flip", "progress=false", cwd=project).returncode == 0
    mode.write_text("crash\n")                      # the same arm now fails at launch
    again = run_cli("run", "matrix=flip", "repeats=1", "rerun=true", "progress=false", cwd=project)
    assert again.returncode == 0, again.stderr
    assert "workflowType=machine_learning" in again.stdout     # the arms view's link
    import mlflow
    from mlflow.entities import ViewType
    client = mlflow.MlflowClient(f"sqlite:///{project / 'runs' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("flip")
    live = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'trial'")
    stored = [json.loads(p.read_text()) for p in (project / "runs" / "flip").glob("*/*/result.json")]
    assert [(r["trial"], r["outcome"]) for r in stored] == [(1, "IMA")]
    (run,) = live                                      # trial 2 left the campaign, trial 1 was re-launched
    assert run.data.tags["harness.launch_id"] == stored[0]["launch_id"] and run.data.tags["outcome"] == "IMA"
    ladder = {k: float(v) for k, v in stored[0]["ladder"].items() if k in ("shapes_captured", "capture_s") and v is not None}
    # Exactly this launch's numbers: no READY start-up time, its own ladder, nothing left from the READY launch.
    assert {k: v for k, v in run.data.metrics.items() if k in ("startup_s", "shapes_captured", "capture_s")} == ladder
    assert run.info.end_time - run.info.start_time == round(stored[0]["duration_s"] * 1000)
    deleted = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'trial'", run_view_type=ViewType.DELETED_ONLY)
    assert len(deleted) == 2
    (arm,) = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'arm'")
    assert (arm.data.tags["ready"], arm.data.metrics["ready_k"], arm.data.metrics["n"]) == ("0/1", 0.0, 1.0)
