"""Tracking against a real MLflow: sqlite under tmp_path, and one real `mlflow server`."""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from harness.adapters.mlflow_server import MlflowServer, group_alive
from harness.adapters.tracking import DONE_TAG, SyncReport, Tracker, TrackingConfig, TrackingError, ui_command
from harness.core.outcome import Outcome
from harness.core.record import Ladder, PatchRecord, SourceRecord, TrialResult

MATRIX = "four_arm"
T0 = "2025-01-02T03:04:05+00:00"
T0_MS = 1735787045000


@pytest.fixture(autouse=True)
def _no_telemetry(monkeypatch):
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


def make_result(arm_id="arm0a1b", label="A", k=0, outcome=Outcome.READY, levels=None, **kw) -> TrialResult:
    ready = outcome is Outcome.READY
    base = dict(
        matrix=MATRIX, arm_id=arm_id, label=label, levels=levels or {"pr32467": "on", "pr33795": "off"}, trial=k,
        outcome=outcome, engine="sglang", model="org/model", tp=8, dp=1, ep=1, argv=("python", "-m", "sglang"),
        env={"SGLANG_MODE": "compact"}, started_at=T0, startup_s=12.5 if ready else None, duration_s=30.0,
        verdict_s=12.5, ladder=Ladder(shapes_captured=36, shapes_total=36, capture_s=4.25),
        source=SourceRecord(repo="/src/sglang", ref="v0.5", base_sha="deadbeef" * 5,
                            patches=(PatchRecord("pr32467", "a" * 64),)))
    base.update(kw)
    return TrialResult(**base)


def write_trial(runs_dir: Path, result: TrialResult, log="server up\nREADY\n", patches=("pr32467",)) -> Path:
    d = runs_dir / result.matrix / result.arm_id / str(result.trial)
    (d / "patches").mkdir(parents=True, exist_ok=True)
    (d / "result.json").write_text(json.dumps(result.to_dict()))
    (d / "server.log").write_text(log)
    for p in patches:
        (d / "patches" / f"{p}.diff").write_text(f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-{p}\n+fixed\n")
    return d


def write_arms(runs_dir: Path, arms: list[tuple[str, str]]) -> None:
    body = {"arms": [{"arm_id": a, "label": lab, "levels": {"pr32467": lab.lower()}} for a, lab in arms]}
    (runs_dir / MATRIX / "arms.json").write_text(json.dumps(body))


@pytest.fixture(scope="session")
def empty_db(tmp_path_factory) -> bytes:
    """A migrated, empty mlflow.db: creating one costs ~3 s, copying it nothing."""
    d = tmp_path_factory.mktemp("template")
    Tracker(TrackingConfig(), d).client.search_experiments()
    return (d / "mlflow.db").read_bytes()


@pytest.fixture
def runs_dir(tmp_path, empty_db) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    (d / "mlflow.db").write_bytes(empty_db)
    return d


@pytest.fixture
def tracker(runs_dir) -> Tracker:
    return Tracker(TrackingConfig(), runs_dir)


def all_runs(client: MlflowClient, name=MATRIX):
    exp = client.get_experiment_by_name(name)
    return client.search_runs([exp.experiment_id], max_results=1000)


def kind(runs, k):
    return [r for r in runs if r.data.tags.get("harness.kind") == k]


def artifact_paths(client, run_id):
    out = []
    for i in client.list_artifacts(run_id):
        out += [j.path for j in client.list_artifacts(run_id, i.path)] if i.is_dir else [i.path]
    return sorted(out)


def test_log_trial_writes_arm_and_trial_runs(tracker, runs_dir):
    r = make_result()
    run_id = tracker.log_trial(r, write_trial(runs_dir, r))
    client = MlflowClient(tracker.uri)
    assert tracker.uri == f"sqlite:///{runs_dir.resolve()}/mlflow.db"
    exp = client.get_experiment_by_name(MATRIX)
    assert exp.artifact_location == (runs_dir / "mlflow-artifacts" / MATRIX).resolve().as_uri()
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"   # a classic experiment in the UI
    runs = all_runs(client)
    (campaign,), (arm,), (trial,) = kind(runs, "campaign"), kind(runs, "arm"), kind(runs, "trial")
    assert trial.info.run_id == run_id
    assert campaign.info.run_name == "campaign four_arm" and "mlflow.parentRunId" not in campaign.data.tags
    assert arm.info.run_name == "A arm0a1b" and arm.data.tags["harness.arm_id"] == "arm0a1b"
    assert arm.data.tags["mlflow.parentRunId"] == campaign.info.run_id
    assert arm.data.params == {"level.pr32467": "on", "level.pr33795": "off"}
    assert arm.data.metrics == {}   # the arm's numbers come from the report (publish), never from a partial count
    assert arm.info.start_time == T0_MS
    assert trial.info.run_name == "A#0" and trial.data.tags["mlflow.parentRunId"] == arm.info.run_id
    assert trial.data.tags["harness.trial"] == "0" and trial.data.tags["harness.arm_id"] == "arm0a1b"
    assert trial.data.tags["harness.launch_id"] == "started:" + T0   # a record from before launch ids
    assert trial.data.params == {"level.pr32467": "on", "level.pr33795": "off", "engine": "sglang",
                                 "model": "org/model", "tp": "8", "dp": "1", "ep": "1", "base_sha": "deadbeef" * 5,
                                 "patch.0.pr32467": "a" * 64}
    assert trial.data.metrics == {"ready": 1.0, "startup_s": 12.5, "capture_s": 4.25, "shapes_captured": 36.0,
                                  "shapes_total": 36.0, "duration_s": 30.0, "verdict_s": 12.5}
    tags = trial.data.tags
    assert (tags["outcome"], tags["label"], tags["harness.counts"]) == ("READY", "A", "true")
    assert "signature" not in tags and "first_error_line" not in tags
    assert trial.info.status == "FINISHED"
    assert (trial.info.start_time, trial.info.end_time) == (T0_MS, T0_MS + 30_000)
    assert artifact_paths(client, run_id) == ["patches/pr32467.diff", "result.json", "server.log"]
    logged = json.loads(Path(client.download_artifacts(run_id, "result.json", str(runs_dir.parent))).read_text())
    assert TrialResult.from_dict(logged) == r


def test_failed_trial_tags_truncated_visibly(tracker, runs_dir):
    r = make_result(outcome=Outcome.IMA, signature="IMA|illegal memory access|k", failing_rank="TP3",
                    first_error_line="CUDA error: an illegal memory access " + "x" * 6000,
                    ladder=Ladder(shapes_captured=12, shapes_total=36, failing_bs=96))
    run = MlflowClient(tracker.uri).get_run(tracker.log_trial(r, write_trial(runs_dir, r)))
    tags = run.data.tags
    assert (tags["outcome"], tags["failing_bs"], tags["failing_rank"]) == ("IMA", "96", "TP3")
    assert tags["signature"] == "IMA|illegal memory access|k"
    assert len(tags["first_error_line"]) == 5000 and tags["first_error_line"].endswith("[truncated]")
    assert tags["first_error_line"].startswith("CUDA error: an illegal memory access")
    assert run.data.metrics["ready"] == 0.0 and "startup_s" not in run.data.metrics and "capture_s" not in run.data.metrics


def test_logging_twice_makes_no_duplicates_and_no_reupload(tracker, runs_dir):
    r = make_result()
    d = write_trial(runs_dir, r)
    first = tracker.log_trial(r, d)
    art = runs_dir / "mlflow-artifacts" / MATRIX / first / "artifacts"
    files = [p for p in art.rglob("*") if p.is_file()]
    assert len(files) == 3
    for p in files:  # same size, other bytes: an upload would show (copy2 keeps mtimes, so not those)
        p.write_bytes(b"Z" * p.stat().st_size)
    again = Tracker(TrackingConfig(), runs_dir)  # a fresh process: nothing cached
    assert again.log_trial(r, d) == first and tracker.log_trial(r, d) == first
    assert all(set(p.read_bytes()) == {ord("Z")} for p in files)
    runs = all_runs(MlflowClient(tracker.uri))
    assert len(kind(runs, "campaign")) == 1 and len(kind(runs, "arm")) == 1 and len(kind(runs, "trial")) == 1


def test_relogging_a_reclassified_trial_updates_tags_not_runs(tracker, runs_dir):
    r = make_result(outcome=Outcome.OTHER, signature="OTHER|x")
    d = write_trial(runs_dir, r)
    run_id = tracker.log_trial(r, d)
    r2 = make_result(outcome=Outcome.HANG)  # no signature any more
    assert tracker.log_trial(r2, d) == run_id
    run = MlflowClient(tracker.uri).get_run(run_id)
    assert run.data.tags["outcome"] == "HANG" and "signature" not in run.data.tags
    assert len(kind(all_runs(MlflowClient(tracker.uri)), "trial")) == 1


def test_changed_param_is_a_tracking_error_naming_the_trial(tracker, runs_dir):
    r = make_result()
    d = write_trial(runs_dir, r)
    tracker.log_trial(r, d)
    with pytest.raises(TrackingError, match=r"four_arm/arm0a1b/0: .*model.*org/other"):
        tracker.log_trial(make_result(model="org/other", duration_s=31.0), d)


def test_sync_two_arms_three_trials_is_idempotent(tracker, runs_dir):
    for arm_id, label in (("aaa111", "A"), ("bbb222", "B")):
        for k in range(3):
            write_trial(runs_dir, make_result(arm_id=arm_id, label=label, k=k, levels={"pr32467": label.lower()}))
    write_arms(runs_dir, [("aaa111", "A"), ("bbb222", "B")])
    assert tracker.sync(runs_dir / MATRIX) == SyncReport(logged=6, skipped=0, failed=[])
    assert Tracker(TrackingConfig(), runs_dir).sync(runs_dir / MATRIX) == SyncReport(logged=0, skipped=6, failed=[])
    runs = all_runs(MlflowClient(tracker.uri))
    assert len(runs) == 9   # the campaign, two arms, six trials
    for arm in kind(runs, "arm"):
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == arm.info.run_id]
        assert len(children) == 3
        assert arm.info.run_name in ("A aaa111", "B bbb222")
        assert {c.info.run_name for c in children} == {f"{arm.info.run_name[0]}#{k}" for k in range(3)}


def test_sync_reports_bad_files_and_logs_the_others(tracker, runs_dir):
    for k in range(3):
        write_trial(runs_dir, make_result(k=k))
    (runs_dir / MATRIX / "arm0a1b" / "1" / "result.json").write_text("{not json")
    bad = make_result(k=2).to_dict() | {"outcome": "EXPLODED"}
    (runs_dir / MATRIX / "arm0a1b" / "2" / "result.json").write_text(json.dumps(bad))
    moved = write_trial(runs_dir, make_result(k=3)) / "result.json"
    moved.write_text(json.dumps(make_result(k=7).to_dict()))  # record and directory disagree
    write_arms(runs_dir, [("arm0a1b", "A"), ("ccc333", "C")])  # C has no trial yet
    report = tracker.sync(runs_dir / MATRIX)
    assert (report.logged, report.skipped) == (1, 0)
    assert sorted(p.parent.name for p, _ in report.failed) == ["1", "2", "3"]
    assert all(msg.startswith("unreadable result") for _, msg in report.failed)
    runs = all_runs(MlflowClient(tracker.uri))
    assert len(kind(runs, "trial")) == 1
    assert {r.info.run_name for r in kind(runs, "arm")} == {"A arm0a1b", "C ccc333"}


def test_sync_completes_a_half_logged_trial(tracker, runs_dir):
    r = make_result()
    d = write_trial(runs_dir, r)
    run_id = tracker.log_trial(r, d)
    client = MlflowClient(tracker.uri)
    client.delete_tag(run_id, DONE_TAG)  # as if the writer died before the end
    art = runs_dir / "mlflow-artifacts" / MATRIX / run_id / "artifacts"
    (art / "server.log").unlink()
    patch = art / "patches" / "pr32467.diff"
    patch.write_bytes(b"Z" * patch.stat().st_size)
    assert tracker.sync(runs_dir / MATRIX) == SyncReport(logged=1, skipped=0, failed=[])
    assert set(patch.read_bytes()) == {ord("Z")}  # present with its size: not sent again
    assert (art / "server.log").read_text() == "server up\nREADY\n"
    assert artifact_paths(client, run_id) == ["patches/pr32467.diff", "result.json", "server.log"]
    assert len(kind(all_runs(client), "trial")) == 1 and client.get_run(run_id).data.tags[DONE_TAG]


def test_secrets_never_reach_mlflow(tracker, runs_dir):
    secret, key = "hf_secret123", "sk-live-987654"
    r = make_result(env={"HF_TOKEN": secret, "OPENAI_API_KEY": key, "SGLANG_MODE": "compact"},
                    argv=("python", "-m", "sglang", "--api-key", key, f"--hf-token={secret}"),
                    outcome=Outcome.OTHER, first_error_line=f"401 Unauthorized for token {secret}",
                    detail=f"auth failed with {key}", levels={"pr32467": "on", "hf_token": secret},
                    config={"env": {"HF_TOKEN": secret}, "nested": [{"db_password": "pw-xyz-1"}]})
    d = write_trial(runs_dir, r, log=f"loading with HF_TOKEN={secret}\nkey {key}\n")
    run_id = tracker.log_trial(r, d)
    stored = list(runs_dir.glob("mlflow.db*")) + [p for p in (runs_dir / "mlflow-artifacts").rglob("*") if p.is_file()]
    assert len(stored) >= 4
    for p in stored:
        data = p.read_bytes()
        for s in (secret, key, "pw-xyz-1"):
            assert s.encode() not in data, (p, s)
    run = MlflowClient(tracker.uri).get_run(run_id)
    assert run.data.params["level.hf_token"] == "***" and "***" in run.data.tags["first_error_line"]
    logged = json.loads((runs_dir / "mlflow-artifacts" / MATRIX / run_id / "artifacts" / "result.json").read_text())
    assert logged["env"]["HF_TOKEN"] == "***" and logged["argv"][4] == "***"


def test_first_log_creates_the_database(tmp_path):
    runs = tmp_path / "fresh" / "runs"  # does not exist yet
    r = make_result()
    d = write_trial(runs, r)
    (runs / "mlflow.db").unlink(missing_ok=True)
    assert Tracker(TrackingConfig(), runs).log_trial(r, d)
    assert (runs / "mlflow.db").stat().st_size > 0


def test_per_trial_logging_is_fast_after_the_first(tracker, runs_dir):
    results = [make_result(k=k) for k in range(11)]
    tracker.log_trial(results[0], write_trial(runs_dir, results[0]))  # creates and migrates the DB
    dirs = [write_trial(runs_dir, r) for r in results[1:]]
    t = time.perf_counter()
    for r, d in zip(results[1:], dirs, strict=True):
        tracker.log_trial(r, d)
    per_trial_s = (time.perf_counter() - t) / 10
    print(f"per-trial log: {per_trial_s * 1000:.0f} ms")
    assert per_trial_s < 0.5


def test_disabled_tracker_touches_nothing(runs_dir):
    r = make_result()
    d = write_trial(runs_dir, r)
    db = (runs_dir / "mlflow.db").read_bytes()
    t = Tracker(TrackingConfig(enabled=False), runs_dir)
    assert t.log_trial(r, d) is None and t.sync(runs_dir / MATRIX) == SyncReport()
    assert (runs_dir / "mlflow.db").read_bytes() == db and not (runs_dir / "mlflow-artifacts").exists()


def test_ui_command(tmp_path):
    argv = ui_command(tmp_path, port=5123)
    assert argv[1:] == ["-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{tmp_path.resolve()}/mlflow.db",
                        "--host", "127.0.0.1", "--port", "5123", "--workers", "1"]
    assert ui_command(tmp_path, uri="http://h:1")[5] == "http://h:1"


def test_logging_through_a_real_server(tmp_path, runs_dir):
    srv_dir = tmp_path / "srv"
    with MlflowServer(f"sqlite:///{srv_dir}/mlflow.db", srv_dir / "artifacts", srv_dir / "server.log") as srv:
        tracker = Tracker(TrackingConfig(uri=srv.url), runs_dir)
        for arm_id, label in (("aaa111", "A"), ("bbb222", "B")):
            for k in range(2):
                write_trial(runs_dir, make_result(arm_id=arm_id, label=label, k=k))
        r = make_result(arm_id="aaa111", k=0)
        run_id = tracker.log_trial(r, runs_dir / MATRIX / "aaa111" / "0")
        assert tracker.sync(runs_dir / MATRIX) == SyncReport(logged=3, skipped=1, failed=[])
        client = MlflowClient(srv.url)
        runs = all_runs(client)
        assert len(kind(runs, "arm")) == 2 and len(kind(runs, "trial")) == 4
        assert artifact_paths(client, run_id) == ["patches/pr32467.diff", "result.json", "server.log"]
        assert client.get_experiment_by_name(MATRIX).artifact_location.startswith("mlflow-artifacts:")
        pgid = srv.proc.pid
    assert list((srv_dir / "artifacts").rglob("server.log"))  # proxied into the server's folder
    assert srv.stopped.survivors == () and group_alive(pgid) == []


def test_unreachable_server_fails_fast_with_tracking_error(runs_dir, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    r = make_result()
    tracker = Tracker(TrackingConfig(uri=f"http://127.0.0.1:{port}"), runs_dir)
    t = time.monotonic()
    with pytest.raises(TrackingError, match=r"four_arm/arm0a1b/0: MlflowException.*127\.0\.0\.1") as e:
        tracker.log_trial(r, write_trial(runs_dir, r))
    assert time.monotonic() - t < 10 and e.value.key == "four_arm/arm0a1b/0"


def test_a_relaunch_gets_its_own_run_and_the_earlier_launch_leaves(tracker, runs_dir):
    ready = make_result(k=1, launch_id="launch1", started_at="2025-01-02T03:04:05.000+00:00", duration_s=400.0)
    first = tracker.log_trial(ready, write_trial(runs_dir, ready))
    ima = make_result(k=1, outcome=Outcome.IMA, launch_id="launch2", started_at="2025-01-02T04:00:00.250+00:00",
                      duration_s=1.4, startup_s=None, ladder=Ladder(shapes_total=36), signature="IMA|x")
    second = tracker.log_trial(ima, write_trial(runs_dir, ima))
    client = MlflowClient(tracker.uri)
    assert second != first
    assert client.get_run(first).info.lifecycle_stage == "deleted"
    run = client.get_run(second)
    # Only this launch's values: nothing left over from the READY launch, and its own 1.4 s.
    assert run.data.metrics == {"ready": 0.0, "shapes_total": 36.0, "duration_s": 1.4, "verdict_s": 12.5}
    assert run.data.tags["outcome"] == "IMA" and run.data.tags["harness.launch_id"] == "launch2"
    assert run.info.end_time - run.info.start_time == 1400
    assert [r.info.run_id for r in kind(all_runs(client), "trial")] == [second]


def test_sync_removes_runs_of_launches_no_longer_stored(tracker, runs_dir):
    for k in (1, 2, 3):
        write_trial(runs_dir, make_result(k=k, launch_id=f"old{k}"))
    assert tracker.sync(runs_dir / MATRIX) == SyncReport(logged=3, skipped=0, failed=[], removed=0)
    arm_dir = runs_dir / MATRIX / "arm0a1b"
    aside = runs_dir / MATRIX / ".superseded" / "20250101T000000.000000Z" / "arm0a1b"
    aside.mkdir(parents=True)
    (arm_dir / "3").rename(aside / "3")                       # moved out of the campaign (rerun=true)
    write_trial(runs_dir, make_result(k=1, launch_id="new1", outcome=Outcome.IMA))   # re-launched
    again = Tracker(TrackingConfig(), runs_dir)
    assert again.sync(runs_dir / MATRIX) == SyncReport(logged=1, skipped=1, failed=[], removed=2)
    trials = kind(all_runs(MlflowClient(tracker.uri)), "trial")
    assert sorted((r.data.tags["harness.trial"], r.data.tags["harness.launch_id"]) for r in trials) == [
        ("1", "new1"), ("2", "old2")]
    assert again.sync(runs_dir / MATRIX) == SyncReport(logged=0, skipped=2, failed=[], removed=0)


def test_sync_leaves_the_runs_of_an_unreadable_record_alone(tracker, runs_dir):
    write_trial(runs_dir, make_result(k=1, launch_id="l1"))
    tracker.sync(runs_dir / MATRIX)
    (runs_dir / MATRIX / "arm0a1b" / "1" / "result.json").write_text("{half")
    report = tracker.sync(runs_dir / MATRIX)
    assert (report.removed, len(report.failed)) == (0, 1)   # which launch is current there is unknown
    assert len(kind(all_runs(MlflowClient(tracker.uri)), "trial")) == 1
