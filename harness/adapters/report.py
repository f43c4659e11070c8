"""Render a report: a terminal table (rich) and CSV; markdown lives in report_md, HTML in report_html."""
from __future__ import annotations

import csv
import io
from typing import Mapping, Sequence

from rich.table import Table

from harness.core.reportdata import ReportData
from harness.core.summary import ArmSummary
from harness.core.verdicts import Comparison

MAX_SIG = 90


def outcomes_text(s: ArmSummary) -> str:
    """"IMA 3, READY 1"."""
    return ", ".join(f"{k} {v}" for k, v in s.outcomes.items()) or "-"


def short(text: str, limit: int = MAX_SIG) -> str:
    """Text cut to limit characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def top_signature(s: ArmSummary) -> str:
    """"3× IMA:… (+2 more)" or "-"."""
    if not s.signatures:
        return "-"
    sig, count = s.signatures[0]
    more = f" (+{len(s.signatures) - 1} more)" if len(s.signatures) > 1 else ""
    return f"{count}× {short(sig)}{more}"


def ready_cell(s: ArmSummary) -> str:
    """"4/6 [0.30, 0.90]" plus the launches not counted."""
    text = s.ready_text
    return text + (f" (+{s.not_counted} not counted)" if s.not_counted else "")


def gates_text(s: ArmSummary) -> str:
    """Gate numbers with ± stderr, or "-"."""
    return "; ".join(g.text for g in s.gates) or "-"


def secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} s"


def counts_text(pairs: Sequence[tuple[object, int]]) -> str:
    """"60×3, 104×1" or "-"."""
    return ", ".join(f"{v}×{c}" for v, c in pairs) or "-"


def failing_bs(s: ArmSummary) -> str:
    return counts_text(s.failing_bs)


def axes_of(summaries: Sequence[ArmSummary]) -> list[str]:
    """Axis names in first-seen order."""
    axes: list[str] = []
    for s in summaries:
        axes += [k for k in s.levels if k not in axes]
    return axes


def level_cell(s: ArmSummary, axis: str, switches: Mapping[str, tuple[str, str]]) -> str:
    """The arm's level on an axis; ✓ / ✗ for on/off switches."""
    level = s.levels.get(axis)
    if level is None:
        return "-"
    if axis in switches:
        return "✓" if level == switches[axis][1] else "✗"
    return level


def setup_text(data: ReportData) -> str:
    """"Setup: 8× NVIDIA B300 · sglang · org/model · TP8 · build v0.5.16 @ f01f706… · env …" or ""."""
    if not data.setup:
        return ""
    # Hardware, engine, model and parallelism say what they are; the rest are named.
    bare = {"hardware", "engine", "model", "parallelism"}
    return "Setup: " + " · ".join(value if what in bare else f"{what} {value}" for what, value in data.setup)


def verdict_for(data: ReportData, label: str) -> str:
    """The arm's READY verdict against its reference, for the live and terminal tables."""
    for c in data.comparisons:
        if c.metric == "READY" and c.arm == label:
            return f"{c.verdict.value} vs {c.ref}"
    return "baseline" if label == data.baseline else "-"


def diff_text(c: Comparison, digits: int = 2) -> str:
    """"+0.83 [0.28, 0.97]" or "-"."""
    if c.diff is None or c.interval is None:
        return "-"
    return f"{c.diff:+.{digits}f} [{c.interval[0]:.{digits}f}, {c.interval[1]:.{digits}f}]"


def side_text(c: Comparison, arm: bool) -> str:
    """"6/6" for a rate, "0.952 (n=6)" for a mean."""
    if c.kind == "rate":
        k, n = (c.k_arm, c.n_arm) if arm else (c.k_ref, c.n_ref)
        return f"{k}/{n}"
    v, n = (c.value_arm, c.n_arm) if arm else (c.value_ref, c.n_ref)
    return "-" if v is None else f"{v:.4g} (n={n})"


def p_text(p: float | None) -> str:
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def terminal_table(data: ReportData, title: str | None = None, arms: int | None = None) -> Table:
    """A rich Table for the console: one row per arm with its READY verdict."""
    summaries = list(data.summaries)[:arms]
    axes = axes_of(summaries)
    table = Table(title=title, show_lines=False)
    for h in ["Arm", *axes, "READY [95% CI]", "Verdict", "Outcomes", "Top signature", "Gates", "Ladder"]:
        table.add_column(h, overflow="fold")
    for s in summaries:
        table.add_row(s.label, *(level_cell(s, a, data.binary_axes) for a in axes), ready_cell(s),
                      verdict_for(data, s.label), outcomes_text(s), top_signature(s), gates_text(s), s.shapes or "-")
    return table


def to_csv(data: ReportData) -> str:
    """One row per arm with plain numbers (for spreadsheets and scripts)."""
    axes = axes_of(data.summaries)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["arm", "arm_id", *axes, "ready", "n", "ci_low", "ci_high", "not_counted", "outcomes",
                "top_signature", "failing_bs", "shapes", "capture_s_median", "startup_s_median", "gates",
                "ready_verdict"])
    for s in data.summaries:
        w.writerow([s.label, s.arm_id, *(s.levels.get(a, "") for a in axes), s.ready, s.n,
                    f"{s.interval[0]:.4f}", f"{s.interval[1]:.4f}", s.not_counted,
                    ";".join(f"{k}={v}" for k, v in s.outcomes.items()),
                    s.signatures[0][0] if s.signatures else "", ";".join(f"{b}={c}" for b, c in s.failing_bs),
                    s.shapes or "", "" if s.capture_s_median is None else f"{s.capture_s_median:.3f}",
                    "" if s.startup_s_median is None else f"{s.startup_s_median:.3f}",
                    ";".join(f"{g.name}={g.passed}/{g.n}" + "".join(f",{m}={v:.6g}" for m, v, _, _ in g.metrics)
                             for g in s.gates),
                    verdict_for(data, s.label)])
    return buf.getvalue()
