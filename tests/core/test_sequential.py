import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness.core.sequential import (
    Decision, FixDecision, _crossing, clean_runs_needed, design, fix_stands, log_glr, looks, operating, replay,
)
from harness.core.stats import upper_bound

DESIGNS = [(0.05, 1, 30), (0.01, 1, 30), (0.05, 2, 30), (0.05, 1, 10), (0.1, 1, 6)]


@pytest.mark.parametrize("alpha,batch,max_n", DESIGNS)
def test_design_error_within_alpha_and_not_wasteful(alpha, batch, max_n):
    d = design(alpha, batch, max_n)
    assert 0.5 * alpha < d.error <= alpha
    # one step more permissive would break alpha: the threshold is the smallest that keeps it
    assert operating(d.threshold, batch, max_n, 0.5, 0.5)[0] <= alpha


@pytest.mark.parametrize("alpha,batch,max_n", [(0.05, 1, 30), (0.01, 1, 30), (0.05, 2, 30), (0.05, 3, 20)])
def test_worst_case_over_a_fine_grid(alpha, batch, max_n):
    d = design(alpha, batch, max_n)
    grid = np.linspace(0.0005, 0.9995, 2000)
    # operating() one p at a time costs ~12 ms; _crossing is the same computation over an array of p
    err, _ = _crossing(d.threshold, batch, max_n, grid, grid)
    for i in (0, 777, 999, 1999):
        assert operating(d.threshold, batch, max_n, grid[i], grid[i])[0] == pytest.approx(err[i], abs=1e-12)
    assert err.max() <= alpha * 1.001
    assert err.max() >= d.error * 0.999        # the design found the worst case, it did not miss a peak
    assert np.allclose(err, err[::-1], atol=1e-12)      # symmetric in p <-> 1 - p, as the design assumes


def test_looks():
    assert looks(1, 4) == [1, 2, 3, 4]
    assert looks(3, 10) == [3, 6, 9, 10]


def simulated_error(alpha, p, campaigns, seed, batch=1, max_n=30):
    """P(DIFFERENT) for two arms both READY with probability p, simulated (SAME stops off: they
    only lower it), vectorised with the same statistic and threshold."""
    d = design(alpha, batch, max_n)
    rng = np.random.default_rng(seed)
    ls = np.array(looks(batch, max_n))
    k1 = np.cumsum(rng.random((campaigns, max_n)) < p, axis=1)[:, ls - 1]
    k2 = np.cumsum(rng.random((campaigns, max_n)) < p, axis=1)[:, ls - 1]
    return (log_glr(k1, ls, k2, ls) >= d.threshold).any(axis=1).mean()


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_simulated_error_within_alpha(p):
    alpha, n = 0.05, 2000
    err = simulated_error(alpha, p, n, seed=12345)
    assert err <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / n)
    exact = operating(design(alpha, 1, 30).threshold, 1, 30, p, p)[0]
    assert abs(err - exact) <= 4 * math.sqrt(exact * (1 - exact) / n)


def test_simulation_matches_the_rule_as_run():
    # The vectorised statistic above decides exactly like replay() / stands() (margin 0: no SAME).
    d = design(0.05, 1, 30)
    rng = np.random.default_rng(7)
    for _ in range(40):
        a = list(rng.random(30) < 0.5)
        b = list(rng.random(30) < 0.3)
        decision, n = replay(d, a, b, margin=0.0)
        k1, k2 = np.cumsum(a), np.cumsum(b)
        ns = np.arange(1, 31)
        crossed = np.nonzero(log_glr(k1, ns, k2, ns) >= d.threshold)[0]
        if len(crossed):
            assert (decision, n) == (Decision.DIFFERENT, int(crossed[0]) + 1)
        else:
            assert (decision, n) == (Decision.EXHAUSTED, 30)


def test_gap_one_decided_within_six_launches():
    d = design(0.01, 1, 30)
    p_diff, n = operating(d.threshold, 1, 30, 1.0, 0.0)
    assert p_diff == pytest.approx(1.0, abs=1e-12) and n <= 6
    assert d.stands(0, n, n, n, margin=0.2) is Decision.DIFFERENT
    assert d.stands(0, n - 1, n - 1, n - 1, margin=0.2) is Decision.CONTINUE


def test_equal_rates_rarely_different_and_never_when_identical():
    d = design(0.05, 1, 30)
    for n in looks(1, 30):
        for k in range(n + 1):
            assert d.stands(k, n, k, n, margin=0.2) is not Decision.DIFFERENT


def test_stands_exhausted_and_same():
    d = design(0.05, 1, 10)
    assert d.stands(5, 10, 6, 10, margin=0.2) is Decision.EXHAUSTED
    assert d.stands(5, 9, 6, 9, margin=0.2) is Decision.CONTINUE
    assert d.stands(200, 200, 200, 200, margin=0.2) is Decision.SAME     # a look beyond max_n still judges


def test_design_rejects_bad_alpha():
    with pytest.raises(ValueError):
        design(0.0, 1, 10)
    with pytest.raises(ValueError):
        design(0.5, 1, 10)


launches = st.lists(st.booleans(), min_size=0, max_size=14)


@settings(deadline=None, max_examples=60)
@given(launches, launches, st.lists(st.booleans(), max_size=6), st.lists(st.booleans(), max_size=6))
def test_replay_deterministic_and_uses_only_first_n(a, b, tail_a, tail_b):
    d = design(0.05, 2, 12)
    decision, n = replay(d, a, b, 0.2)
    assert replay(d, a, b, 0.2) == (decision, n)
    assert n <= min(len(a), len(b), d.max_n)
    if decision is not Decision.CONTINUE:
        # launches after the n-th of either arm change nothing: not more of them, not other values
        assert replay(d, a[:n], b[:n], 0.2) == (decision, n)
        assert replay(d, a[:n] + tail_a, b[:n] + tail_b, 0.2) == (decision, n)
        assert n in looks(d.batch, d.max_n)
        assert d.stands(sum(a[:n]), n, sum(b[:n]), n, 0.2) is decision
    else:
        assert n == min(len(a), len(b), d.max_n)


def test_replay_empty_and_partial():
    d = design(0.05, 2, 12)
    assert replay(d, [], [], 0.2) == (Decision.CONTINUE, 0)
    assert replay(d, [True], [False, True, True], 0.2) == (Decision.CONTINUE, 1)


@settings(deadline=None, max_examples=60)
@given(launches, launches)
def test_replay_symmetric_under_swapping_arms(a, b):
    d = design(0.05, 1, 12)
    assert replay(d, a, b, 0.2) == replay(d, b, a, 0.2)


def test_fix_goal_eight_clean_launches():
    assert clean_runs_needed(1 / 3) == 8
    assert fix_stands(0, 8, 1 / 3, 30) is FixDecision.HOLDS
    assert fix_stands(0, 7, 1 / 3, 30) is FixDecision.CONTINUE
    assert fix_stands(0, 8, 1 / 3, 8) is FixDecision.HOLDS
    assert fix_stands(1, 8, 1 / 3, 8) is FixDecision.EXHAUSTED
    assert fix_stands(6, 6, 1 / 3, 30) is FixDecision.FAILS
    assert fix_stands(0, 0, 1 / 3, 30) is FixDecision.CONTINUE


@pytest.mark.parametrize("target", [0.5, 1 / 3, 0.2, 0.1, 0.01, 1e-4])
def test_clean_runs_needed_is_the_first_clean_streak_that_bounds(target):
    n = clean_runs_needed(target)
    assert upper_bound(0, n) < target <= (upper_bound(0, n - 1) if n > 1 else 1.0)


@functools.lru_cache(maxsize=None)
def fix_table(target, max_n):
    return {(f, n): fix_stands(f, n, target, max_n) for n in range(1, max_n + 1) for f in range(n + 1)}


def fix_operating(rate, target, max_n):
    """Exact (P(HOLDS), P(FAILS), E[launches]) of the fix goal looking after every launch."""
    table = fix_table(target, max_n)
    dist = np.zeros(max_n + 2)
    dist[0] = 1.0
    holds = fails = en = 0.0
    for n in range(1, max_n + 1):
        new = dist * (1 - rate)
        new[1:] += dist[:-1] * rate
        for f in range(n + 1):
            dec = table[f, n]
            if dec is not FixDecision.CONTINUE:
                holds += new[f] * (dec is FixDecision.HOLDS)
                fails += new[f] * (dec is FixDecision.FAILS)
                en += new[f] * n
                new[f] = 0.0
        dist = new
    return holds, fails, en


@pytest.mark.parametrize("max_n", [10, 20, 30])
def test_fix_goal_holds_rarely_for_a_bad_fix(max_n):
    # Looked at after every launch, a bad fix (failure rate ≥ 1/3) must be called HOLDS ≤ 5 % of the time.
    for rate in (1 / 3, 0.4, 0.5):
        holds, _, _ = fix_operating(rate, 1 / 3, max_n)
        assert holds <= 0.05
    holds, _, en = fix_operating(0.0, 1 / 3, max_n)
    assert holds == pytest.approx(1.0) and en == pytest.approx(8.0)


def test_fix_goal_still_finds_good_fixes():
    holds, _, _ = fix_operating(0.1, 1 / 3, 30)
    assert holds > 0.7


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_fix_holds_is_monotone_in_failures(fn):
    f, n = fn
    if fix_stands(f, n, 1 / 3, 40) is FixDecision.HOLDS and f > 0:
        assert fix_stands(f - 1, n, 1 / 3, 40) is FixDecision.HOLDS
    if fix_stands(f, n, 1 / 3, 40) is FixDecision.FAILS and f < n:
        assert fix_stands(f + 1, n, 1 / 3, 40) is FixDecision.FAILS
