import pytest
from hypothesis import given, settings, strategies as st

from harness.core.matrix import Compare, Stats
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.sequential import design, log_glr
from harness.core.verdicts import READY, ArmData, Verdict, judge

# Mostly READY or a crash; now and then a launch that does not count (INFRA, PATCH_FAILED).
OUTCOMES = st.sampled_from([Outcome.READY] * 4 + [Outcome.IMA, Outcome.OOM, Outcome.HANG, Outcome.INFRA,
                                                  Outcome.PATCH_FAILED])


def arm(arm_id, outcomes, gates=None):
    return ArmData(arm_id, arm_id.upper(), [
        TrialResult(matrix="m", arm_id=arm_id, label=arm_id.upper(), levels={}, trial=k, outcome=o,
                    gates=gates[k - 1] if gates else {})
        for k, o in enumerate(outcomes, start=1)])


def ready_of(comparisons):
    return next(c for c in comparisons if c.metric == READY)


def both_ways(a, b, stats):
    """The READY comparison of b against baseline a, and of a against baseline b."""
    arms = [arm("a", a), arm("b", b)]
    return ready_of(judge(arms, "a", stats)), ready_of(judge(arms, "b", stats))


@settings(deadline=None, max_examples=150)
@given(st.lists(OUTCOMES, max_size=16), st.lists(OUTCOMES, max_size=16))
def test_fixed_verdicts_symmetric_under_swapping_baseline(a, b):
    stats = Stats(compare=Compare.BASELINE)
    b_vs_a, a_vs_b = both_ways(a, b, stats)
    assert (b_vs_a.arm, b_vs_a.ref) == ("B", "A") and (a_vs_b.arm, a_vs_b.ref) == ("A", "B")
    assert a_vs_b.verdict is b_vs_a.verdict.flipped()
    assert a_vs_b.p_value == b_vs_a.p_value


@settings(deadline=None, max_examples=150)
@given(st.lists(OUTCOMES, max_size=16), st.lists(OUTCOMES, max_size=16), st.sampled_from([0.05, 0.01, 0.2]),
       st.sampled_from([0.1, 0.2, 0.5]))
def test_fixed_verdicts_follow_p_and_interval(a, b, alpha, margin):
    stats = Stats(compare=Compare.BASELINE, alpha=alpha, margin=margin)
    for c in judge([arm("a", a), arm("b", b)], "a", stats):
        if c.verdict is Verdict.SAME:
            assert -margin < c.interval[0] and c.interval[1] < margin
        if c.verdict in (Verdict.BETTER, Verdict.WORSE):
            assert c.p_adjusted is not None and c.p_adjusted < alpha
            assert (c.verdict is Verdict.BETTER) == (c.diff > 0)
        if c.p_adjusted is None:
            assert c.verdict is Verdict.UNKNOWN
        assert c.n_arm == sum(o.counts for o in b) and c.n_ref == sum(o.counts for o in a)


@settings(deadline=None, max_examples=25)
@given(st.lists(OUTCOMES, max_size=8), st.lists(OUTCOMES, max_size=8))
def test_barnard_verdicts_symmetric(a, b):
    b_vs_a, a_vs_b = both_ways(a, b, Stats(test="barnard"))
    assert a_vs_b.verdict is b_vs_a.verdict.flipped()


def test_p_exactly_at_alpha_gives_the_same_verdict_both_ways():
    # 2/2 READY against 2/14: Fisher p = 0.05 exactly; it used to come out 0.04999999999999999 one way
    b_vs_a, a_vs_b = both_ways([Outcome.READY] * 2, [Outcome.READY] * 2 + [Outcome.IMA] * 12, Stats())
    assert b_vs_a.verdict is Verdict.UNKNOWN and a_vs_b.verdict is Verdict.UNKNOWN


def test_known_fixed_verdicts():
    ok, bad = [Outcome.READY] * 6, [Outcome.IMA] * 5 + [Outcome.READY]
    b_vs_a, a_vs_b = both_ways(ok, bad, Stats())
    assert b_vs_a.verdict is Verdict.WORSE and a_vs_b.verdict is Verdict.BETTER
    assert b_vs_a.p_value == pytest.approx(0.01515, abs=1e-4)
    b_vs_a, _ = both_ways([Outcome.READY] * 3, [Outcome.IMA] * 3, Stats())
    assert b_vs_a.verdict is Verdict.UNKNOWN                 # N = 3 cannot reach 0.05
    b_vs_a, _ = both_ways([Outcome.READY] * 200, [Outcome.READY] * 200, Stats())
    assert b_vs_a.verdict is Verdict.SAME
    b_vs_a, _ = both_ways([], [Outcome.READY] * 3, Stats())
    assert b_vs_a.verdict is Verdict.UNKNOWN and b_vs_a.p_value is None


ADAPTIVE = Stats(adaptive=True, max_repeats=12, alpha=0.05)


@settings(deadline=None, max_examples=100)
@given(st.lists(OUTCOMES, max_size=14), st.lists(OUTCOMES, max_size=14))
def test_adaptive_verdicts_symmetric_under_swapping_baseline(a, b):
    b_vs_a, a_vs_b = both_ways(a, b, ADAPTIVE)
    assert a_vs_b.verdict is b_vs_a.verdict.flipped()
    assert a_vs_b.note == b_vs_a.note
    if b_vs_a.verdict is Verdict.SAME:
        assert "inside" in b_vs_a.note


def test_adaptive_direction_comes_from_the_launches_that_decided():
    # A fails its first 4 launches, B passes them: decided at 4/arm, A worse. Later launches even the
    # totals out (8/12 each); the verdict must still say A is worse, from either side.
    d = design(ADAPTIVE.alpha, ADAPTIVE.batch, ADAPTIVE.max_repeats)
    assert d.stands(0, 4, 4, 4, ADAPTIVE.margin).value == "different"
    a = [Outcome.IMA] * 4 + [Outcome.READY] * 8
    b = [Outcome.READY] * 8 + [Outcome.IMA] * 4
    b_vs_a, a_vs_b = both_ways(a, b, ADAPTIVE)
    assert b_vs_a.verdict is Verdict.BETTER and a_vs_b.verdict is Verdict.WORSE
    assert b_vs_a.note == "decided at 4/arm"


def test_sequential_counts_are_those_of_the_look_that_decided():
    # Same campaign: the row shows 4/4 against 0/4, the evidence the rule stopped on, not 8/12 vs 8/12
    a = [Outcome.IMA] * 4 + [Outcome.READY] * 8
    b = [Outcome.READY] * 8 + [Outcome.IMA] * 4
    b_vs_a, a_vs_b = both_ways(a, b, ADAPTIVE)
    assert (b_vs_a.k_arm, b_vs_a.n_arm, b_vs_a.k_ref, b_vs_a.n_ref, b_vs_a.diff) == (4, 4, 0, 4, 1.0)
    assert (a_vs_b.k_arm, a_vs_b.k_ref, a_vs_b.diff) == (0, 4, -1.0)
    d = design(ADAPTIVE.alpha, ADAPTIVE.batch, ADAPTIVE.max_repeats)
    assert b_vs_a.statistic == pytest.approx(float(log_glr(4, 4, 0, 4))) and b_vs_a.threshold == d.threshold
    assert b_vs_a.statistic >= b_vs_a.threshold
    assert b_vs_a.rule == "sequential GLR, α = 0.05, decided at 4/arm"


def test_undecided_sequential_counts_are_those_of_the_latest_look():
    # Looks every 2 launches: after 3 launches per arm the rule has looked at 2 of them
    stats = Stats(adaptive=True, max_repeats=12, batch=2)
    running, _ = both_ways([Outcome.READY, Outcome.IMA, Outcome.READY], [Outcome.READY] * 3, stats)
    assert running.verdict is Verdict.UNKNOWN and running.note == "running: 3/arm so far"
    assert (running.k_arm, running.n_arm, running.k_ref, running.n_ref) == (2, 2, 1, 2)
    assert running.statistic == pytest.approx(float(log_glr(2, 2, 1, 2)))
    assert running.rule.endswith("latest look at 2/arm")


@settings(deadline=None, max_examples=100)
@given(st.lists(OUTCOMES, max_size=14), st.lists(OUTCOMES, max_size=14), st.lists(OUTCOMES, max_size=14))
def test_a_sequential_comparison_never_carries_a_fixed_sample_p_or_interval(a, b, c):
    # A fixed-sample p-value or interval is not valid once the data chose when to stop; next to an
    # UNKNOWN it read as evidence the rule did not find
    comparisons = judge([arm("a", a), arm("b", b), arm("c", c)], "a", ADAPTIVE)
    threshold = design(ADAPTIVE.alpha / 2, ADAPTIVE.batch, ADAPTIVE.max_repeats).threshold
    for cmp in (x for x in comparisons if x.metric == READY):
        assert cmp.p_value is None and cmp.p_adjusted is None and cmp.interval is None
        assert cmp.rule.startswith("sequential GLR, α = 0.05 (0.025 per pair)") and cmp.threshold == threshold
        assert cmp.n_arm == cmp.n_ref
        outcomes = {"a": a, "b": b, "c": c}
        ready = lambda arm_id: [o is Outcome.READY for o in outcomes[arm_id] if o.counts]  # noqa: E731
        assert cmp.k_arm == sum(ready(cmp.arm_id)[:cmp.n_arm]) and cmp.k_ref == sum(ready(cmp.ref_id)[:cmp.n_ref])
        if cmp.verdict in (Verdict.BETTER, Verdict.WORSE):
            assert cmp.statistic >= cmp.threshold and (cmp.verdict is Verdict.BETTER) == (cmp.diff > 0)
        elif cmp.statistic is not None:
            assert cmp.statistic < cmp.threshold


def test_fixed_comparisons_name_their_rule():
    ok, bad = [Outcome.READY] * 6, [Outcome.IMA] * 5 + [Outcome.READY]
    two = judge([arm("a", ok), arm("b", bad)], "a", Stats())
    assert ready_of(two).rule == "Fisher exact" and ready_of(two).statistic is None
    three = judge([arm("a", ok), arm("b", bad), arm("c", ok)], "a", Stats(test="barnard"))
    assert {c.rule for c in three} == {"Barnard exact, Holm-adjusted over 2 pairs"}


def test_adaptive_running_and_exhausted():
    running, _ = both_ways([Outcome.READY] * 2, [Outcome.READY] * 2, ADAPTIVE)
    assert running.verdict is Verdict.UNKNOWN and running.note.startswith("running")
    mixed = [Outcome.READY, Outcome.IMA] * 6
    done, _ = both_ways(mixed, mixed[::-1], ADAPTIVE)
    assert done.verdict is Verdict.UNKNOWN and done.note.startswith("undecided")


def test_gate_metrics_symmetric():
    gates = lambda vals: [{"g": {"passed": v > 1, "metrics": {"score": v}}} for v in vals]  # noqa: E731
    a = arm("a", [Outcome.READY] * 5, gates([1.0, 1.2, 0.9, 1.1, 1.0]))
    b = arm("b", [Outcome.READY] * 5, gates([2.0, 2.1, 1.9, 2.2, 2.0]))
    stats = Stats(margins={"score": 0.5})
    one = {c.metric: c.verdict for c in judge([a, b], "a", stats)}
    other = {c.metric: c.verdict for c in judge([a, b], "b", stats)}
    assert one["g.score"] is Verdict.BETTER and other["g.score"] is Verdict.WORSE
    assert {m: v.flipped() for m, v in one.items()} == other


def test_importing_the_verdicts_loads_neither_scipy_nor_statsmodels():
    # Every command imports them through the report; scipy.stats alone costs seconds on a loaded box
    import subprocess
    import sys
    code = ("import sys, harness.core.verdicts, harness.core.reportdata; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'statsmodels'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
