"""Bad input an engine can detect before launch, GPU counts, and the GPU preflight."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from harness.adapters.engines import LaunchContext, engine_names, get_engine
from harness.adapters.engines.flags import flag_value, has_flag, norm
from harness.adapters.engines.preflight import check_matrix, count_visible, host_gpus, smi_count
from harness.core.schema import parse_matrix
from harness.errors import ConfigError


def matrix(engine: str, axes: dict | None = None, **target):
    data = {"target": {"engine": engine, "model": "m", **target}, "axes": axes or {}}
    return parse_matrix(data, name="m", file="matrices/m.yaml", engines=engine_names())


def fails(m, *words: str, visible: int | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        check_matrix(m, visible)
    err = info.value
    assert err.file == "matrices/m.yaml"
    for w in words:
        assert w in str(err), str(err)
    return err


@pytest.mark.parametrize("engine, flag, key_words", [
    ("sglang", "--tensor-parallel-size", ["--tp-size", "set tp"]),
    ("sglang", "-tp", ["sglang has no flag -tp", "--tp-size", "set tp"]),
    ("sglang", "--enable-expert-parallel", ["sglang has no flag", "--ep-size", "set ep"]),
    ("vllm", "--tp", ["vllm has no flag --tp", "--tensor-parallel-size / -tp", "set tp"]),
    ("vllm", "--tp-size", ["vllm has no flag --tp-size", "set tp"]),
    ("vllm", "--model-path", ["vllm has no flag --model-path", "positional MODEL"]),
    ("atom", "--tp", ["atom has no flag --tp", "-tp / --tensor-parallel-size"]),
    ("atom", "--dp-size", ["atom has no flag --dp-size", "--data-parallel-size"]),
])
def test_a_parallelism_flag_in_args_names_the_right_spelling_and_the_key(engine, flag, key_words) -> None:
    err = fails(matrix(engine, args=[flag, "8"]), *key_words)
    assert err.key == "target.args"


@pytest.mark.parametrize("engine, flag, right", [
    ("vllm", "--mem-fraction-static", "--gpu-memory-utilization"),
    ("vllm", "--cuda-graph-max-bs", "--max-cudagraph-capture-size"),
    ("sglang", "--gpu-memory-utilization", "--mem-fraction-static"),
    ("sglang", "--enforce-eager", "--disable-cuda-graph"),
    ("sglang", "--enable-dbo", "--enable-two-batch-overlap"),
    ("atom", "--disable-cuda-graph", "--enforce-eager"),
    ("atom", "--enable-two-batch-overlap", "--enable-tbo"),
])
def test_another_engines_spelling_in_a_level_names_this_engines(engine, flag, right) -> None:
    err = fails(matrix(engine, axes={"mode": {"base": {}, "x": {"args": [flag, "1"]}}}),
                f"{engine} has no flag {flag}", f"spells it {right}")
    assert err.key == "axes.mode.x.args"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "atom"])
def test_host_port_and_model_in_args_point_at_the_target(engine) -> None:
    port = {"vllm": "--port", "sglang": "--port", "atom": "--server-port"}[engine]
    fails(matrix(engine, args=[port, "9000"]), "set port in the target")
    fails(matrix(engine, args=["--host=0.0.0.0"]), "--host", "set host")


def test_underscore_and_no_spellings_are_the_same_flag() -> None:
    fails(matrix("vllm", args=["--tensor_parallel_size", "2"]), "set tp")
    fails(matrix("vllm", args=["--no-enable-expert-parallel"]), "set ep")
    assert norm("--kv_cache_dtype=fp8") == "--kv-cache-dtype" and norm("-tp") != norm("--tp")


def test_a_good_matrix_passes_for_every_engine() -> None:
    for engine, args in {"vllm": ["--enable-dbo", "--max-num-seqs", "64"],
                         "sglang": ["--cuda-graph-max-bs", "128", "--enable-dp-attention"],
                         "atom": ["--enable-tbo", "all", "--kv_cache_dtype", "fp8"]}.items():
        check_matrix(matrix(engine, args=args, tp=2, dp=2 if engine != "sglang" else 1), None)


def test_the_command_engine_takes_any_flag() -> None:
    m = parse_matrix({"target": {"engine": "command", "command": ["x"], "args": ["--tp", "8"]}}, name="m",
                     file="m.yaml", engines=engine_names())
    check_matrix(m, None)


@pytest.mark.parametrize("engine, tp, dp, ep, ok", [
    ("vllm", 2, 4, 8, True), ("vllm", 2, 4, 4, False), ("atom", 2, 1, 2, True), ("atom", 4, 2, 4, False),
    ("sglang", 8, 1, 8, True), ("sglang", 8, 1, 4, True), ("sglang", 8, 1, 3, False),
])
def test_ep_must_be_a_size_the_engine_can_run(engine, tp, dp, ep, ok) -> None:
    m = matrix(engine, tp=tp, dp=dp, axes={"ep": {"x": {"ep": ep}}})
    if ok:
        check_matrix(m, None)
    else:
        assert fails(m, f"got ep {ep}" if engine == "sglang" else f"not {ep}").key == "axes.ep.x.ep"


def test_vllm_needs_a_model() -> None:
    m = parse_matrix({"target": {"engine": "vllm"}}, name="m", file="matrices/m.yaml", engines=engine_names())
    assert fails(m, "needs a model").key == "target.model"


def ctx(**kw) -> LaunchContext:
    base = dict(python="py", host="h", port=1, model="m", tp=1, dp=1, ep=1, args=(), command=(), worktree=None)
    return LaunchContext(**{**base, **kw})


@pytest.mark.parametrize("engine, kw, gpus", [
    ("vllm", dict(tp=2, dp=4, ep=8), 8),
    ("vllm", dict(tp=2, dp=4, args=("-pp", "2")), 16),
    ("vllm", dict(tp=2, dp=4, args=("--data-parallel-size-local", "2")), 4),
    ("sglang", dict(tp=8), 8),
    ("sglang", dict(tp=8, dp=8, ep=8, args=("--enable-dp-attention",)), 8),
    ("sglang", dict(tp=2, dp=4), 8),
    ("sglang", dict(tp=16, args=("--nnodes", "2")), 8),
    ("atom", dict(tp=2, ep=2, args=("--enable-dp-attention",)), 2),
    ("atom", dict(tp=4, dp=2, ep=8, args=("--enable-dp-attention",)), 8),
    ("command", dict(tp=2, dp=2), 4),
])
def test_gpus_is_what_the_engine_really_takes(engine, kw, gpus) -> None:
    assert get_engine(engine).gpus(ctx(**kw)) == gpus


def test_too_few_gpus_names_the_arm_and_the_key() -> None:
    m = matrix("sglang", tp=4, axes={"size": {"small": {}, "big": {"tp": 8}}})
    check_matrix(m, 8)
    err = fails(m, "arm B (size=big) needs 8 GPUs", "4 are visible", visible=4)
    assert err.key == "axes.size.big.tp"
    assert fails(matrix("vllm", tp=2, dp=4), "needs 8 GPUs", visible=4).key == "target.tp"


def test_the_gpu_check_never_blocks_a_cpu_target() -> None:
    m = matrix("vllm", tp=2, dp=4)
    check_matrix(m, None)        # not countable here: skipped
    check_matrix(m, 0)           # nothing visible: a CPU target
    cpu_arm = matrix("vllm", tp=2, dp=4, env={"CUDA_VISIBLE_DEVICES": ""})
    check_matrix(cpu_arm, 1)     # the arm hides every GPU itself
    fails(matrix("vllm", tp=2, env={"CUDA_VISIBLE_DEVICES": "0"}), "1 is visible", visible=8)


@pytest.mark.parametrize("value, count", [("0,1,2,3", 4), ("", 0), ("-1", 0), ("0,1,-1,3", 2),
                                          ("GPU-8a4e,GPU-77f0", 2), (" 0 , 1 ", 2)])
def test_visibility_variables(value, count) -> None:
    assert count_visible({"CUDA_VISIBLE_DEVICES": value}) == count
    assert count_visible({"HIP_VISIBLE_DEVICES": value}) == count
    assert count_visible({}) is None


def fake_smi(tmp_path: Path, monkeypatch, body: str) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + body + "\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_nvidia_smi_lists_the_gpus(tmp_path, monkeypatch) -> None:
    fake_smi(tmp_path, monkeypatch, 'echo "GPU 0: NVIDIA H200 (UUID: GPU-a)"; echo "GPU 1: NVIDIA H200 (UUID: GPU-b)"')
    assert smi_count() == 2
    assert host_gpus({}) == 2
    assert host_gpus({"CUDA_VISIBLE_DEVICES": "1"}) == 1


def test_a_failing_or_missing_nvidia_smi_is_not_a_count(tmp_path, monkeypatch) -> None:
    fake_smi(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    assert smi_count() is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert smi_count() is None

    def slow(*a, **k):
        raise subprocess.TimeoutExpired("nvidia-smi", 20)
    fake_smi(tmp_path, monkeypatch, "sleep 100")
    assert smi_count(run=slow) is None


def test_flag_helpers() -> None:
    toks = ["--tp-size", "2", "--x=3", "--enable-dp-attention", "--no-enable-dp-attention", "--y", "-1"]
    assert flag_value(toks, ["--tp-size"]) == "2" and flag_value(toks, ["--x"]) == "3"
    assert flag_value(toks, ["--y"]) == "-1" and flag_value(toks, ["--z"]) is None
    assert not has_flag(toks, ["--enable-dp-attention"])
    assert has_flag(["--enable-dp-attention"], ["--enable-dp-attention"])
