"""The planner: which trials to run, in which order; with ``repeats: auto``, which to run next."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Collection, Sequence

from harness.core.arms import Arm
from harness.core.matrix import Goal, Matrix, Schedule
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.sequential import Decision, FixDecision, fix_stands
from harness.core.verdicts import ArmData, sequential_stands


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


def _open_arms(arms: Sequence[Arm], results: Sequence[TrialResult], matrix: Matrix, baseline_id: str | None) -> set[str]:
    """Arms whose question is still open: a comparison the sequential rule has not decided, or (goal
    fix) a failure rate not yet bounded on either side of the target."""
    st = matrix.stats
    by_arm: dict[str, list[TrialResult]] = {a.arm_id: [] for a in arms}
    for r in sorted(results, key=lambda r: r.trial):
        by_arm.setdefault(r.arm_id, []).append(r)
    ready = {a: [r.outcome is Outcome.READY for r in rs if r.outcome.counts] for a, rs in by_arm.items()}
    max_n = st.max_repeats or matrix.repeats
    if st.goal is Goal.FIX:
        return {a.arm_id for a in arms
                if fix_stands(len(ready[a.arm_id]) - sum(ready[a.arm_id]), len(ready[a.arm_id]), st.max_fail_rate,
                              max_n) is FixDecision.CONTINUE}
    data = [ArmData(a.arm_id, a.label, by_arm[a.arm_id]) for a in arms]
    return {a.arm_id for arm, ref, decision, _ in sequential_stands(data, baseline_id, st)
            if decision is Decision.CONTINUE for a in (arm, ref)}


def adaptive_batch(arms: Sequence[Arm], results: Sequence[TrialResult], matrix: Matrix,
                   baseline_id: str | None) -> list[TrialKey]:
    """The next look of a ``repeats: auto`` campaign: ``batch`` more launches of every arm whose
    question is open, in schedule order; [] when every question stands decided or every open arm
    has had max_repeats launches. Pure: the store's results decide, so a resumed run continues."""
    done: dict[str, set[int]] = {a.arm_id: set() for a in arms}
    for r in results:
        done.setdefault(r.arm_id, set()).add(r.trial)
    max_n = matrix.stats.max_repeats or matrix.repeats
    per_arm: dict[str, list[int]] = {}
    for arm_id in _open_arms(arms, results, matrix, baseline_id):
        free = [k for k in range(1, max_n + 1) if k not in done[arm_id]]
        if free:
            per_arm[arm_id] = free[: matrix.stats.batch]
    keys = [TrialKey(a.arm_id, k) for i in range(matrix.stats.batch) for a in arms
            if i < len(per_arm.get(a.arm_id, ()))
            for k in (per_arm[a.arm_id][i],)]
    if matrix.schedule is Schedule.BLOCKED:
        keys.sort(key=lambda t: [a.arm_id for a in arms].index(t.arm_id))
    elif matrix.schedule is Schedule.RANDOM:
        random.Random(f"{matrix.seed}:{len(results)}").shuffle(keys)
    return keys
