"""One trial: prepare the source, start the server, classify, stop, record. The one place that maps
launch errors to outcomes; a failed launch is data, never an exception."""
from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from harness import __version__
from harness.adapters.engines import LaunchContext, get_engine
from harness.adapters.files import atomic_write
from harness.adapters.server import LaunchSpec, ReadyProbe, Server, ServerRun
from harness.adapters.source.armtree import ArmTree, TreeSpec, patch_specs, prepare_tree
from harness.adapters.source.build import BuildFailed
from harness.adapters.source.caches import jit_cache_env, trial_tmpdir
from harness.adapters.source.importcheck import check_imports
from harness.adapters.store import LOG, Store
from harness.core.arms import Arm
from harness.core.classify import Classification, LogClassifier
from harness.core.matrix import CachePolicy, Matrix, Package
from harness.core.outcome import Outcome
from harness.core.record import Ladder, SourceRecord, StopRecord, TrialResult
from harness.core.redact import argv_secrets, is_secret, redact_argv, redact_env
from harness.errors import InfraError, PatchFailed, SourceError


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial needs; plain data, so an executor can ship it elsewhere."""

    matrix: Matrix
    arm: Arm
    k: int
    runs_dir: Path
    source_top: Path | None = None
    base_sha: str | None = None


@functools.lru_cache(maxsize=8)
def gpu_names(visible: str | None = None) -> str | None:
    """"8× NVIDIA B300" from nvidia-smi (or "1× NVIDIA H200, 1× NVIDIA H100"): the GPUs a server
    with CUDA_VISIBLE_DEVICES=visible sees (indices or UUIDs; None: all). None without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=index,uuid,name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    wanted = None if visible is None else {v.strip() for v in visible.split(",") if v.strip()}
    names: Counter[str] = Counter()
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and (wanted is None or parts[0] in wanted or parts[1] in wanted):
            names[parts[2]] += 1
    return ", ".join(f"{n}× {name}" for name, n in names.items()) or None


def host_info(env: dict[str, str] | None = None) -> dict[str, str]:
    """Where the trial ran; the GPUs as the server's env (CUDA_VISIBLE_DEVICES) shows them."""
    info = {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "python": platform.python_version(), "harness": __version__}
    gpus = gpu_names({**os.environ, **(env or {})}.get("CUDA_VISIBLE_DEVICES"))
    if gpus:
        info["gpus"] = gpus
    return info


def free_port(host: str) -> int:
    """A port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port(host: str, port: int) -> None:
    """Preflight: the port must be free, or the trial would probe someone else's server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise InfraError(f"port {host}:{port} is in use ({exc.strerror})") from None


def _prepare_source(spec: TrialSpec, trial_dir: Path) -> ArmTree | None:
    """The arm's tree (worktree or overlay, built if asked); its applied diffs, the files a patch
    changed outside an overlay's package, and the build log are copied into the trial folder."""
    t = spec.matrix.target
    if t.source is None or spec.source_top is None or spec.base_sha is None:
        return None
    tree_spec = TreeSpec(
        source=t.source, top=spec.source_top, base=spec.base_sha,
        patches=tuple(patch_specs(spec.arm.patches, Path(spec.matrix.file).parent, file=spec.matrix.file)),
        runs_dir=spec.runs_dir, build=t.build, python=t.python or sys.executable,
        build_env={**os.environ, **t.env}, build_keyed_env=dict(t.env), build_timeout_s=t.build_timeout_s)
    try:
        tree = prepare_tree(tree_spec)
    except BuildFailed as exc:
        if exc.log.is_file():
            shutil.copyfile(exc.log, trial_dir / "build.log")
        raise
    prepared = tree.prepared
    if prepared.applied_diffs:
        (trial_dir / "patches").mkdir(exist_ok=True)
        for d in prepared.applied_diffs:
            shutil.copyfile(d, trial_dir / "patches" / d.name)
    if prepared.skipped:
        lines = [f"{name}: {path}" for name, paths in prepared.skipped.items() for path in paths]
        (trial_dir / "patches" / "not_applied.txt").write_text(
            "files outside the package, not applied to the overlay:\n" + "\n".join(lines) + "\n")
    if tree.build is not None and tree.build.log.is_file():
        shutil.copyfile(tree.build.log, trial_dir / "build.log")
    return tree


def _cache_dir(spec: TrialSpec, store: Store, trial_dir: Path) -> Path | None:
    """The folder the trial's JIT caches go to, by target.cache; None = the user's own (shared)."""
    policy = spec.matrix.target.cache
    if policy is CachePolicy.SHARED:
        return None
    folder = store.root / spec.arm.arm_id / "cache" if policy is CachePolicy.PER_ARM else trial_dir / "cache"
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()   # absolute: the server runs in its tree, not here


def _cache_env(engine, folder: Path | None) -> dict[str, str]:
    if folder is None:
        return {}
    env = {**jit_cache_env(folder), **engine.cache_env(folder)}
    for value in env.values():
        if Path(value).is_relative_to(folder):
            Path(value).mkdir(parents=True, exist_ok=True)
    return env


def _environment(spec: TrialSpec, tree: ArmTree | None, engine_cache: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the child's full env, the part the harness set — what gets recorded). PYTHONPATH: an
    overlay first, then target.pythonpath (in the worktree, or beside the matrix), then the arm's
    own PYTHONPATH, then the inherited one."""
    t = spec.matrix.target
    set_env = {**engine_cache, **spec.arm.env}
    entries = []
    overlay = isinstance(t.source, Package) and tree is not None
    if overlay:
        entries.append(str(tree.prepared.path))
    if t.pythonpath:
        root = tree.prepared.path if tree is not None and not overlay else Path(spec.matrix.file).parent
        entries += [str((root / p).resolve()) for p in t.pythonpath]
    if entries:
        own = [p for p in spec.arm.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        set_env["PYTHONPATH"] = os.pathsep.join(entries + own + inherited)
    set_env.setdefault("PYTHONUNBUFFERED", "1")
    return {**os.environ, **set_env}, set_env


def outcome_of(run: ServerRun, seen: Classification) -> Outcome:
    """Map how the server ended plus what its log says to the trial's outcome.

    A fatal line seen while streaming names the class (the classifier's final precedence picks the
    root cause among everything read). Without one, the server's state decides: a log that merely
    stops mid-capture reads as HANG to the classifier, but here we know whether it went quiet
    (HANG), ran out of time (TIMEOUT) or exited."""
    if run.state == "ready":
        return Outcome.READY
    if run.fatal is not None:
        return seen.outcome if seen.outcome not in (None, Outcome.READY) else run.fatal
    if run.state == "hang":
        return Outcome.HANG
    if run.state == "timeout":
        return Outcome.TIMEOUT
    if run.stop is not None and run.stop.signal == "SIGSEGV":
        return Outcome.SEGFAULT
    return Outcome.OTHER


def run_trial(spec: TrialSpec, store: Store) -> TrialResult:
    """Run one trial and write its result.json; never raises for a failed launch."""
    trial_dir = store.fresh_trial_dir(spec.arm.arm_id, spec.k)
    t, arm = spec.matrix.target, spec.arm
    engine = get_engine(t.engine)
    base = TrialResult(
        matrix=spec.matrix.name, arm_id=arm.arm_id, label=arm.label, levels=dict(arm.levels), trial=spec.k,
        outcome=Outcome.HARNESS_ERROR, launch_id=uuid.uuid4().hex, engine=t.engine, model=arm.model,
        tp=arm.tp, dp=arm.dp, ep=arm.ep,
        started_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        host=host_info(dict(arm.env)),
        source=SourceRecord(repo=str(spec.source_top) if spec.source_top else None,
                            ref=getattr(t.source, "ref", None), base_sha=spec.base_sha))
    t0 = time.monotonic()
    try:
        result = _launch(spec, store, trial_dir, engine, base, t0)
    except PatchFailed as exc:
        result = replace(base, outcome=Outcome.PATCH_FAILED, detail=str(exc), duration_s=time.monotonic() - t0)
    except InfraError as exc:
        result = replace(base, outcome=Outcome.INFRA, detail=str(exc), duration_s=time.monotonic() - t0)
    except SourceError as exc:
        result = replace(base, outcome=Outcome.HARNESS_ERROR, detail=str(exc), duration_s=time.monotonic() - t0)
    except Exception:  # noqa: BLE001 - a harness bug must not stop the matrix; the traceback is kept
        result = replace(base, outcome=Outcome.HARNESS_ERROR, detail=traceback.format_exc(),
                         duration_s=time.monotonic() - t0)
    if t.cache is CachePolicy.PER_TRIAL:
        # A cold cache cannot serve another trial; JIT caches run to gigabytes.
        shutil.rmtree(trial_dir / "cache", ignore_errors=True)
    store.write_result(result)
    return result


def _launch(spec: TrialSpec, store: Store, trial_dir: Path, engine, base: TrialResult, t0: float) -> TrialResult:
    t, arm = spec.matrix.target, spec.arm
    tree = _prepare_source(spec, trial_dir)
    if tree is not None:
        base = replace(base, source=replace(tree.prepared.record, repo=str(spec.source_top)))
    worktree = tree.prepared.path if tree else None
    port = t.port or free_port(t.host)
    check_port(t.host, port)
    cache_dir = _cache_dir(spec, store, trial_dir)
    isolation = _cache_env(engine, cache_dir)
    if cache_dir is not None:   # per trial either way: engines put sockets and scratch files there
        isolation["TMPDIR"] = str(trial_tmpdir(store.root, trial_dir))
    env, set_env = _environment(spec, tree, isolation)
    python = t.python or sys.executable
    ctx = LaunchContext(python=python, host=t.host, port=port, model=arm.model, tp=arm.tp, dp=arm.dp, ep=arm.ep,
                        args=arm.args, command=t.command, worktree=worktree)
    argv = engine.argv(ctx)
    config = {**arm.launch_key(), "args": redact_argv(arm.args, env), "env": redact_env(arm.env)}
    base = replace(base, argv=tuple(redact_argv(argv, env)), env=redact_env(set_env), config=config, port=port)
    cwd = worktree or Path.cwd()
    if tree is not None and tree.prepared.record.touched:
        # Before the launch: a server that would run other code than the arm claims is no data.
        check = check_imports(python, env, cwd, tree.prepared.path, tree.prepared.record.touched)
        atomic_write(trial_dir / "import_check.json", json.dumps(check.to_dict(), indent=1).encode())
        if check.mismatches:
            return replace(base, outcome=Outcome.PATCH_FAILED, detail=check.detail(), duration_s=time.monotonic() - t0)
    ready = engine.ready(t.ready)
    classifier = LogClassifier(engine.dialect(), ready_marker=ready.log_marker)
    launch = LaunchSpec(
        argv=tuple(argv), env=env, cwd=cwd, log_path=trial_dir / LOG, host=t.host, port=port,
        probe=ReadyProbe(http_path=ready.http_path, log_marker=ready.log_marker is not None or ready.http_path is None,
                         require_both=ready.require_both, interval_s=ready.interval_s,
                         # The engine's own test follows a 2xx of the HTTP path; without one it has no turn.
                         check=engine.ready_hook(ctx) if ready.http_path is not None else None),
        startup_timeout_s=t.startup_timeout_s, quiet_timeout_s=t.quiet_timeout_s,
        fatal_grace_s=t.fatal_grace_s, stop_timeout_s=t.stop_timeout_s,
        secrets=tuple(v for v in [*(v for k, v in env.items() if is_secret(k)), *argv_secrets(argv)] if len(v) >= 4))
    with Server(launch, classifier) as server:
        run = server.wait_ready()
        stop = server.stop()
    run = replace(run, stop=stop)
    seen = classifier.result()
    outcome = outcome_of(run, seen)
    return replace(
        base, outcome=outcome,
        first_error_line=seen.first_error_line if outcome is not Outcome.READY else None,
        failing_rank=seen.failing_rank, signature=_signature(outcome, seen, run, spec.matrix.target),
        ready_line=seen.ready_line,
        ladder=Ladder(seen.shapes_captured, seen.shapes_total, seen.capture_s, seen.failing_bs),
        startup_s=run.ready_s if outcome is Outcome.READY else None, verdict_s=run.verdict_s,
        duration_s=time.monotonic() - t0, stop=stop or StopRecord(),
        detail=None if outcome is Outcome.READY else _detail(run))


def _signature(outcome: Outcome, seen: Classification, run: ServerRun, t) -> str | None:
    """The classifier's signature when it named this outcome; else one from how the server ended."""
    if outcome is Outcome.READY:
        return None
    if seen.outcome is outcome and seen.signature:
        return seen.signature
    if outcome is Outcome.HANG:
        return f"HANG:no output for {t.quiet_timeout_s:g} s"
    if outcome is Outcome.TIMEOUT:
        return f"TIMEOUT:not ready after {t.startup_timeout_s:g} s"
    if run.stop is not None and run.stop.signal:
        return f"{outcome.value}:killed by {run.stop.signal}"
    return f"{outcome.value}:exited with code {run.exit_code}"


def _detail(run: ServerRun) -> str:
    code = f", exit code {run.exit_code}" if run.exit_code is not None else ""
    return f"server state {run.state}{code}"
