"""SGLang: `{python} -m sglang.launch_server --model-path M`.

Flags as declared in sgl-project/sglang main (python/sglang/srt/arg_groups/fields/parallel.py
@ 00ac710, server_args.py @ 001067f): tp_size --tp-size / --tensor-parallel-size, dp_size
--dp-size / --data-parallel-size, ep_size --ep-size / --expert-parallel-size / --ep, model_path
--model-path / --model. `--tp` and `--dp` work only as argparse prefixes of --tp-size/--dp-size,
so the harness writes the declared names. With --enable-dp-attention the dp ranks split the tp
GPUs; without it, dp launches dp copies of tp GPUs each.

Readiness (http_server.py): /health and /health_generate answer 503 while the server is
"Starting" and /health_generate runs a one-token generation once it is up; the log line
"The server is fired up and ready to roll!" follows the warmup request (_wait_and_warmup).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

from harness.adapters.engines.base import LaunchContext, ReadyHook, register
from harness.adapters.engines.flags import (
    Spelling, assemble, check_args, has_flag, int_value, setting_key,
)
from harness.core.arms import expand
from harness.core.classify import Dialect
from harness.core.matrix import Matrix, ReadyCheck
from harness.errors import ConfigError

SPELLING = Spelling(
    "sglang",
    owned={
        "model": ("--model-path", "--model"),
        "host": ("--host",),
        "port": ("--port",),
        "tp": ("--tp-size", "--tensor-parallel-size", "--tp"),
        "dp": ("--dp-size", "--data-parallel-size", "--dp"),
        "ep": ("--ep-size", "--expert-parallel-size", "--ep"),
    },
    foreign={
        # vLLM's and ATOM's spellings, which sglang's parser rejects
        "-tp": "tp", "-dp": "dp", "-ep": "ep", "--enable-expert-parallel": "ep", "--server-port": "port",
        "-pp": "--pp-size",
        "--gpu-memory-utilization": "--mem-fraction-static",
        "--max-model-len": "--context-length",
        "--max-num-seqs": "--max-running-requests",
        "--enforce-eager": "--disable-cuda-graph",
        "--max-cudagraph-capture-size": "--cuda-graph-max-bs",
        "--enable-dbo": "--enable-two-batch-overlap",
        "--enable-tbo": "--enable-two-batch-overlap",
    },
)
READY_LINE = r"The server is fired up and ready to roll"
_PP = ("--pp-size", "--pipeline-parallel-size")
_DP_ATTENTION = ("--enable-dp-attention",)
_NNODES = ("--nnodes",)


@register("sglang")
class SglangEngine:
    """SGLang's HTTP server."""

    name = "sglang"

    def argv(self, ctx: LaunchContext) -> list[str]:
        head = [ctx.python, "-m", "sglang.launch_server"]
        base = [*(["--model-path", ctx.model] if ctx.model else []), "--host", ctx.host, "--port", str(ctx.port),
                "--tp-size", str(ctx.tp)]
        if ctx.dp > 1:
            base += ["--dp-size", str(ctx.dp)]
        if ctx.ep > 1:
            base += ["--ep-size", str(ctx.ep)]
        return assemble(head, base, ctx.args, same=tuple(SPELLING.owned.values()))

    def gpus(self, ctx: LaunchContext) -> int:
        argv = self.argv(ctx)
        tp = int_value(argv, SPELLING.owned["tp"], ctx.tp) * int_value(argv, _PP, 1)
        dp = 1 if has_flag(argv, _DP_ATTENTION) else int_value(argv, SPELLING.owned["dp"], ctx.dp)
        return math.ceil(tp * dp / max(int_value(argv, _NNODES, 1), 1))

    def check(self, matrix: Matrix) -> None:
        check_args(SPELLING, matrix)
        for arm in expand(matrix):
            if arm.ep > 1 and arm.tp % arm.ep:
                raise ConfigError(
                    f"arm {arm.label} ({arm.title}): sglang's expert-parallel ranks are tensor-parallel "
                    f"ranks, so ep must divide tp = {arm.tp}; got ep {arm.ep}",
                    file=matrix.file, key=setting_key(matrix, arm, ("ep",)))
            if arm.dp > 1 and has_flag(arm.args, _DP_ATTENTION) and arm.tp % arm.dp:
                raise ConfigError(
                    f"arm {arm.label} ({arm.title}): with --enable-dp-attention the dp ranks split the "
                    f"tp = {arm.tp} GPUs, so dp must divide tp; got dp {arm.dp}",
                    file=matrix.file, key=setting_key(matrix, arm, ("dp",)))

    def dialect(self) -> Dialect:
        # Nothing beyond the classifier's generic rules, which already read sglang's prefixes
        # ("[2026-… DP3 TP3 EP3]"), its ladder ("Capturing batches (bs=…)", "Capture … CUDA graph
        # begin/end"), its ready line and its failure lines (core/classify/rules.py, ladder.py):
        # every extra pattern here would cost a regex search on every line.
        return Dialect(name="sglang")

    def ready(self, configured: ReadyCheck) -> ReadyCheck:
        if configured != ReadyCheck(interval_s=configured.interval_s):
            return configured
        # Both: /health_generate answering 200 (a real generation) and the warmup's ready line.
        return ReadyCheck(http_path="/health_generate", log_marker=READY_LINE, require_both=True,
                          interval_s=configured.interval_s)

    def ready_hook(self, ctx: LaunchContext) -> ReadyHook | None:
        return None

    def cache_env(self, cache_dir: Path) -> Mapping[str, str]:
        # sglang points DeepGEMM's DG_JIT_CACHE_DIR at SGLANG_DG_CACHE_DIR (default ~/.cache/deep_gemm,
        # environ.py), so both name the one folder; the other JIT caches are source/caches.py's.
        return {"SGLANG_DG_CACHE_DIR": str(cache_dir / "deep_gemm")}
