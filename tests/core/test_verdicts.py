import pytest
from hypothesis import given, settings, strategies as st

from harness.core.matrix import Compare, Stats
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.sequential import design
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
    assert b_vs_a.diff == 0
    assert b_vs_a.verdict is Verdict.BETTER and a_vs_b.verdict is Verdict.WORSE
    assert b_vs_a.note == "decided at 4/arm"


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
