"""The pure part of tracking: what a trial looks like in MLflow."""
from __future__ import annotations

from harness.adapters.tracking_fields import (TRUNCATED, Secrets, clip, redacted_record, run_times_ms,
                                              safe_key, trial_fields)
from harness.core.outcome import Outcome
from harness.core.record import TrialResult


def result(**kw) -> TrialResult:
    return TrialResult(**{"matrix": "m", "arm_id": "a1", "label": "A", "levels": {"x": "on"}, "trial": 0,
                           "outcome": Outcome.READY, **kw})


def test_safe_key_and_clip():
    assert safe_key("patch.0.{pr: sgl-project/sglang#32467}") == "patch.0._pr__sgl-project_sglang_32467_"
    assert len(safe_key("k" * 300)) == 250
    assert clip("abc", 3) == "abc"
    cut = clip("x" * 30, 20)
    assert len(cut) == 20 and cut == "x" * (20 - len(TRUNCATED)) + TRUNCATED
    assert clip("x" * 30, 5) == "xxxxx"


def test_secrets_found_in_env_config_and_argv():
    r = result(env={"HF_TOKEN": "hf_abcdef", "OTHER": "visible", "X_KEY": "***"},
               config={"a": [{"my_password": "pw-1234"}]},
               argv=("srv", "--api-key", "k-123456", "--hf-token=hf_zzzzzz", "--port", "8000"))
    s = Secrets.of(r)
    assert set(s.values) == {"hf_abcdef", "pw-1234", "k-123456", "hf_zzzzzz"}
    assert s.scrub("token hf_abcdef and k-123456") == "token *** and ***"
    assert s.value("level.HF_TOKEN", "anything") == "***" and s.value("model", "visible") == "visible"
    text = redacted_record(r, s).decode()
    assert all(v not in text for v in s.values) and "visible" in text and "8000" in text


def test_trial_fields_leave_out_what_is_unknown():
    f = trial_fields(result(outcome=Outcome.INFRA, detail="port 8000 in use"), Secrets())
    assert f.metrics == {"ready": 0.0}
    assert f.tags == {"outcome": "INFRA", "label": "A", "harness.counts": "false", "detail": "port 8000 in use"}
    assert f.params == {"level.x": "on", "engine": "command", "tp": "1", "dp": "1", "ep": "1"}


def test_run_times():
    assert run_times_ms(result()) == (None, None)
    assert run_times_ms(result(started_at="1970-01-01T00:00:10Z", duration_s=1.5)) == (10_000, 11_500)
    assert run_times_ms(result(started_at="1970-01-01T00:00:10", duration_s=None)) == (10_000, None)  # naive = UTC
    assert run_times_ms(result(started_at="yesterday")) == (None, None)
    # Millisecond starts and durations that do not add up exactly in floating point: end - start is
    # always the duration rounded, as MLflow's Duration column shows it.
    for started, duration in (("2026-12-01T13:17:04.123+00:00", 1.4004999), ("2026-12-01T13:17:04.999Z", 0.0015),
                              ("2026-12-01T13:17:05.001+00:00", 402.3337)):
        start, end = run_times_ms(result(started_at=started, duration_s=duration))
        assert end - start == round(duration * 1000) and start % 1000 == int(started[20:23])
    # A launch's own milliseconds: a 1.4 s launch lasts 1.4 s.
    assert run_times_ms(result(started_at="1970-01-01T00:00:10.250+00:00", duration_s=1.4)) == (10_250, 11_650)
