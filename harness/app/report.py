"""Use case: the report of a campaign, computed from the store and written beside it."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from harness.adapters.report import terminal_table, to_csv
from harness.adapters.report_md import markdown
from harness.adapters.store import Store
from harness.core.arms import Arm, baseline_of, expand, switch_axes, title_of
from harness.app.report_setup import columns_of, setup_of, shown_argv
from harness.core.campaign import select
from harness.core.drift import drift
from harness.core.matrix import Goal, Matrix
from harness.core.record import TrialResult
from harness.core.redact import redact_env
from harness.core.reportdata import FixStatus, LegendEntry, ReportData
from harness.core.sequential import clean_runs_needed, fix_stands
from harness.core.stats import lower_bound, upper_bound
from harness.core.stored_rule import rule_note, stored_stats
from harness.core.summary import ArmSummary, summarize
from harness.core.verdicts import ArmData, judge
from harness.errors import NoCampaign

FORMATS = ("md", "html", "csv", "json")


@dataclass(frozen=True)
class Report:
    """The report's data, its renderings, and where they were written."""

    data: ReportData
    markdown: str
    csv: str
    files: tuple[Path, ...]

    @property
    def summaries(self) -> list[ArmSummary]:
        return list(self.data.summaries)


def _legend(s: ArmSummary, results: list[TrialResult], arm: Arm | None, free_port: bool) -> LegendEntry:
    """Patches and argv as last launched; env as the matrix declares it for the arm (the harness's
    own cache and temp folders left out), secrets masked."""
    latest = max(results, key=lambda r: r.trial) if results else None
    if latest is not None and "env" in latest.config:
        env = dict(latest.config["env"])          # as launched: the record's declared env, redacted
    else:
        env = redact_env(dict(arm.env)) if arm is not None else dict(latest.env) if latest else {}
    return LegendEntry(
        label=s.label, arm_id=s.arm_id, title=title_of(s.levels),
        patches=tuple((p.name, p.sha256) for p in latest.source.patches) if latest else (),
        env=env, argv=tuple(latest.argv) if latest else (),
        shown_argv=shown_argv(latest, free_port) if latest else ())


def _fix(matrix: Matrix, s: ArmSummary) -> FixStatus:
    fails = s.n - s.ready
    target = matrix.stats.max_fail_rate
    # The bound is calibrated for the most launches the rule could make: the run's max_repeats.
    max_n = matrix.stats.max_repeats if matrix.stats.adaptive and matrix.stats.max_repeats else matrix.repeats
    return FixStatus(s.label, fails, s.n, upper_bound(fails, s.n), lower_bound(fails, s.n), target,
                     fix_stands(fails, s.n, target, max_n), clean_runs_needed(target))


def report_data(matrix: Matrix, store: Store) -> ReportData:
    """The report of a campaign: the matrix's arms (the legend of the last run, else the matrix
    expanded) plus any older arms found in its store. An adaptive run is judged by the rule it
    stored, whatever the matrix says now (rule_note says so when they differ)."""
    legend = store.read_arms() or [{"arm_id": a.arm_id, "label": a.label, "levels": dict(a.levels)}
                                   for a in expand(matrix)]
    run = store.read_run()
    adaptive = run.get("adaptive")
    note = ""
    if "adaptive" in run and not adaptive and matrix.stats.adaptive:
        # A fixed-repeats run is judged as one, whatever the matrix says now: a sequential replay of
        # launches no rule stopped would report a look that never happened.
        matrix = replace(matrix, repeats=store.size() or matrix.repeats,
                         stats=replace(matrix.stats, adaptive=False))
        note = "judged as the run was made, fixed repeats; the matrix now says repeats: auto"
    elif adaptive:
        # Launches stopped by the sequential rule are judged by that rule, as the run stored it: a
        # fixed-sample test, or the same rule at another alpha, would not carry its error guarantee.
        rule = stored_stats(matrix.stats, adaptive)
        note = rule_note(rule, matrix.stats, matrix.repeats)
        matrix = replace(matrix, stats=rule)
    data = compute(matrix, legend, store.results(), size=store.size())
    return replace(data, rule_note=note) if note else data


def compute(matrix: Matrix, legend: Sequence[Mapping[str, object]], results: Sequence[TrialResult],
            size: int | None = None) -> ReportData:
    """Summaries, verdicts and drift from the campaign's trials among results: 1..size of each arm
    (core.campaign; every one when size is None, as for the live view's own selection)."""
    campaign = select(results, size)
    results = campaign.counted
    # Levels in the matrix's axis order (the store keeps them sorted), so titles read as declared.
    order = {a.name: i for i, a in enumerate(matrix.axes)}
    legend = [{**a, "levels": dict(sorted(dict(a.get("levels", {})).items(),  # type: ignore[call-overload]
                                          key=lambda kv: order.get(kv[0], len(order))))} for a in legend]
    summaries = summarize(results, legend)
    by_arm: dict[str, list[TrialResult]] = {}
    for r in sorted(results, key=lambda r: r.trial):
        by_arm.setdefault(r.arm_id, []).append(r)
    current = summaries[: len(legend)]     # verdicts compare the arms of the last run, not older ones
    arms = expand(matrix)
    # Levels as a set: the store writes them sorted, the matrix declares them in its own order.
    declared = {(a.label, frozenset(a.levels.items())): a for a in arms}
    base = baseline_of(matrix, arms)
    base_label = base.label if base is not None else (current[0].label if current else None)
    base_id = next((s.arm_id for s in current if s.label == base_label), None)
    comparisons = judge([ArmData(s.arm_id, s.label, by_arm.get(s.arm_id, [])) for s in current], base_id,
                        matrix.stats)
    notes = [matrix.description] if matrix.description else []
    if campaign.kept:
        notes.append(campaign.kept_text())
    title = f"{matrix.name}: {matrix.target.engine}" + (f" {matrix.target.model}" if matrix.target.model else "")
    return ReportData(
        matrix=matrix.name, title=title, notes=tuple(notes), summaries=tuple(summaries),
        comparisons=tuple(comparisons),
        drift=drift([(s.arm_id, s.label, by_arm.get(s.arm_id, [])) for s in summaries]),
        results=tuple(r for s in summaries for r in by_arm.get(s.arm_id, [])),
        legend=tuple(_legend(s, by_arm.get(s.arm_id, []), declared.get((s.label, frozenset(s.levels.items()))),
                             matrix.target.port is None)
                     for s in summaries),
        setup=setup_of(matrix, results), columns=columns_of(matrix),
        stats=matrix.stats, baseline=base_label,
        fix=tuple(_fix(matrix, s) for s in current) if matrix.stats.goal is Goal.FIX else (),
        binary_axes=switch_axes(matrix))


def build_report(matrix: Matrix, runs_dir: Path, formats: tuple[str, ...] = ("md", "csv")) -> Report:
    """The report; writes report.<fmt> beside the results for each format asked for."""
    store = Store(runs_dir, matrix.name)
    if not any(True for _ in store.result_paths()):
        # Said, not shown as 0/0: a report from another folder reads another (empty) runs/.
        raise NoCampaign(matrix.name, str(store.root.resolve()))
    data = report_data(matrix, store)
    md = markdown(data)
    csv_text = to_csv(data)
    files: list[Path] = []
    if store.root.is_dir():
        for fmt in formats:
            path = store.root / f"report.{fmt}"
            path.write_text(render(data, fmt, md, csv_text), encoding="utf-8")
            files.append(path)
    return Report(data, md, csv_text, tuple(files))


def render(data: ReportData, fmt: str, md: str | None = None, csv_text: str | None = None) -> str:
    """One rendering of the report: md, html, csv or json."""
    if fmt == "md":
        return md if md is not None else markdown(data)
    if fmt == "csv":
        return csv_text if csv_text is not None else to_csv(data)
    if fmt == "json":
        return json.dumps(data.as_json(), indent=2, sort_keys=True, default=str) + "\n"
    if fmt == "html":
        from harness.adapters.report_html import html   # matplotlib is only loaded for HTML
        return html(data)
    raise ValueError(f"unknown report format {fmt!r}; valid: {', '.join(FORMATS)}")


__all__ = ["FORMATS", "Report", "build_report", "compute", "render", "report_data", "terminal_table"]
