"""An arm's launches told in one cell, in the words engineers write in pull requests:
"3/3 READY, 35/35 shapes each", "1/1 library error at bs=104, TP7 (CUBLAS_STATUS_EXECUTION_FAILED)"."""
from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from harness.core.outcome import Outcome
from harness.core.record import TrialResult

WORDS = {
    Outcome.IMA: "illegal memory access", Outcome.CAPTURE_ERROR: "capture failure", Outcome.SEGFAULT: "segfault",
    Outcome.OOM: "out of memory", Outcome.DEVICE_ASSERT: "device-side assert", Outcome.NCCL: "NCCL error",
    Outcome.COMM_TIMEOUT: "communication timeout", Outcome.LIBRARY_ERROR: "library error",
    Outcome.ASSERTION: "start-up error", Outcome.HANG: "hang", Outcome.TIMEOUT: "not ready in time",
    Outcome.OTHER: "other failure",
}
# An error code spelled in capitals: CUBLAS_STATUS_EXECUTION_FAILED, CUDA_ERROR_ILLEGAL_ADDRESS.
_CODE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+){2,}\b")
_LISTED = 3


def _values(values: Sequence[object], sep: str = "/") -> str:
    """"104" when all agree, "8/32/4" for a few, "8/32/4/…" beyond."""
    distinct = list(dict.fromkeys(values))
    return sep.join(str(v) for v in distinct[:_LISTED]) + (f"{sep}…" if len(distinct) > _LISTED else "")


def _failures(outcome: Outcome, rs: Sequence[TrialResult], of: int) -> str:
    text = f"{len(rs)}/{of} {WORDS.get(outcome, outcome.value)}"
    bs = sorted(r.ladder.failing_bs for r in rs if r.ladder.failing_bs is not None)
    ranks = [r.failing_rank for r in rs if r.failing_rank]
    if bs:
        text += f" at bs={_values(bs)}"
    if ranks:
        text += f", {_values(ranks)}"
    codes = [m.group(0) for r in rs for m in [_CODE.search(r.first_error_line or "")] if m]
    if codes:
        text += f" ({_values(codes, ', ')})"
    return text


def _ready(rs: Sequence[TrialResult], of: int) -> str:
    text = f"{len(rs)}/{of} READY"
    ladders = [(r.ladder.shapes_captured, r.ladder.shapes_total) for r in rs if r.ladder.shapes_total]
    if ladders and len(ladders) == len(rs):
        if len(set(ladders)) == 1:
            c, t = ladders[0]
            text += f", {c}/{t} shapes" + (" each" if len(rs) > 1 else "")
        else:
            lo, hi = min(c or 0 for c, _ in ladders), max(c or 0 for c, _ in ladders)
            text += f", {lo}–{hi}/{max(t for _, t in ladders)} shapes"
    return text


def result_cell(results: Sequence[TrialResult]) -> str:
    """The arm's launches in one cell: READY k/n with the ladder, then each failure class with its
    failing bs, rank and error code, most frequent first; launches that do not count are named."""
    counted = [r for r in results if r.outcome.counts]
    n = len(counted)
    parts: list[str] = []
    ready = [r for r in counted if r.outcome is Outcome.READY]
    if ready or not counted:
        parts.append(_ready(ready, n) if counted else "no launch counted")
    by_class: dict[Outcome, list[TrialResult]] = {}
    for r in counted:
        if r.outcome is not Outcome.READY:
            by_class.setdefault(r.outcome, []).append(r)
    for outcome, rs in sorted(by_class.items(), key=lambda kv: -len(kv[1])):
        parts.append(_failures(outcome, rs, n))
    text = "; ".join(parts)
    others = Counter(r.outcome.value for r in results if not r.outcome.counts)
    if others:
        text += " (+" + ", ".join(f"{c} {o}" for o, c in others.most_common()) + ", not counted)"
    return text
