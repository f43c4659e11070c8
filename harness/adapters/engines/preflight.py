"""Checks of a matrix against its engine before anything launches: flags the engine cannot take,
and arms that need more GPUs than this host shows.

GPUs are counted only where they can be: CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES /
ROCR_VISIBLE_DEVICES when set (the arm's own env first), else `nvidia-smi -L`. Where neither
exists (a CPU-only CI host, a laptop preparing a dry run) the count is unknown and the check is
skipped; a count of 0 (the variable set empty, as for vLLM-CPU on a GPU host) is read as "this
target runs on the CPU" and skipped too, so CPU targets are never blocked.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Callable, Mapping

from harness.adapters.engines.base import context_for, get_engine
from harness.adapters.engines.flags import setting_key
from harness.core.arms import Arm, expand
from harness.core.matrix import Matrix
from harness.errors import ConfigError

VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
SMI_TIMEOUT_S = 20.0


def count_visible(env: Mapping[str, str]) -> int | None:
    """GPUs a visibility variable allows (None: no such variable set). Like CUDA, the list ends at
    the first invalid entry ("-1" hides every GPU)."""
    for var in VISIBILITY_VARS:
        if var in env:
            count = 0
            for entry in env[var].split(","):
                entry = entry.strip()
                if not entry or entry.startswith("-"):
                    break
                count += 1
            return count
    return None


def smi_count(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> int | None:
    """GPUs `nvidia-smi -L` lists; None when it is not installed or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        proc = run([smi, "-L"], capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


def host_gpus(env: Mapping[str, str] | None = None) -> int | None:
    """GPUs this host shows to a child with env (None: not countable here)."""
    env = os.environ if env is None else env
    visible = count_visible(env)
    return visible if visible is not None else smi_count()


def check_matrix(matrix: Matrix, visible_gpus: int | None) -> None:
    """Everything the engine can judge before launch; ConfigError naming file and key.
    visible_gpus: host_gpus() for a real run, None to skip the GPU check (a dry run)."""
    engine = get_engine(matrix.target.engine)
    engine.check(matrix)
    if visible_gpus is None:
        return
    for arm in expand(matrix):
        visible = count_visible(arm.env)
        visible = visible_gpus if visible is None else visible
        need = engine.gpus(context_for(matrix, arm, python="python", port=0))
        if visible and need > visible:
            raise ConfigError(
                f"arm {arm.label} ({arm.title}) needs {need} GPUs ({engine.name}: tp {arm.tp} × dp {arm.dp}"
                f"{_extra(arm)}) but {visible} {'is' if visible == 1 else 'are'} visible on this host "
                f"(CUDA_VISIBLE_DEVICES / nvidia-smi)",
                file=matrix.file, key=setting_key(matrix, arm, ("tp", "dp")))


def _extra(arm: Arm) -> str:
    return f", ep {arm.ep}" if arm.ep > 1 else ""
