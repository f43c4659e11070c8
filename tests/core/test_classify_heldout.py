"""Held-out real logs (tests/data/heldout): excerpts from public issues the classifier was not
developed on, labelled before the classifier was run on them; plus the general rules they led to."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.classify import LogClassifier, classify_text
from harness.core.classify.normalize import clean, strip_prefixes
from harness.core.classify.rules import match
from harness.core.outcome import Outcome
from tests.core.test_classify_fixtures import as_labels, find_real_logs, load_labels, read_log

DATA = Path(__file__).resolve().parents[1] / "data"
HELDOUT = DATA / "heldout"
FIELDS = ("outcome", "first_error_line", "failing_bs", "failing_rank", "shapes_captured")


def _dev_label_folders() -> list[Path]:
    return [f for f in (DATA / "logs", find_real_logs()) if f is not None]


LABELS = load_labels(HELDOUT)
IDS = [row["file"] for row in LABELS]


def test_heldout_logs_are_present_and_labelled() -> None:
    logs = sorted(p.name for p in HELDOUT.glob("*.log"))
    assert 20 <= len(logs) <= 25
    assert logs == sorted(IDS)
    for row in LABELS:
        assert "https://github.com/" in row["source"]
        assert row["notes"]
        assert len(read_log(HELDOUT / row["file"]).split("\n")) <= 81  # <= 80 lines plus the final newline


def test_heldout_sources_are_not_development_sources() -> None:
    ref = re.compile(r"[\w.-]+/[\w.-]+#\d+")
    dev = {m for folder in _dev_label_folders() for row in load_labels(folder) for m in ref.findall(row["source"])}
    for row in LABELS:
        assert not set(ref.findall(row["source"])) & dev, row["file"]


@pytest.mark.parametrize("label", LABELS, ids=IDS)
def test_heldout_log_matches_its_label(label: dict) -> None:
    got = as_labels(classify_text(read_log(HELDOUT / label["file"])))
    assert got == {k: label[k] for k in FIELDS}, label["notes"]


@pytest.mark.parametrize("label", LABELS, ids=IDS)
def test_heldout_labelled_line_is_verbatim_in_the_log(label: dict) -> None:
    assert label["first_error_line"] in read_log(HELDOUT / label["file"]).split("\n")


@pytest.mark.parametrize("label", LABELS, ids=IDS)
def test_heldout_streaming_bytes_gives_the_same_answer(label: dict) -> None:
    classifier = LogClassifier()
    with open(HELDOUT / label["file"], "rb") as log:
        for raw in log:
            classifier.feed(raw.decode("utf-8", errors="replace").rstrip("\n"))
    assert classifier.result() == classify_text(read_log(HELDOUT / label["file"]))


@pytest.mark.parametrize("label", LABELS, ids=IDS)
def test_heldout_failures_have_signatures(label: dict) -> None:
    c = classify_text(read_log(HELDOUT / label["file"]))
    if c.outcome is Outcome.READY:
        assert c.signature is None
    else:
        assert c.signature is not None and c.signature.startswith(c.outcome.value + ":")


# The general rules the held-out set led to, on lines of other shapes than the held-out ones.

@pytest.mark.parametrize(("message", "outcome"), [
    ("TimeoutError", Outcome.COMM_TIMEOUT),
    ("asyncio.exceptions.TimeoutError", Outcome.COMM_TIMEOUT),
    ("TimeoutError: RPC call to execute_model timed out.", Outcome.COMM_TIMEOUT),
    ("ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).",
     Outcome.ASSERTION),
    ("ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization "
     "block_n = 128.", Outcome.ASSERTION),
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'", Outcome.OTHER),
    ("hip error: invalid device function", Outcome.OTHER),
])
def test_general_rule_families(message: str, outcome: Outcome) -> None:
    rule = match(message)
    assert rule is not None and rule.outcome is outcome


def test_terminate_wrapper_yields_to_its_what_line() -> None:
    log = (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with "
        "exception: NCCL error: unhandled cuda error\n"
    )
    c = classify_text(log)
    assert c.outcome is Outcome.NCCL
    assert c.first_error_line.startswith("  what():") and c.failing_rank == "Rank 3"
    only_wrapper = classify_text("terminate called after throwing an instance of 'c10::Error'\n")
    assert only_wrapper.outcome is Outcome.OTHER


@pytest.mark.parametrize(("line", "message"), [
    ("2025-03-03 17:23:05,701 - __main__ - INFO - RuntimeError: CUDA error: out of memory",
     "RuntimeError: CUDA error: out of memory"),
    ("2025-02-25T17:41:21+08:00 - gpustack.worker.backends.vllm - INFO - Starting vllm server",
     "Starting vllm server"),
    ('2023-12-12 19:38:39 | ERROR | stderr |   File "/x/vllm_worker.py", line 243, in <module>',
     'File "/x/vllm_worker.py", line 243, in <module>'),
    ("2024-06-25 09:17:32,746 - lmdeploy - WARNING - [rank0]: NCCL error", "NCCL error"),
])
def test_python_logging_relay_prefix_is_stripped_without_its_level(line: str, message: str) -> None:
    stripped = strip_prefixes(clean(line))
    assert stripped.message == message
    assert stripped.level is None  # the relay's level says nothing about the server's line


def test_relayed_exception_line_is_read_and_not_silenced_by_the_relay_level() -> None:
    line = "2025-03-03 17:23:05,701 - __main__ - INFO - KeyError: 'model.layers.0.mlp.weight'"
    c = classify_text(line + "\n")
    assert c.outcome is Outcome.OTHER and c.first_error_line == line


def test_blank_lines_pasted_between_frame_and_source_line() -> None:
    # Every line doubled by the paste: the source line of the frame must still be read as source.
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/pynccl_wrapper.py", line 256, in NCCL_CHECK',
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "KeyError: 'model.layers.0.mlp.weight'",
    ]
    c = classify_text("\n\n".join(lines) + "\n")
    assert c.outcome is Outcome.OTHER and c.first_error_line == lines[-1]
