"""Everything a report shows, computed once from the store; renderers only format it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.core.drift import Drift
from harness.core.matrix import Stats
from harness.core.record import TrialResult
from harness.core.sequential import FixDecision
from harness.core.summary import ArmSummary
from harness.core.verdicts import Comparison


@dataclass(frozen=True)
class LegendEntry:
    """How one arm was launched: its exact patches, env and argv (from its latest launch)."""

    label: str
    arm_id: str
    title: str
    patches: tuple[tuple[str, str], ...] = ()     # (name, sha256)
    env: Mapping[str, str] = field(default_factory=dict)   # harness-set keys, secrets masked
    argv: tuple[str, ...] = ()
    shown_argv: tuple[str, ...] = ()     # argv as a reader re-runs it: paths relative, the free port as {port}


@dataclass(frozen=True)
class FixStatus:
    """The "does this fix work" goal for one arm: its failure rate's one-sided 95 % bounds."""

    label: str
    failures: int
    n: int
    upper: float
    lower: float
    target: float
    decision: FixDecision
    clean_needed: int            # launches in a row without a failure that would bound it below target


@dataclass(frozen=True)
class ReportData:
    """One campaign's report."""

    matrix: str
    title: str
    notes: tuple[str, ...]
    summaries: tuple[ArmSummary, ...]
    comparisons: tuple[Comparison, ...]
    drift: Drift
    results: tuple[TrialResult, ...]             # every trial of the reported arms, for timelines and ladders
    legend: tuple[LegendEntry, ...]
    stats: Stats
    baseline: str | None                         # the reference arm's label
    rule_note: str = ""                          # the run's stored rule judged, where the matrix now says otherwise
    fix: tuple[FixStatus, ...] = ()
    binary_axes: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # axis -> (off level, on level)
    setup: tuple[tuple[str, str], ...] = ()      # (what, value): hardware, engine, model, parallelism, build, env
    columns: Mapping[str, str] = field(default_factory=dict)  # axis -> its column's name (the change: "#32467")

    def results_of(self, arm_id: str) -> Sequence[TrialResult]:
        """One arm's trials in trial order."""
        return sorted((r for r in self.results if r.arm_id == arm_id), key=lambda r: r.trial)

    def as_json(self) -> dict[str, Any]:
        """Plain data for format=json (see adapters.report)."""
        from dataclasses import asdict
        d = asdict(self)
        d["results"] = [r.to_dict() for r in self.results]
        return d
