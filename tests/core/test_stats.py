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


# ---------------------------------------------------------------- more intervals, bounds, tests

from hypothesis import settings  # noqa: E402

from harness.core.stats import (  # noqa: E402
    compare_means, diff_interval, holm, lower_bound, rate_p_value, upper_bound,
)


def counts(max_n):
    """(k, n) with 1 <= n <= max_n."""
    return st.integers(1, max_n).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@settings(deadline=None)
@given(st.integers(1, 250).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_more_data_at_the_same_rate_never_widens(kn):
    k, n = kn
    lo, hi = wilson_interval(k, n)
    lo2, hi2 = wilson_interval(2 * k, 2 * n)
    assert hi2 - lo2 <= hi - lo + 1e-12


@settings(deadline=None)
@given(counts(60), counts(60))
def test_diff_interval_contains_estimate(a, b):
    (k1, n1), (k2, n2) = a, b
    lo, hi = diff_interval(k1, n1, k2, n2)
    d = k1 / n1 - k2 / n2
    assert -1.0 <= lo <= d <= hi <= 1.0
    lo2, hi2 = diff_interval(k2, n2, k1, n1)          # swapping the arms mirrors it
    assert math.isclose(lo, -hi2, abs_tol=1e-12) and math.isclose(hi, -lo2, abs_tol=1e-12)


def test_diff_interval_with_an_empty_side():
    assert diff_interval(0, 0, 3, 5) == (-1.0, 1.0)


# Values on a 0.001 grid: realistic gate metrics (no sub-normal spreads that underflow the variance).
metric = st.integers(-10**6, 10**6).map(lambda v: v / 1000)


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")   # scipy, on nearly equal values
@settings(deadline=None)
@given(st.lists(metric, min_size=2, max_size=20), st.lists(metric, min_size=2, max_size=20))
def test_welch_interval_contains_difference(x1, x2):
    mc = compare_means(x1, x2)
    assert mc is not None and 0.0 <= mc.p_value <= 1.0
    lo, hi = mc.interval
    tol = 1e-9 * max(1.0, abs(mc.mean1), abs(mc.mean2))
    assert lo - tol <= mc.diff <= hi + tol
    swapped = compare_means(x2, x1)
    assert math.isclose(swapped.p_value, mc.p_value, rel_tol=1e-9, abs_tol=1e-12)


def test_welch_edge_cases():
    assert compare_means([1.0], [1.0, 2.0]) is None
    same = compare_means([2.0, 2.0], [2.0, 2.0])
    assert same.interval == (0.0, 0.0) and same.p_value == 1.0
    apart = compare_means([1.0, 1.0, 1.0], [2.0, 2.0])
    assert apart.diff == -1.0 and apart.p_value == 0.0


@settings(deadline=None)
@given(counts(80))
def test_one_sided_bounds_bracket_the_estimate(kn):
    k, n = kn
    assert 0.0 <= lower_bound(k, n) <= k / n <= upper_bound(k, n) <= 1.0
    assert math.isclose(lower_bound(k, n), 1 - upper_bound(n - k, n), abs_tol=1e-12)


def test_clean_launches_bound_one_third():
    # one-sided exact 95 %: 1 - 0.05**(1/n); 8 clean launches bound the rate below 1/3, 7 do not
    assert upper_bound(0, 8) == pytest.approx(1 - 0.05 ** (1 / 8), abs=1e-9)
    assert upper_bound(0, 8) < 1 / 3 <= upper_bound(0, 7)
    assert upper_bound(0, 0) == 1.0 and upper_bound(5, 5) == 1.0


@settings(deadline=None)
@given(counts(40), counts(40))
def test_fisher_symmetric_under_swapping_arms(a, b):
    (k1, n1), (k2, n2) = a, b
    p = rate_p_value(k1, n1, k2, n2)
    assert 0.0 < p <= 1.0
    assert rate_p_value(k2, n2, k1, n1) == p          # bit-identical: verdicts compare it with alpha


@settings(deadline=None, max_examples=25)
@given(counts(10), counts(10))
def test_barnard_symmetric_under_swapping_arms(a, b):
    (k1, n1), (k2, n2) = a, b
    assert rate_p_value(k1, n1, k2, n2, "barnard") == rate_p_value(k2, n2, k1, n1, "barnard")


def test_fisher_known_values():
    assert rate_p_value(1, 6, 6, 6) == pytest.approx(0.01515, abs=1e-4)    # (6 + 6) / C(12, 7) = 1/66
    assert rate_p_value(0, 3, 3, 3) >= 0.05                                 # N = 3 can never reach 0.05
    assert rate_p_value(0, 3, 3, 3) == pytest.approx(0.1, abs=1e-9)
    assert rate_p_value(2, 6, 6, 6) > 0.05                                  # so N = 6 needs ≤ 1 of 6
    # swapping arms lands exactly on alpha from both sides alike (it used to differ in the last bit)
    assert rate_p_value(2, 2, 2, 14) == rate_p_value(2, 14, 2, 2)
    assert rate_p_value(0, 0, 3, 3) == 1.0
    with pytest.raises(ValueError):
        rate_p_value(1, 2, 1, 2, "chi2")


@settings(deadline=None, max_examples=25)    # statsmodels' holm runs gc.collect() on every call (~50 ms)
@given(st.lists(st.floats(0.0, 1.0), min_size=0, max_size=12))
def test_holm_never_below_raw(ps):
    adj = holm(ps)
    assert len(adj) == len(ps)
    assert all(p - 1e-12 <= a <= 1.0 for p, a in zip(ps, adj))
    order = sorted(range(len(ps)), key=lambda i: ps[i])            # monotone in the raw order
    assert all(adj[i] <= adj[j] + 1e-12 for i, j in zip(order, order[1:]))


def test_holm_single_and_known():
    assert holm([0.03]) == [0.03]
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


# ---------------------------------------------------------------- Barnard's exact test

from fractions import Fraction  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import binom  # noqa: E402

RATES = np.linspace(0.0005, 0.9995, 1999)      # the common READY rate under "no difference"


def barnard_reference(n1, n2):
    """Barnard's two-sided test from its definition, independently of harness, for every table of
    n1 vs n2 launches: tables ranked by the pooled score statistic in exact fractions, P(at least as
    extreme | p) maximised over a fine grid of p."""
    def score2(a, b):
        p = Fraction(a + b, n1 + n2)
        if Fraction(a, n1) == Fraction(b, n2):
            return Fraction(0)
        return (Fraction(a, n1) - Fraction(b, n2)) ** 2 / (p * (1 - p) * (Fraction(1, n1) + Fraction(1, n2)))
    scores = [[score2(a, b) for b in range(n2 + 1)] for a in range(n1 + 1)]
    grid = np.linspace(0.0, 1.0, 40001)
    both = np.einsum("pa,pb->pab", binom.pmf(np.arange(n1 + 1)[None, :], n1, grid[:, None]),
                     binom.pmf(np.arange(n2 + 1)[None, :], n2, grid[:, None]))
    return {(k1, k2): float(both[:, np.array(scores) >= scores[k1][k2]].sum(axis=1).max())
            for k1 in range(n1 + 1) for k2 in range(n2 + 1)}


def test_barnard_takes_the_arms_as_the_two_samples():
    # scipy's barnard_exact wants the samples as columns: [[ready1, ready2], [failed1, failed2]]
    from scipy.stats import barnard_exact
    right = barnard_exact([[3, 6], [3, 0]]).pvalue
    assert right == pytest.approx(0.06758, abs=1e-5)
    assert rate_p_value(3, 6, 6, 6, "barnard") == pytest.approx(right, abs=1e-9)
    # the same evidence written the other way round, READY <-> failed, and with the arms swapped
    for args in [(0, 6, 3, 6), (6, 6, 3, 6), (3, 6, 0, 6)]:
        assert rate_p_value(*args, "barnard") == rate_p_value(3, 6, 6, 6, "barnard")


@pytest.mark.parametrize("n1,n2", [(6, 6), (4, 7), (3, 10)])
def test_barnard_matches_its_definition(n1, n2):
    for (k1, k2), p in barnard_reference(n1, n2).items():
        assert rate_p_value(k1, n1, k2, n2, "barnard") == pytest.approx(p, abs=1e-6), (k1, n1, k2, n2)


def test_barnard_counts_tables_that_tie_the_observed_one():
    # 0/6 vs 5/6 ties its mirror 1/6 vs 6/6 exactly; a floating-point ranking dropped it (0.0039)
    assert rate_p_value(0, 6, 5, 6, "barnard") == pytest.approx(0.0063477, abs=1e-6)


def false_different(n, test, alpha=0.05):
    """Exact worst case over the common rate of P(p < alpha) for n launches per arm, both arms alike."""
    k = np.arange(n + 1)
    reject = np.array([[rate_p_value(a, n, b, n, test) < alpha for b in k] for a in k])
    pmf = binom.pmf(k[None, :], n, RATES[:, None])
    return float(np.einsum("pa,pb,ab->p", pmf, pmf, reject).max())


@pytest.mark.parametrize("n", [6, 12])
@pytest.mark.parametrize("test", ["barnard", "fisher"])
def test_false_different_within_alpha(n, test):
    assert false_different(n, test) <= 0.05
