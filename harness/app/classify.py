"""Use case: classify existing server logs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.classify import LogClassifier


def classify_file(path: Path, ready_marker: str | None = None) -> dict[str, Any]:
    """Stream a log file through the classifier; the keys match labels.jsonl of the real-log fixtures."""
    clf = LogClassifier(ready_marker=ready_marker)
    with open(path, "rb") as f:
        for raw in f:
            clf.feed(raw.decode("utf-8", errors="replace").rstrip("\n"))
    c = clf.result()
    return {"file": str(path), "outcome": c.outcome.value if c.outcome else None,
            "first_error_line": c.first_error_line, "failing_bs": c.failing_bs, "failing_rank": c.failing_rank,
            "shapes_captured": c.shapes_captured, "shapes_total": c.shapes_total, "capture_s": c.capture_s,
            "signature": c.signature, "ready_line": c.ready_line}
