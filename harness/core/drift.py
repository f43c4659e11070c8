"""Signature drift: the distinct failures of each arm and whether arms share them.

A fix that only moves a crash shows up here: the arm keeps failing, but its signature (the error
and the surfacing kernel) changes from launch to launch (seed 003: "the failing shape, rank and
surfacing kernel continued to drift"); the failing batch sizes and ranks are listed beside it.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from harness.core.outcome import Outcome
from harness.core.record import TrialResult


def site_of(signature: str) -> str | None:
    """The surfacing kernel or frame a signature ends with ("...@_fwd_kernel"), if any."""
    head, sep, site = signature.rpartition("@")
    return site if sep and head and " " not in site else None


@dataclass(frozen=True)
class ArmDrift:
    """One arm's failures."""

    arm_id: str
    label: str
    failures: int                                   # counted launches that did not reach READY
    signatures: tuple[tuple[str, int], ...]         # distinct signatures, most common first
    failing_bs: tuple[tuple[int, int], ...]         # (bs, launches)
    failing_ranks: tuple[tuple[str, int], ...]
    sites: tuple[tuple[str, int], ...]              # surfacing kernels / frames
    trials: tuple[tuple[int, str], ...]             # (trial, signature) in launch order: the drift itself

    @property
    def drifting(self) -> bool:
        """Two or more distinct signatures. One signature is one failure mode, even where it surfaced
        at several batch sizes or ranks (a race hits whichever bs is capturing): those spreads are
        shown beside it, not called drift. A kernel that changes changes the signature."""
        return len(self.signatures) > 1


@dataclass(frozen=True)
class Drift:
    """Failures per arm and across arms."""

    arms: tuple[ArmDrift, ...]
    shared: Mapping[str, tuple[str, ...]]           # signature -> labels of the arms that saw it (≥ 2)


def _counts(values: Sequence[object]) -> tuple:
    return tuple(Counter(v for v in values if v is not None).most_common())


def arm_drift(arm_id: str, label: str, results: Sequence[TrialResult]) -> ArmDrift:
    """The failures of one arm's counted launches."""
    failed = [r for r in sorted(results, key=lambda r: r.trial)
              if r.outcome.counts and r.outcome is not Outcome.READY]
    sigs = [r.signature or r.outcome.value for r in failed]
    return ArmDrift(
        arm_id=arm_id, label=label, failures=len(failed),
        signatures=_counts(sigs),
        failing_bs=_counts([r.ladder.failing_bs for r in failed]),
        failing_ranks=_counts([r.failing_rank for r in failed]),
        sites=_counts([site_of(s) for s in sigs]),
        trials=tuple((r.trial, s) for r, s in zip(failed, sigs, strict=True)),
    )


def drift(arms: Sequence[tuple[str, str, Sequence[TrialResult]]]) -> Drift:
    """Drift for (arm_id, label, results) in report order, with the signatures seen in two or more arms."""
    per_arm = tuple(arm_drift(a, lbl, rs) for a, lbl, rs in arms)
    seen: dict[str, list[str]] = {}
    for d in per_arm:
        for sig, _ in d.signatures:
            seen.setdefault(sig, []).append(d.label)
    return Drift(per_arm, {s: tuple(labels) for s, labels in seen.items() if len(labels) > 1})
