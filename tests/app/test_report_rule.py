"""A report judges an adaptive campaign by the rule its run stored (arms.json), not by the matrix
file's current stats or the command line's: the rule's error guarantee belongs to the rule that
chose when to stop."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from harness.adapters.store import Store
from harness.app.report import report_data
from harness.core.arms import expand
from harness.core.matrix import Compare, Goal, Matrix, Stats
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.schema import parse_matrix
from harness.core.sequential import FixDecision, fix_stands
from harness.core.stored_rule import rule_settings, stored_stats
from harness.core.verdicts import READY, Verdict
from tests.fixtures.campaign import ENGINES


def matrix(tmp_path: Path, axes: dict | None = None, **stats: object) -> Matrix:
    body = {"target": {"engine": "sglang", "model": "m"}, "repeats": "auto", "stats": stats}
    if axes is not None:
        body |= {"axes": axes, "baseline": "fix=off"}
    return parse_matrix(body, name="rule", file=str(tmp_path / "rule.yaml"), engines=ENGINES)


def run_campaign(runs: Path, m: Matrix, plan: dict[str, list[Outcome]]) -> Store:
    """What `harness run` leaves: arms.json with the run's settings, a result.json per launch."""
    store = Store(runs, m.name)
    arms = expand(m)
    store.write_arms(arms, {"file": m.file, "adaptive": rule_settings(m.stats)}, size=m.stats.max_repeats)
    for arm in arms:
        for k, outcome in enumerate(plan[arm.label], start=1):
            store.write_result(TrialResult(matrix=m.name, arm_id=arm.arm_id, label=arm.label,
                                           levels=dict(arm.levels), trial=k, outcome=outcome))
    return store


FIX_AXIS = {"fix": {"off": {}, "on": {"env": {"FIX": "1"}}}}


def test_editing_alpha_after_the_run_keeps_its_verdicts(tmp_path):
    # Stopped at 4 launches per arm by α = 0.05 (0/4 against 4/4); α = 0.01 would not have stopped
    ran = matrix(tmp_path, FIX_AXIS, max_repeats=12, alpha=0.05)
    store = run_campaign(tmp_path / "runs", ran, {"A": [Outcome.IMA] * 4, "B": [Outcome.READY] * 4})
    before = report_data(ran, store)
    edited = matrix(tmp_path, FIX_AXIS, max_repeats=12, alpha=0.01)
    after = report_data(edited, store)
    ready = next(c for c in after.comparisons if c.metric == READY)
    assert ready.verdict is Verdict.BETTER and ready.note == "decided at 4/arm"
    assert [(c.metric, c.verdict, c.rule) for c in after.comparisons] == \
        [(c.metric, c.verdict, c.rule) for c in before.comparisons]
    assert after.stats.alpha == 0.05 and before.rule_note == ""
    assert after.rule_note == "judged by the run's stored rule (α = 0.05); the matrix now says α = 0.01"


def test_a_fixed_repeats_matrix_now_still_judges_by_the_stored_sequential_rule(tmp_path):
    ran = matrix(tmp_path, FIX_AXIS, max_repeats=12, alpha=0.05, margin=0.3)
    store = run_campaign(tmp_path / "runs", ran, {"A": [Outcome.IMA] * 4, "B": [Outcome.READY] * 4})
    fixed = parse_matrix({"target": {"engine": "sglang", "model": "m"}, "axes": FIX_AXIS, "baseline": "fix=off",
                          "repeats": 4, "stats": {"alpha": 0.01}}, name="rule", file="rule.yaml", engines=ENGINES)
    data = report_data(fixed, store)
    ready = next(c for c in data.comparisons if c.metric == READY)
    assert ready.verdict is Verdict.BETTER and ready.p_value is None and ready.rule.startswith("sequential GLR")
    assert data.rule_note.startswith("judged by the run's stored rule (repeats: auto") and "fixed repeats 4" in \
        data.rule_note


def test_the_fix_goal_uses_the_runs_max_repeats_and_target(tmp_path):
    # 1 failure in 9 launches against 0.5: HOLDS if the campaign could only go to 12 launches, not
    # yet when it could go to 30 (a longer campaign gives a bad fix more chances, so the bar is higher)
    assert fix_stands(1, 9, 0.5, 12) is FixDecision.HOLDS and fix_stands(1, 9, 0.5, 30) is FixDecision.CONTINUE
    ran = matrix(tmp_path, None, max_repeats=30, goal="fix", max_fail_rate=0.5)
    store = run_campaign(tmp_path / "runs", ran, {"A": [Outcome.READY] * 4 + [Outcome.IMA] + [Outcome.READY] * 4})
    edited = matrix(tmp_path, None, max_repeats=12, goal="fix")          # max_fail_rate back to 1/3
    (fix,) = report_data(edited, store).fix
    assert (fix.failures, fix.n, fix.target, fix.decision) == (1, 9, 0.5, FixDecision.CONTINUE)
    assert report_data(edited, store).rule_note == ("judged by the run's stored rule (max_repeats 30, "
                                                    "max_fail_rate 0.5); the matrix now says max_repeats 12, "
                                                    "max_fail_rate 0.333")


def test_a_run_stored_before_every_setting_was_recorded_reads_the_rest_from_the_matrix():
    old = {"batch": 2, "max_repeats": 10, "alpha": 0.05, "margin": 0.2, "compare": "all", "goal": "compare"}
    rule = stored_stats(Stats(max_fail_rate=0.25, test="barnard"), old)
    assert (rule.adaptive, rule.batch, rule.compare, rule.max_fail_rate, rule.test) == \
        (True, 2, Compare.ALL, 0.25, "barnard")


@settings(deadline=None, max_examples=50)
@given(st.builds(Stats, alpha=st.sampled_from([0.01, 0.05, 0.1]), margin=st.sampled_from([0.1, 0.2]),
                 compare=st.sampled_from(list(Compare)), test=st.sampled_from(["fisher", "barnard"]),
                 adaptive=st.just(True), max_repeats=st.integers(1, 60), batch=st.integers(1, 4),
                 goal=st.sampled_from(list(Goal)), max_fail_rate=st.sampled_from([0.1, 1 / 3, 0.5]),
                 lower_is_better=st.lists(st.sampled_from(["tpot_ms", "ttft_ms"]), unique=True).map(tuple),
                 margins=st.dictionaries(st.sampled_from(["score", "tpot_ms"]), st.sampled_from([0.01, 2.0]))))
def test_every_setting_of_the_rule_is_stored_and_read_back(stats):
    import json
    stored = json.loads(json.dumps(rule_settings(stats)))            # as arms.json holds it
    assert stored_stats(Stats(), stored) == stats


def test_a_fixed_repeats_run_is_judged_as_one_when_the_matrix_now_says_auto(tmp_path):
    auto = matrix(tmp_path, FIX_AXIS, max_repeats=36)
    store = Store(tmp_path / "runs", auto.name)
    arms = expand(auto)
    store.write_arms(arms, {"file": auto.file, "adaptive": None}, size=4)     # what `repeats=4` stores
    for arm in arms:
        for k in range(1, 5):
            outcome = Outcome.READY if arm.label == "B" or k == 1 else Outcome.IMA
            store.write_result(TrialResult(matrix=auto.name, arm_id=arm.arm_id, label=arm.label,
                                           levels=dict(arm.levels), trial=k, outcome=outcome))
    data = report_data(auto, store)
    ready = next(c for c in data.comparisons if c.metric == READY)
    assert not data.stats.adaptive and ready.test == "Fisher exact" and ready.p_value is not None
    assert (ready.k_arm, ready.n_arm, ready.k_ref, ready.n_ref) == (4, 4, 1, 4)
    assert data.rule_note == "judged as the run was made, fixed repeats; the matrix now says repeats: auto"
