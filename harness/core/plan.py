"""The planner: which trials to run, in which order."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Collection, Sequence

from harness.core.arms import Arm
from harness.core.matrix import Schedule


@dataclass(frozen=True)
class TrialKey:
    """One trial: repeat k (1-based) of an arm."""

    arm_id: str
    k: int


def order_trials(arms: Sequence[Arm], repeats: int, schedule: Schedule, seed: int = 0) -> list[TrialKey]:
    """Every (arm, k) for k in 1..repeats, ordered by the schedule:
    interleaved = A1 B1 A2 B2 …, blocked = A1 A2 … B1 B2 …, random = a seeded shuffle."""
    if schedule is Schedule.BLOCKED:
        return [TrialKey(a.arm_id, k) for a in arms for k in range(1, repeats + 1)]
    trials = [TrialKey(a.arm_id, k) for k in range(1, repeats + 1) for a in arms]
    if schedule is Schedule.RANDOM:
        random.Random(seed).shuffle(trials)
    return trials


def pending(trials: Sequence[TrialKey], done: Collection[TrialKey]) -> list[TrialKey]:
    """The trials without a result yet, in their order (resume)."""
    done_set = set(done)
    return [t for t in trials if t not in done_set]
