"""publish: the report into MLflow, its failures returned as words, never raised."""
from __future__ import annotations

import socket

from harness.app.config import Settings
from harness.app.dashboard import dashboard_url, publish
from harness.app.report import build_report
from tests.app.test_dashboard_browser import MATRIX, store


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_tracking_server_is_an_error_returned_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    runs = tmp_path / "runs"
    store(runs)
    report = build_report(MATRIX, runs, formats=())
    settings = Settings(runs_dir=runs, tracking_uri=f"http://127.0.0.1:{closed_port()}")
    (err,) = publish(report, settings)
    assert err.startswith("dash: MlflowException") and "127.0.0.1" in err
    assert dashboard_url(settings, "dash") is None


def test_tracking_off_publishes_nothing(tmp_path):
    runs = tmp_path / "runs"
    store(runs)
    settings = Settings(runs_dir=runs, tracking_enabled=False)
    assert publish(build_report(MATRIX, runs, formats=()), settings) == []
    assert dashboard_url(settings, "dash") is None
    assert not (runs / "mlflow.db").exists() and not (runs / "mlflow-artifacts").exists()
