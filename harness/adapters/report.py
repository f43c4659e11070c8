"""Render arm summaries: a terminal table (rich), GitHub markdown, CSV."""
from __future__ import annotations

import csv
import io
from typing import Sequence

from rich.table import Table

from harness.core.summary import ArmSummary

_MAX_SIG = 90


def _outcomes(s: ArmSummary) -> str:
    return ", ".join(f"{k} {v}" for k, v in s.outcomes.items()) or "-"


def _sig(s: ArmSummary) -> str:
    if not s.signatures:
        return "-"
    sig, count = s.signatures[0]
    text = sig if len(sig) <= _MAX_SIG else sig[: _MAX_SIG - 1] + "…"
    more = f" (+{len(s.signatures) - 1} more)" if len(s.signatures) > 1 else ""
    return f"{count}× {text}{more}"


def _interval(s: ArmSummary) -> str:
    return "-" if s.n == 0 else f"{s.interval[0]:.2f}–{s.interval[1]:.2f}"


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} s"


def _bs(s: ArmSummary) -> str:
    return ", ".join(f"{bs}×{c}" for bs, c in s.failing_bs) or "-"


def _axes(summaries: Sequence[ArmSummary]) -> list[str]:
    axes: list[str] = []
    for s in summaries:
        for k in s.levels:
            if k not in axes:
                axes.append(k)
    return axes


def _rows(summaries: Sequence[ArmSummary]) -> tuple[list[str], list[list[str]]]:
    axes = _axes(summaries)
    header = ["Arm", *axes, "READY", "95% CI", "Outcomes", "Top signature", "Failing bs", "Ladder",
              "Capture (median)", "Startup (median)"]
    rows = []
    for s in summaries:
        ready = f"{s.ready}/{s.n}" + (f" (+{s.not_counted} not counted)" if s.not_counted else "")
        rows.append([s.label, *(s.levels.get(a, "-") for a in axes), ready, _interval(s), _outcomes(s), _sig(s),
                     _bs(s), s.shapes or "-", _secs(s.capture_s_median), _secs(s.startup_s_median)])
    return header, rows


def terminal_table(summaries: Sequence[ArmSummary], title: str | None = None) -> Table:
    """A rich Table for the console."""
    header, rows = _rows(summaries)
    table = Table(title=title, show_lines=False)
    for h in header:
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*r)
    return table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(summaries: Sequence[ArmSummary], title: str | None = None, notes: Sequence[str] = ()) -> str:
    """A GitHub-ready markdown table with a legend of arm ids, to paste into a pull request."""
    header, rows = _rows(summaries)
    out = [f"**{title}**", ""] if title else []
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join("---" for _ in header) + "|")
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    out.append("")
    out.append("READY k/n counts launches that reached ready; PATCH_FAILED, INFRA and HARNESS_ERROR are not "
               "counted. 95% CI: Wilson score interval.")
    out.append("")
    out.append("Arms: " + "; ".join(f"{s.label} = `{s.arm_id}`" for s in summaries))
    out += [f"{n}" for n in notes]
    return "\n".join(out) + "\n"


def to_csv(summaries: Sequence[ArmSummary]) -> str:
    """One row per arm with plain numbers (for spreadsheets and scripts)."""
    axes = _axes(summaries)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["arm", "arm_id", *axes, "ready", "n", "ci_low", "ci_high", "not_counted", "outcomes",
                "top_signature", "failing_bs", "shapes", "capture_s_median", "startup_s_median"])
    for s in summaries:
        w.writerow([s.label, s.arm_id, *(s.levels.get(a, "") for a in axes), s.ready, s.n,
                    f"{s.interval[0]:.4f}", f"{s.interval[1]:.4f}", s.not_counted,
                    ";".join(f"{k}={v}" for k, v in s.outcomes.items()),
                    s.signatures[0][0] if s.signatures else "", ";".join(f"{b}={c}" for b, c in s.failing_bs),
                    s.shapes or "", "" if s.capture_s_median is None else f"{s.capture_s_median:.3f}",
                    "" if s.startup_s_median is None else f"{s.startup_s_median:.3f}"])
    return buf.getvalue()
