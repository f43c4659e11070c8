"""Idempotent MLflow primitives over one MlflowClient: find runs by tags, log only what differs,
upload only missing artifacts; every MLflow, network or database error becomes a TrackingError.

No process-global state of MLflow's is used (no mlflow.start_run): every call names its run id.
"""
from __future__ import annotations

import logging
import os
import warnings
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from harness.adapters.tracking_fields import RunFields
from harness.errors import HarnessError


class TrackingError(HarnessError):
    """MLflow refused or could not be reached; key names the run (matrix/arm_id/k) involved."""

    def __init__(self, key: str, message: str):
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}")


class Refused(Exception):
    """Raised inside a `MlflowWriter.errors` block; leaves it as a TrackingError carrying the key."""


def quiet_mlflow() -> None:
    """Silence the harmless noise measured with MLflow 3.17 + SQLAlchemy 2.1; errors still show."""
    for name in ("alembic", "mlflow.store.db.utils"):  # "Creating initial MLflow database tables..."
        logging.getLogger(name).setLevel(logging.WARNING)
    # Raised when MLflow's sqlalchemy_store module is imported; attributed to sqlalchemy's frames,
    # so it is matched by its text, not by module.
    warnings.filterwarnings("ignore", message=r"The ``noload`` loader strategy is deprecated", category=DeprecationWarning)
    # Two "View run ... at" lines on stdout per finished run over http; an explicit setting wins.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


def _chunks(items: list, size: int = 100) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _quote(value: str) -> str:
    if "'" in value or "\\" in value:
        raise Refused(f"{value!r}: a value with quotes or backslashes cannot be searched in MLflow")
    return value


class MlflowWriter:
    """One MlflowClient (created on first use: importing mlflow takes ~2 s) and its experiment ids."""

    def __init__(self, uri: str, db_dir: Path | None = None):
        self.uri, self._db_dir = uri, db_dir   # db_dir: created first (sqlite needs the folder)
        self._client = None
        self._experiments: dict[str, str] = {}

    @property
    def client(self):
        if self._client is None:
            quiet_mlflow()
            from mlflow import MlflowClient
            if self._db_dir is not None:
                self._db_dir.mkdir(parents=True, exist_ok=True)
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    @contextmanager
    def errors(self, key: str) -> Iterator[None]:
        """Turn what MLflow, requests, SQLAlchemy or the filesystem raise into TrackingError(key)."""
        import requests
        import sqlalchemy.exc
        from mlflow.exceptions import MlflowException
        try:
            yield
        except Refused as e:
            raise TrackingError(key, str(e)) from e
        except (MlflowException, OSError, requests.RequestException, sqlalchemy.exc.SQLAlchemyError) as e:
            raise TrackingError(key, f"{type(e).__name__}: {e} (tracking URI {self.uri})") from e

    def experiment(self, name: str, artifact_location: str | None, tags: Mapping[str, str] | None = None) -> str:
        """The id of the active experiment `name`, created (with artifact_location) if missing; tags
        it lacks or holds with other values are set (once per writer)."""
        if name not in self._experiments:
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                exp_id = self.client.create_experiment(name, artifact_location=artifact_location, tags=dict(tags or {}))
            elif exp.lifecycle_stage != "active":
                raise Refused(f"experiment {name!r} is deleted in {self.uri}; restore it "
                              "(mlflow experiments restore) or use another tracking URI")
            else:
                exp_id = exp.experiment_id
                for k, v in (tags or {}).items():
                    if exp.tags.get(k) != v:
                        self.client.set_experiment_tag(exp_id, k, v)
            self._experiments[name] = exp_id
        return self._experiments[name]

    def experiment_tag(self, exp: str, key: str) -> str | None:
        """One tag of the experiment as stored now."""
        return self.client.get_experiment(exp).tags.get(key)

    def search(self, exp: str, tags: Mapping[str, str]) -> list:
        """All active runs of exp whose tags have these values (every page)."""
        filt = " and ".join(f"tags.\"{_quote(k)}\" = '{_quote(v)}'" for k, v in tags.items())
        runs, token = [], None
        while True:
            page = self.client.search_runs([exp], filt, max_results=1000, page_token=token)
            runs += list(page)
            token = page.token
            if not token:
                return runs

    def find(self, exp: str, tags: Mapping[str, str]):
        """The run with these tags, or None; the oldest if a crash left strays."""
        runs = self.search(exp, tags)
        return min(runs, key=lambda r: r.info.start_time) if runs else None

    def log_fields(self, run_id: str, fields: RunFields, data=None, ts_ms: int | None = None, step: int = 0,
                   stale_tags: Sequence[str] = ()) -> None:
        """Log what differs from data (the run as last read). A param never changes in MLflow, so
        a different value is refused; metrics and tags are updated; stale_tags absent from fields
        are deleted (a re-classified trial loses its old signature)."""
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.utils.time import get_current_time_millis
        old_p = data.params if data else {}
        old_m = data.metrics if data else {}
        old_t = data.tags if data else {}
        conflicts = {k: (old_p[k], v) for k, v in fields.params.items() if k in old_p and old_p[k] != v}
        if conflicts:
            raise Refused(f"run {run_id}: params already logged with other values (old, new): {conflicts}")
        ts = ts_ms or get_current_time_millis()
        params = [Param(k, v) for k, v in fields.params.items() if k not in old_p]
        metrics = [Metric(k, v, ts, step) for k, v in fields.metrics.items() if old_m.get(k) != v]
        tags = [RunTag(k, v) for k, v in fields.tags.items() if old_t.get(k) != v]
        for k in stale_tags:
            if k in old_t and k not in fields.tags:
                self.client.delete_tag(run_id, k)
        # One call when it fits: MLflow takes at most 100 params and 100 tags per batch.
        for p, m, t in zip_longest(_chunks(params), _chunks(metrics), _chunks(tags), fillvalue=[]):
            self.client.log_batch(run_id, metrics=m, params=p, tags=t)

    def artifact_sizes(self, run_id: str) -> dict[str, int | None]:
        """path → size of the run's artifacts, one folder deep (all the harness writes)."""
        out = {}
        for info in self.client.list_artifacts(run_id):
            if info.is_dir:
                out.update({i.path: i.file_size for i in self.client.list_artifacts(run_id, info.path)})
            else:
                out[info.path] = info.file_size
        return out

    def upload(self, run_id: str, files: Sequence[tuple[Path, str | None]], have: Mapping[str, int | None],
               always: Sequence[Path] = ()) -> None:
        """Upload each (file, artifact folder) unless `have` lists it with the same size."""
        for src, dest in files:
            art = f"{dest}/{src.name}" if dest else src.name
            if src in always or have.get(art) != src.stat().st_size:
                self.client.log_artifact(run_id, str(src), dest)
