"""Labelled logs: the real excerpts (shared/fixtures/real-logs) and our own cases (tests/data/logs)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.core.classify import Classification, LogClassifier, classify_text

OWN_LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
LABELLED_FIELDS = ("outcome", "first_error_line", "failing_bs", "failing_rank", "shapes_captured")


def find_real_logs() -> Path | None:
    """The shared real-log fixtures: $HARNESS_REAL_LOGS, else shared/fixtures/real-logs above us."""
    env = os.environ.get("HARNESS_REAL_LOGS")
    if env:
        return Path(env) if Path(env).is_dir() else None
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "fixtures" / "real-logs"
        if candidate.is_dir():
            return candidate
    return None


def load_labels(folder: Path | None) -> list[dict]:
    """The labels.jsonl rows of a fixture folder (empty when the folder is absent)."""
    if folder is None or not (folder / "labels.jsonl").is_file():
        return []
    rows = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines() if line.strip()]
    for row in rows:
        row["path"] = folder / row["file"]
    return rows


def read_log(path: Path) -> str:
    """A log as text, undecodable bytes replaced (as the harness reads server logs)."""
    return path.read_bytes().decode("utf-8", errors="replace")


REAL = load_labels(find_real_logs())
OWN = load_labels(OWN_LOGS)
ALL = REAL + OWN


def as_labels(c: Classification) -> dict:
    return {
        "outcome": c.outcome.value if c.outcome else None,
        "first_error_line": c.first_error_line,
        "failing_bs": c.failing_bs,
        "failing_rank": c.failing_rank,
        "shapes_captured": c.shapes_captured,
    }


def _check(label: dict, c: Classification) -> None:
    got = as_labels(c)
    want = {k: label[k] for k in LABELLED_FIELDS}
    assert got == want, label.get("notes")


@pytest.mark.skipif(not REAL, reason="shared/fixtures/real-logs not found (set HARNESS_REAL_LOGS)")
@pytest.mark.parametrize("label", REAL, ids=[r["file"] for r in REAL])
def test_real_excerpt_matches_its_label(label: dict) -> None:
    _check(label, classify_text(read_log(label["path"])))


def test_own_cases_are_present_and_labelled() -> None:
    logs = sorted(p.name for p in OWN_LOGS.glob("*.log"))
    assert 10 <= len(logs) <= 20
    assert logs == sorted(r["file"] for r in OWN)


@pytest.mark.parametrize("label", OWN, ids=[r["file"] for r in OWN])
def test_own_case_matches_its_label(label: dict) -> None:
    c = classify_text(read_log(label["path"]))
    _check(label, c)
    if "shapes_total" in label:
        assert c.shapes_total == label["shapes_total"]
    if "capture_s" in label:
        assert c.capture_s == pytest.approx(label["capture_s"])
    if "signature_site" in label:
        assert c.signature is not None and c.signature.endswith("@" + label["signature_site"])


@pytest.mark.parametrize("label", ALL, ids=[r["file"] for r in ALL])
def test_labelled_line_is_verbatim_in_the_log(label: dict) -> None:
    lines = read_log(label["path"]).split("\n")
    assert label["first_error_line"] is None or label["first_error_line"] in lines


@pytest.mark.parametrize("label", ALL, ids=[r["file"] for r in ALL])
def test_streaming_a_file_as_bytes_gives_the_same_answer(label: dict) -> None:
    # How the app layer streams a file: binary lines, decoded, newline stripped.
    classifier = LogClassifier()
    with open(label["path"], "rb") as log:
        for raw in log:
            classifier.feed(raw.decode("utf-8", errors="replace").rstrip("\n"))
    assert classifier.result() == classify_text(read_log(label["path"]))


@pytest.mark.parametrize("label", ALL, ids=[r["file"] for r in ALL])
def test_failures_have_signatures_and_ready_has_none(label: dict) -> None:
    c = classify_text(read_log(label["path"]))
    if c.outcome is None or c.outcome.value == "READY":
        assert c.signature is None
    else:
        assert c.signature is not None and c.signature.startswith(c.outcome.value + ":")
