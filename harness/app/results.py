"""Stored results as a pandas DataFrame: the campaign's trials, the ones its report counts."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.adapters.store import Store
from harness.core.campaign import select
from harness.errors import NoCampaign


def load_frame(matrix: str, runs_dir: str | Path = "runs") -> pd.DataFrame:
    """One row per trial: arm, label, level.<axis>…, trial, outcome, counts, extracted fields, timings."""
    store = Store(Path(runs_dir), matrix)
    results = store.results()
    if not results:
        raise NoCampaign(matrix, str(store.root.resolve()))
    rows = []
    for r in select(results, store.size()).counted:
        rows.append({
            "matrix": r.matrix, "arm_id": r.arm_id, "label": r.label, "trial": r.trial, "launch_id": r.launch_id,
            **{f"level.{k}": v for k, v in r.levels.items()},
            "outcome": r.outcome.value, "counts": r.outcome.counts, "ready": r.outcome.value == "READY",
            "first_error_line": r.first_error_line, "signature": r.signature, "failing_rank": r.failing_rank,
            "failing_bs": r.ladder.failing_bs, "shapes_captured": r.ladder.shapes_captured,
            "shapes_total": r.ladder.shapes_total, "capture_s": r.ladder.capture_s, "startup_s": r.startup_s,
            "verdict_s": r.verdict_s, "duration_s": r.duration_s, "started_at": r.started_at,
            "engine": r.engine, "model": r.model, "tp": r.tp, "dp": r.dp, "ep": r.ep,
            "base_sha": r.source.base_sha, "patches": ",".join(p.name for p in r.source.patches),
            "host": r.host.get("hostname"),
        })
    return pd.DataFrame(rows)
