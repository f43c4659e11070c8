"""Each engine's log dialect through the classifier: failing bs, failing rank, shapes captured n/N
and capture seconds. The lines follow the engines' own format strings (versions in the module
docstrings of harness/adapters/engines/*.py); bars are tqdm's, glued with \\r as a terminal gets them."""
from __future__ import annotations

import pytest

from harness.adapters.engines import get_engine
from harness.core.classify import classify_text
from harness.core.outcome import Outcome

V = "(EngineCore_DP0 pid=812) INFO 10-08 12:00:0{} [gpu_model_runner.py:6582] "
W = "(Worker_DP0_TP1_EP1 pid=901) ERROR 10-08 12:00:07 [multiproc_executor.py:905] "
BAR_V = "Capturing CUDA graphs ({}): {:3d}%|█████     | {}/{} [00:05<00:06,  5.87it/s]"
BAR_S = "Capturing batches (bs={} avail_mem=20.10 GB): {:3d}%|███▎      | {}/{} [00:12<00:16,  1.2it/s]"
S = "[2026-10-01 12:00:0{} {}] "

CASES = {
    "vllm: IMA in a worker during piecewise capture": ("vllm", "\n".join([
        V.format(0) + "Model loading took 12.1 GiB and 40.2 seconds",
        "\r".join(BAR_V.format("mixed prefill-decode, PIECEWISE", p, n, 67) for p, n in ((1, 1), (45, 30))),
        W + "WorkerProc hit an exception.",
        W + "Traceback (most recent call last):",
        W + '  File "/vllm/v1/worker/gpu_model_runner.py", line 6660, in _capture_cudagraphs',
        W + "    self._dummy_run(num_tokens, cudagraph_runtime_mode=CUDAGraphMode.NONE)",
        W + "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "(EngineCore_DP0 pid=812) ERROR 10-08 12:00:08 [core.py:1510] EngineCore failed to start.",
    ]), dict(outcome=Outcome.IMA, failing_rank="DP0_TP1_EP1", shapes_captured=30, shapes_total=67,
             failing_bs=None, capture_s=None)),
    "vllm: both capture phases, ready": ("vllm", "\n".join([
        BAR_V.format("mixed prefill-decode, PIECEWISE", 100, 67, 67),
        BAR_V.format("decode, FULL", 100, 35, 35),
        V.format(5) + "Graph capturing finished in 15 secs, took 1.21 GiB",
        "(APIServer pid=700) INFO 10-08 12:00:09 [entry.py:140] Starting vLLM server on http://127.0.0.1:8000",
    ]), dict(outcome=Outcome.READY, shapes_captured=35, shapes_total=35, capture_s=15.0)),
    "vllm: DBO + DeepEP without the fix (seed 004)": ("vllm", "\n".join([
        "(Worker_DP2_TP1_EP5 pid=931) ERROR 10-08 12:00:07 [multiproc_executor.py:905] "
        "RuntimeError: DeepEP error: CPU recv timeout",
        "(Worker_DP3_TP0_EP6 pid=932) ERROR 10-08 12:00:07 [multiproc_executor.py:905] "
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "(EngineCore_DP2 pid=812) ERROR 10-08 12:00:08 [core.py:1510] EngineCore failed to start.",
    ]), dict(outcome=Outcome.IMA, failing_rank="DP3_TP0_EP6")),
    "vllm: DeepEP timeout alone": ("vllm", "\n".join([
        "(Worker_DP2_TP1_EP5 pid=931) ERROR 10-08 12:00:07 [multiproc_executor.py:905] "
        "RuntimeError: DeepEP error: CPU recv timeout",
        "(EngineCore_DP2 pid=812) ERROR 10-08 12:00:08 [core.py:1510] EngineCore failed to start.",
    ]), dict(outcome=Outcome.COMM_TIMEOUT, failing_rank="DP2_TP1_EP5")),
    "vllm: older VllmWorker rank prefix": ("vllm", (
        "(VllmWorker rank=5 pid=50999) ERROR 07-07 15:19:48 [multiproc_executor.py:492] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB."),
        dict(outcome=Outcome.OOM, failing_rank="rank=5")),
    "vllm: torchrun rank prefix": ("vllm", "[rank0]: RuntimeError: NCCL error: unhandled cuda error",
                                   dict(outcome=Outcome.NCCL, failing_rank="rank0")),
    "vllm: a context-parallel worker name": ("vllm", (
        "(Worker_DP0_PCP1_TP1 pid=201) ERROR 10-08 12:00:01 [multiproc_executor.py:900] "
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"),
        dict(outcome=Outcome.IMA, failing_rank="DP0_PCP1_TP1")),
    "sglang: IMA at bs=60, largest first (seed 003)": ("sglang", "\n".join([
        S.format(0, "TP0") + "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=6, "
        "bs=[1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 60, 64, 72, 80, 88, 96, 104, 112, 120, 128], avail mem=41.20 GB",
        "\r".join(BAR_S.format(bs, n * 100 // 21, n, 21) for n, bs in enumerate([128, 120, 112, 104, 96, 88, 80,
                                                                                 72, 64, 60])),
        S.format(5, "TP3") + "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/model_executor/runner_backend/full_cuda_graph_backend.py", line 107, '
        "in capture_one",
        "    graph = torch.cuda.CUDAGraph()",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        S.format(6, "TP0") + "Received sigquit from a child process. It usually means the child failed.",
    ]), dict(outcome=Outcome.IMA, failing_bs=60, failing_rank="TP3", shapes_captured=9, shapes_total=21)),
    "sglang: fault before the first bar": ("sglang", "\n".join([
        S.format(0, "DP3 TP3 EP3") + "Capture target decode CUDA graph begin. backend=full, "
        "num_tokens_per_req=1, bs=[1, 2, 4, 8, 16, 32, 64, 128], avail mem=12.41 GB",
        S.format(1, "DP3 TP3 EP3") + "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]), dict(outcome=Outcome.IMA, failing_bs=128, failing_rank="DP3 TP3 EP3", shapes_captured=0,
             shapes_total=8)),
    "sglang: segfault glued to the bar": ("sglang", "\n".join([
        BAR_S.format(448, 8, 4, 51) + "Fatal Python error: Segmentation fault",
        "Thread 0x00007f (most recent call first):",
    ]), dict(outcome=Outcome.SEGFAULT, failing_bs=448, shapes_captured=4, shapes_total=51)),
    "sglang: new capture-end lines summed over phases": ("sglang", "\n".join([
        BAR_S.format(1, 100, 35, 35),
        S.format(1, "TP0") + "Capture target decode CUDA graph end. elapsed=18.62 s, mem usage=0.43 GB, "
        "avail mem=11.98 GB.",
        S.format(2, "TP0") + "Capture draft decode CUDA graph end. elapsed=4.10 s, mem usage=0.11 GB.",
        S.format(9, "") .replace(" ]", "]") + "The server is fired up and ready to roll!",
    ]), dict(outcome=Outcome.READY, shapes_captured=35, shapes_total=35, capture_s=22.72)),
    "sglang: old capture-end line": ("sglang", "\n".join([
        "[15:57:40 TP0] Capture cuda graph begin. This can take up to several minutes.",
        "[15:57:49 TP0] Capture cuda graph end. Time elapsed: 8.53 s",
        "[15:57:49] The server is fired up and ready to roll!",
    ]), dict(outcome=Outcome.READY, capture_s=8.53)),
    "sglang: DeepEP timeout with a DP rank": ("sglang",
                                              S.format(5, "DP3 TP3") + "RuntimeError: DeepEP error: CPU recv timeout",
                                              dict(outcome=Outcome.COMM_TIMEOUT, failing_rank="DP3 TP3")),
    "sglang: watchdog": ("sglang", "[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)",
                         dict(outcome=Outcome.HANG, failing_rank="TP0")),
    "atom: HIP 900 in hipBLASLt during TBO decode capture (seed 000)": ("atom", "\n".join([
        "[atom 12:00:00] ModelRunner rank=0, dp_rank_local=0, tp_rank=0",
        "\r".join(f"Capturing bs={bs}, max_q_len=1: {n * 5:3d}%|█         | {n}/20 [00:02<00:20,  1.0s/it]"
                  for n, bs in enumerate([512, 496, 480])),
        "Hip error: 'operation not permitted when stream is capturing'(900) at hipblaslt.cpp:147",
        "Hip error: 'operation not permitted when stream is capturing'(900) at hipblaslt.cpp:147",
        "[atom 12:00:03] AsyncIOProcManager(ModelRunner): [ModelRunner1/4] proc died unexpectedly "
        "(exitcode=-6), shutting down.",
        "[atom 12:00:03] Engine Core Mgr: Received unexpected SHUTDOWN signal from DP rank 1 during initialization",
    ]), dict(outcome=Outcome.CAPTURE_ERROR, failing_bs=480, shapes_captured=2, shapes_total=20)),
    "atom: GPU hang on an unhealthy host (seed 001 CI)": ("atom", "\n".join([
        "[atom 12:00:00] Loading safetensors shards[openai/gpt-oss-120b]: 100%",
        "HW Exception by GPU node-2 (Agent handle: 0x55d5c3a0) reason :GPU Hang",
        "[atom 12:10:00] Engine Core Mgr: Received unexpected SHUTDOWN signal from DP rank 0 during initialization",
    ]), dict(outcome=Outcome.HANG)),
    "atom: memory access fault": ("atom", "Memory access fault by GPU node-5 (Agent handle: 0x460e3a50) on "
                                  "address 0x7ec4dfe0e000. Reason: Write access to a read-only page.",
                                  dict(outcome=Outcome.IMA)),
    "atom: hipBLASLt": ("atom", "\n".join([
        "hipBLASLt error: Heuristic Fetch Failed!",
        "[atom 12:00:03] Engine Core Mgr: Some processes failed to start, shutting down all",
    ]), dict(outcome=Outcome.LIBRARY_ERROR)),
    "atom: ready after capture": ("atom", "\n".join([
        "\r".join(f"Capturing bs={bs}, max_q_len=1: {n * 20:3d}%|██        | {n}/5 [00:02<00:20,  1.0s/it]"
                  for n, bs in enumerate([16, 8, 4, 2, 1, 1])),
        "[atom 12:05:00] Engine Core: cudagraph capture[1, 2, 4, 8, 16] cost: 12.34 seconds, pool: 1.20GB",
        "[atom 12:05:03] Server started successfully and ready to accept requests",
    ]), dict(outcome=Outcome.READY, shapes_captured=5, shapes_total=5, capture_s=12.34)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_log(name: str) -> None:
    engine, text, want = CASES[name]
    c = classify_text(text + "\n", dialect=get_engine(engine).dialect())
    got = {k: getattr(c, k) for k in want}
    assert got == want, c
    assert (c.signature is None) == (c.outcome is Outcome.READY)


def test_every_engine_has_its_own_dialect() -> None:
    assert {get_engine(e).dialect().name for e in ("vllm", "sglang", "atom")} == {"vllm", "sglang", "atom"}
