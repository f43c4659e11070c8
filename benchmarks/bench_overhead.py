"""Harness overhead per trial, excluding the server itself.

Side by side, interleaved (ABAB…) so machine drift hits both alike:
  direct  — start the fixture server (ready at once), poll /health until 200, SIGTERM, wait;
  harness — one full trial through harness.app.trial.run_trial of the same server, from a git
            source with a patch (cached worktree), readiness probe, classifier, stop, psutil
            check, result.json.
Overhead = median(harness) − median(direct).  Goal: ≤ 0.5 s median on 2 cores.

    python benchmarks/bench_overhead.py [--trials 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "fixtures" / "fixture_server.py"

from harness.adapters.store import Store  # noqa: E402
from harness.app.config import load  # noqa: E402
from harness.app.trial import TrialSpec, free_port, run_trial  # noqa: E402
from harness.app.validate import check_sources  # noqa: E402
from harness.core.arms import expand  # noqa: E402


def direct_once() -> float:
    port = free_port("127.0.0.1")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(FIXTURE), "--mode", "ready", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.005)
    proc.terminate()
    proc.wait(10)
    return time.monotonic() - t0


def setup(tmp: Path) -> tuple:
    repo = tmp / "src"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    (repo / "x.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    (tmp / "p.diff").write_text("--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n")
    (tmp / "matrices").mkdir()
    (tmp / "matrices" / "bench.yaml").write_text(f"""
target:
  engine: command
  source: {{repo: {repo}, ref: HEAD}}
  command: ["{{python}}", "{FIXTURE}", --mode, ready, --host, "{{host}}", --port, "{{port}}"]
  startup_timeout_s: 30
axes:
  p: {{on: {{patches: [../p.diff]}}}}
""")
    matrix, settings = load(["matrix=bench", f"runs_dir={tmp / 'runs'}"], cwd=tmp)
    top, sha = check_sources(matrix)
    arm = expand(matrix, sha)[0]
    store = Store(settings.runs_dir, matrix.name)
    return matrix, arm, store, settings, top, sha


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    n = ap.parse_args().trials
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        os.chdir(tmp)
        matrix, arm, store, settings, top, sha = setup(tmp)
        run_trial(TrialSpec(matrix, arm, 0, settings.runs_dir, top, sha), store)   # warm: worktree, imports
        direct, harness, inside = [], [], []
        for k in range(1, n + 1):
            direct.append(direct_once())
            t0 = time.monotonic()
            r = run_trial(TrialSpec(matrix, arm, k, settings.runs_dir, top, sha), store)
            harness.append(time.monotonic() - t0)
            assert r.outcome.value == "READY", r.detail
            inside.append(r.startup_s or 0.0)
        # The whole loop as `harness run` does it: planning, store, live view off, MLflow (sqlite) on,
        # including the final flush of the tracking writer.
        from dataclasses import replace

        from rich.console import Console

        from harness.app.run import run_matrix
        full_settings = replace(settings, runs_dir=tmp / "runs-full", progress=False)
        t0 = time.monotonic()
        run_matrix(replace(matrix, repeats=n), full_settings, Console(file=open(os.devnull, "w")))
        full = (time.monotonic() - t0) / n
    md, mh = statistics.median(direct), statistics.median(harness)
    print(f"trials: {n} each, interleaved")
    print(f"direct  start→ready→stopped: median {md:.3f} s  (max {max(direct):.3f})")
    print(f"harness full trial:          median {mh:.3f} s  (max {max(harness):.3f})")
    print(f"  of which launch→ready as the harness saw it: median {statistics.median(inside):.3f} s")
    print(f"overhead per trial (median harness − median direct): {mh - md:.3f} s   goal ≤ 0.5 s")
    print(f"ratio harness/direct: {mh / md:.2f}")
    print(f"whole run loop with MLflow sqlite logging, per trial (mean incl. DB creation): {full:.3f} s "
          f"→ overhead {full - md:.3f} s")


if __name__ == "__main__":
    main()
