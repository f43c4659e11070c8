"""The one MLflow writer of a run: a background thread fed from the store, so tracking never
slows a trial down and a broken tracking server never loses one (`harness sync` re-feeds)."""
from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

from harness.core.record import TrialResult


class TrackingWriter:
    """Logs stored trials to MLflow in order, off the trial path; errors are kept, not raised."""

    def __init__(self, runs_dir: Path, uri: str | None):
        self._q: queue.Queue[tuple[TrialResult, Path] | None] = queue.Queue()
        self.errors: list[str] = []
        self.logged = 0
        self._runs_dir, self._uri = runs_dir, uri
        self._thread = threading.Thread(target=self._loop, name="harness-tracking", daemon=True)
        self._thread.start()

    def submit(self, result: TrialResult, trial_dir: Path) -> None:
        """Queue a stored trial for logging."""
        self._q.put((result, trial_dir))

    def close(self, timeout_s: float = 120.0) -> None:
        """Log what is queued, then stop."""
        self._q.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.errors.append(f"tracking did not finish within {timeout_s:.0f} s")

    def _loop(self) -> None:
        # MLflow's defaults retry an unreachable server for minutes; the store already holds the
        # trial, so fail soon and let `harness sync` re-feed. A user's own settings win.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
        from harness.adapters.tracking import Tracker, TrackingConfig, TrackingError

        tracker = None
        while (item := self._q.get()) is not None:
            if self.errors:  # a broken tracking server: stop trying, the store has everything
                continue
            result, trial_dir = item
            try:
                tracker = tracker or Tracker(TrackingConfig(uri=self._uri), self._runs_dir)
                tracker.log_trial(result, trial_dir)
                self.logged += 1
            except TrackingError as exc:
                self.errors.append(str(exc))
