"""Interval estimates and tests for proportions and means (scipy / statsmodels underneath, imported
on first use: a command that only validates its input should not pay for them)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:      # numpy is loaded by the functions that use it: not on the CLI's start-up path
    import numpy as np

RATE_TESTS = ("fisher", "barnard")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (0, 1) when n == 0 (nothing known)."""
    if n == 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"k={k} outside 0..n={n}")
    from scipy.stats import binomtest
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
    from scipy.stats import binomtest
    ci = binomtest(k, n).proportion_ci(confidence_level=2 * confidence - 1, method="exact")
    return float(ci.high)


def lower_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper–Pearson) lower bound of a proportion."""
    return 1.0 - upper_bound(n - k, n, confidence)


def diff_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95 % interval of p1 - p2: Newcombe's hybrid score interval; (-1, 1) when a side is empty."""
    if n1 == 0 or n2 == 0:
        return -1.0, 1.0
    from statsmodels.stats.proportion import confint_proportions_2indep
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
    # Both tests are symmetric in the arms and in READY <-> not READY; one canonical form of the four
    # makes the p-value bit-identical however the pair is written (otherwise it can land on either side
    # of alpha: 2/2 vs 2/14 gave 0.05 one way and 0.04999999999999999 the other).
    (a, n), (b, m) = min(sorted([(k1, n1), (k2, n2)]), sorted([(n1 - k1, n1), (n2 - k2, n2)]))
    if test == "barnard":
        return barnard_p_value(a, n, b, m)
    from scipy.stats import fisher_exact
    return min(1.0, float(fisher_exact([[a, n - a], [b, m - b]], alternative="two-sided").pvalue))


def barnard_p_value(k1: int, n1: int, k2: int, n2: int) -> float:
    """Barnard's exact unconditional two-sided test (pooled score statistic): the largest, over the
    common rate p, probability of a table at least as extreme as k1/n1 vs k2/n2.

    Not scipy.stats.barnard_exact: it ranks the tables by a floating-point statistic, so a table that
    ties the observed one exactly (its mirror, 0/6 vs 5/6 against 1/6 vs 6/6) can rank below it by
    one rounding step and drop out of the tail, giving p = 0.0039 where the test's p is 0.0063. Here
    the ranking is exact, in integers."""
    import numpy as np
    if n1 <= 0 or n2 <= 0 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"counts outside 0..n: {k1}/{n1}, {k2}/{n2}")
    n = n1 + n2
    a = np.arange(n1 + 1, dtype=object)[:, None]
    b = np.arange(n2 + 1, dtype=object)[None, :]
    s = a + b
    # score statistic squared = (a·n2 - b·n1)² · n / (n1·n2·s·(n - s)): compared as exact fractions
    num = (a * n2 - b * n1) ** 2 * n
    den = s * (n - s) * (n1 * n2)
    den = np.where(den == 0, 1, den)            # s = 0 or n: both rates equal, numerator 0
    obs_num, obs_den = num[k1, k2], den[k1, k2]
    if obs_num == 0:
        return 1.0
    extreme = (num * obs_den >= obs_num * den).astype(bool)
    # P(extreme | p) = sum_s w_s · Binomial(s; n, p), w_s the share of the C(n, s) ways to reach s
    # that are extreme tables (a hypergeometric probability): a polynomial in p, maximised.
    i, j = np.nonzero(extreme)
    log_share = _log_comb(n1)[i] + _log_comb(n2)[j] - _log_comb(n)[i + j]
    w = np.bincount(i + j, weights=np.exp(log_share), minlength=n + 1)
    return min(1.0, _max_over_rate(w, n))


def _log_comb(n: int) -> np.ndarray:
    import numpy as np
    return np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(n + 1)])


def _max_over_rate(w: np.ndarray, n: int) -> float:
    """max over p in [0, 1] of sum_s w_s · Binomial(s; n, p): a grid, then two finer grids around
    the highest points (a polynomial of degree n has few, wide peaks; p found to 2.5e-8)."""
    import numpy as np
    s = np.arange(n + 1)
    log_comb = _log_comb(n)

    def tail(p: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            lp, lq = np.log(p)[:, None], np.log1p(-p)[:, None]
            # 0 · log 0 = 0: the rate 0 (or 1) puts all its mass on s = 0 (or n)
            log_pmf = log_comb + np.where(s == 0, 0.0, s * lp) + np.where(s == n, 0.0, (n - s) * lq)
        return np.exp(log_pmf) @ w

    grid, step = np.linspace(0.0, 1.0, 1001), 1e-3
    best = 0.0
    for _ in range(3):
        values = tail(grid)
        best = max(best, float(values.max()))
        grid = np.clip(np.concatenate([np.linspace(grid[i] - step, grid[i] + step, 201)
                                       for i in np.argsort(values)[-4:]]), 0.0, 1.0)
        step /= 100
    return best


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
    from scipy.stats import ttest_ind
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
    from statsmodels.stats.multitest import multipletests
    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]
