"""AMD ATOM: `{python} -m atom.entrypoints.openai_server --model M -tp N`.

Read from ROCm/ATOM main @ ffdf3bb (2026-08-22): atom/model_engine/arg_utils.py (--model,
--tensor-parallel-size/-tp, --data-parallel-size/-dp, --pipeline-parallel-size/-pp,
--prefill-context-parallel-size/-pcp, --enable-expert-parallel, --enable-dp-attention,
--enable-tbo [prefill|all]); atom/entrypoints/openai/api_server.py: the HTTP port is
--server-port (--port is the engine's internal port), /health answers {"status": "ok"}, and
/v1/models and /v1/completions are served. engine_core_mgr.py: with --enable-dp-attention the
tp × dp GPUs become tp × dp DP ranks of tp 1; either way a launch takes tp × pp × pcp × dp GPUs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from harness.adapters.engines import probes
from harness.adapters.engines.base import LaunchContext, ReadyHook, register
from harness.adapters.engines.flags import Spelling, assemble, check_args, check_ep_switch, int_value
from harness.core.classify import Dialect
from harness.core.matrix import Matrix, ReadyCheck

SPELLING = Spelling(
    "atom",
    owned={
        "model": ("--model",),
        "host": ("--host",),
        "port": ("--server-port",),
        "tp": ("-tp", "--tensor-parallel-size"),
        "dp": ("--data-parallel-size", "-dp"),
        "ep": ("--enable-expert-parallel",),   # a switch: experts spread over tp × dp
    },
    foreign={
        # sglang's and vLLM's spellings, which ATOM's parser rejects
        "--tp": "tp", "--tp-size": "tp", "--dp": "dp", "--dp-size": "dp",
        "--ep": "ep", "-ep": "ep", "--ep-size": "ep", "--expert-parallel-size": "ep",
        "--model-path": "model",
        "--mem-fraction-static": "--gpu-memory-utilization",
        "--context-length": "--max-model-len",
        "--max-running-requests": "--max-num-seqs",
        "--disable-cuda-graph": "--enforce-eager",
        "--enable-two-batch-overlap": "--enable-tbo",
        "--enable-dbo": "--enable-tbo",
        # ATOM's own --port exists but is the engine's internal port, so it is not flagged here.
    },
)
_PP = ("--pipeline-parallel-size", "-pp")
_PCP = ("--prefill-context-parallel-size", "-pcp")


@register("atom")
class AtomEngine:
    """ATOM's OpenAI server (ROCm)."""

    name = "atom"

    def argv(self, ctx: LaunchContext) -> list[str]:
        head = [ctx.python, "-m", "atom.entrypoints.openai_server"]
        base = [*(["--model", ctx.model] if ctx.model else []), "--host", ctx.host, "--server-port", str(ctx.port),
                "-tp", str(ctx.tp)]
        if ctx.dp > 1:
            base += ["--data-parallel-size", str(ctx.dp)]
        if ctx.ep > 1:
            base.append("--enable-expert-parallel")
        return assemble(head, base, ctx.args, same=tuple(SPELLING.owned.values()))

    def gpus(self, ctx: LaunchContext) -> int:
        argv = self.argv(ctx)
        return (int_value(argv, SPELLING.owned["tp"], ctx.tp) * int_value(argv, SPELLING.owned["dp"], ctx.dp)
                * int_value(argv, _PP, 1) * int_value(argv, _PCP, 1))

    def check(self, matrix: Matrix) -> None:
        check_args(SPELLING, matrix)
        check_ep_switch(matrix, "ATOM")

    def dialect(self) -> Dialect:
        # Nothing beyond the classifier's generic rules: "[atom 12:34:56] " headers, the ladder
        # ("Capturing bs=16, max_q_len=1", "cudagraph capture[…] cost: X seconds"), the ready line
        # and the ROCm failure lines (HIP error 900, hipBLASLt, memory access fault, GPU Hang).
        return Dialect(name="atom")

    def ready(self, configured: ReadyCheck) -> ReadyCheck:
        return configured

    def ready_hook(self, ctx: LaunchContext) -> ReadyHook | None:
        # /health answers as soon as uvicorn runs; a one-token completion proves the engine serves.
        return probes.completion_ready

    def cache_env(self, cache_dir: Path) -> Mapping[str, str]:
        # ATOM keeps its compile cache in ~/.cache/atom (atom/utils/backends.py:475, no variable)
        # and points Inductor and Triton below it itself while compiling: nothing more to redirect.
        return {}
