"""The HTML report's plots, drawn with matplotlib and returned as PNG data URIs.

Figures are built with ``matplotlib.figure.Figure`` rather than pyplot: nothing is registered in
pyplot's global figure list (so nothing can leak or needs closing), and the process-wide backend is
left alone for callers that have their own (a notebook). ``savefig`` to PNG draws with Agg.
"""
from __future__ import annotations

import base64
import io
import struct
import textwrap
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Sequence

from matplotlib import dates as mdates
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from harness.core.arms import arm_name, title_of
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.reportdata import ReportData
from harness.core.summary import ArmSummary

DPI = 150            # drawn at 1.5x and shown at 100 px per inch: sharp on high-density screens
_SHOWN_DPI = 100

OUTCOME_COLOURS: Mapping[Outcome, str] = {
    Outcome.READY: "#2e7d32", Outcome.IMA: "#c62828", Outcome.CAPTURE_ERROR: "#ef6c00",
    Outcome.SEGFAULT: "#6a1b9a", Outcome.OOM: "#ad1457", Outcome.DEVICE_ASSERT: "#8d3b12",
    Outcome.NCCL: "#1565c0", Outcome.COMM_TIMEOUT: "#00838f", Outcome.LIBRARY_ERROR: "#5e35b1",
    Outcome.ASSERTION: "#795548", Outcome.HANG: "#37474f", Outcome.TIMEOUT: "#f9a825",
    Outcome.OTHER: "#616161", Outcome.PATCH_FAILED: "#bdbdbd", Outcome.INFRA: "#90a4ae",
    Outcome.HARNESS_ERROR: "#b0bec5",
}

# Capture-ladder cell states, in colour-map order.
_NO_LADDER, _NOT_REACHED, _CAPTURED, _FAILED = range(4)
_LADDER_COLOURS = ("#ffffff", "#e0e0e0", "#66bb6a", "#d32f2f")
_LADDER_NAMES = ("no ladder seen", "not reached", "captured", "failed here")


@dataclass(frozen=True)
class Plot:
    """One rendered figure: a PNG data URI and the size to show it at (CSS px)."""

    uri: str
    width: int
    height: int
    alt: str


def _render(fig: Figure, alt: str) -> Plot:
    buf = io.BytesIO()
    # No Software metadata: the same data gives the same bytes across matplotlib patch versions.
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    png = buf.getvalue()
    width, height = struct.unpack(">II", png[16:24])       # the IHDR chunk
    scale = _SHOWN_DPI / DPI
    return Plot("data:image/png;base64," + base64.b64encode(png).decode("ascii"),
                round(width * scale), round(height * scale), alt)


def arm_names(data: ReportData) -> dict[str, str]:
    """label -> arm_name for the reported arms."""
    return {s.label: arm_name(s.label, title_of(s.levels)) for s in data.summaries}


def _tick(name: str) -> str:
    return textwrap.fill(name, 34)


def _rows_height(labels: Sequence[str], per_row: float) -> float:
    """Inches for one row per arm, grown where a caption wraps onto several lines."""
    return sum(max(per_row, 0.2 * (label.count("\n") + 1) + 0.15) for label in labels)


def _arm_ticks(ax, labels: Sequence[str]) -> None:
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)     # first arm on top, as in the tables


def ready_plot(data: ReportData) -> Plot | None:
    """READY rate per arm, bars with their Wilson 95 % interval and k/n; None before any launch."""
    arms = list(data.summaries)
    if not any(s.n for s in arms):
        return None
    names = [arm_names(data)[s.label] + (" (ref)" if s.label == data.baseline else "") for s in arms]
    labels = [_tick(n) for n in names]
    fig = Figure(figsize=(9, _rows_height(labels, 0.55) + 1.3))
    ax = fig.add_subplot()
    right = blended_transform_factory(ax.transAxes, ax.transData)
    for y, s in enumerate(arms):
        if s.n == 0:
            ax.text(1.02, y, "0/0 (no launches)", transform=right, va="center", fontsize=9, color="#616161")
            continue
        rate = s.ready / s.n
        lo, hi = s.interval
        ax.barh(y, rate, height=0.6, color="#81c784", edgecolor="#2e7d32",
                hatch="//" if s.label == data.baseline else None)
        ax.errorbar(rate, y, xerr=[[rate - lo], [hi - rate]], fmt="o", color="#1b1b1b", capsize=4, ms=4)
        ax.text(1.02, y, f"{s.ready}/{s.n}  [{lo:.2f}, {hi:.2f}]", transform=right, va="center", fontsize=9)
    _arm_ticks(ax, labels)
    ax.set_xlim(0, 1.015)     # room for the interval cap and point at a rate of 1
    ax.set_xlabel("READY rate (bar) with Wilson 95 % interval; right: READY k/n [interval]")
    ax.set_title("READY rate per arm", loc="left")
    ax.grid(axis="x", alpha=0.3)
    return _render(fig, f"READY rate per arm with Wilson 95 % intervals: {'; '.join(names)}")


def _ladder_row(r: TrialResult, steps: int) -> list[int]:
    captured, total = r.ladder.shapes_captured, r.ladder.shapes_total
    if captured is None:
        return [_NO_LADDER] * steps
    total = total if total is not None else steps
    row = [_CAPTURED if i < captured else _NOT_REACHED if i < total else _NO_LADDER for i in range(steps)]
    # Only a counted failure failed at capture: PATCH_FAILED / INFRA never reached the ladder.
    if r.outcome.is_failure and r.ladder.shapes_total is not None and captured < total:
        row[captured] = _FAILED
    return row


def ladder_plot(data: ReportData) -> Plot | None:
    """Capture ladder per trial (rows by arm, columns = capture steps); None when no ladder was seen."""
    rows = [r for s in data.summaries for r in data.results_of(s.arm_id)]
    steps = max([r.ladder.shapes_total or r.ladder.shapes_captured or 0 for r in rows], default=0)
    if steps == 0:
        return None
    grid = [_ladder_row(r, steps) for r in rows]
    fig = Figure(figsize=(11, 0.24 * len(rows) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    ax.pcolormesh(range(1, steps + 2), range(len(rows) + 1), grid, cmap=ListedColormap(_LADDER_COLOURS),
                  norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5, 3.5], 4), edgecolors="#ffffff", linewidth=0.5)
    cell_in = 9.0 / steps
    for y, (r, row) in enumerate(zip(rows, grid, strict=True)):
        if _FAILED in row and r.ladder.failing_bs is not None:
            x = row.index(_FAILED) + 1
            if cell_in >= 0.2:
                ax.text(x + 0.5, y + 0.5, str(r.ladder.failing_bs), ha="center", va="center",
                        fontsize=6.5, color="white", fontweight="bold")
            else:    # too narrow for the number: write it beside the cell
                ax.text(x + 1.1, y + 0.5, f"bs {r.ladder.failing_bs}", ha="left", va="center",
                        fontsize=6.5, color="#b71c1c")
    for y in range(1, len(rows)):
        if rows[y].arm_id != rows[y - 1].arm_id:
            ax.axhline(y, color="#424242", linewidth=1.2)
    names = {s.arm_id: arm_names(data)[s.label] for s in data.summaries}
    ax.set_yticks([y + 0.5 for y in range(len(rows))],
                  [f"{names[r.arm_id]} #{r.trial} {r.outcome.value}" for r in rows], fontsize=7.5)
    ax.set_ylim(len(rows), 0)
    every = 1 if steps <= 40 else 5
    ax.set_xticks([i + 0.5 for i in range(1, steps + 1) if i == 1 or i % every == 0],
                  [str(i) for i in range(1, steps + 1) if i == 1 or i % every == 0], fontsize=7)
    ax.set_xlabel("capture step (number in a red cell: the failing bs)")
    # The engine of the campaign's own launches, not an assumption: each engine orders its ladder.
    engines = ", ".join(sorted({r.engine for r in rows if r.engine}))
    caption = (f"Capture ladder per trial{f' ({engines} logs)' if engines else ''}: columns are capture steps "
               "in the order the log printed them")
    ax.set_title(caption, loc="left", fontsize=11)
    fig.legend(handles=[Patch(facecolor=c, edgecolor="#9e9e9e", label=n)
                        for c, n in zip(_LADDER_COLOURS[::-1], _LADDER_NAMES[::-1], strict=True)],
               loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    return _render(fig, f"{caption}. Rows: {'; '.join(dict.fromkeys(names[r.arm_id] for r in rows))}")


def _start(r: TrialResult) -> datetime | None:
    return datetime.fromisoformat(r.started_at.replace("Z", "+00:00")) if r.started_at else None


def timeline_plot(data: ReportData) -> Plot | None:
    """Trials over time, one row per arm, coloured by outcome, bars as long as each launch; None
    without results. Without start times the x axis is the launch order."""
    arms = [s for s in data.summaries if data.results_of(s.arm_id)]
    if not arms:
        return None
    row = {s.arm_id: y for y, s in enumerate(arms)}
    results = [r for s in arms for r in data.results_of(s.arm_id)]
    timed = all(r.started_at for r in results)
    names = [arm_names(data)[s.label] for s in arms]
    labels = [_tick(n) for n in names]
    fig = Figure(figsize=(11, _rows_height(labels, 0.5) + 1.6))
    ax = fig.add_subplot()
    if timed:
        for r in results:
            x = mdates.date2num(_start(r))
            if r.duration_s:
                ax.barh(row[r.arm_id], r.duration_s / 86400, left=x, height=0.5, alpha=0.45,
                        color=OUTCOME_COLOURS[r.outcome])
            ax.plot(x, row[r.arm_id], "o", ms=6, color=OUTCOME_COLOURS[r.outcome], mec="white", mew=0.6)
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.use_sticky_edges = False      # bars stick the axis to their left edge, clipping the first launch
        ax.margins(x=0.02)
        ax.set_xlabel("start time (UTC); bar = launch to stop")
    else:
        # The interleaved schedule launches trial k of every arm before trial k+1 of any.
        order = sorted(results, key=lambda r: (r.trial, row[r.arm_id]))
        for x, r in enumerate(order, start=1):
            ax.plot(x, row[r.arm_id], "o", ms=7, color=OUTCOME_COLOURS[r.outcome], mec="white", mew=0.6)
        ax.set_xlabel("launch order (start times missing: trial-major order assumed)")
    seen = [o for o in Outcome if any(r.outcome is o for r in results)]
    ax.legend(handles=[Patch(color=OUTCOME_COLOURS[o], label=o.value) for o in seen],
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    _arm_ticks(ax, labels)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Timeline of launches by arm (drift over time)", loc="left")
    return _render(fig, f"Timeline of launches by arm, coloured by outcome: {'; '.join(names)}")


def _gate_metrics(arms: Sequence[ArmSummary]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for s in arms:
        for g in s.gates:
            out += [(g.name, m) for m, *_ in g.metrics if (g.name, m) not in out]
    return out


def gates_plot(data: ReportData) -> Plot | None:
    """Mean ± stderr of every gate metric per arm; None when no arm has gate metrics."""
    arms = list(data.summaries)
    metrics = _gate_metrics(arms)
    if not metrics:
        return None
    cols = min(len(metrics), 3)
    rows = -(-len(metrics) // cols)
    fig = Figure(figsize=(4.2 * cols + 1.5, (0.5 * len(arms) + 1.2) * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, (gate, metric) in enumerate(metrics):
        ax = axes[i // cols][i % cols]
        for y, s in enumerate(arms):
            found = [(mean, se, n) for g in s.gates if g.name == gate for m, mean, se, n in g.metrics if m == metric]
            if not found:
                continue
            mean, se, n = found[0]
            ax.errorbar(mean, y, xerr=se, fmt="o", color="#1565c0", capsize=4, ms=5)
            ax.annotate(f"{mean:.4g}" + (f" ± {se:.2g}" if se is not None else "") + f" (n={n})", (mean, y),
                        xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7.5)
        _arm_ticks(ax, [_tick(arm_names(data)[s.label]) for s in arms])
        ax.margins(x=0.35)
        ax.set_ylim(len(arms) - 0.4, -0.8)     # room above the first arm for its annotation
        ax.set_title(f"{gate}.{metric}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    for j in range(len(metrics), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    fig.suptitle("Gate scores per arm: mean ± standard error", x=0.02, ha="left")
    names = "; ".join(arm_names(data)[s.label] for s in arms)
    return _render(fig, f"Gate scores per arm, mean and standard error: {names}")
