"""Checks that need the file system, git, the engine's interpreter or the network (a PR's diff,
once), run before anything launches."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from harness.adapters.source.armtree import patch_specs
from harness.adapters.source.git import check_patches, resolve_repo
from harness.adapters.source.installed import find_package
from harness.adapters.source.overlay import fingerprint
from harness.core.matrix import Matrix, Package
from harness.errors import ConfigError


def _program_exists(program: str) -> bool:
    path = Path(program).expanduser()
    return bool(shutil.which(str(path)) or (path.is_file() and os.access(path, os.X_OK)))


def check_programs(matrix: Matrix) -> None:
    """The interpreter, the command's program and the build's must exist before anything launches."""
    t = matrix.target
    if t.python is not None and not _program_exists(t.python):
        raise ConfigError(f"no executable {t.python!r}", file=matrix.file, key="target.python")
    if t.command and "{" not in t.command[0] and not shutil.which(t.command[0]):
        raise ConfigError(f"no executable {t.command[0]!r} (on PATH or as a path)", file=matrix.file,
                          key="target.command[0]")
    if t.build:
        if t.source is None:
            raise ConfigError("a build needs target.source (it runs in the arm's tree)", file=matrix.file,
                              key="target.build")
        # A relative program (./build.sh) is looked up in the arm's tree when the build runs.
        if "{" not in t.build[0] and "/" not in t.build[0] and not shutil.which(t.build[0]):
            raise ConfigError(f"no executable {t.build[0]!r} on PATH", file=matrix.file, key="target.build[0]")


def check_sources(matrix: Matrix) -> tuple[Path | None, str | None]:
    """Resolve the target's source and check every patch of every axis level (a PR's diff is
    fetched into the patch cache now, or the error says where to put it).
    Returns (git top-level, base SHA) for a git source, (package folder, package fingerprint)
    for an installed package, (None, None) for a target without a source."""
    base = Path(matrix.file).parent
    patched = [(f"axes.{a.name}.{lv.name}.patches", lv.patches) for a in matrix.axes for lv in a.levels if lv.patches]
    source = matrix.target.source
    if source is None:
        if patched:
            raise ConfigError("patches need target.source (a git repository and ref, or an installed package)",
                              file=matrix.file, key=patched[0][0])
        return None, None
    if isinstance(source, Package):
        top = find_package(matrix.target.python or sys.executable, source.package,
                           {**os.environ, **matrix.target.env}, file=matrix.file)
        sha = fingerprint(top)
    else:
        repo = Path(source.repo).expanduser()
        repo = repo if repo.is_absolute() else (base / repo)
        top, sha = resolve_repo(repo, source.ref, file=matrix.file)
    for key, patches in patched:
        specs = patch_specs(patches, base, file=matrix.file, key_of=lambda i, key=key: f"{key}[{i}]")
        check_patches(top, specs, file=matrix.file, key_of=lambda i, key=key: f"{key}[{i}]")
    return top, sha
