"""The streaming contract and properties that must hold for any log."""
from __future__ import annotations

import re
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.classify import LogClassifier, classify_text
from harness.core.classify.classifier import _raw
from harness.core.outcome import Outcome
from tests.core.test_classify_fixtures import ALL, read_log

LOGS = {r["file"]: read_log(r["path"]) for r in ALL}
NAMES = sorted(LOGS)
_FRAME = re.compile(r'File "[^"]+", line \d+,')
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class ExhaustiveClassifier(LogClassifier):
    """Looks at every line: no substring prefilter."""

    def feed(self, line: str) -> Outcome | None:
        self._seg += 1
        return self._feed_slow(_raw(line))


def lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def feed_all(classifier: LogClassifier, lines: list[str]) -> list[Outcome | None]:
    return [classifier.feed(line) for line in lines]


@pytest.mark.parametrize("name", NAMES)
def test_fatal_outcome_is_returned_once_at_the_first_fatal_line(name: str) -> None:
    lines = lines_of(LOGS[name])
    classifier = LogClassifier()
    answers = feed_all(classifier, lines)
    fatal = [i for i, a in enumerate(answers) if a is not None and a is not Outcome.READY]
    ready = [i for i, a in enumerate(answers) if a is Outcome.READY]
    final = classifier.result()
    assert len(ready) <= 1 and len(fatal) <= 1
    if not fatal:
        # Without a fatal line the log can only be quiet, READY, or stopped in a stall that
        # no line declared: inside a capture, or with workers not answering a broadcast.
        assert final.outcome in (None, Outcome.READY, Outcome.HANG, Outcome.COMM_TIMEOUT)
        if final.outcome in (Outcome.HANG, Outcome.COMM_TIMEOUT):
            assert "Captur" in final.first_error_line or "broadcast block" in final.first_error_line
        return
    assert final.outcome not in (None, Outcome.READY)
    (first,) = fatal
    # Nothing before that line names a failure, and the root cause is not before it either.
    before = LogClassifier()
    assert all(a in (None, Outcome.READY) for a in feed_all(before, lines[:first]))
    assert first <= lines.index(final.first_error_line)


@pytest.mark.parametrize("name", NAMES)
def test_result_equals_classify_text_and_prefilter_hides_nothing(name: str) -> None:
    lines = lines_of(LOGS[name])
    streamed, exhaustive = LogClassifier(), ExhaustiveClassifier()
    feed_all(streamed, lines)
    feed_all(exhaustive, lines)
    assert streamed.result() == classify_text(LOGS[name]) == exhaustive.result()


@SETTINGS
@given(name=st.sampled_from(NAMES), cut=st.floats(0, 1))
def test_any_prefix_streamed_equals_the_prefix_classified(name: str, cut: float) -> None:
    lines = lines_of(LOGS[name])
    head = lines[: int(len(lines) * cut)]
    classifier = LogClassifier()
    feed_all(classifier, head)
    assert classifier.result() == classify_text("\n".join(head))


# Noise that real logs carry in front of a line, none of which changes what the line says.
NOISE_PREFIXES = st.sampled_from([
    "", "vllm-1  | ", "  | ", "2025-01-01T00:00:00.000Z stderr F ", "\x1b[36m\x1b[0m", " [36m [0m",
    '<font color="#2AA1B3"><b></b></font>', "^@^@", "\x00", "[sglang]     | ",
])


def _key(text: str) -> tuple:
    c = classify_text(text)
    return c.outcome, c.failing_bs, c.shapes_captured, c.shapes_total


@SETTINGS
@given(name=st.sampled_from(NAMES), data=st.data())
def test_wrappers_and_colours_do_not_change_the_outcome(name: str, data: st.DataObject) -> None:
    lines = lines_of(LOGS[name])
    wrappers = data.draw(st.lists(NOISE_PREFIXES, min_size=len(lines), max_size=len(lines)))
    colours = data.draw(st.lists(st.sampled_from(["", "\x1b[31m", " [32m", "**"]),
                                 min_size=len(lines), max_size=len(lines)))
    noisy = [w + c + line for w, c, line in zip(wrappers, colours, lines, strict=True)]
    assert _key("\n".join(noisy)) == _key(LOGS[name])


INFO_LINES = st.sampled_from([
    "(APIServer pid=7) INFO:     127.0.0.1:50812 - \"POST /v1/completions HTTP/1.1\" 200 OK",
    "[2025-06-22 16:13:55 TP0] Decode batch. #running-req: 1, #token: 43, token usage: 0.00, #queue-req: 0",
    "INFO 02-03 13:14:04 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Running: 1 reqs",
    "node-0:32478:34896 [2] NCCL INFO comm 0x55b978e00250 rank 2 nranks 8 cudaDev 2 - Init COMPLETE",
    "Loading safetensors checkpoint shards:  47% Completed | 8/17 [00:04<00:05,  1.70it/s]",
    "",
])


@SETTINGS
@given(name=st.sampled_from(NAMES), data=st.data())
def test_ordinary_lines_inserted_do_not_change_the_outcome(name: str, data: st.DataObject) -> None:
    lines = lines_of(LOGS[name])
    # Not right after a traceback frame: there Python prints the frame's source line.
    slots = [i for i in range(len(lines) + 1) if i == 0 or not _FRAME.search(lines[i - 1])]
    inserts = data.draw(st.lists(st.tuples(st.sampled_from(slots), INFO_LINES), max_size=6))
    noisy = list(lines)
    for slot, extra in sorted(inserts, reverse=True):
        noisy.insert(slot, extra)
    got = classify_text("\n".join(noisy))
    want = classify_text(LOGS[name])
    assert (got.outcome, got.failing_rank, got.failing_bs) == (want.outcome, want.failing_rank, want.failing_bs)


@SETTINGS
@given(name=st.sampled_from(NAMES), data=st.data())
def test_gluing_lines_with_carriage_returns_does_not_change_the_outcome(name: str, data: st.DataObject) -> None:
    lines = lines_of(LOGS[name])
    glue = data.draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + ("\r" if g else "\n") for line, g in zip(lines, glue, strict=True))
    assert _key(text) == _key(LOGS[name])


MESSAGES = st.sampled_from([
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "Fatal Python error: Segmentation fault",
    "Watchdog timeout (self.watchdog_timeout=300)",
    "[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)",
    "rocblaslt error: Could not load /x/y/TensileLibrary.dat",
    "NVCC compilation failed: nvcc fatal   : Unsupported gpu architecture 'sm_100f'",
    "AssertionError: bad shape",
    "KeyError: 'x'",
    "scheduler_0 (pid=33237) crashed with exit code -11",
    "Fatal Python error: Aborted",
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    "Capturing batches (bs=64 avail_mem=9.80 GB):   8%|#  | 1/13 [00:02<00:31,  2.61s/it]",
    "Graph capturing finished in 5 secs, took 0.45 GiB",
    "The server is fired up and ready to roll!",
    "No available shared memory broadcast block found in 60 seconds.",
    "Traceback (most recent call last):",
    '  File "/x/model.py", line 10, in forward',
    "    _kernel[grid](x)",
    "HW Exception by GPU node-1 (Agent handle: 0x1) reason :GPU Hang",
    "Memory access fault by GPU node-5 (Agent handle: 0x1) on address 0x2. Reason: Unknown.",
    "../aten/src/ATen/native/cuda/Indexing.cu:1284: k: block: [0,0,0], thread: [1,0,0] Assertion `a` failed.",
    "TimeoutError: RPC call to execute_model timed out.",
    "Exception: Capture cuda graph failed: CUDA error: unspecified launch failure",
])
PREFIXES = st.sampled_from(["", "(Worker_TP1 pid=4) ", "[2025-01-01 00:00:00 TP2] ", "[rank3]:",
                            "(EngineCore_DP0 pid=3) ERROR 01-01 00:00:00 [core.py:1] ", "  | "])


@SETTINGS
@given(st.lists(st.tuples(PREFIXES, st.one_of(MESSAGES, INFO_LINES)), max_size=30))
def test_prefilter_never_hides_a_line_the_rules_would_read(pairs: list[tuple[str, str]]) -> None:
    # Bare consequence lines ("EngineCore failed to start.") are skipped by design: they are
    # never the cause and always follow an error line the prefilter does let through.
    lines = [p + m for p, m in pairs]
    streamed, exhaustive = LogClassifier(), ExhaustiveClassifier()
    assert feed_all(streamed, lines) == feed_all(exhaustive, lines)
    assert streamed.result() == exhaustive.result()


def test_ready_then_fatal_is_the_fatal_class() -> None:
    classifier = LogClassifier()
    assert classifier.feed("INFO:     Application startup complete.") is Outcome.READY
    assert classifier.feed("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)") is Outcome.NCCL
    assert classifier.feed("RuntimeError: NCCL error: unhandled cuda error") is None  # only once
    c = classifier.result()
    assert c.outcome is Outcome.NCCL and c.ready_line == "INFO:     Application startup complete."


def test_python_error_after_ready_counts_only_when_the_engine_dies() -> None:
    ready = "INFO:     Application startup complete."
    err = "ValueError: Tool choice 'required' is not supported with stream=True"
    assert classify_text(f"{ready}\n{err}").outcome is Outcome.READY
    dead = classify_text(f"{ready}\n{err}\nvllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
    assert dead.outcome is Outcome.ASSERTION and dead.first_error_line == err


def test_memory_stays_bounded_over_a_long_log() -> None:
    classifier = LogClassifier()
    block = [
        "(Worker_TP{r} pid=1) ERROR 01-01 00:00:00 [x.py:1] Traceback (most recent call last):",
        '(Worker_TP{r} pid=1) ERROR 01-01 00:00:00 [x.py:1]   File "/x/m{r}.py", line 1, in f{r}',
        "(Worker_TP{r} pid=1) ERROR 01-01 00:00:00 [x.py:1]     k{r}[grid](x)",
        "(Worker_TP{r} pid=1) ERROR 01-01 00:00:00 [x.py:1] RuntimeError: CUDA error: out of memory",
        "Capturing batches (bs={r} avail_mem=1.00 GB):  50%|#  | 1/2 [00:01<00:01,  1.00s/it]",
        "[2025-01-01 00:00:00 TP0] Capture target p{r} CUDA graph end. elapsed=1.00 s",
        "INFO 01-01 00:00:00 [x.py:1] ordinary line {r}",
    ]
    tracemalloc.start()
    for r in range(3000):  # warm up: fill every bounded table
        feed_all(classifier, [line.format(r=r) for line in block])
    middle, _ = tracemalloc.get_traced_memory()
    for r in range(3000, 13000):
        feed_all(classifier, [line.format(r=r) for line in block])
    end, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert end - middle < 16 * 1024
