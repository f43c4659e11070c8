"""Per-arm summaries computed from trial results: READY k/n with an interval, outcomes, signatures."""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.stats import stderr, wilson_interval


@dataclass(frozen=True)
class GateSummary:
    """One gate over an arm's launches that ran it."""

    name: str
    passed: int
    n: int                                                   # launches with a pass/fail for this gate
    metrics: tuple[tuple[str, float, float | None, int], ...]  # (metric, mean, stderr, n)

    @property
    def text(self) -> str:
        """"gsm8k 3/3, exact_match 0.912 ± 0.004"."""
        parts = [f"{self.name} {self.passed}/{self.n}" if self.n else self.name]
        for m, mean, se, _ in self.metrics:
            parts.append(f"{m} {mean:.3g}" + (f" ± {se:.2g}" if se is not None else ""))
        return ", ".join(parts)


@dataclass(frozen=True)
class ArmSummary:
    """What one arm's trials say."""

    arm_id: str
    label: str
    levels: Mapping[str, str]
    ready: int                          # READY trials
    n: int                              # counted trials (PATCH_FAILED / INFRA / HARNESS_ERROR excluded)
    interval: tuple[float, float]       # Wilson 95 % for ready / n
    outcomes: Mapping[str, int]         # every outcome, counted or not
    not_counted: int
    signatures: tuple[tuple[str, int], ...]   # most common first
    shapes: str | None                  # ladder summary, e.g. "8/8" or "3-8/8"
    capture_s_median: float | None
    startup_s_median: float | None
    failing_bs: tuple[tuple[int, int], ...]   # (bs, count), most common first
    gates: tuple[GateSummary, ...] = ()

    @property
    def ready_text(self) -> str:
        """"4/6 [0.30, 0.90]" or "0/0"."""
        if self.n == 0:
            return "0/0"
        lo, hi = self.interval
        return f"{self.ready}/{self.n} [{lo:.2f}, {hi:.2f}]"


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _shapes(results: Sequence[TrialResult]) -> str | None:
    seen = [(r.ladder.shapes_captured, r.ladder.shapes_total) for r in results
            if r.ladder.shapes_captured is not None]
    if not seen:
        return None
    lo = min(s for s, _ in seen)
    hi = max(s for s, _ in seen)
    totals = {t for _, t in seen if t is not None}
    total = f"/{max(totals)}" if totals else ""
    return f"{lo}{total}" if lo == hi else f"{lo}-{hi}{total}"


def _gates(results: Sequence[TrialResult]) -> tuple[GateSummary, ...]:
    names: list[str] = []
    for r in results:
        names += [g for g in r.gates if g not in names]
    out = []
    for g in names:
        bodies = [r.gates[g] for r in results if g in r.gates]
        verdicts = [b["passed"] for b in bodies if b.get("passed") is not None]
        metric_names: list[str] = []
        for b in bodies:
            metric_names += [m for m in b.get("metrics", {}) if m not in metric_names]
        metrics = []
        for m in metric_names:
            vals = [float(b["metrics"][m]) for b in bodies
                    if isinstance(b.get("metrics", {}).get(m), (int, float)) and not isinstance(b["metrics"][m], bool)]
            if vals:
                metrics.append((m, sum(vals) / len(vals), stderr(vals), len(vals)))
        out.append(GateSummary(g, sum(bool(v) for v in verdicts), len(verdicts), tuple(metrics)))
    return tuple(out)


def summarize_arm(arm_id: str, label: str, levels: Mapping[str, str],
                  results: Sequence[TrialResult], top: int = 3) -> ArmSummary:
    """Summarise one arm's results."""
    counted = [r for r in results if r.outcome.counts]
    ready = sum(r.outcome is Outcome.READY for r in counted)
    sigs = Counter(r.signature for r in counted if r.signature and r.outcome is not Outcome.READY)
    bs = Counter(r.ladder.failing_bs for r in counted if r.ladder.failing_bs is not None)
    return ArmSummary(
        arm_id=arm_id, label=label, levels=dict(levels), ready=ready, n=len(counted),
        interval=wilson_interval(ready, len(counted)),
        outcomes=dict(Counter(r.outcome.value for r in results).most_common()),
        not_counted=len(results) - len(counted),
        signatures=tuple(sigs.most_common(top)),
        shapes=_shapes(results),
        capture_s_median=_median(r.ladder.capture_s for r in results),
        startup_s_median=_median(r.startup_s for r in results if r.outcome is Outcome.READY),
        failing_bs=tuple(bs.most_common()),      # every value: the CSV and JSON are complete
        gates=_gates(results),
    )


def summarize(results: Sequence[TrialResult], legend: Sequence[Mapping[str, object]] = ()) -> list[ArmSummary]:
    """One summary per arm: arms of the legend first (in its order), then any others found in results
    (earlier runs on other code or config), whose labels get a prime (A') to tell them apart."""
    by_arm: dict[str, list[TrialResult]] = {}
    for r in results:
        by_arm.setdefault(r.arm_id, []).append(r)
    order: list[tuple[str, str, Mapping[str, str]]] = [
        (str(a["arm_id"]), str(a["label"]), dict(a.get("levels", {}))) for a in legend]  # type: ignore[arg-type]
    known = {a for a, _, _ in order}
    for arm_id, rs in by_arm.items():
        if arm_id not in known:
            order.append((arm_id, f"{rs[0].label}'", rs[0].levels))
    return [summarize_arm(a, lbl, lv, sorted(by_arm.get(a, []), key=lambda r: r.trial)) for a, lbl, lv in order]
