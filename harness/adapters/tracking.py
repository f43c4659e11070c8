"""MLflow tracking: the store's trials, fed to MLflow by one writer, and the campaign's report.

Layout: experiment = matrix (tagged a classic, non-GenAI experiment); a campaign run (tag
harness.kind=campaign) holding the report as artifacts; under it a run per arm (harness.kind=arm,
harness.arm_id) carrying the report's numbers; under each arm a run per launch of a trial
(harness.kind=trial, harness.arm_id, harness.trial, harness.launch_id). Runs are found by these
tags before being created, so logging is idempotent. A trial run is complete when its tag
harness.logged holds the sha256 of the result.json logged with it (set last, after the
artifacts): `sync` skips those, and completes the others. A trial run whose launch is no longer
in the store (re-launched, or moved out of the campaign by rerun=true) is deleted (soft), so the
experiment shows the live launches only.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from harness.adapters import tracking_dashboard as td
from harness.adapters import tracking_fields as tf
from harness.adapters.store import Store
from harness.adapters.tracking_mlflow import MlflowWriter, TrackingError
from harness.core.record import TrialResult
from harness.core.reportdata import ReportData
from harness.core.summary import ArmSummary

__all__ = ["DONE_TAG", "IN_CAMPAIGN_TAG", "LAUNCH_TAG", "SyncReport", "Tracker", "TrackingConfig", "TrackingError",
           "default_uri", "ui_command"]

DONE_TAG = "harness.logged"
LAUNCH_TAG = "harness.launch_id"
IN_CAMPAIGN_TAG = "harness.in_campaign"
_REMOTE_SCHEMES = ("http://", "https://", "databricks")
_TrialKey = tuple[str, str, str]   # (arm_id, trial, launch key), as tag values


@dataclass(frozen=True)
class TrackingConfig:
    """Where trials go. uri None → sqlite in runs_dir; artifact_root None → runs_dir/mlflow-artifacts
    for a local backend (a remote server keeps its own artifact store). Each matrix gets a folder."""

    uri: str | None = None
    artifact_root: str | None = None
    enabled: bool = True


@dataclass(frozen=True)
class SyncReport:
    """What `Tracker.sync` did: trials logged (or completed), already logged, runs of launches no
    longer stored that were deleted, and what failed."""

    logged: int = 0
    skipped: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    removed: int = 0


def default_uri(runs_dir: Path) -> str:
    """The sqlite database beside the store (4 slashes: an absolute path)."""
    return f"sqlite:///{runs_dir.resolve()}/mlflow.db"


def ui_command(runs_dir: Path, host: str = "127.0.0.1", port: int = 5000, uri: str | None = None) -> list[str]:
    """argv of the MLflow UI over the store's tracking database (run it without a shell). One
    worker: a local UI needs no more, and it starts about three times faster."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri or default_uri(runs_dir),
            "--host", host, "--port", str(port), "--workers", "1"]


class Tracker:
    """The one MLflow writer of a store. Caches the client, experiment ids and campaign/arm run ids."""

    def __init__(self, config: TrackingConfig, runs_dir: Path):
        self.config, self.runs_dir = config, runs_dir
        self.uri = config.uri or default_uri(runs_dir)
        self._mlflow = MlflowWriter(self.uri, db_dir=None if config.uri else runs_dir)
        self._campaigns: dict[str, str] = {}
        self._arm_runs: dict[tuple[str, str], str] = {}

    @property
    def client(self):
        """The MlflowClient in use (created on first use)."""
        return self._mlflow.client

    def log_trial(self, result: TrialResult, trial_dir: Path) -> str | None:
        """Log one launch from its store directory; returns its MLflow run id, or None when tracking
        is disabled. Idempotent. Runs of other launches of the same trial are deleted: this one,
        just stored, replaced them. Raises TrackingError."""
        if not self.config.enabled:
            return None
        with self._mlflow.errors(f"{result.matrix}/{result.arm_id}/{result.trial}"):
            exp = self._experiment(result.matrix)
            start_ms = tf.run_times_ms(result)[0]
            arm_run = self._arm_run(exp, result.matrix, result.arm_id, result.label, result.levels, start_ms)
            runs = self._mlflow.search(exp, _trial_tags(result.arm_id, result.trial))
            key = _key_of(result)
            run = _oldest([r for r in runs if _run_key(r) == key])
            run_id = self._log_trial(exp, arm_run, result, trial_dir, run)
            self._delete(r for r in runs if r.info.run_id != run_id)
        return run_id

    def sync(self, matrix_dir: Path) -> SyncReport:
        """Feed every result.json of the campaign under matrix_dir to MLflow, and delete the runs of
        launches the store no longer holds. Trials already logged with the same record are skipped;
        incomplete ones are completed. A bad file or a refused trial lands in `failed` and the
        others go on; not reaching the experiment at all raises TrackingError."""
        if not self.config.enabled:
            return SyncReport()
        matrix, failed, logged, skipped = matrix_dir.name, [], 0, 0
        if not matrix_dir.is_dir():
            raise TrackingError(matrix, f"no such matrix directory: {matrix_dir}")
        arms = _read_arms(matrix_dir, failed)
        with self._mlflow.errors(matrix):
            exp = self._experiment(matrix)
            runs = self._mlflow.search(exp, {"harness.kind": "trial"})   # one search for the whole campaign
        by_key: dict[_TrialKey, list] = {}
        for run in runs:
            by_key.setdefault(_run_key(run), []).append(run)
        live, unreadable = self._stored(matrix_dir, failed)
        kept: set[str] = set()
        for key, (result, path) in live.items():
            run = _oldest(by_key.get(key, []))
            if run is not None and _is_done(run, _Record(result)):
                skipped += 1
                kept.add(run.info.run_id)
                continue
            label, levels = arms.get(result.arm_id, (result.label, result.levels))
            try:
                with self._mlflow.errors(f"{matrix}/{result.arm_id}/{result.trial}"):
                    arm_run = self._arm_run(exp, matrix, result.arm_id, label, levels, tf.run_times_ms(result)[0])
                    kept.add(self._log_trial(exp, arm_run, result, path.parent, run))
                logged += 1
            except TrackingError as e:
                failed.append((path, str(e)))
                if run is not None:
                    kept.add(run.info.run_id)
        for arm_id, (label, levels) in arms.items():  # arms.json's arms get a run even before their first trial
            try:
                with self._mlflow.errors(f"{matrix}/{arm_id}"):
                    self._arm_run(exp, matrix, arm_id, label, levels, None)
            except TrackingError as e:
                failed.append((matrix_dir / arm_id, str(e)))
        with self._mlflow.errors(matrix):
            removed = self._delete(r for r in runs if r.info.run_id not in kept
                                   and (r.data.tags.get("harness.arm_id"), r.data.tags.get("harness.trial")) not in unreadable)
        return SyncReport(logged, skipped, failed, removed)

    def publish(self, data: ReportData, matrix_dir: Path, artifacts: Sequence[Path] = ()) -> None:
        """Show the campaign's report in MLflow: the campaign run (summary tags, a markdown
        description, the artifacts: the rendered report), each reported arm's run with exactly the
        report's numbers, each trial run tagged harness.in_campaign (true for the launches the
        report counts), runs of launches no longer stored deleted, the saved "arms" view of the
        runs table. Trials are not logged here (the writer or `sync` did). Raises TrackingError."""
        if not self.config.enabled:
            return
        matrix = data.matrix
        stored, unreadable = self._stored(matrix_dir, [])
        secrets = tf.Secrets(v for r, _ in stored.values() for v in tf.Secrets.of(r).values)
        counted = {_key_of(r) for r in data.results}
        with self._mlflow.errors(matrix):
            exp = self._experiment(matrix)
            self._view(exp, data)
            first_ms, last_ms = td.times_ms(data.results)
            campaign = self._campaign(exp, matrix, first_ms)
            runs = self._mlflow.search(exp, {"harness.kind": "trial"})
            by_arm: dict[str, list] = {}
            for run in runs:
                key = _run_key(run)
                if key in stored:
                    by_arm.setdefault(key[0], []).append(run)
                    flag = "true" if key in counted else "false"
                    if run.data.tags.get(IN_CAMPAIGN_TAG) != flag:
                        self.client.set_tag(run.info.run_id, IN_CAMPAIGN_TAG, flag)
            self._delete(r for r in runs if _run_key(r) not in stored and (_run_key(r)[0], _run_key(r)[1]) not in unreadable)
            for s in data.summaries:
                self._publish_arm(exp, matrix, s, data, secrets)
            reported = {s.arm_id for s in data.summaries}
            # An arm the report no longer shows and no stored launch of which is left: gone.
            gone = [r for r in self._mlflow.search(exp, {"harness.kind": "arm"})
                    if r.data.tags.get("harness.arm_id") not in reported and not by_arm.get(r.data.tags.get("harness.arm_id"))]
            self._delete(gone)
            self._arm_runs = {k: v for k, v in self._arm_runs.items() if v not in {r.info.run_id for r in gone}}
            fields = td.campaign_fields(data, secrets, len(stored))
            run = self.client.get_run(campaign)
            self._mlflow.log_fields(campaign, fields, run.data, stale_tags=("kept_not_counted",))
            with tempfile.TemporaryDirectory(prefix="harness-mlflow-") as tmp:
                files = [(_scrubbed_copy(p, Path(tmp) / p.name, secrets) if secrets.values else p, None)
                         for p in artifacts if p.is_file()]
                # Always sent: a report is small, and it changes with every run.
                self._mlflow.upload(campaign, files, {}, always=[f for f, _ in files])
            self.client.set_terminated(campaign, "FINISHED", end_time=last_ms)

    def experiment_id(self, matrix: str) -> str | None:
        """The matrix's experiment id, or None when it has none (nothing created)."""
        with self._mlflow.errors(matrix):
            exp = self.client.get_experiment_by_name(matrix)
        return exp.experiment_id if exp is not None and exp.lifecycle_stage == "active" else None

    def _experiment(self, matrix: str) -> str:
        root = self.config.artifact_root
        if root is None:
            loc = None if self.uri.startswith(_REMOTE_SCHEMES) else (self.runs_dir / "mlflow-artifacts" / matrix)
        else:
            loc = f"{root.rstrip('/')}/{matrix}" if "://" in root else Path(root) / matrix
        return self._mlflow.experiment(matrix, loc.resolve().as_uri() if isinstance(loc, Path) else loc,
                                       {"harness.matrix": matrix, td.KIND_TAG: td.KIND_CLASSIC})

    def _view(self, exp: str, data: ReportData) -> None:
        from mlflow.utils.time import get_current_time_millis
        value = td.view_tag(td.view_state(data), self._mlflow.experiment_tag(exp, td.VIEW_TAG), get_current_time_millis())
        if value is not None:
            self.client.set_experiment_tag(exp, td.VIEW_TAG, value)

    def _campaign(self, exp: str, matrix: str, start_ms: int | None) -> str:
        if matrix not in self._campaigns:
            run = self._mlflow.find(exp, {"harness.kind": "campaign"})
            if run is None:
                run = self.client.create_run(exp, start_time=start_ms, run_name=f"campaign {matrix}", tags={
                    "harness.kind": "campaign", "harness.matrix": matrix})
            self._campaigns[matrix] = run.info.run_id
        return self._campaigns[matrix]

    def _arm_run(self, exp: str, matrix: str, arm_id: str, label: str, levels: Mapping[str, str],
                 start_ms: int | None) -> str:
        if (matrix, arm_id) in self._arm_runs:
            return self._arm_runs[(matrix, arm_id)]
        campaign = self._campaign(exp, matrix, start_ms)
        name = f"{label} {arm_id}"
        run = self._mlflow.find(exp, {"harness.kind": "arm", "harness.arm_id": arm_id})
        if run is None:
            run = self.client.create_run(exp, start_time=start_ms, run_name=name, tags={
                "harness.kind": "arm", "harness.arm_id": arm_id, "harness.matrix": matrix,
                "mlflow.parentRunId": campaign})
        elif run.info.run_name != name:
            self.client.update_run(run.info.run_id, name=name)  # labels follow the newest arms.json
        tags = {"label": label, "mlflow.parentRunId": campaign}   # an arm run from before campaign runs joins it
        fields = tf.RunFields(params=tf.level_params(levels), tags=tags)
        self._mlflow.log_fields(run.info.run_id, fields, run.data)
        self._arm_runs[(matrix, arm_id)] = run.info.run_id
        return run.info.run_id

    def _publish_arm(self, exp: str, matrix: str, s: ArmSummary, data: ReportData, secrets: tf.Secrets) -> None:
        results = [r for r in data.results if r.arm_id == s.arm_id]
        arm_run = self._arm_run(exp, matrix, s.arm_id, s.label, s.levels, td.times_ms(results)[0])
        run = self.client.get_run(arm_run)
        fields = td.arm_fields(s, data, secrets)
        fields = tf.RunFields(metrics={**fields.metrics, **td.stale_metrics(run.data.metrics, fields.metrics)},
                              tags=fields.tags)
        # MLflow shows a metric's value at its highest step, and n may fall (rerun=true): each
        # publication that changes a number goes one step above all before it.
        step = max((m.step for m in self.client.get_metric_history(arm_run, "ready_k")), default=-1) + 1
        self._mlflow.log_fields(arm_run, fields, run.data, step=step, stale_tags=td.ARM_TAG_KEYS)
        self.client.set_terminated(arm_run, "FINISHED", end_time=td.times_ms(results)[1])

    def _log_trial(self, exp: str, arm_run: str, result: TrialResult, trial_dir: Path, run) -> str:
        rec = _Record(result)
        if run is not None and _is_done(run, rec):
            return run.info.run_id
        start_ms, end_ms = tf.run_times_ms(result)
        if run is None:
            run = self.client.create_run(exp, start_time=start_ms, run_name=f"{result.label}#{result.trial}", tags={
                "mlflow.parentRunId": arm_run, "harness.matrix": result.matrix,
                **_trial_tags(result.arm_id, result.trial), LAUNCH_TAG: td.launch_key(result)})
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

    def _stored(self, matrix_dir: Path, failed: list) -> tuple[dict[_TrialKey, tuple[TrialResult, Path]], set]:
        """The store's current launches by key, and the (arm_id, trial) whose record cannot be read
        (their runs are left alone: which launch is current there is unknown)."""
        live: dict[_TrialKey, tuple[TrialResult, Path]] = {}
        unreadable: set[tuple[str, str]] = set()
        for path in Store(matrix_dir.parent, matrix_dir.name).result_paths():
            try:
                result = _load(path, matrix_dir.name)
            except (OSError, ValueError, KeyError, TypeError) as e:
                failed.append((path, f"unreadable result: {type(e).__name__}: {e}"))
                unreadable.add((path.parent.parent.name, path.parent.name))
                continue
            live[_key_of(result)] = (result, path)
        return live, unreadable

    def _delete(self, runs: Iterable) -> int:
        n = 0
        for run in runs:
            self.client.delete_run(run.info.run_id)
            n += 1
        return n


def _trial_tags(arm_id: str, trial: int) -> dict[str, str]:
    return {"harness.kind": "trial", "harness.arm_id": arm_id, "harness.trial": str(trial)}


def _key_of(result: TrialResult) -> _TrialKey:
    return result.arm_id, str(result.trial), td.launch_key(result)


def _run_key(run) -> _TrialKey:
    tags = run.data.tags
    # A run from before launch ids has no LAUNCH_TAG: it matches no stored launch, so it is replaced.
    return tags.get("harness.arm_id", ""), tags.get("harness.trial", ""), tags.get(LAUNCH_TAG, "")


def _oldest(runs: Sequence):
    """The run to keep among runs of one launch (a crash may have left strays): the oldest."""
    return min(runs, key=lambda r: r.info.start_time) if runs else None


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
