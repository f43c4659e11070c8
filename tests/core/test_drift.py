"""Signature drift: one signature is one failure mode, wherever it surfaced."""
from __future__ import annotations

from harness.core.drift import arm_drift, drift
from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult

IMA = "IMA:CUDA error: an illegal memory access was encountered@_fwd_kernel"


def _r(k: int, outcome: Outcome = Outcome.IMA, sig: str | None = IMA, bs: int | None = None,
       rank: str | None = None) -> TrialResult:
    return TrialResult(matrix="m", arm_id="a", label="A", levels={}, trial=k, outcome=outcome, signature=sig,
                       failing_rank=rank, ladder=Ladder(failing_bs=bs))


def test_one_signature_at_several_batch_sizes_and_ranks_is_not_drifting():
    d = arm_drift("a", "A", [_r(1, bs=8, rank="TP0"), _r(2, bs=24, rank="TP3"), _r(3, Outcome.READY, None)])
    assert d.failures == 2 and d.signatures == ((IMA, 2),) and not d.drifting
    assert dict(d.failing_bs) == {8: 1, 24: 1} and dict(d.failing_ranks) == {"TP0": 1, "TP3": 1}


def test_two_signatures_are_drifting():
    other = "CAPTURE_ERROR:operation not permitted when stream is capturing@triton_fused_moe"
    d = arm_drift("a", "A", [_r(1), _r(2, sig=other)])
    assert d.drifting and d.trials == ((1, IMA), (2, other))


def test_a_single_failure_and_none_are_not_drifting():
    assert not arm_drift("a", "A", [_r(1, bs=8)]).drifting
    assert not arm_drift("a", "A", [_r(1, Outcome.READY, None)]).drifting
    assert drift([("a", "A", [_r(1)]), ("b", "B", [_r(1)])]).shared == {IMA: ("A", "B")}
