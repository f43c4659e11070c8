"""Which stored trials a campaign counts.

A campaign is one matrix's store, growing across invocations. Its size is the repeats of the
run that last wrote it (`repeats` in arms.json; with ``repeats: auto``, its max_repeats): a
report, `harness.load()`, MLflow and the live view count trials 1..size of each arm, exactly
those. Trials above the size (left by an earlier, larger run) stay in the store and are named as
kept, never counted: ``repeats=3`` after a run of 6 reports 3 launches per arm, ``repeats=6``
counts all six again. ``rerun=true`` supersedes: the arms' earlier launches leave the campaign
(moved aside by the store) and trials 1..size are launched afresh.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from harness.core.matrix import Matrix
from harness.core.record import TrialResult


def campaign_size(matrix: Matrix) -> int:
    """Trials per arm a run of this matrix counts: its repeats, or with repeats: auto its max_repeats."""
    return int(matrix.stats.max_repeats or matrix.repeats) if matrix.stats.adaptive else matrix.repeats


@dataclass(frozen=True)
class Campaign:
    """The trials a campaign counts, and the stored ones it does not."""

    size: int | None                      # trials per arm counted (None: every stored trial)
    counted: tuple[TrialResult, ...]      # in (arm, trial) order
    kept: tuple[TrialResult, ...] = ()    # stored above the size: named, not counted

    def kept_text(self) -> str:
        """"3 stored launches above repeats=6 kept, not counted (trials 7–9)" or ""."""
        if not self.kept:
            return ""
        ks = sorted({r.trial for r in self.kept})
        span = f"trial {ks[0]}" if len(ks) == 1 else f"trials {ks[0]}–{ks[-1]}"
        return (f"{len(self.kept)} stored launch{'es' if len(self.kept) > 1 else ''} above repeats={self.size} "
                f"kept, not counted ({span}; repeats={ks[-1]} counts them)")


def select(results: Sequence[TrialResult], size: int | None,
           arm_ids: Collection[str] | None = None) -> Campaign:
    """The campaign of size trials per arm among results (only arm_ids' arms, if given)."""
    mine = sorted((r for r in results if arm_ids is None or r.arm_id in arm_ids),
                  key=lambda r: (r.arm_id, r.trial))
    if size is None:
        return Campaign(None, tuple(mine))
    return Campaign(size, tuple(r for r in mine if 1 <= r.trial <= size),
                    tuple(r for r in mine if r.trial > size))
