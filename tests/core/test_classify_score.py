"""Score every labelled field of the shared real logs (shared/fixtures/real-logs) and require 100%.

    .venv/bin/python -m pytest tests/core/test_classify_score.py -s

prints the per-field accuracy, for the generic classifier and with each log's engine dialect
(labels.jsonl names the engine: vllm | sglang | atom | other)."""
from __future__ import annotations

from collections import defaultdict

import pytest

from harness.adapters.engines import engine_names, get_engine
from harness.core.classify import Dialect, classify_text
from tests.core.test_classify_fixtures import LABELLED_FIELDS, find_real_logs, load_labels, read_log

REAL = load_labels(find_real_logs())


def _value(c, field: str):
    value = getattr(c, field)
    return value.value if field == "outcome" and value is not None else value


def dialect_for(engine: str) -> Dialect:
    return get_engine(engine).dialect() if engine in engine_names() else Dialect()


def score(rows: list[dict], with_dialect: bool) -> tuple[dict[str, list[int]], list[str]]:
    """{field: [right, total]} over rows, and one line per wrong field."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    wrong = []
    for row in rows:
        c = classify_text(read_log(row["path"]), dialect=dialect_for(row["engine"]) if with_dialect else None)
        for field in LABELLED_FIELDS:
            got, want = _value(c, field), row[field]
            tally[field][1] += 1
            if got == want:
                tally[field][0] += 1
            else:
                wrong.append(f"{row['file']} ({row['engine']}) {field}: got {got!r}, labelled {want!r}")
    return tally, wrong


def table(generic: dict[str, list[int]], dialect: dict[str, list[int]]) -> str:
    lines = [f"{'field':<18}{'generic':>14}{'engine dialect':>18}"]
    for field in LABELLED_FIELDS:
        cells = [f"{r}/{n} {100 * r / n:5.1f}%" for r, n in (generic[field], dialect[field])]
        lines.append(f"{field:<18}{cells[0]:>14}{cells[1]:>18}")
    right = sum(r for r, _ in dialect.values())
    total = sum(n for _, n in dialect.values())
    lines.append(f"{'all fields':<18}{'':>14}{f'{right}/{total} {100 * right / total:5.1f}%':>18}")
    return "\n".join(lines)


@pytest.mark.skipif(not REAL, reason="shared/fixtures/real-logs not found (set HARNESS_REAL_LOGS)")
def test_every_labelled_field_of_the_real_logs_is_right() -> None:
    generic, wrong_generic = score(REAL, with_dialect=False)
    dialect, wrong_dialect = score(REAL, with_dialect=True)
    engines = ", ".join(f"{e} {sum(r['engine'] == e for r in REAL)}" for e in sorted({r["engine"] for r in REAL}))
    print(f"\nreal logs: {len(REAL)} files ({engines})\n" + table(generic, dialect))
    assert wrong_dialect == [] and wrong_generic == []
