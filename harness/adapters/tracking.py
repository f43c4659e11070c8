"""MLflow tracking: the store's trials, fed to MLflow by one writer.

Layout: experiment = matrix; a run per arm (tags harness.kind=arm, harness.arm_id); under it a
child run per trial (tags harness.kind=trial, harness.arm_id, harness.trial, mlflow.parentRunId).
Runs are found by these tags before being created, so logging is idempotent. A trial run is
complete when its tag harness.logged holds the sha256 of the result.json logged with it (set
last, after the artifacts). Uses MlflowClient with explicit run ids: no process-global active run.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Iterator, Mapping

from harness.adapters import tracking_fields as tf
from harness.core.record import TrialResult
from harness.errors import HarnessError

DONE_TAG = "harness.logged"
_REMOTE_SCHEMES = ("http://", "https://", "databricks")


@dataclass(frozen=True)
class TrackingConfig:
    """Where trials go. uri None → sqlite in runs_dir; artifact_root None → runs_dir/mlflow-artifacts
    for a local backend (a remote server keeps its own artifact store)."""

    uri: str | None = None
    artifact_root: str | None = None
    enabled: bool = True


@dataclass(frozen=True)
class SyncReport:
    """What `Tracker.sync` did: trials logged (or completed), already logged, and files that failed."""

    logged: int = 0
    skipped: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)


class TrackingError(HarnessError):
    """MLflow refused or could not be reached; key names the run (matrix/arm_id/k) involved."""

    def __init__(self, key: str, message: str):
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}")


class _Refused(Exception):
    """Raised inside a `Tracker._wrap` block; becomes a TrackingError carrying the run's key."""


def default_uri(runs_dir: Path) -> str:
    """The sqlite database beside the store (4 slashes: an absolute path)."""
    return f"sqlite:///{runs_dir.resolve()}/mlflow.db"


def ui_command(runs_dir: Path, host: str = "127.0.0.1", port: int = 5000, uri: str | None = None) -> list[str]:
    """argv of the MLflow UI over the store's tracking database (run it without a shell). One
    worker: a local UI needs no more, and it starts three times faster."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri or default_uri(runs_dir),
            "--host", host, "--port", str(port), "--workers", "1"]


def _quiet_mlflow() -> None:
    # Harmless noise measured with MLflow 3.17 + SQLAlchemy 2.1; errors still show.
    for name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*noload.. loader strategy is deprecated", module=r"mlflow\.")
    # Two "View run ... at" lines on stdout per finished run over http; respect an explicit choice.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


def _chunks(items: list, size: int = 100) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Tracker:
    """The one MLflow writer of a store. Caches the client, experiment ids and arm run ids."""

    def __init__(self, config: TrackingConfig, runs_dir: Path):
        self.config, self.runs_dir = config, runs_dir
        self.uri = config.uri or default_uri(runs_dir)
        self._client = None
        self._experiments: dict[str, str] = {}
        self._arm_runs: dict[tuple[str, str], str] = {}

    # ---- public -------------------------------------------------------------------------------
    def log_trial(self, result: TrialResult, trial_dir: Path) -> str | None:
        """Log one trial (and refresh its arm's summary); returns the trial's MLflow run id, or None
        when tracking is disabled. Idempotent. Raises TrackingError."""
        if not self.config.enabled:
            return None
        key = f"{result.matrix}/{result.arm_id}/{result.trial}"
        with self._wrap(key):
            exp = self._experiment(result.matrix)
            arm_run = self._arm_run(exp, result.matrix, result.arm_id, result.label, result.levels)
            run = self._find_one(exp, "trial", result.arm_id, result.trial)
            run_id = self._log_trial(exp, arm_run, result, trial_dir, run)
            self._refresh_arm(exp, result.arm_id, arm_run)
        return run_id

    def sync(self, matrix_dir: Path) -> SyncReport:
        """Feed every result.json under matrix_dir to MLflow. Trials already logged with the same
        record are skipped; incomplete ones are completed. A bad file or a refused trial lands in
        `failed` and the others go on; failing to reach the experiment at all raises TrackingError."""
        if not self.config.enabled:
            return SyncReport()
        matrix = matrix_dir.name
        if not matrix_dir.is_dir():
            raise TrackingError(matrix, f"no such matrix directory: {matrix_dir}")
        failed: list[tuple[Path, str]] = []
        logged = skipped = 0
        arms = self._read_arms(matrix_dir, failed)
        with self._wrap(matrix):
            exp = self._experiment(matrix)
            trials = {}  # (arm_id, trial) -> run: one search for the whole campaign
            for run in self._search(exp, "tags.\"harness.kind\" = 'trial'"):
                trials.setdefault((run.data.tags.get("harness.arm_id"), run.data.tags.get("harness.trial")), run)
        touched = set(arms)  # arms.json's arms get a run even before their first trial
        for path in sorted(matrix_dir.glob("*/*/result.json")):
            try:
                result = _load(path, matrix)
            except (OSError, ValueError, KeyError, TypeError) as e:
                failed.append((path, f"unreadable result: {type(e).__name__}: {e}"))
                continue
            run = trials.get((result.arm_id, str(result.trial)))
            if run is not None and _is_done(run, _Record(result)):
                skipped += 1
                continue
            label, levels = arms.get(result.arm_id, (result.label, result.levels))
            try:
                with self._wrap(f"{matrix}/{result.arm_id}/{result.trial}"):
                    arm_run = self._arm_run(exp, matrix, result.arm_id, label, levels)
                    self._log_trial(exp, arm_run, result, path.parent, run)
                logged += 1
                touched.add(result.arm_id)
            except TrackingError as e:
                failed.append((path, str(e)))
        for arm_id in sorted(touched):
            try:
                with self._wrap(f"{matrix}/{arm_id}"):
                    if arm_id in arms:
                        self._arm_run(exp, matrix, arm_id, *arms[arm_id])
                    if (matrix, arm_id) in self._arm_runs:
                        self._refresh_arm(exp, arm_id, self._arm_runs[(matrix, arm_id)])
            except TrackingError as e:
                failed.append((matrix_dir / arm_id, str(e)))
        return SyncReport(logged, skipped, failed)

    # ---- MLflow plumbing ----------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            _quiet_mlflow()
            from mlflow import MlflowClient  # 2 s import: only when tracking is used
            if self.uri == default_uri(self.runs_dir):
                self.runs_dir.mkdir(parents=True, exist_ok=True)
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    @contextmanager
    def _wrap(self, key: str) -> Iterator[None]:
        import requests
        import sqlalchemy.exc
        from mlflow.exceptions import MlflowException
        try:
            yield
        except _Refused as e:
            raise TrackingError(key, str(e)) from e
        except (MlflowException, OSError, requests.RequestException, sqlalchemy.exc.SQLAlchemyError) as e:
            raise TrackingError(key, f"{type(e).__name__}: {e} (tracking URI {self.uri})") from e

    def _artifact_location(self, matrix: str) -> str | None:
        root = self.config.artifact_root
        if root is None:
            if self.uri.startswith(_REMOTE_SCHEMES):
                return None
            return (self.runs_dir / "mlflow-artifacts" / matrix).resolve().as_uri()
        return f"{root.rstrip('/')}/{matrix}" if "://" in root else (Path(root) / matrix).resolve().as_uri()

    def _experiment(self, matrix: str) -> str:
        if matrix not in self._experiments:
            exp = self.client.get_experiment_by_name(matrix)
            if exp is None:
                exp_id = self.client.create_experiment(matrix, artifact_location=self._artifact_location(matrix),
                                                       tags={"harness.matrix": matrix})
            elif exp.lifecycle_stage != "active":
                raise _Refused(f"experiment {matrix!r} is deleted in {self.uri}; restore it "
                                            "(mlflow experiments restore) or use another tracking URI")
            else:
                exp_id = exp.experiment_id
            self._experiments[matrix] = exp_id
        return self._experiments[matrix]

    def _search(self, exp: str, filter_string: str) -> list:
        runs, token = [], None
        while True:
            page = self.client.search_runs([exp], filter_string, max_results=1000, page_token=token)
            runs += list(page)
            token = page.token
            if not token:
                return runs

    def _find_one(self, exp: str, kind: str, arm_id: str, trial: int | None = None):
        f = f"tags.\"harness.kind\" = '{kind}' and tags.\"harness.arm_id\" = '{_quote(arm_id)}'"
        if trial is not None:
            f += f" and tags.\"harness.trial\" = '{trial}'"
        runs = self._search(exp, f)
        return min(runs, key=lambda r: r.info.start_time) if runs else None  # oldest wins over strays

    def _arm_run(self, exp: str, matrix: str, arm_id: str, label: str, levels: Mapping[str, str]) -> str:
        if (matrix, arm_id) in self._arm_runs:
            return self._arm_runs[(matrix, arm_id)]
        name = f"{label} {arm_id}"
        run = self._find_one(exp, "arm", arm_id)
        if run is None:
            run = self.client.create_run(exp, run_name=name, tags={
                "harness.kind": "arm", "harness.arm_id": arm_id, "harness.matrix": matrix})
        elif run.info.run_name != name:
            self.client.update_run(run.info.run_id, name=name)  # labels follow the newest arms.json
        fields = tf.RunFields(params=tf.level_params(levels), tags={"label": label})
        self._log_fields(run.info.run_id, fields, run.data)
        self._arm_runs[(matrix, arm_id)] = run.info.run_id
        return run.info.run_id

    def _log_trial(self, exp: str, arm_run: str, result: TrialResult, trial_dir: Path, run) -> str:
        rec = _Record(result)
        if run is not None and _is_done(run, rec):
            return run.info.run_id
        secrets, record, sha = rec.secrets, rec.data, rec.sha256
        start_ms, end_ms = tf.run_times_ms(result)
        if run is None:
            run = self.client.create_run(exp, start_time=start_ms, run_name=f"{result.label}#{result.trial}", tags={
                "mlflow.parentRunId": arm_run, "harness.kind": "trial", "harness.arm_id": result.arm_id,
                "harness.trial": str(result.trial), "harness.matrix": result.matrix})
            have: dict[str, int | None] = {}
        else:
            have = self._artifact_sizes(run.info.run_id)
        run_id = run.info.run_id
        stale = tuple(k for k in tf.TRIAL_TAG_KEYS if k in run.data.tags)
        fields = tf.trial_fields(result, secrets)
        self._log_fields(run_id, fields, run.data, end_ms, stale_tags=stale)
        self._log_artifacts(run_id, trial_dir, record, secrets, have)
        self.client.set_terminated(run_id, "FINISHED", end_time=end_ms)
        self.client.set_tag(run_id, DONE_TAG, sha)
        return run_id

    def _log_fields(self, run_id: str, fields: tf.RunFields, data=None, ts_ms: int | None = None,
                    stale_tags: tuple[str, ...] = ()) -> None:
        """Log what differs from data (the run as last read): params never change, so a different
        value is a conflict; metrics and tags are updated; stale harness tags are deleted."""
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.utils.time import get_current_time_millis
        old_p = data.params if data else {}
        old_m = data.metrics if data else {}
        old_t = data.tags if data else {}
        conflicts = {k: (old_p[k], v) for k, v in fields.params.items() if k in old_p and old_p[k] != v}
        if conflicts:
            raise _Refused(f"run {run_id}: params already logged with other values (old, new): {conflicts}")
        ts = ts_ms or get_current_time_millis()
        params = [Param(k, v) for k, v in fields.params.items() if k not in old_p]
        metrics = [Metric(k, v, ts, 0) for k, v in fields.metrics.items() if old_m.get(k) != v]
        tags = [RunTag(k, v) for k, v in fields.tags.items() if old_t.get(k) != v]
        for k in stale_tags:
            if k not in fields.tags:
                self.client.delete_tag(run_id, k)
        # One call when it fits: MLflow takes at most 100 params and 100 tags per batch.
        for p, m, t in zip_longest(_chunks(params), _chunks(metrics), _chunks(tags), fillvalue=[]):
            self.client.log_batch(run_id, metrics=m, params=p, tags=t)

    def _artifact_sizes(self, run_id: str) -> dict[str, int | None]:
        out = {}
        for info in self.client.list_artifacts(run_id):
            if info.is_dir:
                out.update({i.path: i.file_size for i in self.client.list_artifacts(run_id, info.path)})
            else:
                out[info.path] = info.file_size
        return out

    def _log_artifacts(self, run_id: str, trial_dir: Path, record: bytes, secrets: tf.Secrets,
                       have: Mapping[str, int | None]) -> None:
        """Upload result.json (always: it changed, or the run would be complete), server.log and
        patches/*.diff unless already there with the same size. Files are scrubbed copies when the
        trial has secrets to scrub."""
        with tempfile.TemporaryDirectory(prefix="harness-mlflow-") as tmp:
            staged = Path(tmp, "result.json")
            staged.write_bytes(record)
            uploads = [(staged, None)]
            sources = [(trial_dir / "server.log", None)]
            sources += [(p, "patches") for p in sorted((trial_dir / "patches").glob("*.diff"))]
            for src, dest in sources:
                if not src.is_file():
                    continue
                if secrets.values:
                    src = _scrubbed_copy(src, Path(tmp, dest or "", src.name), secrets)
                art = f"{dest}/{src.name}" if dest else src.name
                if have.get(art) != src.stat().st_size:
                    uploads.append((src, dest))
            for src, dest in uploads:
                self.client.log_artifact(run_id, str(src), dest)

    def _refresh_arm(self, exp: str, arm_id: str, arm_run: str) -> None:
        trials = self._search(exp, f"tags.\"harness.kind\" = 'trial' and tags.\"harness.arm_id\" = '{_quote(arm_id)}'")
        summary = tf.arm_summary(r.data.tags for r in trials)
        run = self.client.get_run(arm_run)
        stale = run.data.tags.get("ready") != summary.tags["ready"] or any(
            run.data.metrics.get(k) != v for k, v in summary.metrics.items())
        if stale or run.info.status != "FINISHED":
            from mlflow.entities import Metric, RunTag
            from mlflow.utils.time import get_current_time_millis
            # All summary metrics at step n, so that ready_k/n plots as the campaign grows.
            ts, n = get_current_time_millis(), int(summary.metrics["n"])
            self.client.log_batch(arm_run, metrics=[Metric(k, v, ts, n) for k, v in summary.metrics.items()],
                                  tags=[RunTag(k, v) for k, v in summary.tags.items()])
            self.client.set_terminated(arm_run, "FINISHED")

    def _read_arms(self, matrix_dir: Path, failed: list) -> dict[str, tuple[str, dict[str, str]]]:
        path = matrix_dir / "arms.json"
        if not path.exists():
            return {}
        try:
            arms = json.loads(path.read_text())["arms"]
            return {a["arm_id"]: (a["label"], dict(a.get("levels", {}))) for a in arms}
        except (OSError, ValueError, KeyError, TypeError) as e:
            failed.append((path, f"unreadable arms: {type(e).__name__}: {e}; labels taken from results"))
            return {}


def _quote(value: str) -> str:
    if "'" in value or "\\" in value:
        raise _Refused(f"{value!r}: ids with quotes or backslashes cannot be searched in MLflow")
    return value


def _load(path: Path, matrix: str) -> TrialResult:
    d = json.loads(path.read_text())
    if not isinstance(d, dict):
        raise TypeError(f"expected a JSON object, got {type(d).__name__}")
    result = TrialResult.from_dict(d)
    where = (matrix, path.parent.parent.name, path.parent.name)
    if where != (result.matrix, result.arm_id, str(result.trial)):
        raise ValueError(f"record says {result.matrix}/{result.arm_id}/{result.trial} but lies at {'/'.join(where)}")
    return result


class _Record:
    """The result.json that goes to MLflow, and its sha256 (the completion mark)."""

    def __init__(self, result: TrialResult):
        self.secrets = tf.Secrets.of(result)
        self.data = tf.redacted_record(result, self.secrets)
        self.sha256 = hashlib.sha256(self.data).hexdigest()


def _is_done(run, rec: _Record) -> bool:
    return run.info.status == "FINISHED" and run.data.tags.get(DONE_TAG) == rec.sha256


def _scrubbed_copy(src: Path, dst: Path, secrets: tf.Secrets) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with src.open(encoding="utf-8", errors="replace") as fin, dst.open("w", encoding="utf-8") as fout:
        for line in fin:
            fout.write(secrets.scrub(line))
    return dst
