import math

import pytest
from hypothesis import given, strategies as st

from harness.core.stats import wilson_interval


def test_known_values():
    # Wilson 95 % for 3/6 is symmetric around 0.5: [0.188, 0.812] (z = 1.95996)
    lo, hi = wilson_interval(3, 6)
    assert lo == pytest.approx(0.1876, abs=1e-3) and hi == pytest.approx(0.8124, abs=1e-3)
    lo, hi = wilson_interval(0, 6)
    assert lo == 0.0 and hi == pytest.approx(0.3903, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_interval_contains_estimate_and_is_ordered(kn):
    k, n = kn
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n + 1e-12 and k / n - 1e-12 <= hi <= 1.0


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_symmetry(kn):
    k, n = kn
    lo, hi = wilson_interval(k, n)
    lo2, hi2 = wilson_interval(n - k, n)
    assert math.isclose(lo, 1 - hi2, abs_tol=1e-9) and math.isclose(hi, 1 - lo2, abs_tol=1e-9)


def test_bad_counts():
    with pytest.raises(ValueError):
        wilson_interval(5, 3)
