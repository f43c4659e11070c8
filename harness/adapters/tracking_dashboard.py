"""What a campaign's report looks like in MLflow: the campaign run, one run per arm, and the saved
"arms" view of the runs table.

Pure functions (no MLflow import): tracking.py writes what these compute. Every number is taken
from the ReportData, so the dashboard and the report cannot disagree; every string passes through
`Secrets.value` (scrubbed, clipped) and every key through `safe_key`.
"""
from __future__ import annotations

import json
import math
from typing import Iterable, Mapping

from harness.adapters.tracking_fields import TAG_LIMIT, RunFields, Secrets, clip, run_times_ms, safe_key
from harness.core.matrix import Compare
from harness.core.record import TrialResult
from harness.core.reportdata import ReportData
from harness.core.summary import ArmSummary
from harness.core.verdicts import READY, Comparison

# Experiment tag read by the MLflow UI (3.x): a "Machine learning" experiment, not a GenAI one.
KIND_TAG, KIND_CLASSIC = "mlflow.experimentKind", "custom_model_development"
# A saved view of the runs table (MLflow UI's "Views" menu, shareable by ?viewStateShareKey=).
VIEW_KEY = "harness-arms"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_NAME = "harness: arms"
NOTE_TAG = "mlflow.note.content"   # the run's description, shown as markdown on its page

# Tags the harness owns on an arm run; one absent from a new report is deleted.
ARM_TAG_KEYS = ("ready", "verdict", "top_signature", "label")
# Metrics that only exist while their value does; one gone from a new report is logged as NaN.
ARM_OPTIONAL_METRICS = ("ready_rate", "ready_ci_low", "ready_ci_high")
GATE_PREFIX = "gate."
DECIMALS = 4


def launch_key(result: TrialResult) -> str:
    """What tells one launch of a trial from another: its launch_id; a record from before launch
    ids falls back to its start time."""
    if result.launch_id:
        return result.launch_id
    return f"started:{result.started_at}" if result.started_at else "unknown"


def verdict_text(summary: ArmSummary, comparisons: Iterable[Comparison], baseline: str | None,
                 compare: Compare) -> str | None:
    """The arm's READY verdicts as the report states them: "BETTER vs A"; "baseline" for the
    reference arm; None when the arm was not judged (an older arm of the store)."""
    parts = []
    for c in comparisons:
        if c.metric != READY:
            continue
        if c.arm_id == summary.arm_id:
            parts.append(f"{c.verdict.value} vs {c.ref}")
        elif c.ref_id == summary.arm_id and compare is Compare.ALL:
            parts.append(f"{c.verdict.flipped().value} vs {c.arm}")
    if parts:
        return "; ".join(parts)
    return "baseline" if summary.label == baseline and compare is Compare.BASELINE else None


def _shown(x: float) -> float:
    # Four decimals: the report prints two, and MLflow's table cuts a long float off with an ellipsis.
    return round(float(x), DECIMALS)


def arm_fields(summary: ArmSummary, data: ReportData, secrets: Secrets) -> RunFields:
    """Metrics and tags of one arm's run: the report's numbers for that arm (rates, interval bounds
    and gate means to DECIMALS places)."""
    metrics: dict[str, float] = {"ready_k": float(summary.ready), "n": float(summary.n)}
    if summary.n:
        lo, hi = summary.interval
        metrics.update(ready_rate=_shown(summary.ready / summary.n), ready_ci_low=_shown(lo), ready_ci_high=_shown(hi))
    for g in summary.gates:
        if g.n:
            metrics[safe_key(f"{GATE_PREFIX}{g.name}.pass_rate")] = _shown(g.passed / g.n)
        for name, mean, _, _ in g.metrics:
            metrics[safe_key(f"{GATE_PREFIX}{g.name}.{name}")] = _shown(mean)
    tags = {"ready": f"{summary.ready}/{summary.n}", "label": summary.label}
    verdict = verdict_text(summary, data.comparisons, data.baseline, data.stats.compare)
    if verdict is not None:
        tags["verdict"] = verdict
    if summary.signatures:
        sig, count = summary.signatures[0]
        tags["top_signature"] = f"{count}× {sig}"
    return RunFields(metrics=metrics, tags={safe_key(k): clip(secrets.value(k, v), TAG_LIMIT) for k, v in tags.items()})


def stale_metrics(old: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """NaN for each harness metric the arm run holds that the new report no longer has (MLflow
    keeps a metric forever; NaN says it has no value now, rather than showing the old one)."""
    return {k: math.nan for k, v in old.items()
            if k not in new and (k in ARM_OPTIONAL_METRICS or k.startswith(GATE_PREFIX)) and not math.isnan(v)}


def campaign_fields(data: ReportData, secrets: Secrets, trials_in_store: int) -> RunFields:
    """Tags of the campaign run: what it counts, its verdicts, and a short markdown description."""
    counted = len(data.results)
    verdicts = [f"{s.label}: {v}" for s in data.summaries
                if (v := verdict_text(s, data.comparisons, data.baseline, data.stats.compare)) not in (None, "baseline")]
    tags = {"arms": str(len(data.summaries)), "trials": str(counted), "baseline": data.baseline or "-",
            "verdicts": "; ".join(verdicts) or "-"}
    if trials_in_store > counted:
        tags["kept_not_counted"] = str(trials_in_store - counted)
    lines = [f"**{data.title}**", ""] + [f"- {n}" for n in data.notes]
    lines += [f"- {s.label} ({', '.join(f'{k}={v}' for k, v in s.levels.items())}): {s.ready_text} READY"
              for s in data.summaries]
    lines += ["", f"Verdicts: {tags['verdicts']}", "",
              "The full report: report.md, report.html and report.json among this run's artifacts; "
              "the arms side by side: the runs table's view \"" + VIEW_NAME + "\"."]
    tags[NOTE_TAG] = "\n".join(lines)
    metrics = {"arms": float(len(data.summaries)), "trials": float(counted)}
    return RunFields(metrics=metrics, tags={k: clip(secrets.value(k, v), TAG_LIMIT) for k, v in tags.items()})


def times_ms(results: Iterable[TrialResult]) -> tuple[int | None, int | None]:
    """(first start, last end) over these launches, in epoch milliseconds."""
    spans = [run_times_ms(r) for r in results]
    starts = [s for s, _ in spans if s is not None]
    ends = [e for _, e in spans if e is not None]
    return (min(starts) if starts else None), (max(ends) if ends else None)


def _col(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"   # the runs table's column id


def view_columns(data: ReportData) -> list[str]:
    """The arms view's columns, in order: READY k/n, rate and interval, verdict, top signature,
    each gate's pass rate and metric means, then the levels."""
    cols = [_col("tags", "ready"), _col("metrics", "ready_rate"), _col("metrics", "ready_ci_low"),
            _col("metrics", "ready_ci_high"), _col("tags", "verdict"), _col("tags", "top_signature")]
    gates: list[str] = []
    for s in data.summaries:
        for g in s.gates:
            keys = ([f"{GATE_PREFIX}{g.name}.pass_rate"] if g.n else []) + [f"{GATE_PREFIX}{g.name}.{m}" for m, *_ in g.metrics]
            gates += [safe_key(k) for k in keys if safe_key(k) not in gates]
    axes: list[str] = []
    for s in data.summaries:
        axes += [a for a in s.levels if a not in axes]
    return cols + [_col("metrics", g) for g in gates] + [_col("params", safe_key(f"level.{a}")) for a in axes]


def view_state(data: ReportData) -> str:
    """The saved view's state as the MLflow UI reads it: the arm runs only, in label order, with
    the report's columns. Deterministic, so an unchanged campaign rewrites nothing."""
    cols = view_columns(data)
    state = {
        "searchFilter": "tags.`harness.kind` = 'arm'", "orderByKey": _col("tags", "label"), "orderByAsc": True,
        "startTime": "ALL", "lifecycleFilter": "Active", "datasetsFilter": [], "modelVersionFilter": "All Runs",
        "selectedColumns": cols, "columnOrder": ["tags.`mlflow.runName`", *cols],
        "columnWidths": {_col("tags", "top_signature"): 420, _col("tags", "verdict"): 160},
        "runsHiddenMode": "SHOW_ALL", "viewMaximized": False, "runListHidden": False,
    }
    return json.dumps(state, sort_keys=True)


def view_tag(state: str, existing: str | None, now_ms: int) -> str | None:
    """The view's experiment tag value (MLflow's saved-view envelope), or None when `existing`
    already holds this state."""
    created = now_ms
    if existing:
        try:
            old = json.loads(existing)
            if old.get("state") == state and old.get("name") == VIEW_NAME:
                return None
            created = int(old.get("createdAt", now_ms))
        except (ValueError, TypeError, AttributeError):
            pass  # not ours or damaged: written anew
    return json.dumps({"name": VIEW_NAME, "createdAt": created, "updatedAt": now_ms, "state": state})


def view_url(base_url: str, experiment_id: str) -> str:
    """The arms view in the MLflow UI, opened as a classic (machine learning) experiment."""
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs"
            f"?viewStateShareKey={VIEW_KEY}&workflowType=machine_learning")
