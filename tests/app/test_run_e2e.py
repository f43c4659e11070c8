"""End to end through the CLI with real processes, real git and real MLflow (sqlite)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.app.conftest import FIXTURE_SERVER, REPO, fixture_target, git, run_cli, write_matrix


def results(project: Path, matrix: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((project / "runs" / matrix).glob("*/*/result.json"))]


def by_level(rs: list[dict], axis: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rs:
        out.setdefault(r["levels"][axis], []).append(r)
    return out


def fixture_processes(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if marker in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


def test_failure_modes_are_classified_and_nothing_is_left(project):
    target = fixture_target("ready", quiet_timeout_s=2.5, startup_timeout_s=4)
    target["command"] = [t for t in target["command"] if t not in ("--mode", "ready")]
    target["args"] = ["--mode", "ready"]
    levels = {m: {"args": ["--mode", m]} for m in ("ready", "crash", "hang", "never-ready", "ignore-term", "segv")}
    write_matrix(project, "modes", {"target": target, "axes": {"mode": levels}, "repeats": 1})
    proc = run_cli("run", "matrix=modes", "tracking.enabled=false", cwd=project)
    assert proc.returncode == 0, proc.stderr
    rs = {r["levels"]["mode"]: r for r in results(project, "modes")}
    assert {m: r["outcome"] for m, r in rs.items()} == {
        "ready": "READY", "crash": "IMA", "hang": "HANG", "never-ready": "TIMEOUT", "ignore-term": "READY",
        "segv": "SEGFAULT"}
    assert "illegal memory access" in rs["crash"]["first_error_line"]
    assert rs["crash"]["signature"].startswith("IMA:")
    assert rs["never-ready"]["signature"] == "TIMEOUT:not ready after 4 s"
    assert rs["hang"]["signature"].startswith("HANG:")
    assert rs["segv"]["signature"] == "SEGFAULT:killed by SIGSEGV"
    assert rs["ignore-term"]["stop"]["force_killed"] is True
    assert all(r["stop"]["survivors"] == [] for r in rs.values())
    for r in rs.values():
        log = (project / "runs" / "modes" / r["arm_id"] / str(r["trial"]) / "server.log").read_text()
        assert "fixture" in log
        assert r["argv"][1] == str(FIXTURE_SERVER)
    assert not fixture_processes(str(FIXTURE_SERVER) + " --host"), "a server process was left behind"
    md = (project / "runs" / "modes" / "report.md").read_text()
    assert "| A | ready | 1/1 READY" in md and "| B | crash | 1/1 illegal memory access" in md


LAUNCH = '''import os, sys
from pkg.mode import MODE
os.execv(sys.executable, [sys.executable, sys.argv[1], "--mode", MODE, "--port", sys.argv[2]])
'''


def test_patch_arms_worktrees_and_a_patch_that_does_not_apply(project, source_repo):
    (source_repo / "pkg" / "launch.py").write_text(LAUNCH)
    (source_repo / "pkg" / "__init__.py").write_text("")
    git(source_repo, "add", "-A")
    git(source_repo, "commit", "-qm", "launcher")
    fix = project / "fix.diff"
    fix.write_text("--- a/pkg/mode.py\n+++ b/pkg/mode.py\n@@ -1 +1 @@\n-MODE = \"crash\"\n+MODE = \"ready\"\n")
    stale = project / "stale.diff"
    stale.write_text("--- a/pkg/mode.py\n+++ b/pkg/mode.py\n@@ -1 +1 @@\n-MODE = \"hang\"\n+MODE = \"ready\"\n")
    (source_repo / "pkg" / "mode.py").write_text('MODE = "uncommitted"\n')   # the user's dirty checkout
    before = (git(source_repo, "status", "--porcelain"), git(source_repo, "rev-parse", "HEAD"))
    target = {"engine": "command", "source": {"repo": str(source_repo), "ref": "main"}, "pythonpath": ["."],
              "command": ["{python}", "-m", "pkg.launch", str(FIXTURE_SERVER), "{port}"],
              "startup_timeout_s": 20, "fatal_grace_s": 0.5, "stop_timeout_s": 3}
    write_matrix(project, "patched", {"target": target, "repeats": 2, "axes": {
        "fix": {"off": {}, "on": {"patches": ["../fix.diff"]}, "stale": {"patches": ["../stale.diff"]}}}})
    proc = run_cli("run", "matrix=patched", "tracking.enabled=false", cwd=project)
    assert proc.returncode == 0, proc.stderr
    rs = by_level(results(project, "patched"), "fix")
    assert [r["outcome"] for r in rs["off"]] == ["IMA", "IMA"]
    assert [r["outcome"] for r in rs["on"]] == ["READY", "READY"]
    assert [r["outcome"] for r in rs["stale"]] == ["PATCH_FAILED", "PATCH_FAILED"]
    assert "patch does not apply" in rs["stale"][0]["detail"] or "does not apply" in rs["stale"][0]["detail"]
    on = rs["on"][0]
    import hashlib
    assert on["source"]["base_sha"] == git(source_repo, "rev-parse", "main")
    assert on["source"]["patches"][0]["sha256"] == hashlib.sha256(fix.read_bytes()).hexdigest()
    assert on["source"]["touched"]["pkg/mode.py"] == [hashlib.sha256(b'MODE = "crash"\n').hexdigest(),
                                                      hashlib.sha256(b'MODE = "ready"\n').hexdigest()]
    assert (project / "runs" / "patched" / on["arm_id"] / "1" / "patches").is_dir()
    assert (git(source_repo, "status", "--porcelain"), git(source_repo, "rev-parse", "HEAD")) == before
    assert (source_repo / "pkg" / "mode.py").read_text() == 'MODE = "uncommitted"\n'
    md = run_cli("report", "matrix=patched", "format=md", cwd=project).stdout
    assert "| A | off | 2/2 illegal memory access | 0.00 [0.00, 0.66] |" in md
    assert "| B | on | 2/2 READY, 4/4 shapes each | 1.00 [0.34, 1.00] |" in md
    assert "| C | stale | no launch counted (+2 PATCH_FAILED, not counted) | - |" in md


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_interrupt_mid_matrix_then_resume(project, sig):
    target = fixture_target("slow-ready", startup_timeout_s=20)
    target["command"] += ["--delay-s", "0.8"]
    write_matrix(project, "resume", {"target": target, "axes": {"x": {"a": {}, "b": {"env": {"B": "1"}}}},
                                     "repeats": 4})
    harness = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "run", "matrix=resume",
                                "tracking.enabled=false"], cwd=project, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 60
    while len(results(project, "resume")) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # let the next trial's server start
    harness.send_signal(sig)
    rc = harness.wait(30)
    assert rc == (-9 if sig == signal.SIGKILL else 130)
    finished = {(r["arm_id"], r["trial"]): r["started_at"] for r in results(project, "resume")}
    assert 3 <= len(finished) < 8
    deadline = time.monotonic() + 10
    while fixture_processes(str(FIXTURE_SERVER) + " --mode slow-ready") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not fixture_processes(str(FIXTURE_SERVER) + " --mode slow-ready"), "server survived kill -9"
    proc = run_cli("run", "matrix=resume", "tracking.enabled=false", "progress=false", cwd=project)
    assert proc.returncode == 0, proc.stderr
    after = results(project, "resume")
    assert len(after) == 8 and len({(r["arm_id"], r["trial"]) for r in after}) == 8
    for r in after:
        key = (r["arm_id"], r["trial"])
        if key in finished:
            assert r["started_at"] == finished[key], "a finished trial was run again"
    assert f"{8 - len(finished)} trials run, {len(finished)} already in the store" in proc.stdout
    assert all(r["outcome"] == "READY" for r in after)
