"""repeats: auto through the CLI with real fixture servers: launches stop once each comparison is
decided, the report says how, and a second run resumes without launching anything."""
from __future__ import annotations

import json
from pathlib import Path

from harness.core.sequential import Decision, clean_runs_needed, design
from tests.app.conftest import fixture_target, run_cli, write_matrix


def launches(project: Path, matrix: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in (project / "runs" / matrix).glob("*/*/result.json"):
        r = json.loads(p.read_text())
        out[r["label"]] = out.get(r["label"], 0) + 1
    return out


def first_decision(stands, max_n: int) -> int:
    return next(n for n in range(1, max_n + 1) if stands(n) is not Decision.CONTINUE)


def test_auto_repeats_stop_when_decided_and_resume(project):
    write_matrix(project, "auto", {
        "target": fixture_target("ready"),
        "axes": {"build": {"good": {}, "same": {}, "bad": {"args": ["--mode", "crash"]}}},
        "baseline": "build=good",
        "repeats": "auto",
        "stats": {"max_repeats": 10, "alpha": 0.05, "margin": 0.5},
    })
    proc = run_cli("run", "matrix=auto", "progress=false", "tracking.enabled=false", cwd=project)
    assert proc.returncode == 0, proc.stderr
    rule = design(0.05 / 2, 1, 10)          # two pairs judged: alpha split between them
    n_bad = first_decision(lambda n: rule.stands(0, n, n, n, 0.5), 10)
    n_same = first_decision(lambda n: rule.stands(n, n, n, n, 0.5), 10)
    assert launches(project, "auto") == {"A": max(n_bad, n_same), "B": n_same, "C": n_bad}
    assert sum(launches(project, "auto").values()) < 3 * 10
    md = (project / "runs" / "auto" / "report.md").read_text()
    assert f"- C (build=bad) vs A (build=good), READY: **WORSE** — 0/{n_bad} vs {n_bad}/{n_bad}, -1.00; sequential GLR" in md
    assert f"decided at {n_bad}/arm (log GLR" in md and "- B (build=same) vs A (build=good), READY: **SAME**" in md and "inside ±0.5" in md
    again = run_cli("run", "matrix=auto", "progress=false", "tracking.enabled=false", cwd=project)
    assert again.returncode == 0 and "0 trials run" in again.stdout
    html = run_cli("report", "matrix=auto", "format=html", cwd=project)
    page = (project / "runs" / "auto" / "report.html").read_text()
    assert html.returncode == 0 and "report.html" in html.stderr and page.count("data:image/png;base64,") == 3
    js = json.loads(run_cli("report", "matrix=auto", "format=json", cwd=project).stdout)
    assert {(c["arm"], c["verdict"]) for c in js["comparisons"]} == {("B", "SAME"), ("C", "WORSE")}


def test_fix_goal_stops_after_enough_clean_runs(project):
    write_matrix(project, "fix", {
        "target": fixture_target("ready"),
        "repeats": "auto",
        "stats": {"max_repeats": 12, "goal": "fix", "max_fail_rate": 0.5},
    })
    proc = run_cli("run", "matrix=fix", "progress=false", "tracking.enabled=false", cwd=project)
    assert proc.returncode == 0, proc.stderr
    need = clean_runs_needed(0.5)
    assert launches(project, "fix") == {"A": need}
    md = (project / "runs" / "fix" / "report.md").read_text()
    assert f"{need} clean launches in a row bound it below the target" in md and "**holds** — 0/" in md


def test_dry_run_says_auto(project):
    write_matrix(project, "dry", {"target": fixture_target("ready"), "repeats": "auto",
                                  "stats": {"max_repeats": 7}})
    proc = run_cli("run", "matrix=dry", "dry_run=true", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "up to 7 repeats" in proc.stdout and "repeats: auto" in proc.stdout


def test_report_judges_adaptive_launches_by_the_sequential_rule(project):
    write_matrix(project, "flip", {
        "target": fixture_target("ready"),
        "axes": {"build": {"good": {}, "bad": {"args": ["--mode", "crash"]}}},
        "repeats": 3,
    })
    proc = run_cli("run", "matrix=flip", "progress=false", "tracking.enabled=false", "repeats=auto",
                   "stats.max_repeats=6", cwd=project)
    assert proc.returncode == 0, proc.stderr
    md = run_cli("report", "matrix=flip", "format=md", cwd=project).stdout
    assert "sequential GLR" in md and "log GLR" in md and "Fisher exact" not in md and "p = " not in md
