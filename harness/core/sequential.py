"""Adaptive repeats: a group-sequential test of two READY rates with an exactly controlled error.

After every batch of launches per arm (a *look*), the generalised likelihood ratio of "the arms
differ" against "they share one rate" is compared with one threshold. The threshold is calibrated
exactly, not by simulation: a dynamic program over the counts (k1, k2) at each look gives the
probability that two arms with the same rate p ever cross it, for a grid of p refined around its
maxima, and the threshold is the smallest whose worst case over p stays within alpha. Stopping
early as SAME (the difference's interval inside the margin) only lowers that probability, so it
does not need calibrating (a non-binding futility rule).

The "does this fix work" goal stops an arm once the one-sided exact 95 % bound of its failure rate
is below (or above) a target: 0 failures in 8 launches bound the rate below 1/3. Looking after every
launch gives a bad fix many chances to look good (a bound checked at each of 30 launches says HOLDS
for a true rate of 1/3 11 % of the time), so only the first chance, the clean_runs_needed launches in
a row, uses the plain 95 % bound; later looks use a stricter level calibrated exactly (a dynamic
program over the failure count) so that P(ever HOLDS | failure rate ≥ target) ≤ 5 % up to max_n.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import numpy as np

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
    from scipy.special import xlogy         # scipy on first use: importing the verdicts stays cheap
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
    from scipy.stats import binom
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


_FIX_ALPHA = 0.05       # the fix goal's error: P(HOLDS | failure rate ≥ target)


def _holds_max(n: int, max_fail_rate: float, level: float | None) -> int:
    """The most failures of n launches that still say HOLDS (-1: none). level None: the plain one-sided
    95 % bound (upper_bound < target); else P(≤ failures | rate = target) ≤ level."""
    if level is None:
        f = -1
        while f + 1 < n and upper_bound(f + 1, n) < max_fail_rate:
            f += 1
        return f
    from scipy.stats import binom
    cdf = binom.cdf(np.arange(n + 1), n, max_fail_rate)
    ok = np.nonzero(cdf <= level * (1 + 1e-9))[0]
    return int(ok[-1]) if len(ok) else -1


def _fix_error(max_fail_rate: float, max_n: int, level: float) -> float:
    """Exact P(ever HOLDS within max_n launches | failure rate = target), looking after every launch
    (FAILS stops ignored: they only lower it). A higher rate only lowers it, so this is the worst case."""
    n0 = clean_runs_needed(max_fail_rate)
    dist = np.zeros(max_n + 2)
    dist[0] = 1.0
    err = 0.0
    for n in range(1, max_n + 1):
        new = dist * (1 - max_fail_rate)
        new[1:] += dist[:-1] * max_fail_rate
        b = _holds_max(n, max_fail_rate, None if n <= n0 else level)
        if b >= 0:
            err += float(new[:b + 1].sum())
            new[:b + 1] = 0.0
        dist = new
    return err


@lru_cache(maxsize=64)
def _fix_level(max_fail_rate: float, max_n: int) -> float:
    """The level for HOLDS after the first clean_runs_needed launches: the largest attainable
    P(≤ f failures of n | rate = target) keeping the whole campaign's error within _FIX_ALPHA."""
    n0 = clean_runs_needed(max_fail_rate)
    if max_n <= n0:
        return _FIX_ALPHA
    from scipy.stats import binom
    cands = sorted({float(v) for n in range(n0 + 1, max_n + 1)
                    for v in binom.cdf(np.arange(n + 1), n, max_fail_rate) if v <= _FIX_ALPHA})
    lo, hi, best = 0, len(cands) - 1, 0.0
    while lo <= hi:
        mid = (lo + hi) // 2
        if _fix_error(max_fail_rate, max_n, cands[mid]) <= _FIX_ALPHA:
            best, lo = cands[mid], mid + 1
        else:
            hi = mid - 1
    return best


def fix_stands(failures: int, n: int, max_fail_rate: float, max_n: int) -> FixDecision:
    """The fix goal for one arm: failures of n counted launches, looked at after every launch.
    HOLDS: the plain one-sided 95 % bound is below the target up to clean_runs_needed launches, a
    stricter calibrated level after them (see _fix_level), so that a fix whose failure rate is at
    or above the target is called HOLDS in at most 5 % of campaigns of max_n launches."""
    if n > 0:
        level = None if n <= clean_runs_needed(max_fail_rate) else _fix_level(max_fail_rate, max_n)
        if failures <= _holds_max(n, max_fail_rate, level):
            return FixDecision.HOLDS
    if n > 0 and lower_bound(failures, n) > max_fail_rate:
        return FixDecision.FAILS
    return FixDecision.EXHAUSTED if n >= max_n else FixDecision.CONTINUE


@lru_cache(maxsize=64)
def clean_runs_needed(max_fail_rate: float) -> int:
    """Launches in a row without a failure that bound the failure rate below the target (1/3 → 8)."""
    if not 0 < max_fail_rate < 1:
        raise ValueError(f"max_fail_rate must lie in (0, 1), got {max_fail_rate}")
    # upper_bound(0, n) = 1 - 0.05**(1/n): start just below the closed form, then check exactly.
    n = max(1, int(math.log(1 - 0.95) / math.log1p(-max_fail_rate)) - 1)
    while upper_bound(0, n) >= max_fail_rate:
        n += 1
    return n
