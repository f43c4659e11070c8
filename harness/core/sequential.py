"""Adaptive repeats: a group-sequential test of two READY rates with an exactly controlled error.

After every batch of launches per arm (a *look*), the generalised likelihood ratio of "the arms
differ" against "they share one rate" is compared with one threshold. The threshold is calibrated
exactly, not by simulation: a dynamic program over the counts (k1, k2) at each look gives the
probability that two arms with the same rate p ever cross it, for a grid of p refined around its
maxima, and the threshold is the smallest whose worst case over p stays within alpha. Stopping
early as SAME (the difference's interval inside the margin) only lowers that probability, so it
does not need calibrating (a non-binding futility rule).

The "does this fix work" goal stops an arm once the one-sided exact 95 % bound of its failure rate
is below (or above) a target: 0 failures in 8 launches bound the rate below 1/3.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import numpy as np
from scipy.special import xlogy
from scipy.stats import binom

from harness.core.stats import diff_interval, lower_bound, upper_bound

_COARSE = 200          # grid points of the common rate p in (0, 0.5]; the statistic is symmetric in p ↔ 1-p
_FINE = 60             # points tried around each of the worst coarse points


class Decision(str, Enum):
    """Where a sequential comparison stands."""

    DIFFERENT = "different"     # crossed the calibrated threshold
    SAME = "same"               # the difference's 95 % interval lies inside ±margin
    CONTINUE = "continue"       # neither yet; launch another batch
    EXHAUSTED = "exhausted"     # max_repeats reached without a decision


def _loglik(k: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    p = np.divide(k, n, out=np.zeros(np.broadcast(k, n).shape), where=n > 0)
    return xlogy(k, p) + xlogy(n - k, 1 - p)


def log_glr(k1: int | np.ndarray, n1: int | np.ndarray, k2: int | np.ndarray, n2: int | np.ndarray) -> np.ndarray:
    """log sup L(p1, p2) / sup L(p): how much better two rates explain k1/n1, k2/n2 than one."""
    k1, n1, k2, n2 = (np.asarray(v, dtype=float) for v in (k1, n1, k2, n2))
    return _loglik(k1, n1) + _loglik(k2, n2) - _loglik(k1 + k2, n1 + n2)


def looks(batch: int, max_n: int) -> list[int]:
    """Launches per arm at each look: batch, 2·batch, …, max_n (the last look may be a partial batch)."""
    return sorted({min(j * batch, max_n) for j in range(1, -(-max_n // batch) + 1)})


def _crossing(threshold: float, batch: int, max_n: int, p1: np.ndarray, p2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact P(the statistic ever reaches threshold) and E[launches per arm] for rates p1, p2 (arrays)."""
    dist = np.ones((len(p1), 1, 1))
    crossed = np.zeros(len(p1))
    expected_n = np.zeros(len(p1))
    n = 0
    for m in looks(batch, max_n):
        step = m - n
        steps = np.arange(step + 1)
        t1 = binom.pmf(steps[None, :], step, p1[:, None])
        t2 = binom.pmf(steps[None, :], step, p2[:, None])
        new = np.zeros((len(p1), m + 1, m + 1))
        for i in steps:
            for j in steps:
                new[:, i:i + n + 1, j:j + n + 1] += dist * (t1[:, i] * t2[:, j])[:, None, None]
        n = m
        k = np.arange(n + 1)
        stop = log_glr(k[:, None], n, k[None, :], n) >= threshold
        hit = (new * stop).sum(axis=(1, 2))
        crossed += hit
        expected_n += hit * n
        dist = new * ~stop
    expected_n += dist.sum(axis=(1, 2)) * n
    return crossed, expected_n


def operating(threshold: float, batch: int, max_n: int, p1: float, p2: float) -> tuple[float, float]:
    """(P(DIFFERENT), expected launches per arm) for arms with READY rates p1 and p2, without SAME stops."""
    c, e = _crossing(threshold, batch, max_n, np.array([p1], dtype=float), np.array([p2], dtype=float))
    return float(c[0]), float(e[0])


def _worst_h0(threshold: float, batch: int, max_n: int) -> float:
    grid = np.linspace(0.5 / _COARSE, 0.5, _COARSE)
    err, _ = _crossing(threshold, batch, max_n, grid, grid)
    worst = float(err.max())
    step = grid[1] - grid[0]
    for i in np.argsort(err)[-3:]:
        fine = np.clip(np.linspace(grid[i] - step, grid[i] + step, _FINE), 1e-6, 0.5)
        e, _ = _crossing(threshold, batch, max_n, fine, fine)
        worst = max(worst, float(e.max()))
    return worst


@dataclass(frozen=True)
class SequentialDesign:
    """A calibrated rule: DIFFERENT when log_glr ≥ threshold at a look."""

    alpha: float
    batch: int
    max_n: int
    threshold: float
    error: float          # the worst-case P(DIFFERENT) for equal rates, ≤ alpha

    def stands(self, k1: int, n1: int, k2: int, n2: int, margin: float) -> Decision:
        """The decision for counts at a look (READY k of n launches on each side)."""
        if n1 > 0 and n2 > 0 and float(log_glr(k1, n1, k2, n2)) >= self.threshold:
            return Decision.DIFFERENT
        lo, hi = diff_interval(k1, n1, k2, n2)
        if -margin < lo and hi < margin:
            return Decision.SAME
        return Decision.EXHAUSTED if min(n1, n2) >= self.max_n else Decision.CONTINUE


@lru_cache(maxsize=32)
def design(alpha: float, batch: int, max_n: int) -> SequentialDesign:
    """The smallest threshold whose worst-case error for equal rates is ≤ alpha (exact)."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    # The rejection region only changes at values the statistic takes, so search those.
    values: set[float] = set()
    for n in looks(batch, max_n):
        k = np.arange(n + 1)
        values.update(np.round(log_glr(k[:, None], n, k[None, :], n), 12).ravel().tolist())
    candidates = sorted(v for v in values if v > 0) + [float("inf")]
    lo, hi = 0, len(candidates) - 1          # invariant: candidates[hi] is within alpha
    while lo < hi:
        mid = (lo + hi) // 2
        if _worst_h0(candidates[mid] - 1e-9, batch, max_n) <= alpha:
            hi = mid
        else:
            lo = mid + 1
    threshold = candidates[hi] - 1e-9
    error = 0.0 if threshold == float("inf") else _worst_h0(threshold, batch, max_n)
    return SequentialDesign(alpha, batch, max_n, threshold, error)


def replay(d: SequentialDesign, ready1: list[bool], ready2: list[bool], margin: float) -> tuple[Decision, int]:
    """Walk the looks over two arms' counted launches in order; the first decision and the launches
    per arm it took. CONTINUE (with the launches so far) when the data end before one."""
    n_avail = min(len(ready1), len(ready2))
    n = 0
    for n in looks(d.batch, d.max_n):
        if n > n_avail:
            break
        verdict = d.stands(sum(ready1[:n]), n, sum(ready2[:n]), n, margin)
        if verdict is not Decision.CONTINUE:
            return verdict, n
    return Decision.CONTINUE, min(n_avail, d.max_n)


class FixDecision(str, Enum):
    """Where a "does this fix work" arm stands against its failure-rate target."""

    HOLDS = "holds"             # upper 95 % bound of the failure rate below the target
    FAILS = "fails"             # lower 95 % bound above the target
    CONTINUE = "continue"
    EXHAUSTED = "exhausted"


def fix_stands(failures: int, n: int, max_fail_rate: float, max_n: int) -> FixDecision:
    """The fix goal for one arm: failures of n counted launches."""
    if n > 0 and upper_bound(failures, n) < max_fail_rate:
        return FixDecision.HOLDS
    if n > 0 and lower_bound(failures, n) > max_fail_rate:
        return FixDecision.FAILS
    return FixDecision.EXHAUSTED if n >= max_n else FixDecision.CONTINUE


def clean_runs_needed(max_fail_rate: float) -> int:
    """Launches in a row without a failure that bound the failure rate below the target (1/3 → 8)."""
    n = 1
    while upper_bound(0, n) >= max_fail_rate:
        n += 1
    return n
