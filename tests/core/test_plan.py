from hypothesis import given, strategies as st

from harness.core.arms import Arm
from harness.core.matrix import Schedule
from harness.core.plan import TrialKey, order_trials, pending


def arms(n):
    return [Arm(f"id{i}", chr(65 + i), {"x": str(i)}, None, 1, 1, 1, ()) for i in range(n)]


def test_interleaved_is_abab():
    keys = order_trials(arms(2), 3, Schedule.INTERLEAVED)
    assert [(k.arm_id, k.k) for k in keys] == [("id0", 1), ("id1", 1), ("id0", 2), ("id1", 2), ("id0", 3), ("id1", 3)]


def test_blocked_is_aabb():
    keys = order_trials(arms(2), 2, Schedule.BLOCKED)
    assert [(k.arm_id, k.k) for k in keys] == [("id0", 1), ("id0", 2), ("id1", 1), ("id1", 2)]


@given(st.integers(1, 5), st.integers(1, 6), st.sampled_from(list(Schedule)), st.integers(0, 10))
def test_every_trial_once(n_arms, repeats, schedule, seed):
    keys = order_trials(arms(n_arms), repeats, schedule, seed)
    assert len(keys) == n_arms * repeats == len(set(keys))


def test_random_is_seeded():
    a = order_trials(arms(3), 4, Schedule.RANDOM, seed=7)
    assert a == order_trials(arms(3), 4, Schedule.RANDOM, seed=7)
    assert a != order_trials(arms(3), 4, Schedule.RANDOM, seed=8)


def test_pending_keeps_order_and_drops_done():
    keys = order_trials(arms(2), 2, Schedule.INTERLEAVED)
    assert pending(keys, {TrialKey("id1", 1)}) == [keys[0], keys[2], keys[3]]
