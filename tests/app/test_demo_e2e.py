"""The demo matrix end to end: real worktrees of this repository, real races, real MLflow (sqlite)."""
from __future__ import annotations

import json
import subprocess

import pytest

from harness.adapters.source.git import remove_worktrees
from tests.app.conftest import REPO, run_cli


def _is_clone() -> bool:
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=REPO, capture_output=True, text=True,
                             timeout=10)
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.strip() == str(REPO)


@pytest.mark.skipif(not _is_clone(), reason="the demo's source is this repository, which must be a git clone")
def test_demo_matrix_end_to_end_with_mlflow(project):
    try:
        proc = run_cli("run", "matrix=demo", "progress=false", cwd=project, timeout=600)
        assert proc.returncode == 0, proc.stderr
        rs = [json.loads(p.read_text()) for p in (project / "runs" / "demo").glob("*/*/result.json")]
        on = [r for r in rs if r["levels"]["fix"] == "on"]
        off = [r for r in rs if r["levels"]["fix"] == "off"]
        # repeats: auto, one pair: both arms launch in step until the pair is decided, at most 36 each.
        assert len(on) == len(off) and 2 <= len(on) <= 36, (len(on), len(off))
        assert all(r["outcome"] == "READY" for r in on), [r["first_error_line"] for r in on]
        assert all(r["outcome"] in ("READY", "IMA") for r in off), [r["detail"] for r in off]
        for r in off:
            if r["outcome"] == "IMA":
                assert "illegal memory access" in r["first_error_line"] and r["ladder"]["failing_bs"] is not None
        assert on[0]["source"]["patches"][0]["name"] == "fix-record-stream.diff"
        assert off[0]["source"]["patches"] == []
        report = json.loads(run_cli("report", "matrix=demo", "format=json", cwd=project).stdout)
        (verdict,) = [c["verdict"] for c in report["comparisons"] if c["metric"] == "READY"]
        # The rule stops a pair only once it is decided; undecided, it runs to the cap.
        assert verdict in ("BETTER", "SAME") or len(on) == 36, (verdict, len(on))
        assert f"{len(on)}/{len(on)} [" in proc.stdout
        n = len(rs)

        import mlflow
        client = mlflow.MlflowClient(f"sqlite:///{project / 'runs' / 'mlflow.db'}")
        exp = client.get_experiment_by_name("demo")
        runs = client.search_runs([exp.experiment_id], max_results=200)
        arms = [r for r in runs if r.data.tags.get("harness.kind") == "arm"]
        trials = [r for r in runs if r.data.tags.get("harness.kind") == "trial"]
        assert len(arms) == 2 and len(trials) == n
        ready = [t for t in trials if t.data.tags.get("outcome") == "READY"]
        assert len(ready) == sum(r["outcome"] == "READY" for r in rs)
        assert {t.data.params["level.fix"] for t in trials} == {"on", "off"}
        one = trials[0]
        names = {a.path for a in client.list_artifacts(one.info.run_id)}
        assert {"server.log", "result.json"} <= names

        # Re-running resumes: nothing new is launched or logged twice.
        again = run_cli("run", "matrix=demo", "progress=false", cwd=project, timeout=120)
        assert again.returncode == 0 and f"0 trials run, {n} already in the store" in again.stdout
        assert len(client.search_runs([exp.experiment_id], max_results=200)) == len(runs)
    finally:
        remove_worktrees(REPO, project / "runs" / ".worktrees")
