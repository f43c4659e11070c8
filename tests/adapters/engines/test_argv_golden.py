"""Golden files of the generated server command lines, one token per line.

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/adapters/engines/test_argv_golden.py

rewrites them; review the diff like code."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.adapters.engines import LaunchContext, get_engine

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "engines"
PY = "/opt/venv/bin/python"


def ctx(**kw) -> LaunchContext:
    base = dict(python=PY, host="127.0.0.1", port=30000, model=None, tp=1, dp=1, ep=1, args=(), command=(),
                worktree=None)
    return LaunchContext(**{**base, **kw})


CASES = {
    # vLLM
    "vllm_minimal": ("vllm", ctx(model="Qwen/Qwen3-0.6B")),
    "vllm_seed004_dbo_deepep": ("vllm", ctx(
        model="zai-org/GLM-5.3", port=8000, tp=2, dp=4, ep=8,
        args=("--all2all-backend", "deepep_high_throughput", "--enable-dbo", "--compilation-config",
              '{"cudagraph_mode": "NONE"}', "--kv-cache-dtype", "fp8", "--max-model-len", "8192",
              "--gpu-memory-utilization", "0.90", "--enable-prefix-caching"))),
    "vllm_override_replaces": ("vllm", ctx(
        model="m", args=("--max-num-seqs", "64", "--enforce-eager", "--max-num-seqs", "8", "--no-enforce-eager"))),
    "vllm_cpu_tiny": ("vllm", ctx(model="/models/tiny-llama", tp=1, args=("--max-model-len", "256", "--dtype",
                                                                          "float32"))),
    # SGLang
    "sglang_minimal": ("sglang", ctx(model="Qwen/Qwen3-0.6B")),
    "sglang_seed003_b300_tp8": ("sglang", ctx(
        model="deepseek-ai/DeepSeek-V4-Pro-DSpark", tp=8,
        args=("--speculative-num-draft-tokens", "6", "--cuda-graph-max-bs", "128", "--max-running-requests",
              "128"))),
    "sglang_dp_attention_ep": ("sglang", ctx(
        model="deepseek-ai/DeepSeek-V3", tp=8, dp=8, ep=8, args=("--enable-dp-attention",
                                                                  "--moe-a2a-backend", "deepep"))),
    # ATOM
    "atom_minimal": ("atom", ctx(model="Qwen/Qwen3-0.6B", port=8000)),
    "atom_seed001_tbo_all": ("atom", ctx(
        model="openai/gpt-oss-120b", port=8000, tp=2, ep=2,
        args=("--enable-dp-attention", "--kv_cache_dtype", "fp8", "--enable-tbo", "all"))),
    "atom_seed000_tp4_dp2_ep8": ("atom", ctx(
        model="deepseek-ai/DeepSeek-V4-Flash-FP8", port=8000, tp=4, dp=2, ep=8,
        args=("--enable-dp-attention", "--enable-tbo", "all"))),
    # command
    "command_placeholders": ("command", ctx(
        model="demo-tiny", tp=2, command=("{python}", "-m", "demo_server", "--host", "{host}", "--port", "{port}",
                                          "--tp", "{tp}"), args=("--max-bs", "32"))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_command_line_matches_its_golden_file(name: str) -> None:
    engine, context = CASES[name]
    text = "\n".join(get_engine(engine).argv(context)) + "\n"
    path = GOLDEN / f"{name}.argv"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}; run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


def test_every_golden_file_has_a_case() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.argv")) == sorted(CASES)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "atom"])
def test_an_override_in_args_replaces_the_flag_in_place_under_any_spelling(engine: str) -> None:
    # check() rejects these in a matrix; the command line is still never given a flag twice.
    spelled = {"vllm": ("-tp", "4"), "sglang": ("--tensor-parallel-size", "4"), "atom": ("--tensor-parallel-size", "4")}
    argv = get_engine(engine).argv(ctx(model="m", tp=8, args=spelled[engine]))
    tp_flags = {"vllm": ("--tensor-parallel-size", "-tp"), "sglang": ("--tp-size", "--tensor-parallel-size"),
                "atom": ("-tp", "--tensor-parallel-size")}[engine]
    assert sum(argv.count(f) for f in tp_flags) == 1
    i = argv.index(spelled[engine][0])
    assert argv[i + 1] == "4" and "8" not in argv
