"""Verdicts between arms: BETTER / WORSE / SAME / UNKNOWN, each with the rule that decided, its
numbers (a p-value and the difference's 95 % interval, or the sequential statistic and threshold),
and the n on each side.

Rates (READY, a gate's pass rate): Fisher's or Barnard's exact test and Newcombe's interval of the
difference. Gate metrics (a GSM8K score, TPOT): Welch's t test and interval of the difference of
means. SAME is claimed only when the whole interval lies inside ±margin; a large p-value alone
says UNKNOWN. When more than one pair is judged on a metric, its p-values are Holm-adjusted
within that metric. In an adaptive campaign the READY comparisons are decided by the sequential rule
that chose when to stop (its error is split evenly over the pairs), replayed from the stored
launches; they carry that rule's statistic and threshold at the look that decided, and no p-value or
interval: a fixed-sample one is not valid once the data chose when to stop.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from itertools import combinations
from typing import Sequence

from harness.core.matrix import Compare, Stats
from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.sequential import Decision, SequentialDesign, design, log_glr, looks, replay
from harness.core.stats import compare_means, diff_interval, holm, rate_p_value

READY = "READY"


class Verdict(str, Enum):
    """The arm against its reference, on one metric."""

    BETTER = "BETTER"
    WORSE = "WORSE"
    SAME = "SAME"
    UNKNOWN = "UNKNOWN"

    def flipped(self) -> "Verdict":
        """The verdict seen from the other arm."""
        return {Verdict.BETTER: Verdict.WORSE, Verdict.WORSE: Verdict.BETTER}.get(self, self)


@dataclass(frozen=True)
class ArmData:
    """One arm's trials as the verdicts see them."""

    arm_id: str
    label: str
    results: Sequence[TrialResult]       # in trial order

    @property
    def counted(self) -> list[TrialResult]:
        return [r for r in self.results if r.outcome.counts]


@dataclass(frozen=True)
class Comparison:
    """One metric of one arm against a reference arm."""

    metric: str                 # "READY", "gsm8k pass", "gsm8k.exact_match"
    kind: str                   # "rate" | "mean"
    arm: str                    # label
    ref: str                    # label of the reference (the baseline)
    arm_id: str
    ref_id: str
    n_arm: int
    n_ref: int
    value_arm: float | None     # the rate or mean
    value_ref: float | None
    k_arm: int | None           # successes, for rates
    k_ref: int | None
    diff: float | None          # arm - ref
    interval: tuple[float, float] | None
    test: str
    p_value: float | None
    p_adjusted: float | None
    verdict: Verdict
    note: str = ""
    rule: str = ""                    # the rule that decided, in words: "Fisher exact, Holm-adjusted over 3 pairs"
    statistic: float | None = None    # sequential: the log GLR at the look that decided (or the latest)
    threshold: float | None = None    # sequential: the calibrated threshold it is compared with


def pairs(arms: Sequence[ArmData], baseline_id: str | None, compare: Compare) -> list[tuple[ArmData, ArmData]]:
    """(arm, reference) pairs: each arm against the baseline (the first arm when none is named), or
    every pair, the later arm against the earlier."""
    if len(arms) < 2:
        return []
    if compare is Compare.ALL:
        return [(b, a) for a, b in combinations(arms, 2)]
    ref = next((a for a in arms if a.arm_id == baseline_id), arms[0])
    return [(a, ref) for a in arms if a.arm_id != ref.arm_id]


def _ready(results: Sequence[TrialResult]) -> list[bool]:
    return [r.outcome is Outcome.READY for r in results if r.outcome.counts]


def _gate_passes(results: Sequence[TrialResult], gate: str) -> list[bool]:
    return [bool(r.gates[gate]["passed"]) for r in results
            if gate in r.gates and r.gates[gate].get("passed") is not None]


def _gate_values(results: Sequence[TrialResult], gate: str, metric: str) -> list[float]:
    out = []
    for r in results:
        v = r.gates.get(gate, {}).get("metrics", {}).get(metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    return out


def _metrics(arms: Sequence[ArmData]) -> tuple[list[str], list[tuple[str, str]]]:
    gates: list[str] = []
    metrics: list[tuple[str, str]] = []
    for a in arms:
        for r in a.results:
            for g, body in r.gates.items():
                if g not in gates and body.get("passed") is not None:
                    gates.append(g)
                for m in body.get("metrics", {}):
                    if (g, m) not in metrics:
                        metrics.append((g, m))
    return gates, metrics


def _rate(metric: str, arm: ArmData, ref: ArmData, xs: list[bool], ys: list[bool], stats: Stats) -> Comparison:
    k1, n1, k2, n2 = sum(xs), len(xs), sum(ys), len(ys)
    p = rate_p_value(k1, n1, k2, n2, stats.test)
    empty = n1 == 0 or n2 == 0
    return Comparison(
        metric=metric, kind="rate", arm=arm.label, ref=ref.label, arm_id=arm.arm_id, ref_id=ref.arm_id,
        n_arm=n1, n_ref=n2, value_arm=k1 / n1 if n1 else None, value_ref=k2 / n2 if n2 else None,
        k_arm=k1, k_ref=k2, diff=None if empty else k1 / n1 - k2 / n2,
        interval=None if empty else diff_interval(k1, n1, k2, n2),
        test=f"{'Fisher' if stats.test == 'fisher' else 'Barnard'} exact", p_value=None if empty else p,
        p_adjusted=None, verdict=Verdict.UNKNOWN)


def _mean(metric: str, arm: ArmData, ref: ArmData, xs: list[float], ys: list[float]) -> Comparison | None:
    mc = compare_means(xs, ys)
    if mc is None:
        return None
    return Comparison(
        metric=metric, kind="mean", arm=arm.label, ref=ref.label, arm_id=arm.arm_id, ref_id=ref.arm_id,
        n_arm=len(xs), n_ref=len(ys), value_arm=mc.mean1, value_ref=mc.mean2, k_arm=None, k_ref=None,
        diff=mc.diff, interval=mc.interval, test="Welch t", p_value=mc.p_value, p_adjusted=None,
        verdict=Verdict.UNKNOWN)


def _decide(c: Comparison, alpha: float, margin: float | None, lower_is_better: bool) -> Verdict:
    if c.diff is None or c.interval is None or c.p_adjusted is None:
        return Verdict.UNKNOWN
    if c.p_adjusted < alpha and c.diff != 0:
        better = (c.diff < 0) if lower_is_better else (c.diff > 0)
        return Verdict.BETTER if better else Verdict.WORSE
    if margin is not None and -margin < c.interval[0] and c.interval[1] < margin:
        return Verdict.SAME
    return Verdict.UNKNOWN


def _design(stats: Stats, n_pairs: int) -> SequentialDesign:
    return design(stats.alpha / max(1, n_pairs), stats.batch, stats.max_repeats or 1)


def sequential_stands(arms: Sequence[ArmData], baseline_id: str | None,
                      stats: Stats) -> list[tuple[ArmData, ArmData, Decision, int]]:
    """Where each pair stands under the sequential rule (alpha split evenly over the pairs), replayed
    from the arms' counted launches in order: (arm, ref, decision, launches per arm it took)."""
    todo = pairs(arms, baseline_id, stats.compare)
    rule = _design(stats, len(todo))
    return [(arm, ref, *replay(rule, _ready(arm.results), _ready(ref.results), stats.margin)) for arm, ref in todo]


def _sequential(arm: ArmData, ref: ArmData, decision: Decision, n: int, stats: Stats, n_pairs: int) -> Comparison:
    """The READY comparison as the sequential rule sees it: the counts at the look that decided (the
    latest look while undecided), its statistic against its threshold."""
    d = _design(stats, n_pairs)
    at = n if decision is not Decision.CONTINUE else max((m for m in looks(d.batch, d.max_n) if m <= n), default=0)
    xs, ys = _ready(arm.results)[:at], _ready(ref.results)[:at]
    k1, k2 = sum(xs), sum(ys)
    if decision is Decision.DIFFERENT:
        # The direction of the launches the rule decided on, not of all of them: an arm may have run
        # on after its pair was decided, and the totals may even tie.
        verdict = Verdict.BETTER if k1 > k2 else Verdict.WORSE
    else:
        verdict = Verdict.SAME if decision is Decision.SAME else Verdict.UNKNOWN
    share = f", α/{n_pairs} per pair" if n_pairs > 1 else ""
    note = {Decision.DIFFERENT: f"decided at {n}/arm", Decision.SAME: f"inside ±{stats.margin:g} at {n}/arm",
            Decision.EXHAUSTED: f"undecided at max_repeats {n}/arm",
            Decision.CONTINUE: f"running: {n}/arm so far"}[decision]
    statistic = float(log_glr(k1, at, k2, at)) if at else None
    threshold = d.threshold if math.isfinite(d.threshold) else None
    return Comparison(
        metric=READY, kind="rate", arm=arm.label, ref=ref.label, arm_id=arm.arm_id, ref_id=ref.arm_id,
        n_arm=at, n_ref=at, value_arm=k1 / at if at else None, value_ref=k2 / at if at else None,
        k_arm=k1, k_ref=k2, diff=k1 / at - k2 / at if at else None, interval=None,
        test=f"sequential GLR (α={stats.alpha:g}{share})", p_value=None, p_adjusted=None, verdict=verdict,
        note=note, rule=_sequential_rule(decision, n, at, k1, k2, stats, n_pairs, threshold),
        statistic=statistic, threshold=threshold)


def _sequential_rule(decision: Decision, n: int, at: int, k1: int, k2: int, stats: Stats, n_pairs: int,
                     threshold: float | None) -> str:
    alpha = f"sequential GLR, α = {stats.alpha:g}" + (f" ({stats.alpha / n_pairs:.3g} per pair)"
                                                      if n_pairs > 1 else "")
    if decision is Decision.SAME:
        lo, hi = diff_interval(k1, at, k2, at)
        return (f"{alpha}, SAME at {n}/arm: the difference's 95% interval [{lo:.2f}, {hi:.2f}] lies inside "
                f"±{stats.margin:g}")
    if threshold is None:
        return f"{alpha}: no difference can reach it within max_repeats {stats.max_repeats}/arm"
    return alpha + {Decision.DIFFERENT: f", decided at {n}/arm", Decision.EXHAUSTED: f", undecided at {n}/arm",
                    Decision.CONTINUE: f", latest look at {at}/arm"}[decision]


def judge(arms: Sequence[ArmData], baseline_id: str | None, stats: Stats) -> list[Comparison]:
    """Every comparison the stats block asks for, in pair order: READY, then gate pass rates, then
    gate metrics."""
    todo = pairs(arms, baseline_id, stats.compare)
    stands = {(a.arm_id, r.arm_id): (d, n) for a, r, d, n in sequential_stands(arms, baseline_id, stats)} \
        if stats.adaptive else {}
    gates, metrics = _metrics(arms)
    fixed: list[tuple[Comparison, float | None, bool]] = []    # (comparison, SAME margin, lower is better)
    sequential: list[Comparison] = []
    for arm, ref in todo:
        if stats.adaptive:
            sequential.append(_sequential(arm, ref, *stands[(arm.arm_id, ref.arm_id)], stats, len(todo)))
        else:
            fixed.append((_rate(READY, arm, ref, _ready(arm.results), _ready(ref.results), stats), stats.margin,
                          False))
        for g in gates:
            fixed.append((_rate(f"{g} pass", arm, ref, _gate_passes(arm.results, g),
                                _gate_passes(ref.results, g), stats), stats.margin, False))
        for g, m in metrics:
            name = f"{g}.{m}"
            c = _mean(name, arm, ref, _gate_values(arm.results, g, m), _gate_values(ref.results, g, m))
            if c is not None:
                fixed.append((c, stats.margins.get(name, stats.margins.get(m)),
                              name in stats.lower_is_better or m in stats.lower_is_better))
    # Holm within each metric's family: the pairs judged on READY, on gsm8k pass, ...
    adjusted: dict[int, float] = {}
    family: dict[str, int] = {}
    for metric in dict.fromkeys(c.metric for c, _, _ in fixed):
        tested = [i for i, (c, _, _) in enumerate(fixed) if c.metric == metric and c.p_value is not None]
        adjusted |= dict(zip(tested, holm([fixed[i][0].p_value for i in tested]), strict=True))  # type: ignore[misc]
        family[metric] = len(tested)
    judged = []
    for i, (c, margin, lower) in enumerate(fixed):
        holm_text = f", Holm-adjusted over {family[c.metric]} pairs" if family[c.metric] > 1 and i in adjusted else ""
        c = replace(c, p_adjusted=adjusted.get(i), rule=c.test + holm_text)
        judged.append(replace(c, verdict=_decide(c, stats.alpha, margin, lower)))
    order = {(a.arm_id, r.arm_id): i for i, (a, r) in enumerate(todo)}
    return sorted(sequential + judged, key=lambda c: order[(c.arm_id, c.ref_id)])
