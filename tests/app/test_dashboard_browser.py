"""The MLflow dashboard in a real browser: a campaign published into sqlite, a real `mlflow server`
over it, and headless Chromium rendering the runs page the harness links to."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness.adapters.mlflow_server import MlflowServer
from harness.adapters.tracking import Tracker, TrackingConfig
from harness.app.config import Settings
from harness.app.dashboard import dashboard_url, publish
from harness.app.report import build_report
from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult
from harness.core.schema import parse_matrix

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")

MATRIX = parse_matrix({"target": {"command": ["x"]}, "axes": {"fix": {"off": {}, "on": {}}}, "baseline": {"fix": "off"}},
                      name="dash", file="dash.yaml", engines=("command",))
ARMS = (("a0ff", "A", "off"), ("b0on", "B", "on"))
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1600,1000")


def store(runs: Path) -> None:
    """A: 1 of 6 READY (IMA otherwise); B: 6 of 6."""
    root = runs / "dash"
    for arm_id, label, level in ARMS:
        for k in range(1, 7):
            ready = label == "B" or k == 1
            r = TrialResult(matrix="dash", arm_id=arm_id, label=label, levels={"fix": level}, trial=k,
                            outcome=Outcome.READY if ready else Outcome.IMA, launch_id=f"{arm_id}-{k}",
                            signature=None if ready else "IMA:illegal memory access@load",
                            started_at=f"2025-01-02T03:0{k}:00.000+00:00", duration_s=2.5,
                            ladder=Ladder(shapes_captured=7 if ready else 3, shapes_total=7))
            d = root / arm_id / str(k)
            d.mkdir(parents=True)
            (d / "result.json").write_text(json.dumps(r.to_dict()))
            (d / "server.log").write_text("server log\n")
    (root / "arms.json").write_text(json.dumps({"matrix": "dash", "repeats": 6, "arms": [
        {"arm_id": a, "label": lab, "levels": {"fix": lvl}} for a, lab, lvl in ARMS]}))


def page_text(url: str, budget_ms: int) -> str:
    """The rendered page as text (chromium's --dump-dom once the SPA has settled)."""
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                                 "--dump-dom", url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=180)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # the browser's helpers too, whatever happened
            except ProcessLookupError:
                pass
            proc.wait()
    text = re.sub(r"<[^>]+>", " ", out.decode("utf-8", "replace"))
    return re.sub(r"\s+", " ", html.unescape(text))


def test_the_arms_view_shows_rate_interval_verdict_and_signature(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    runs = tmp_path / "runs"
    store(runs)
    settings = Settings(runs_dir=runs)
    assert Tracker(TrackingConfig(), runs).sync(runs / "dash").logged == 12
    report = build_report(MATRIX, runs, formats=())
    assert publish(report, settings) == []
    a, b = report.data.summaries
    with MlflowServer(f"sqlite:///{runs}/mlflow.db", tmp_path / "artifacts", tmp_path / "server.log") as srv:
        url = dashboard_url(settings, "dash", ui_url=srv.url)
        assert url is not None and "workflowType=machine_learning" in url
        wanted = ("ready_rate", "ready_ci_low", "ready_ci_high", "verdict", "top_signature", "BETTER vs A", "baseline",
                  "1/6", "6/6", f"{round(a.interval[0], 4)}", "IMA:illegal memory access@load")
        text = ""
        for budget_ms in (15_000, 30_000, 60_000):   # a loaded machine may need longer for the first render
            text = page_text(url, budget_ms)
            if all(w in text for w in wanted):
                break
    missing = [w for w in wanted if w not in text]
    assert missing == [], text[:3000]
    assert round(a.ready / a.n, 4) == 0.1667 and "0.1667" in text
    # The classic runs page, not the GenAI one (whose sidebar has Judges and whose page says "Training runs").
    assert " Runs " in text and "Judges" not in text and "Training runs" not in text
