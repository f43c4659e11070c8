"""Checks that need the file system or git, run before anything launches."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.adapters.source.git import PatchSpec, check_patches, resolve_repo
from harness.core.matrix import Matrix
from harness.errors import ConfigError


def check_programs(matrix: Matrix) -> None:
    """The interpreter and the command's program must exist before anything launches."""
    t = matrix.target
    if t.python is not None:
        python = Path(t.python).expanduser()
        if not (shutil.which(str(python)) or (python.is_file() and os.access(python, os.X_OK))):
            raise ConfigError(f"no executable {t.python!r}", file=matrix.file, key="target.python")
    if t.command and "{" not in t.command[0] and not shutil.which(t.command[0]):
        raise ConfigError(f"no executable {t.command[0]!r} (on PATH or as a path)", file=matrix.file,
                          key="target.command[0]")


def check_sources(matrix: Matrix) -> tuple[Path | None, str | None]:
    """Resolve the target's repository and base ref, and check every patch of every axis level.
    Returns (repository top level, base SHA), or (None, None) for a target without a source."""
    base = Path(matrix.file).parent
    patched = [(f"axes.{a.name}.{lv.name}.patches", lv.patches) for a in matrix.axes for lv in a.levels if lv.patches]
    if matrix.target.source is None:
        if patched:
            raise ConfigError("patches need target.source (a git repository and ref)", file=matrix.file,
                              key=patched[0][0])
        return None, None
    repo = Path(matrix.target.source.repo).expanduser()
    repo = repo if repo.is_absolute() else (base / repo)
    top, sha = resolve_repo(repo, matrix.target.source.ref, file=matrix.file)
    for key, patches in patched:
        specs = [PatchSpec(diff=(base / p.diff).resolve()) if p.diff is not None
                 else PatchSpec(commit=p.commit, range=p.range) for p in patches]
        check_patches(top, specs, file=matrix.file, key_of=lambda i, key=key: f"{key}[{i}]")
    return top, sha
