"""Interval estimates and tests for proportions and means (scipy / statsmodels underneath)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy.stats import barnard_exact, binomtest, fisher_exact, ttest_ind
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep

RATE_TESTS = ("fisher", "barnard")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (0, 1) when n == 0 (nothing known)."""
    if n == 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"k={k} outside 0..n={n}")
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    lo, hi = float(ci.low), float(ci.high)
    # The closed form leaves rounding dust at the edges; k=0 and k=n pin them exactly.
    return (0.0 if k == 0 else max(0.0, lo)), (1.0 if k == n else min(1.0, hi))


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper–Pearson) upper bound of a proportion: 0/8 at 95 % → 0.312."""
    if n == 0:
        return 1.0
    if k == n:
        return 1.0
    ci = binomtest(k, n).proportion_ci(confidence_level=2 * confidence - 1, method="exact")
    return float(ci.high)


def lower_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper–Pearson) lower bound of a proportion."""
    return 1.0 - upper_bound(n - k, n, confidence)


def diff_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95 % interval of p1 - p2: Newcombe's hybrid score interval; (-1, 1) when a side is empty."""
    if n1 == 0 or n2 == 0:
        return -1.0, 1.0
    lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
    d = k1 / n1 - k2 / n2
    # Clamp rounding dust so the point estimate always lies inside.
    return max(-1.0, min(float(lo), d)), min(1.0, max(float(hi), d))


def rate_p_value(k1: int, n1: int, k2: int, n2: int, test: str = "fisher") -> float:
    """Two-sided p-value for p1 == p2: Fisher's exact (conditional) or Barnard's exact (unconditional)."""
    if test not in RATE_TESTS:
        raise ValueError(f"unknown rate test {test!r}; valid: {', '.join(RATE_TESTS)}")
    if n1 == 0 or n2 == 0:
        return 1.0
    # Both tests are symmetric in the rows; a canonical row order makes the p-value bit-identical
    # when the arms swap (otherwise it can land on either side of alpha: 2/2 vs 2/14 gave 0.05 one
    # way and 0.04999999999999999 the other).
    table = sorted([[k1, n1 - k1], [k2, n2 - k2]])
    if test == "barnard":
        if (k1 + k2) in (0, n1 + n2):      # one column empty: no evidence either way
            return 1.0
        return min(1.0, float(barnard_exact(table, alternative="two-sided").pvalue))
    return min(1.0, float(fisher_exact(table, alternative="two-sided").pvalue))


@dataclass(frozen=True)
class MeanComparison:
    """Welch's t test of mean1 - mean2 with its 95 % interval."""

    mean1: float
    mean2: float
    diff: float
    interval: tuple[float, float]
    p_value: float


def compare_means(x1: Sequence[float], x2: Sequence[float]) -> MeanComparison | None:
    """Difference of means with Welch's interval and p-value; None when a side has fewer than 2
    values. Identical constant samples give a zero-width interval and p = 1."""
    if len(x1) < 2 or len(x2) < 2:
        return None
    m1, m2 = sum(x1) / len(x1), sum(x2) / len(x2)
    if _constant(x1) and _constant(x2):
        d = m1 - m2
        return MeanComparison(m1, m2, d, (d, d), 1.0 if d == 0 else 0.0)
    r = ttest_ind(list(x1), list(x2), equal_var=False)
    ci = r.confidence_interval(0.95)
    return MeanComparison(m1, m2, m1 - m2, (float(ci.low), float(ci.high)), float(r.pvalue))


def _constant(xs: Sequence[float]) -> bool:
    return all(math.isclose(v, xs[0]) for v in xs)


def stderr(xs: Sequence[float]) -> float | None:
    """Standard error of the mean; None for fewer than 2 values."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((v - m) ** 2 for v in xs) / (len(xs) - 1) / len(xs))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (statsmodels); a single p is returned as is."""
    if len(p_values) <= 1:
        return [float(p) for p in p_values]
    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]
