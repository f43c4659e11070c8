"""vLLM: `vllm serve MODEL`, run as `{python} -m vllm.entrypoints.cli.main serve` so the target's
own interpreter picks its own vLLM.

Flags, log lines and endpoints as read from vLLM 0.32.0 (the CPU build in .venv-vllm; the
same files in vllm-project/vllm main): engine/arg_utils.py (parallel group), config/parallel.py
(world size = pp × tp × pcp), entrypoints/serve/instrumentator/health.py (/health is 200 once
the engine answers), entrypoints/openai/models/api_router.py (/v1/models).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from harness.adapters.engines import probes
from harness.adapters.engines.base import LaunchContext, ReadyHook, register
from harness.adapters.engines.flags import (
    Spelling, assemble, check_args, check_ep_switch, int_value,
)
from harness.core.classify import Dialect
from harness.core.matrix import Matrix, ReadyCheck
from harness.errors import ConfigError

SPELLING = Spelling(
    "vllm",
    owned={
        "model": ("--model",),   # accepted but moved to the front as MODEL (utils/argparse_utils.py)
        "host": ("--host",),
        "port": ("--port",),
        "tp": ("--tensor-parallel-size", "-tp"),
        "dp": ("--data-parallel-size", "-dp"),
        "ep": ("--enable-expert-parallel", "-ep"),   # a switch: the EP size is tp × dp
    },
    foreign={
        # sglang's and ATOM's spellings, which vLLM's parser rejects
        "--tp": "tp", "--tp-size": "tp", "--dp": "dp", "--dp-size": "dp",
        "--ep": "ep", "--ep-size": "ep", "--expert-parallel-size": "ep",
        "--model-path": "model", "--server-port": "port",
        "--mem-fraction-static": "--gpu-memory-utilization",
        "--context-length": "--max-model-len",
        "--max-running-requests": "--max-num-seqs",
        "--disable-cuda-graph": "--enforce-eager",
        "--cuda-graph-max-bs": "--max-cudagraph-capture-size",
        "--enable-two-batch-overlap": "--enable-dbo",
        "--enable-tbo": "--enable-dbo",
        "--enable-dp-attention": ("with dp > 1 and ep on (--data-parallel-size, --enable-expert-parallel) "
                                  "vLLM's attention is data-parallel already"),
    },
    positional_model=True,
)
_PP = ("--pipeline-parallel-size", "-pp")
_PCP = ("--prefill-context-parallel-size", "-pcp")
_DPL = ("--data-parallel-size-local", "-dpl")


@register("vllm")
class VllmEngine:
    """vLLM's OpenAI server."""

    name = "vllm"

    def argv(self, ctx: LaunchContext) -> list[str]:
        head = [ctx.python, "-m", "vllm.entrypoints.cli.main", "serve", *([ctx.model] if ctx.model else [])]
        base = ["--host", ctx.host, "--port", str(ctx.port), "--tensor-parallel-size", str(ctx.tp)]
        if ctx.dp > 1:
            base += ["--data-parallel-size", str(ctx.dp)]
        if ctx.ep > 1:
            base.append("--enable-expert-parallel")
        return assemble(head, base, ctx.args, same=tuple(SPELLING.owned.values()))

    def gpus(self, ctx: LaunchContext) -> int:
        # One host runs pp × tp × pcp GPUs per DP rank, for its local DP ranks (-dpl, else all).
        argv = self.argv(ctx)
        dp_here = int_value(argv, _DPL, int_value(argv, SPELLING.owned["dp"], ctx.dp))
        return (int_value(argv, SPELLING.owned["tp"], ctx.tp) * int_value(argv, _PP, 1)
                * int_value(argv, _PCP, 1) * dp_here)

    def check(self, matrix: Matrix) -> None:
        check_args(SPELLING, matrix)
        if not matrix.target.model and not any(lv.model for a in matrix.axes for lv in a.levels):
            raise ConfigError("vllm needs a model (a Hugging Face id or a local path)", file=matrix.file,
                              key="target.model")
        check_ep_switch(matrix, "vLLM")

    def dialect(self) -> Dialect:
        # Nothing beyond the classifier's generic rules, which already read vLLM's prefixes
        # ("(Worker_DP0_TP1_EP1 pid=N)", "(VllmWorker rank=5 …)"), its ladder, its ready lines
        # ("Starting vLLM server on", 0.32.0 launchers/api_server/entry.py:140) and failure lines:
        # every extra pattern here would cost a regex search on every line.
        return Dialect(name="vllm")

    def ready(self, configured: ReadyCheck) -> ReadyCheck:
        return configured

    def ready_hook(self, ctx: LaunchContext) -> ReadyHook | None:
        # /health turns 200 with the engine; /v1/models non-empty means the served model is wired.
        return probes.models_ready

    def cache_env(self, cache_dir: Path) -> Mapping[str, str]:
        # VLLM_CACHE_ROOT holds torch.compile's cache (envs.py: ~/.cache/vllm); the JIT caches any
        # engine fills (Triton, Inductor, DeepGEMM, FlashInfer, TVM-FFI) are source/caches.py's.
        return {"VLLM_CACHE_ROOT": str(cache_dir / "vllm")}
