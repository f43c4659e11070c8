"""The campaign's report in a real MLflow (sqlite under tmp_path): campaign, arm and trial runs
carry exactly the report's numbers, and nothing of a launch that is no longer stored."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from harness.adapters.tracking import Tracker, TrackingConfig
from harness.app.report import compute
from harness.core.outcome import Outcome
from harness.core.schema import parse_matrix
from harness.core.verdicts import READY
from tests.adapters.test_tracking import MATRIX, all_runs, empty_db, kind, make_result, write_trial  # noqa: F401

SECRET = "hf_PublishSecret4242"
M = parse_matrix({"target": {"command": ["x"]}, "axes": {"pr32467": {"off": {}, "on": {}}}, "baseline": {"pr32467": "off"}},
                 name=MATRIX, file=f"{MATRIX}.yaml", engines=("command",))
LEGEND = [{"arm_id": "aaa111", "label": "A", "levels": {"pr32467": "off"}},
          {"arm_id": "bbb222", "label": "B", "levels": {"pr32467": "on"}}]
SIG = "IMA:illegal memory access@k"


@pytest.fixture
def runs_dir(tmp_path, empty_db) -> Path:  # noqa: F811
    d = tmp_path / "runs"
    d.mkdir()
    (d / "mlflow.db").write_bytes(empty_db)
    return d


def campaign(runs_dir: Path, n: int = 4):
    """A: READY, IMA, IMA, READY...; B: READY every time with a gsm8k gate. Stored and returned."""
    out = []
    for k in range(1, n + 1):
        a_ready = k % 3 == 1
        out.append(make_result(arm_id="aaa111", label="A", k=k, levels={"pr32467": "off"}, launch_id=f"a{k}",
                               outcome=Outcome.READY if a_ready else Outcome.IMA,
                               signature=None if a_ready else SIG, env={"HF_TOKEN": SECRET}))
        out.append(make_result(arm_id="bbb222", label="B", k=k, levels={"pr32467": "on"}, launch_id=f"b{k}",
                               gates={"gsm8k": {"passed": k != 2, "metrics": {"exact_match": 0.5 + k / 10}}}))
    for r in out:
        write_trial(runs_dir, r)
    return out


def report_files(tmp: Path, text: str) -> list[Path]:
    tmp.mkdir(exist_ok=True)
    files = []
    for ext in ("md", "html", "json"):
        (tmp / f"report.{ext}").write_text(text)
        files.append(tmp / f"report.{ext}")
    return files


def by_label(runs):
    return {r.data.tags["label"]: r for r in kind(runs, "arm")}


def test_arm_runs_carry_exactly_the_reports_numbers(runs_dir, tmp_path):
    results = campaign(runs_dir)
    tracker = Tracker(TrackingConfig(), runs_dir)
    tracker.sync(runs_dir / MATRIX)
    data = compute(M, LEGEND, results, size=3)
    tracker.publish(data, runs_dir / MATRIX, report_files(tmp_path / "r", "# report\n"))
    client = MlflowClient(tracker.uri)
    runs = all_runs(client)
    arms = by_label(runs)
    for s in data.summaries:
        run = arms[s.label]
        lo, hi = s.interval
        expected = {"ready_k": s.ready, "n": s.n, "ready_rate": round(s.ready / s.n, 4),
                    "ready_ci_low": round(lo, 4), "ready_ci_high": round(hi, 4)}
        for g in s.gates:
            expected[f"gate.{g.name}.pass_rate"] = round(g.passed / g.n, 4)
            expected.update({f"gate.{g.name}.{m}": round(mean, 4) for m, mean, _, _ in g.metrics})
        assert run.data.metrics == expected
        assert run.data.tags["ready"] == f"{s.ready}/{s.n}"
    assert (arms["A"].data.metrics["ready_k"], arms["A"].data.metrics["n"]) == (1, 3)   # trials 1..3 only
    assert arms["B"].data.metrics["gate.gsm8k.pass_rate"] == round(2 / 3, 4)
    assert arms["B"].data.metrics["gate.gsm8k.exact_match"] == round((0.6 + 0.7 + 0.8) / 3, 4)
    (c,) = [c for c in data.comparisons if c.metric == READY]
    assert arms["B"].data.tags["verdict"] == f"{c.verdict.value} vs A" and arms["A"].data.tags["verdict"] == "baseline"
    assert arms["A"].data.tags["top_signature"] == f"2× {SIG}" and "top_signature" not in arms["B"].data.tags
    assert all(r.info.status == "FINISHED" for r in kind(runs, "arm") + kind(runs, "campaign"))
    # Trials 4 are stored but not counted by this report: kept, tagged out of the campaign.
    flags = {(r.data.tags["label"], r.data.tags["harness.trial"]): r.data.tags["harness.in_campaign"]
             for r in kind(runs, "trial")}
    assert flags == {(lab, str(k)): "true" if k <= 3 else "false" for lab in "AB" for k in range(1, 5)}


def test_campaign_run_holds_the_report_and_the_experiment_its_arms_view(runs_dir, tmp_path):
    results = campaign(runs_dir, 3)
    tracker = Tracker(TrackingConfig(), runs_dir)
    tracker.sync(runs_dir / MATRIX)
    data = compute(M, LEGEND, results)
    tracker.publish(data, runs_dir / MATRIX, report_files(tmp_path / "r", f"# report\ntoken {SECRET}\n"))
    client = MlflowClient(tracker.uri)
    (camp,) = kind(all_runs(client), "campaign")
    assert sorted(a.path for a in client.list_artifacts(camp.info.run_id)) == ["report.html", "report.json", "report.md"]
    md = Path(client.download_artifacts(camp.info.run_id, "report.md", str(tmp_path))).read_text()
    assert md == "# report\ntoken ***\n"      # scrubbed with the trials' secrets
    assert camp.data.tags["trials"] == "6" and camp.data.tags["arms"] == "2" and camp.data.tags["baseline"] == "A"
    assert "B: " in camp.data.tags["verdicts"] and "report.md" in camp.data.tags["mlflow.note.content"]
    assert (camp.info.start_time, camp.info.end_time) == (1735787045000, 1735787045000 + 30_000)
    exp = client.get_experiment_by_name(MATRIX)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    view = json.loads(exp.tags["mlflow.sharedViewState.harness-arms"])
    state = json.loads(view["state"])
    assert view["name"] == "harness: arms" and state["searchFilter"] == "tags.`harness.kind` = 'arm'"
    assert state["selectedColumns"][:6] == ["tags.`ready`", "metrics.`ready_rate`", "metrics.`ready_ci_low`",
                                            "metrics.`ready_ci_high`", "tags.`verdict`", "tags.`top_signature`"]
    assert "metrics.`gate.gsm8k.exact_match`" in state["selectedColumns"]
    assert "params.`level.pr32467`" in state["selectedColumns"]
    for p in list(runs_dir.glob("mlflow.db*")) + [p for p in (runs_dir / "mlflow-artifacts").rglob("*") if p.is_file()]:
        assert SECRET.encode() not in p.read_bytes(), p


def test_a_smaller_report_replaces_the_numbers_and_drops_what_is_gone(runs_dir, tmp_path):
    results = campaign(runs_dir, 4)
    tracker = Tracker(TrackingConfig(), runs_dir)
    tracker.sync(runs_dir / MATRIX)
    tracker.publish(compute(M, LEGEND, results), runs_dir / MATRIX)
    # rerun=true with repeats=1: every earlier launch leaves the store, one fresh launch per arm.
    for arm in ("aaa111", "bbb222"):
        for k in (1, 2, 3, 4):
            (runs_dir / MATRIX / arm / str(k) / "result.json").unlink()
    fresh = [make_result(arm_id="aaa111", label="A", k=1, levels={"pr32467": "off"}, launch_id="a1-new"),
             make_result(arm_id="bbb222", label="B", k=1, levels={"pr32467": "on"}, launch_id="b1-new")]
    for r in fresh:
        write_trial(runs_dir, r)
        tracker.log_trial(r, runs_dir / MATRIX / r.arm_id / "1")
    again = Tracker(TrackingConfig(), runs_dir)
    again.publish(compute(M, LEGEND, fresh), runs_dir / MATRIX)
    client = MlflowClient(tracker.uri)
    runs = all_runs(client)
    arms = by_label(runs)
    assert {lab: (r.data.metrics["ready_k"], r.data.metrics["n"], r.data.tags["ready"]) for lab, r in arms.items()} == {
        "A": (1, 1, "1/1"), "B": (1, 1, "1/1")}
    assert "top_signature" not in arms["A"].data.tags                     # no failure left: the tag goes
    assert str(arms["B"].data.metrics["gate.gsm8k.pass_rate"]) == "nan"   # no gate ran in this campaign
    trials = kind(runs, "trial")
    assert sorted(r.data.tags["harness.launch_id"] for r in trials) == ["a1-new", "b1-new"]
    assert all(r.data.tags["harness.in_campaign"] == "true" for r in trials)
