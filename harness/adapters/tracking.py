"""MLflow tracking: the store's trials, fed to MLflow by one writer.

Layout: experiment = matrix; a run per arm (tags harness.kind=arm, harness.arm_id); under it a
child run per trial (tags harness.kind=trial, harness.arm_id, harness.trial, mlflow.parentRunId).
Runs are found by these tags before being created, so logging is idempotent. A trial run is
complete when its tag harness.logged holds the sha256 of the result.json logged with it (set
last, after the artifacts): `sync` skips those, and completes the others.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from harness.adapters import tracking_fields as tf
from harness.adapters.tracking_mlflow import MlflowWriter, TrackingError
from harness.core.record import TrialResult

__all__ = ["DONE_TAG", "SyncReport", "Tracker", "TrackingConfig", "TrackingError", "default_uri", "ui_command"]

DONE_TAG = "harness.logged"
_REMOTE_SCHEMES = ("http://", "https://", "databricks")


@dataclass(frozen=True)
class TrackingConfig:
    """Where trials go. uri None → sqlite in runs_dir; artifact_root None → runs_dir/mlflow-artifacts
    for a local backend (a remote server keeps its own artifact store). Each matrix gets a folder."""

    uri: str | None = None
    artifact_root: str | None = None
    enabled: bool = True


@dataclass(frozen=True)
class SyncReport:
    """What `Tracker.sync` did: trials logged (or completed), already logged, and what failed."""

    logged: int = 0
    skipped: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)


def default_uri(runs_dir: Path) -> str:
    """The sqlite database beside the store (4 slashes: an absolute path)."""
    return f"sqlite:///{runs_dir.resolve()}/mlflow.db"


def ui_command(runs_dir: Path, host: str = "127.0.0.1", port: int = 5000, uri: str | None = None) -> list[str]:
    """argv of the MLflow UI over the store's tracking database (run it without a shell). One
    worker: a local UI needs no more, and it starts about three times faster."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri or default_uri(runs_dir),
            "--host", host, "--port", str(port), "--workers", "1"]


class Tracker:
    """The one MLflow writer of a store. Caches the client, experiment ids and arm run ids."""

    def __init__(self, config: TrackingConfig, runs_dir: Path):
        self.config, self.runs_dir = config, runs_dir
        self.uri = config.uri or default_uri(runs_dir)
        self._mlflow = MlflowWriter(self.uri, db_dir=None if config.uri else runs_dir)
        self._arm_runs: dict[tuple[str, str], str] = {}

    @property
    def client(self):
        """The MlflowClient in use (created on first use)."""
        return self._mlflow.client

    def log_trial(self, result: TrialResult, trial_dir: Path) -> str | None:
        """Log one trial from its store directory and refresh its arm's summary; returns the trial's
        MLflow run id, or None when tracking is disabled. Idempotent. Raises TrackingError."""
        if not self.config.enabled:
            return None
        with self._mlflow.errors(f"{result.matrix}/{result.arm_id}/{result.trial}"):
            exp = self._experiment(result.matrix)
            arm_run = self._arm_run(exp, result.matrix, result.arm_id, result.label, result.levels)
            run = self._mlflow.find(exp, _trial_tags(result.arm_id, result.trial))
            run_id = self._log_trial(exp, arm_run, result, trial_dir, run)
            self._refresh_arm(exp, result.arm_id, arm_run)
        return run_id

    def sync(self, matrix_dir: Path) -> SyncReport:
        """Feed every result.json under matrix_dir to MLflow. Trials already logged with the same
        record are skipped; incomplete ones are completed. A bad file or a refused trial lands in
        `failed` and the others go on; not reaching the experiment at all raises TrackingError."""
        if not self.config.enabled:
            return SyncReport()
        matrix, failed, logged, skipped = matrix_dir.name, [], 0, 0
        if not matrix_dir.is_dir():
            raise TrackingError(matrix, f"no such matrix directory: {matrix_dir}")
        arms = _read_arms(matrix_dir, failed)
        with self._mlflow.errors(matrix):
            exp = self._experiment(matrix)
            trials = {}  # (arm_id, trial) -> run: one search for the whole campaign
            for run in self._mlflow.search(exp, {"harness.kind": "trial"}):
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
                with self._mlflow.errors(f"{matrix}/{result.arm_id}/{result.trial}"):
                    arm_run = self._arm_run(exp, matrix, result.arm_id, label, levels)
                    self._log_trial(exp, arm_run, result, path.parent, run)
                logged += 1
                touched.add(result.arm_id)
            except TrackingError as e:
                failed.append((path, str(e)))
        for arm_id in sorted(touched):
            try:
                with self._mlflow.errors(f"{matrix}/{arm_id}"):
                    if arm_id in arms:
                        self._arm_run(exp, matrix, arm_id, *arms[arm_id])
                    if (matrix, arm_id) in self._arm_runs:
                        self._refresh_arm(exp, arm_id, self._arm_runs[(matrix, arm_id)])
            except TrackingError as e:
                failed.append((matrix_dir / arm_id, str(e)))
        return SyncReport(logged, skipped, failed)

    def _experiment(self, matrix: str) -> str:
        root = self.config.artifact_root
        if root is None:
            loc = None if self.uri.startswith(_REMOTE_SCHEMES) else (self.runs_dir / "mlflow-artifacts" / matrix)
        else:
            loc = f"{root.rstrip('/')}/{matrix}" if "://" in root else Path(root) / matrix
        return self._mlflow.experiment(matrix, loc.resolve().as_uri() if isinstance(loc, Path) else loc)

    def _arm_run(self, exp: str, matrix: str, arm_id: str, label: str, levels: Mapping[str, str]) -> str:
        if (matrix, arm_id) in self._arm_runs:
            return self._arm_runs[(matrix, arm_id)]
        name = f"{label} {arm_id}"
        run = self._mlflow.find(exp, {"harness.kind": "arm", "harness.arm_id": arm_id})
        if run is None:
            run = self.client.create_run(exp, run_name=name, tags={
                "harness.kind": "arm", "harness.arm_id": arm_id, "harness.matrix": matrix})
        elif run.info.run_name != name:
            self.client.update_run(run.info.run_id, name=name)  # labels follow the newest arms.json
        fields = tf.RunFields(params=tf.level_params(levels), tags={"label": label})
        self._mlflow.log_fields(run.info.run_id, fields, run.data)
        self._arm_runs[(matrix, arm_id)] = run.info.run_id
        return run.info.run_id

    def _log_trial(self, exp: str, arm_run: str, result: TrialResult, trial_dir: Path, run) -> str:
        rec = _Record(result)
        if run is not None and _is_done(run, rec):
            return run.info.run_id
        start_ms, end_ms = tf.run_times_ms(result)
        if run is None:
            run = self.client.create_run(exp, start_time=start_ms, run_name=f"{result.label}#{result.trial}", tags={
                "mlflow.parentRunId": arm_run, "harness.matrix": result.matrix,
                **_trial_tags(result.arm_id, result.trial)})
            have: dict[str, int | None] = {}
        else:
            have = self._mlflow.artifact_sizes(run.info.run_id)
        run_id = run.info.run_id
        fields = tf.trial_fields(result, rec.secrets)
        self._mlflow.log_fields(run_id, fields, run.data, end_ms, stale_tags=tf.TRIAL_TAG_KEYS)
        with tempfile.TemporaryDirectory(prefix="harness-mlflow-") as tmp:
            staged = Path(tmp, "result.json")
            staged.write_bytes(rec.data)
            files = [(staged, None)] + _trial_files(trial_dir, rec.secrets, Path(tmp))
            # result.json always: the run is here because its logged record differs or is missing.
            self._mlflow.upload(run_id, files, have, always=[staged])
        self.client.set_terminated(run_id, "FINISHED", end_time=end_ms)
        self.client.set_tag(run_id, DONE_TAG, rec.sha256)
        return run_id

    def _refresh_arm(self, exp: str, arm_id: str, arm_run: str) -> None:
        trials = self._mlflow.search(exp, {"harness.kind": "trial", "harness.arm_id": arm_id})
        summary = tf.arm_summary(r.data.tags for r in trials)
        run = self.client.get_run(arm_run)
        stale = run.data.tags.get("ready") != summary.tags["ready"] or any(
            run.data.metrics.get(k) != v for k, v in summary.metrics.items())
        if stale or run.info.status != "FINISHED":
            # Every summary metric at step n, so that ready_k over n plots as the campaign grows.
            self._mlflow.log_fields(arm_run, summary, step=int(summary.metrics["n"]))
            self.client.set_terminated(arm_run, "FINISHED")


def _trial_tags(arm_id: str, trial: int) -> dict[str, str]:
    return {"harness.kind": "trial", "harness.arm_id": arm_id, "harness.trial": str(trial)}


class _Record:
    """The result.json that goes to MLflow, and its sha256 (the completion mark)."""

    def __init__(self, result: TrialResult):
        self.secrets = tf.Secrets.of(result)
        self.data = tf.redacted_record(result, self.secrets)
        self.sha256 = hashlib.sha256(self.data).hexdigest()


def _is_done(run, rec: _Record) -> bool:
    return run.info.status == "FINISHED" and run.data.tags.get(DONE_TAG) == rec.sha256


def _trial_files(trial_dir: Path, secrets: tf.Secrets, tmp: Path) -> list[tuple[Path, str | None]]:
    """server.log and patches/*.diff as (file, artifact folder); scrubbed copies if there are secrets."""
    files = [(trial_dir / "server.log", None)] + [(p, "patches") for p in sorted(trial_dir.glob("patches/*.diff"))]
    out = []
    for src, dest in files:
        if src.is_file():
            out.append((_scrubbed_copy(src, tmp / (dest or "") / src.name, secrets) if secrets.values else src, dest))
    return out


def _scrubbed_copy(src: Path, dst: Path, secrets: tf.Secrets) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with src.open(encoding="utf-8", errors="replace") as fin, dst.open("w", encoding="utf-8") as fout:
        for line in fin:
            fout.write(secrets.scrub(line))
    return dst


def _load(path: Path, matrix: str) -> TrialResult:
    d = json.loads(path.read_text())
    if not isinstance(d, dict):
        raise TypeError(f"expected a JSON object, got {type(d).__name__}")
    result = TrialResult.from_dict(d)
    where = (matrix, path.parent.parent.name, path.parent.name)
    if where != (result.matrix, result.arm_id, str(result.trial)):
        raise ValueError(f"record says {result.matrix}/{result.arm_id}/{result.trial} but lies at {'/'.join(where)}")
    return result


def _read_arms(matrix_dir: Path, failed: list) -> dict[str, tuple[str, dict[str, str]]]:
    """arm_id → (label, levels) from arms.json; {} when absent, and a `failed` entry when unreadable."""
    path = matrix_dir / "arms.json"
    if not path.exists():
        return {}
    try:
        return {a["arm_id"]: (a["label"], dict(a.get("levels", {}))) for a in json.loads(path.read_text())["arms"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        failed.append((path, f"unreadable arms.json: {type(e).__name__}: {e}; labels taken from the results"))
        return {}
