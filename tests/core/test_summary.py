from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult
from harness.core.summary import summarize


def r(arm, k, outcome, sig=None, bs=None, shapes=None, startup=None):
    return TrialResult(matrix="m", arm_id=arm, label={"a": "A", "b": "B"}[arm], levels={"fix": arm}, trial=k,
                       outcome=outcome, signature=sig, ladder=Ladder(shapes, 8 if shapes is not None else None, None, bs),
                       startup_s=startup)


def test_counts_intervals_and_not_counted():
    results = [r("a", 1, Outcome.READY, shapes=8, startup=2.0), r("a", 2, Outcome.IMA, "IMA:x", 16, 3),
               r("a", 3, Outcome.IMA, "IMA:x", 16, 5), r("a", 4, Outcome.PATCH_FAILED),
               r("b", 1, Outcome.READY, shapes=8, startup=1.0), r("b", 2, Outcome.READY, shapes=8, startup=3.0)]
    legend = [{"arm_id": "a", "label": "A", "levels": {"fix": "off"}}, {"arm_id": "b", "label": "B", "levels": {"fix": "on"}}]
    a, b = summarize(results, legend)
    assert (a.ready, a.n, a.not_counted) == (1, 3, 1)
    assert a.outcomes == {"IMA": 2, "READY": 1, "PATCH_FAILED": 1}
    assert a.signatures == (("IMA:x", 2),) and a.failing_bs == ((16, 2),)
    assert a.shapes == "3-8/8" and a.startup_s_median == 2.0
    assert (b.ready, b.n) == (2, 2) and b.interval[1] == 1.0 and b.startup_s_median == 2.0
    assert a.ready_text.startswith("1/3 [")


def test_arm_without_results_and_unknown_arm():
    legend = [{"arm_id": "a", "label": "A", "levels": {}}]
    s = summarize([r("b", 1, Outcome.READY)], legend)
    assert [x.arm_id for x in s] == ["a", "b"] and s[1].label == "B'"
    assert s[0].n == 0 and s[0].ready_text == "0/0" and s[0].interval == (0.0, 1.0)


def test_every_failing_bs_is_kept_for_the_complete_formats():
    from harness.core.record import Ladder, TrialResult
    from harness.core.outcome import Outcome
    from harness.core.summary import summarize_arm
    rs = [TrialResult(matrix="m", arm_id="a", label="A", levels={}, trial=k, outcome=Outcome.IMA,
                      ladder=Ladder(failing_bs=bs)) for k, bs in enumerate((1, 16, 32, 64, 96, 128), start=1)]
    assert [bs for bs, _ in summarize_arm("a", "A", {}, rs).failing_bs] == [1, 16, 32, 64, 96, 128]
