"""The pure part of the dashboard: what the campaign and its arms look like in MLflow."""
from __future__ import annotations

import json
import math

from harness.adapters import tracking_dashboard as td
from harness.adapters.tracking_fields import Secrets
from harness.app.report import compute
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.schema import parse_matrix

LEGEND = [{"arm_id": f"a{i}", "label": lab, "levels": {"pr": lvl}} for i, (lab, lvl) in enumerate(
    (("A", "off"), ("B", "on"), ("C", "also")))]


def matrix(compare: str):
    return parse_matrix({"target": {"command": ["x"]}, "axes": {"pr": {"off": {}, "on": {}, "also": {}}},
                         "stats": {"compare": compare}}, name="m", file="m.yaml", engines=("command",))


def results(secret: str = "") -> list[TrialResult]:
    mk = lambda arm, k, o: TrialResult(matrix="m", arm_id=f"a{arm}", label="ABC"[arm], levels={"pr": LEGEND[arm]["levels"]["pr"]},
                                       trial=k, outcome=o, signature=f"IMA:bad {secret}" if o is Outcome.IMA else None,
                                       env={"HF_TOKEN": secret} if secret else {})
    return [mk(0, k, Outcome.IMA) for k in range(1, 7)] + [mk(1, k, Outcome.READY) for k in range(1, 7)] + \
        [mk(2, k, Outcome.READY if k % 2 else Outcome.IMA) for k in range(1, 7)]


def test_verdicts_against_the_baseline_and_between_all_pairs():
    data = compute(matrix("baseline"), LEGEND, results())
    a, b, c = data.summaries
    assert td.verdict_text(a, data.comparisons, data.baseline, data.stats.compare) == "baseline"
    assert td.verdict_text(b, data.comparisons, data.baseline, data.stats.compare) == "BETTER vs A"
    every = compute(matrix("all"), LEGEND, results())
    a, b, c = every.summaries
    # Each arm lists every pair it is in, seen from its side.
    assert td.verdict_text(a, every.comparisons, every.baseline, every.stats.compare).startswith("WORSE vs B")
    assert "BETTER vs A" in td.verdict_text(b, every.comparisons, every.baseline, every.stats.compare)


def test_arm_fields_are_the_summary_scrubbed_and_rounded():
    secret = "hf_dashboardSecret1"
    data = compute(matrix("baseline"), LEGEND, results(secret))
    f = td.arm_fields(data.summaries[2], data, Secrets([secret]))
    lo, hi = data.summaries[2].interval
    assert f.metrics == {"ready_k": 3.0, "n": 6.0, "ready_rate": 0.5, "ready_ci_low": round(lo, 4),
                         "ready_ci_high": round(hi, 4)}
    assert f.tags["top_signature"] == "3× IMA:bad ***" and f.tags["ready"] == "3/6"
    empty = td.arm_fields(compute(matrix("baseline"), LEGEND, []).summaries[1], data, Secrets())
    assert empty.metrics == {"ready_k": 0.0, "n": 0.0} and "top_signature" not in empty.tags
    assert td.stale_metrics({"ready_rate": 0.5, "ready_k": 3.0, "gate.g.x": 1.0}, empty.metrics).keys() == {
        "ready_rate", "gate.g.x"}
    assert all(math.isnan(v) for v in td.stale_metrics({"ready_rate": 0.5}, {}).values())


def test_launch_key_falls_back_to_the_start_time():
    r = results()[0]
    assert td.launch_key(r) == "unknown"
    assert td.launch_key(TrialResult(**{**r.__dict__, "started_at": "2025-01-01T00:00:00.000+00:00"})) == \
        "started:2025-01-01T00:00:00.000+00:00"
    assert td.launch_key(TrialResult(**{**r.__dict__, "launch_id": "abc"})) == "abc"


def test_the_saved_view_is_rewritten_only_when_it_changes():
    data = compute(matrix("baseline"), LEGEND, results())
    state = td.view_state(data)
    first = td.view_tag(state, None, 1000)
    assert json.loads(first) == {"name": td.VIEW_NAME, "createdAt": 1000, "updatedAt": 1000, "state": state}
    assert td.view_tag(state, first, 2000) is None
    changed = json.loads(td.view_tag(state + " ", first, 3000))
    assert (changed["createdAt"], changed["updatedAt"]) == (1000, 3000)
    assert td.view_tag(state, "not json", 5)                       # a damaged tag is written anew
    assert td.view_url("http://h:5000/", "7") == (
        "http://h:5000/#/experiments/7/runs?viewStateShareKey=harness-arms&workflowType=machine_learning")
