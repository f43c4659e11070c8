"""SIGTERM of the real `harness` process: what it started stops with it, what finished stays."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from tests.app.conftest import FIXTURE_SERVER, REPO, fixture_target, write_matrix

START_S = 120.0      # mlflow ui on a loaded 2-core box takes 10-30 s
STOP_S = 60.0


def _harness(*args: str, cwd: Path) -> subprocess.Popen:
    # Its own session, so that the test can clean up after a failure; the signal goes to the pid alone,
    # as `kill PID` or a supervisor sends it.
    return subprocess.Popen([sys.executable, "-m", "harness.cli.main", *args], cwd=cwd, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _kill_all(proc: subprocess.Popen, procs: list[psutil.Process]) -> None:
    for p in _alive(procs + _tree(proc.pid)):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_sigterm_of_ui_frees_the_port_and_leaves_no_process(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "runs").mkdir()
    proc = _harness("ui", f"port={port}", f"runs_dir={tmp_path / 'runs'}", cwd=tmp_path)
    seen: list[psutil.Process] = []
    try:
        deadline, status = time.monotonic() + START_S, None
        while time.monotonic() < deadline and status is None and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    status = r.status
            except OSError:
                time.sleep(0.5)
        assert status == 200, proc.stderr.read() if proc.poll() is not None else "no /health"
        seen = _tree(proc.pid)
        assert seen                                      # mlflow ui and its uvicorn below the harness
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(STOP_S) == 143
        gone, alive = psutil.wait_procs(seen, timeout=10)
        assert not _alive(alive), [p.cmdline() for p in _alive(alive)]
        assert _port_free(port)
    finally:
        _kill_all(proc, seen)


def test_sigterm_of_run_stops_the_server_and_keeps_finished_trials(project):
    # Arm A's server is ready at once; arm B's never is (the fixture takes the last --mode given).
    write_matrix(project, "m", {"target": fixture_target("never-ready", startup_timeout_s=300, quiet_timeout_s=300),
                                "repeats": 1, "axes": {"mode": {"quick": {"args": ["--mode", "ready"]}, "slow": {}}}})
    proc = _harness("run", "matrix=m", "progress=false", "tracking.enabled=false", cwd=project)
    seen: list[psutil.Process] = []
    try:
        server = None
        deadline = time.monotonic() + START_S
        while server is None and time.monotonic() < deadline and proc.poll() is None:
            for p in _tree(proc.pid):
                try:
                    cmd = p.cmdline()
                except psutil.NoSuchProcess:
                    continue
                if str(FIXTURE_SERVER) in cmd and "ready" not in cmd:    # arm B's server is up
                    server = p
            time.sleep(0.2)
        assert server is not None, proc.communicate(timeout=30)
        seen = _tree(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=STOP_S)
        assert proc.returncode == 143, err
        assert "terminated" in err and "resume" in err and len(err.strip().splitlines()) == 1, err
        gone, alive = psutil.wait_procs(seen, timeout=10)
        assert not _alive(alive), [p.cmdline() for p in _alive(alive)]
        results = [json.loads(p.read_text()) for p in (project / "runs" / "m").glob("*/*/result.json")]
        assert [(r["levels"]["mode"], r["outcome"]) for r in results] == [("quick", "READY")]
    finally:
        _kill_all(proc, seen)
