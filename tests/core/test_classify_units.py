"""The classifier's parts: cleaning and prefixes, rules and precedence, ladder, signatures."""
from __future__ import annotations

import pytest

from harness.core.classify import Dialect, LogClassifier, classify_text
from harness.core.classify.ladder import LadderTracker
from harness.core.classify.normalize import clean, message_rank, segments, strip_prefixes
from harness.core.classify.rules import BOILERPLATE, dialect_rules, match
from harness.core.classify.signature import normalise
from harness.core.outcome import Outcome

MSG = "RuntimeError: CUDA error: an illegal memory access was encountered"


@pytest.mark.parametrize(("line", "rank", "level"), [
    (f"(Worker_PP0 pid=23220) ERROR 07-15 21:01:01 [multiproc_executor.py:1007] {MSG}", "PP0", "ERROR"),
    (f"(Worker_PP0_TP1_EP1 pid=34510) ERROR 04-12 01:50:23 [multiproc_executor.py:971] {MSG}", "PP0_TP1_EP1", "ERROR"),
    (f"(VllmWorker rank=5 pid=50999) ERROR 07-07 15:19:48 [multiproc_executor.py:492] {MSG}", "rank=5", "ERROR"),
    (f"(EngineCore_DP0 pid=212) {MSG}", "DP0", None),
    (f"(EngineCore pid=212) {MSG}", None, None),
    (f"[rank0]: {MSG}", "rank0", None),
    (f"[rank 7]:[E413 16:51:14 ProcessGroupNCCL.cpp:1595] {MSG}", "rank 7", "ERROR"),
    (f"[2025-06-22 16:13:55 DP3 TP3] {MSG}", "DP3 TP3", None),
    (f"[2025-12-29 07:57:46 TP0 EP0] {MSG}", "TP0 EP0", None),
    (f"[15:57:49 TP0] {MSG}", "TP0", None),
    (f"vllm-1  | (Worker_TP1 pid=9) ERROR 10-06 12:00:22 [x.py:1] {MSG}", "TP1", "ERROR"),
    (f"  | [2025-04-03 08:11:45 TP1] {MSG}", "TP1", None),
    (f"2025-01-01T00:00:00.000Z stderr F [2025-01-01 00:00:00 TP2] {MSG}", "TP2", None),
    (f"[sglang]     | [2026-06-24 11:50:33] {MSG}", None, None),
    (f"ERROR 11-29 09:36:15 engine.py:366] {MSG}", None, "ERROR"),
    (f"INFO:     {MSG}", None, "INFO"),
    (f"[atom 10:03:21] {MSG}", None, None),
    (f"(RayWorkerVllm pid=5085, ip=10.0.0.2) [W CUDAGraph.cpp:145] {MSG}", None, "WARNING"),
])
def test_prefixes_are_stripped_and_rank_kept_as_printed(line: str, rank: str | None, level: str | None) -> None:
    stripped = strip_prefixes(clean(line))
    assert stripped.message == MSG
    assert stripped.rank == rank
    assert stripped.level == level


@pytest.mark.parametrize("noisy", [
    f"\x1b[1;31m{MSG}\x1b[0m",
    f" [36m [0m{MSG} [32m [repeated 6x across cluster] [0m".replace(" [repeated 6x across cluster]", ""),
    f'<font color="#2AA1B3"><b></b></font>{MSG}',
    f"^@^@\x00{MSG}",
    f"**{MSG}**",
])
def test_noise_is_cleaned(noisy: str) -> None:
    assert strip_prefixes(clean(noisy)).message == MSG


def test_segments_split_carriage_returns_and_glued_bars() -> None:
    line = "A\rCapturing batches (bs=8 avail_mem=1.00 GB):  50%|#   | 1/2 [00:01<00:01,  1.00s/it]Fatal Python error: x"
    assert segments(line) == [
        "A", "Capturing batches (bs=8 avail_mem=1.00 GB):  50%|#   | 1/2 [00:01<00:01,  1.00s/it]",
        "Fatal Python error: x",
    ]
    assert segments("\rx\r") == ["", "x", ""]


def test_rank_named_inside_the_message() -> None:
    assert message_rank("[PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog") == "Rank 2"
    assert message_rank("no rank here") is None


@pytest.mark.parametrize(("message", "outcome"), [
    ("RuntimeError: CUDA error: an illegal memory access was encountered", Outcome.IMA),
    ("Memory access fault by GPU node-5 (Agent handle: 0x1) on address 0x2. Reason: Unknown.", Outcome.IMA),
    ("Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered", Outcome.IMA),
    ("[Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access",
     Outcome.IMA),
    ("RuntimeError: CUDA error: operation not permitted when stream is capturing", Outcome.CAPTURE_ERROR),
    ("hipBLASLt error: operation not permitted when stream is capturing", Outcome.CAPTURE_ERROR),
    ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB", Outcome.OOM),
    ("RuntimeError: CUDA error: out of memory", Outcome.OOM),
    ("Indexing.cu:1284: indexSelectLargeIndex: block: [0,0,0], thread: [24,0,0] Assertion `a < b` failed.",
     Outcome.DEVICE_ASSERT),
    ("RuntimeError: CUDA error: device-side assert triggered", Outcome.DEVICE_ASSERT),
    ("Watchdog timeout (self.watchdog_timeout=300)", Outcome.HANG),
    ("Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", Outcome.HANG),
    ("HW Exception by GPU node-1 (Agent handle: 0x3508fba0) reason :GPU Hang", Outcome.HANG),
    ("Fatal Python error: Segmentation fault", Outcome.SEGFAULT),
    ("*** SIGSEGV received at time=1720159248 on cpu 5 ***", Outcome.SEGFAULT),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", Outcome.NCCL),
    ("[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 1800270 ms", Outcome.NCCL),
    ("TimeoutError: RPC call to execute_model timed out.", Outcome.COMM_TIMEOUT),
    ("rocblaslt error: Could not load /x/TensileLibrary_lazy_gfx942.dat", Outcome.LIBRARY_ERROR),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`",
     Outcome.LIBRARY_ERROR),
    ("triton.compiler.errors.CompilationError: at 1:0:", Outcome.LIBRARY_ERROR),
    ("AssertionError: expected 2 heads", Outcome.ASSERTION),
    ("ValueError(\"type fp8e4nv not supported in this architecture.\")", Outcome.ASSERTION),
    ("HIP error: invalid argument", Outcome.OTHER),
    ("KeyError: 'model.layers.0.weight'", Outcome.OTHER),
    ("EngineCore failed to start.", Outcome.OTHER),
])
def test_rule_names_the_outcome(message: str, outcome: Outcome) -> None:
    rule = match(message)
    assert rule is not None and rule.outcome is outcome


@pytest.mark.parametrize("hint", [
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.",
    "Possible solutions:",
    "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "Ignore import error when loading sglang.srt.models.x: libcudart.so.13: cannot open shared object file",
    "/x/torch/cuda/__init__.py:61: UserWarning: CUDA initialization: CUDA error: no CUDA-capable device",
])
def test_boilerplate_hints_never_name_a_class(hint: str) -> None:
    assert BOILERPLATE.match(hint)
    assert classify_text(hint + "\n" + hint).outcome is None


def test_precedence_root_cause_beats_earlier_wrapper_and_consequence() -> None:
    log = "\n".join([
        "ERROR 01-01 00:00:00 [core.py:1] EngineCore failed to start.",
        "Exception: Capture cuda graph failed: CUDA error: unspecified launch failure",
        "RuntimeError: NCCL error: unhandled cuda error",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: out of memory",
    ])
    c = classify_text(log)
    assert c.outcome is Outcome.IMA
    assert c.first_error_line == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_soft_watchdog_is_not_a_hang() -> None:
    assert classify_text("[2026-01-01 00:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, "
                         "self.soft=True)").outcome is None


def test_quiet_levels_never_name_a_failure() -> None:
    log = "(Worker_TP0 pid=1) WARNING 01-01 00:00:00 [x.py:1] CUDA error: out of memory, retrying with a smaller batch"
    assert classify_text(log).outcome is None


def test_source_line_of_a_frame_is_not_an_error() -> None:
    log = "\n".join([
        "Traceback (most recent call last):",
        '  File "/x/pynccl_wrapper.py", line 350, in NCCL_CHECK',
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ])
    c = classify_text(log)
    assert c.outcome is Outcome.OTHER and c.first_error_line.startswith("RuntimeError: Engine core")


@pytest.mark.parametrize(("lines", "captured", "total", "bs", "capture_s"), [
    (["Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  45%|####5     | 23/51 [00:02<00:02, 9.9it/s]"],
     23, 51, None, None),
    (["Capturing batches (bs=448 avail_mem=87.41 GB):   8%|#  | 4/51 [00:20<03:35,  4.59s/it]"], 4, 51, 448, None),
    (["INFO 01-01 00:00:00 [capture] Capturing CUDA graphs (decode, FULL): 3/8 bs=16"], 3, 8, 16, None),
    (["Capturing num tokens (num_tokens=7680 avail_mem=0.01 GB):   2%|▏  | 1/58 [00:00<00:46,  1.22it/s]"],
     1, 58, 7680, None),
    (["Capturing bs=16, max_q_len=1:  50%|#####     | 4/8 [00:01<00:01,  3.1it/s]"], 4, 8, 16, None),
    (["(EngineCore_DP0 pid=1) INFO 10-06 12:00:40 [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, "
      "took 0.31 GiB"], None, None, None, 8.0),
    (["[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB.",
      "[2025-03-08 12:29:28 TP3] Capture cuda graph end. Time elapsed: 7.22 s. avail mem=0.53 GB."],
     None, None, None, 7.22),
    (["[2026-10-10 11:59:51] Capture target decode CUDA graph end. elapsed=10.10 s, mem usage=0.79 GB",
      "[2026-10-10 11:59:53] Capture draft decode CUDA graph end. elapsed=2.17 s"], None, None, None, 12.27),
    (["[atom 10:03:19] Engine Core: cudagraph capture[1, 2, 4] cost: 23.47 seconds, pool: 1.92GB"],
     None, None, None, 23.47),
])
def test_ladder_formats(lines: list[str], captured, total, bs, capture_s) -> None:
    c = classify_text("\n".join(lines))
    assert (c.shapes_captured, c.shapes_total, c.capture_s) == (captured, total, capture_s)
    tracker = LadderTracker()
    for line in lines:
        tracker.observe(strip_prefixes(clean(line)).message, line, None)
    assert tracker.bs == bs


def test_failing_bs_only_when_the_failure_came_during_capture() -> None:
    bar = "Capturing batches (bs=8 avail_mem=1.00 GB): 100%|##| 2/2 [00:01<00:00,  1.00it/s]"
    end = "[2025-01-01 00:00:01 TP0] Capture cuda graph end. Time elapsed: 1.00 s."
    err = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert classify_text("\n".join([bar, err])).failing_bs == 8
    after = classify_text("\n".join([bar, end, err]))
    assert after.failing_bs is None and after.shapes_captured == 2


def test_error_naming_its_capture_bs_gives_the_failing_bs_before_any_bar() -> None:
    log = "\n".join([
        "ERROR 11-29 10:40:28 [demo_server.py:217] Worker compute stream failed while capturing bs=32",
        "ERROR 11-29 10:40:28 [demo_server.py:217] RuntimeError: demo device error: an illegal memory access",
    ])
    c = classify_text(log)
    assert (c.outcome, c.failing_bs, c.shapes_captured) == (Outcome.IMA, 32, None)


def test_log_ending_inside_a_capture_is_a_stall() -> None:
    c = classify_text("Capturing batches (bs=512 avail_mem=3.10 GB):   0%|   | 0/52 [00:04<?, ?it/s]\n")
    assert c.outcome is Outcome.HANG and c.failing_bs == 512
    assert c.signature == "HANG:stalled in capture: Capturing batches (bs=<N> avail_mem=<N> GB)"


def test_signature_is_stable_across_ranks_runs_and_worktrees() -> None:
    a = classify_text(
        "(Worker_TP1 pid=111) ERROR 01-01 00:00:00 [x.py:1] Traceback (most recent call last):\n"
        '(Worker_TP1 pid=111) ERROR 01-01 00:00:00 [x.py:1]   File "/tmp/wt/arm-a/vllm/model.py", line 10, in forward\n'
        "(Worker_TP1 pid=111) ERROR 01-01 00:00:00 [x.py:1]     y = f(x)\n"
        "(Worker_TP1 pid=111) ERROR 01-01 00:00:00 [x.py:1] RuntimeError: CUDA error: out of memory at 0x7f00aa GPU 1\n")
    b = classify_text(
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/home/u/src/vllm/model.py", line 12, in forward\n'
        "[rank3]:     y = f(x)\n"
        "[rank3]: RuntimeError: CUDA error: out of memory at 0x7f99bb GPU 3\n")
    assert a.signature == b.signature == "OOM:RuntimeError: CUDA error: out of memory at <ADDR> GPU <N>@model.py:forward"
    assert a.failing_rank == "TP1" and b.failing_rank == "rank3"


def test_normalise_masks_numbers_addresses_and_paths() -> None:
    text = "fault by GPU node-5 (Agent handle: 0x460e3a50) at /home/a/b/lib/kernel.cu:42 bs=512  took 1.5 s"
    assert normalise(text) == "fault by GPU node-<N> (Agent handle: <ADDR>) at kernel.cu:<N> bs=<N> took <N> s"


def test_dialect_patterns_prefixes_and_ready_marker() -> None:
    dialect = Dialect(
        name="custom",
        ready_patterns=(r"engine is serving",),
        fatal_patterns=((r"KABOOM in \w+", Outcome.SEGFAULT),),
        prefix_patterns=(r"<node (?P<rank>r\d+)> ",),
    )
    c = classify_text("<node r2> engine is serving\n<node r7> KABOOM in expert_gemm\n", dialect=dialect)
    assert (c.outcome, c.failing_rank, c.ready_line) == (Outcome.SEGFAULT, "r7", "<node r2> engine is serving")
    marker = LogClassifier(ready_marker=r"listening on :\d+")
    assert marker.feed("server listening on :8000") is Outcome.READY


def test_dialect_rejects_a_fatal_pattern_that_names_no_failure() -> None:
    with pytest.raises(ValueError, match="must name one of"):
        dialect_rules(((r"x", Outcome.READY),))
