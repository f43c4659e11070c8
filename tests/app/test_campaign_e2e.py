"""A campaign across invocations, through the CLI with real fixture servers: a re-run replaces the
arms' evidence, a smaller repeats counts only its trials, and report, harness.load() and the
store agree on exactly which launches count."""
from __future__ import annotations

import json
from pathlib import Path

import harness
from tests.app.conftest import FIXTURE_SERVER, run_cli, write_matrix


def two_arms(project: Path) -> dict[str, Path]:
    """Arms a and b whose behaviour a test flips between invocations (a file read at each launch),
    without changing what defines the arms."""
    files = {name: project / f"mode-{name}" for name in ("a", "b")}
    for f in files.values():
        f.write_text("ready\n")
    write_matrix(project, "flip", {
        "target": {"engine": "command", "command": ["{python}", str(FIXTURE_SERVER), "--host", "{host}",
                                                    "--port", "{port}"],
                   "startup_timeout_s": 60, "quiet_timeout_s": 30, "fatal_grace_s": 0.5, "stop_timeout_s": 10},
        "axes": {"arm": {name: {"args": ["--mode-file", str(f)]} for name, f in files.items()}},
        "repeats": 3})
    return files


def report_json(project: Path, *extra: str) -> dict:
    proc = run_cli("report", "matrix=flip", "format=json", *extra, cwd=project)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def counts(report: dict) -> dict[str, tuple[int, int]]:
    return {s["levels"]["arm"]: (s["ready"], s["n"]) for s in report["summaries"]}


def test_rerun_replaces_the_arms_evidence_and_a_smaller_repeats_counts_only_its_trials(project):
    files = two_arms(project)
    first = run_cli("run", "matrix=flip", "tracking.enabled=false", "progress=false", cwd=project)
    assert first.returncode == 0, first.stderr
    assert counts(report_json(project)) == {"a": (3, 3), "b": (3, 3)}

    files["a"].write_text("crash\n")           # arm a now fails at every launch
    again = run_cli("run", "matrix=flip", "tracking.enabled=false", "repeats=2", "rerun=true", "progress=false", cwd=project)
    assert again.returncode == 0, again.stderr
    assert "6 earlier launches superseded" in again.stdout
    report = report_json(project)
    # Exactly the two fresh launches per arm: none of the earlier run's trials is counted.
    assert counts(report) == {"a": (0, 2), "b": (2, 2)}
    assert {r["outcome"] for r in report["results"] if r["levels"]["arm"] == "a"} == {"IMA"}
    frame = harness.load("flip", runs_dir=str(project / "runs"))
    assert sorted(zip(frame["level.arm"], frame["trial"], frame["outcome"])) == [
        ("a", 1, "IMA"), ("a", 2, "IMA"), ("b", 1, "READY"), ("b", 2, "READY")]
    superseded = list((project / "runs" / "flip" / ".superseded").glob("*/*/*/result.json"))
    assert len(superseded) == 6                    # the evidence of the first run is kept aside
    assert {json.loads(p.read_text())["outcome"] for p in superseded} == {"READY"}

    # Growing the campaign launches only the missing trials; shrinking it counts trials 1..N only.
    grow = run_cli("run", "matrix=flip", "tracking.enabled=false", "repeats=3", "progress=false", cwd=project)
    assert grow.returncode == 0, grow.stderr
    assert "2 trials run, 4 already in the store" in grow.stdout
    assert counts(report_json(project)) == {"a": (0, 3), "b": (3, 3)}
    shrink = run_cli("run", "matrix=flip", "tracking.enabled=false", "repeats=1", "progress=false", cwd=project)
    assert shrink.returncode == 0, shrink.stderr
    assert "0 trials run, 2 already in the store" in shrink.stdout
    report = report_json(project)
    assert counts(report) == {"a": (0, 1), "b": (1, 1)}
    assert sorted(r["trial"] for r in report["results"]) == [1, 1]
    assert any("4 stored launches above repeats=1 kept, not counted (trials 2–3; repeats=3 counts them)" in n for n in report["notes"])
    frame = harness.load("flip", runs_dir=str(project / "runs"))
    assert sorted(frame["trial"]) == [1, 1]


def test_a_report_from_another_folder_says_it_found_no_campaign(project, tmp_path_factory):
    two_arms(project)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    proc = run_cli("report", f"matrix={project / 'matrices' / 'flip.yaml'}", cwd=elsewhere)
    assert proc.returncode == 1
    assert f"no campaign of matrix 'flip' under {elsewhere.resolve() / 'runs' / 'flip'}" in proc.stderr
    assert not (elsewhere / "runs").exists()
