"""Use case: classify existing server logs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.classify import LogClassifier
from harness.core.outcome import Outcome


def classify_file(path: Path, ready_marker: str | None = None) -> dict[str, Any]:
    """Stream a log file through the classifier; the keys of labels.jsonl of the real-log fixtures, plus
    ready_line. A READY log has no first_error_line: its ready line is ready_line (the classifier's
    first_error_line holds it, as the fixtures' labels do)."""
    clf = LogClassifier(ready_marker=ready_marker)
    with open(path, "rb") as f:
        for raw in f:
            clf.feed(raw.decode("utf-8", errors="replace").rstrip("\n"))
    c = clf.result()
    return {"file": str(path), "outcome": c.outcome.value if c.outcome else None,
            "first_error_line": None if c.outcome is Outcome.READY else c.first_error_line, "failing_bs": c.failing_bs, "failing_rank": c.failing_rank,
            "shapes_captured": c.shapes_captured, "shapes_total": c.shapes_total, "capture_s": c.capture_s,
            "signature": c.signature, "ready_line": c.ready_line}
