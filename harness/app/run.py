"""Use case: run a matrix — expand, plan, resume, execute each trial, log, report."""
from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.adapters.engines import context_for, get_engine
from harness.adapters.engines.preflight import check_matrix, host_gpus
from harness.adapters.report import terminal_table
from harness.app.report import compute
from harness.adapters.store import Store
from harness.app.config import Settings
from harness.app.trial import TrialSpec, run_trial
from harness.app.tracking_writer import TrackingWriter
from harness.app.validate import check_programs, check_sources
from harness.core.arms import Arm, baseline_of, expand
from harness.core.matrix import Goal, Matrix
from harness.core.plan import TrialKey, adaptive_batch, order_trials, pending
from harness.core.record import TrialResult
from harness.core.redact import redact_env


@dataclass(frozen=True)
class RunReport:
    """What a run did."""

    total: int
    skipped: int
    ran: int
    store: Path
    tracking_errors: tuple[str, ...] = ()


def describe(matrix: Matrix, arms: list[Arm], console: Console) -> None:
    """The dry run: arms, the exact argv and env of each, the trial count."""
    engine = get_engine(matrix.target.engine)
    t = matrix.target
    st = matrix.stats
    upto = "up to " if st.adaptive else ""
    console.print(f"[bold]matrix {matrix.name}[/] ({matrix.file}): {len(arms)} arms × {upto}{matrix.repeats} repeats "
                  f"= {upto}{len(arms) * matrix.repeats} trials, schedule {matrix.schedule.value}")
    if st.adaptive:
        console.print(f"repeats: auto — a look every {st.batch} launch(es) per arm; each arm stops once "
                      + (f"its failure rate is bounded against {st.max_fail_rate:.2f}" if st.goal is Goal.FIX
                         else f"its comparisons are decided (α = {st.alpha:g}, margin ±{st.margin:g})"),
                      markup=False)
    for arm in arms:
        ctx = context_for(matrix, arm, t.python or sys.executable, t.port or "<free port>",
                          Path("<worktree>") if t.source else None)
        argv = engine.argv(ctx)
        console.print(f"\n[bold]{arm.label}[/] {arm.title}  id {arm.arm_id}")
        # Shown quoted for reading and copying; the harness itself never runs a shell.
        console.print(f"  argv: {shlex.join(argv)}", soft_wrap=True, markup=False)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in redact_env(dict(arm.env)).items())
        console.print(f"  env:  {env or '(none added)'}", soft_wrap=True, markup=False)
        if t.pythonpath:
            console.print(f"  PYTHONPATH: {', '.join(t.pythonpath)} (inside the arm's worktree)", markup=False)
        if arm.patches:
            console.print(f"  patches: {', '.join(p.name for p in arm.patches)}", markup=False)
    console.print(f"\n{upto}{len(arms) * matrix.repeats} trials; nothing launched (dry run).")


def _view(progress: Progress, current: str, matrix: Matrix, arms: list[Arm], results: list[TrialResult]) -> Group:
    legend = [{"arm_id": a.arm_id, "label": a.label, "levels": dict(a.levels)} for a in arms]
    table = terminal_table(compute(matrix, legend, results), title=f"{matrix.name}: READY k/n", arms=len(arms))
    return Group(progress, current, table)


def _batches(matrix: Matrix, arms: list[Arm], trials: list[TrialKey], store: Store, rerun: bool,
             seen: list[TrialResult]) -> Iterator[list[TrialKey]]:
    """Fixed repeats: one batch, the pending trials. repeats: auto: one look at a time, planned from
    the results so far (seen is updated by the caller as trials finish)."""
    if not matrix.stats.adaptive:
        yield trials if rerun else pending(trials, store.done())
        return
    base = baseline_of(matrix, arms)
    while batch := adaptive_batch(arms, seen, matrix, base.arm_id if base else None):
        yield batch


def run_matrix(matrix: Matrix, settings: Settings, console: Console) -> RunReport:
    """Run every pending trial of the matrix in schedule order; results land in the store first."""
    check_programs(matrix)
    # Flags the engine cannot take; arms needing more GPUs than this host shows (not in a dry run,
    # which may be prepared on a laptop for a cluster).
    check_matrix(matrix, None if settings.dry_run else host_gpus())
    source_top, base_sha = check_sources(matrix)
    arms = expand(matrix, base_sha)
    if settings.dry_run:
        describe(matrix, arms, console)
        return RunReport(total=len(arms) * matrix.repeats, skipped=0, ran=0, store=settings.runs_dir / matrix.name)
    store = Store(settings.runs_dir, matrix.name)
    st = matrix.stats
    # A later `harness report` must judge adaptive launches by the rule that stopped them.
    store.write_arms(arms, {"file": matrix.file, "description": matrix.description,
                            "adaptive": {"batch": st.batch, "max_repeats": st.max_repeats, "alpha": st.alpha,
                                         "margin": st.margin, "compare": st.compare.value, "goal": st.goal.value}
                            if st.adaptive else None})
    trials = order_trials(arms, matrix.repeats, matrix.schedule, matrix.seed)
    by_id = {a.arm_id: a for a in arms}
    writer = TrackingWriter(settings.runs_dir, settings.tracking_uri) if settings.tracking_enabled else None
    progress = Progress(TextColumn("trials" + (" (at most)" if matrix.stats.adaptive else "")), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    seen = [] if settings.rerun and matrix.stats.adaptive else [r for r in store.results() if r.arm_id in by_id]
    before = 0 if settings.rerun else len(seen)      # results kept from earlier runs
    task = progress.add_task("trials", total=len(trials), completed=before)
    live_on = console.is_terminal if settings.progress is None else settings.progress
    t0, ran = time.monotonic(), 0
    try:
        with Live(_view(progress, "", matrix, arms, seen), console=console, refresh_per_second=4,
                  transient=True) if live_on else _NoLive() as live:
            for batch in _batches(matrix, arms, trials, store, settings.rerun, seen):
                for key in batch:
                    arm = by_id[key.arm_id]
                    current = f"now: {arm.label} ({arm.title}) trial {key.k}/{matrix.repeats}"
                    live.update(_view(progress, current, matrix, arms, seen))
                    if not live_on:
                        console.print(current, markup=False)
                    result = run_trial(TrialSpec(matrix, arm, key.k, settings.runs_dir, source_top, base_sha), store)
                    ran += 1
                    if not live_on:
                        console.print(f"  {arm.label}#{key.k}: {result.outcome.value}"
                                      + (f" — {result.first_error_line}" if result.first_error_line else ""),
                                      markup=False)
                    seen[:] = [r for r in seen if (r.arm_id, r.trial) != (result.arm_id, result.trial)] + [result]
                    if writer is not None:
                        writer.submit(result, store.trial_dir(arm.arm_id, key.k))
                    progress.advance(task)
                    live.update(_view(progress, "", matrix, arms, seen))
    finally:
        # Also on Ctrl-C: what finished is logged before the harness exits.
        errors: tuple[str, ...] = ()
        if writer is not None:
            writer.close()
            errors = tuple(writer.errors)
    console.print(f"{ran} trials run, {before} already in the store, "
                  f"{time.monotonic() - t0:.1f} s", markup=False)
    return RunReport(total=len(trials), skipped=before if matrix.stats.adaptive else len(trials) - ran,
                     ran=ran, store=store.root, tracking_errors=errors)


class _NoLive:
    """Stands in for rich.Live when the output is not a terminal."""

    def __enter__(self) -> "_NoLive":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, *_: object) -> None:
        return None
