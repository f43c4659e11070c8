"""Which stored trials a campaign counts."""
from __future__ import annotations

from harness.core.campaign import campaign_size, select
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.schema import parse_matrix


def trial(arm: str, k: int, outcome: Outcome = Outcome.READY) -> TrialResult:
    return TrialResult(matrix="m", arm_id=arm, label=arm.upper(), levels={}, trial=k, outcome=outcome)


def test_trials_above_the_size_are_kept_not_counted():
    rs = [trial("a", k) for k in range(1, 7)] + [trial("b", k) for k in (2, 1, 3)]
    c = select(rs, 3)
    assert [(r.arm_id, r.trial) for r in c.counted] == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]
    assert [(r.arm_id, r.trial) for r in c.kept] == [("a", 4), ("a", 5), ("a", 6)]
    assert c.kept_text() == "3 stored launches above repeats=3 kept, not counted (trials 4–6; repeats=6 counts them)"


def test_no_size_counts_everything_and_arms_can_be_chosen():
    rs = [trial("a", k) for k in range(1, 5)] + [trial("b", 1)]
    assert len(select(rs, None).counted) == 5 and select(rs, None).kept == ()
    only_b = select(rs, 2, {"b"})
    assert [(r.arm_id, r.trial) for r in only_b.counted] == [("b", 1)] and only_b.kept == ()
    assert select(rs, 9).kept_text() == ""


def test_size_is_repeats_or_the_adaptive_maximum():
    base = {"target": {"engine": "command", "command": ["x"]}, "axes": {"a": {"x": {}}}}
    fixed = parse_matrix({**base, "repeats": 5}, name="m", file="m.yaml", engines=("command",))
    auto = parse_matrix({**base, "repeats": "auto", "stats": {"max_repeats": 12}}, name="m", file="m.yaml",
                        engines=("command",))
    assert campaign_size(fixed) == 5
    assert campaign_size(auto) == 12
