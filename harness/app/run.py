"""Use case: run a matrix — expand, plan, resume, execute each trial, log, report."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.adapters.engines.preflight import host_gpus
from harness.adapters.report import terminal_table
from harness.app.report import compute
from harness.adapters.store import Store
from harness.app.config import Settings
from harness.app.trial import TrialSpec, run_trial
from harness.app.tracking_writer import TrackingWriter
from harness.app.preview import describe
from harness.app.validate import check_matrix_for_run, raise_problems
from harness.core.arms import Arm, baseline_of, expand
from harness.core.campaign import campaign_size, select
from harness.core.matrix import Matrix
from harness.core.plan import TrialKey, adaptive_batch, order_trials, pending
from harness.core.record import TrialResult
from harness.core.stored_rule import rule_settings


@dataclass(frozen=True)
class RunReport:
    """What a run did."""

    total: int
    skipped: int
    ran: int
    store: Path
    tracking_errors: tuple[str, ...] = ()


def _view(progress: Progress, current: str, matrix: Matrix, arms: list[Arm], results: list[TrialResult]) -> Group:
    legend = [{"arm_id": a.arm_id, "label": a.label, "levels": dict(a.levels)} for a in arms]
    table = terminal_table(compute(matrix, legend, results), title=f"{matrix.name}: READY k/n", arms=len(arms))
    return Group(progress, current, table)


def _batches(matrix: Matrix, arms: list[Arm], trials: list[TrialKey], store: Store,
             seen: list[TrialResult]) -> Iterator[list[TrialKey]]:
    """Fixed repeats: one batch, the pending trials. repeats: auto: one look at a time, planned from
    the results so far (seen is updated by the caller as trials finish)."""
    if not matrix.stats.adaptive:
        yield pending(trials, store.done())
        return
    base = baseline_of(matrix, arms)
    while batch := adaptive_batch(arms, seen, matrix, base.arm_id if base else None):
        yield batch


def run_matrix(matrix: Matrix, settings: Settings, console: Console) -> RunReport:
    """Run every pending trial of the matrix in schedule order; results land in the store first."""
    # Every check runs and reports all it finds: a dry run shows them (on a laptop preparing a
    # cluster run, the checkout, the engine's python or the GPUs may well be missing), a real run
    # refuses them together, before anything is written or launched.
    checked = check_matrix_for_run(matrix, dry_run=settings.dry_run, visible_gpus=host_gpus())
    if not settings.dry_run:
        raise_problems(matrix, checked.problems)
    source_top, base_sha = checked.top, checked.base
    arms = expand(matrix, base_sha)
    if settings.dry_run:
        describe(matrix, arms, console, checked)
        return RunReport(total=len(arms) * matrix.repeats, skipped=0, ran=0, store=settings.runs_dir / matrix.name)
    store = Store(settings.runs_dir, matrix.name)
    st = matrix.stats
    size = campaign_size(matrix)
    if settings.rerun:
        # A re-run replaces the arms' evidence: their earlier launches leave the campaign, kept aside.
        moved, where = store.supersede([a.arm_id for a in arms])
        if moved:
            console.print(f"rerun: {moved} earlier launches superseded, kept in {where}", markup=False,
                          soft_wrap=True)
    # A later `harness report` must judge adaptive launches by the rule that stopped them.
    store.write_arms(arms, {"file": matrix.file, "description": matrix.description,
                            "adaptive": rule_settings(st) if st.adaptive else None}, size=size)
    trials = order_trials(arms, matrix.repeats, matrix.schedule, matrix.seed)
    by_id = {a.arm_id: a for a in arms}
    writer = TrackingWriter(settings.runs_dir, settings.tracking_uri) if settings.tracking_enabled else None
    progress = Progress(TextColumn("trials" + (" (at most)" if matrix.stats.adaptive else "")), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    # The live view counts exactly what the report will: trials 1..size of these arms.
    seen = list(select(store.results(), size, by_id).counted)
    before = len(seen)      # results kept from earlier runs
    task = progress.add_task("trials", total=len(trials), completed=before)
    live_on = console.is_terminal if settings.progress is None else settings.progress
    t0, ran = time.monotonic(), 0
    try:
        with Live(_view(progress, "", matrix, arms, seen), console=console, refresh_per_second=4,
                  transient=True) if live_on else _NoLive() as live:
            for batch in _batches(matrix, arms, trials, store, seen):
                for key in batch:
                    arm = by_id[key.arm_id]
                    current = f"now: {arm.label} ({arm.title}) trial {key.k}/{matrix.repeats}"
                    live.update(_view(progress, current, matrix, arms, seen))
                    if not live_on:
                        console.print(current, markup=False, soft_wrap=True)
                    result = run_trial(TrialSpec(matrix, arm, key.k, settings.runs_dir, source_top, base_sha), store)
                    ran += 1
                    if not live_on:
                        console.print(f"  {arm.label}#{key.k}: {result.outcome.value}"
                                      + (f" — {result.first_error_line}" if result.first_error_line else ""),
                                      markup=False, soft_wrap=True)
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
                  f"{time.monotonic() - t0:.1f} s", markup=False, soft_wrap=True)
    return RunReport(total=len(trials), skipped=before,
                     ran=ran, store=store.root, tracking_errors=errors)


class _NoLive:
    """Stands in for rich.Live when the output is not a terminal."""

    def __enter__(self) -> "_NoLive":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, *_: object) -> None:
        return None
