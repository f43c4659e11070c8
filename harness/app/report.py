"""Use case: the per-arm report of a campaign, from the store."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.adapters.report import markdown, terminal_table, to_csv
from harness.adapters.store import Store
from harness.core.arms import expand
from harness.core.matrix import Matrix
from harness.core.summary import ArmSummary, summarize


@dataclass(frozen=True)
class Report:
    """The summaries and where their renderings were written."""

    summaries: list[ArmSummary]
    markdown: str
    csv: str
    files: tuple[Path, ...]


def build_report(matrix: Matrix, runs_dir: Path) -> Report:
    """Summaries for the matrix's arms (in label order) plus any other arms found in its store;
    writes report.md and report.csv beside the results."""
    store = Store(runs_dir, matrix.name)
    # The legend of the last run (arm ids include the base SHA it resolved); expand if none yet.
    legend = store.read_arms() or [{"arm_id": a.arm_id, "label": a.label, "levels": dict(a.levels)}
                                   for a in expand(matrix)]
    results = store.results()
    summaries = summarize(results, legend)
    shas = sorted({r.source.base_sha for r in results if r.source.base_sha})
    patches = sorted({f"{p.name} sha256:{p.sha256[:12]}" for r in results for p in r.source.patches})
    notes = []
    if matrix.description:
        notes.append(f"\n{matrix.description}")
    if shas:
        notes.append(f"Base: {', '.join(s[:12] for s in shas)}" + (f"; patches: {', '.join(patches)}" if patches else ""))
    title = f"{matrix.name}: {matrix.target.engine}" + (f" {matrix.target.model}" if matrix.target.model else "")
    md = markdown(summaries, title=title, notes=notes)
    csv_text = to_csv(summaries)
    files: tuple[Path, ...] = ()
    if store.root.is_dir():
        (store.root / "report.md").write_text(md, encoding="utf-8")
        (store.root / "report.csv").write_text(csv_text, encoding="utf-8")
        files = (store.root / "report.md", store.root / "report.csv")
    return Report(summaries, md, csv_text, files)


__all__ = ["Report", "build_report", "terminal_table"]
