"""Use case: the campaign's report in MLflow, for a reviewer who opens the experiment.

Called after the trials are in MLflow (the run's writer has finished, or `sync` has fed them):
one writer at a time, as sqlite needs. A tracking failure is returned, never raised: the store
and the report files already hold everything, and `harness sync` publishes again.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from harness.app.config import Settings
from harness.app.report import Report, render

ARTIFACT_FORMATS = ("md", "html", "json")


def publish(report: Report, settings: Settings) -> list[str]:
    """Campaign run with report.md / report.html / report.json, arm runs with the report's numbers,
    trial runs marked in or out of the campaign; returns the errors (empty when all went in)."""
    if not settings.tracking_enabled:
        return []
    from harness.adapters.tracking import Tracker, TrackingConfig, TrackingError

    matrix_dir = settings.runs_dir / report.data.matrix
    try:
        with tempfile.TemporaryDirectory(prefix="harness-report-") as tmp:
            files = []
            for fmt in ARTIFACT_FORMATS:
                path = Path(tmp, f"report.{fmt}")
                path.write_text(render(report.data, fmt, report.markdown, report.csv), encoding="utf-8")
                files.append(path)
            Tracker(TrackingConfig(uri=settings.tracking_uri), settings.runs_dir).publish(report.data, matrix_dir, files)
    except TrackingError as exc:
        return [str(exc)]
    return []


def dashboard_url(settings: Settings, matrix: str, ui_url: str = "http://127.0.0.1:5000") -> str | None:
    """Where the arms view of the matrix's experiment opens in the MLflow UI at ui_url (`harness ui`
    serves the store's database there); None when tracking is off or the experiment is missing."""
    if not settings.tracking_enabled:
        return None
    from harness.adapters.tracking import Tracker, TrackingConfig, TrackingError
    from harness.adapters.tracking_dashboard import view_url

    try:
        exp = Tracker(TrackingConfig(uri=settings.tracking_uri), settings.runs_dir).experiment_id(matrix)
    except TrackingError:
        return None
    if exp is None:
        return None
    return view_url(settings.tracking_uri if (settings.tracking_uri or "").startswith("http") else ui_url, exp)
