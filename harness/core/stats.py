"""Interval estimates for per-arm proportions."""
from __future__ import annotations

from scipy.stats import binomtest


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
