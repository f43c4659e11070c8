"""The base checkout's compiled artifacts in an arm's worktree, so a Python-only patch arm of an
editable install (vLLM's _C*.so, its generated _version.py, vllm_flash_attn's copied files) runs
without a rebuild.

Artifacts are the files git ignores that sit inside a Python package of the checkout (below a
folder with a tracked __init__.py), bytecode and *.egg-info aside: what `pip install -e .` or
`setup.py build_ext --inplace` left there. Without a build command they are symlinked (free, and
the arm sees what the base checkout has now); with one they are copied, so the build may rewrite
them without ever writing into the user's checkout."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.adapters.source.gitcmd import git

_SKIP_PARTS = ("__pycache__",)


def find_artifacts(repo_top: Path) -> list[str]:
    """Repository-relative paths (a folder ends with /) of the ignored files inside packages."""
    packages = {str(Path(p).parent) for p in _z(git(repo_top, ["ls-files", "-z", "--", "*__init__.py"]).stdout)
                if Path(p).name == "__init__.py"}
    ignored = _z(git(repo_top, ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                     timeout_s=300).stdout)
    out = []
    for rel in ignored:
        parts = rel.rstrip("/").split("/")
        if any(p in _SKIP_PARTS or p.endswith(".egg-info") for p in parts) or rel.endswith((".pyc", ".pyo")):
            continue
        if any("/".join(parts[:i]) in packages for i in range(1, len(parts))):
            out.append(rel)
    return sorted(out)


def place_artifacts(repo_top: Path, tree: Path, *, copy: bool) -> list[str]:
    """Link (or copy) each artifact of repo_top to the same path in tree where tree has nothing
    there yet; returns what was placed now. Idempotent: a second call places nothing."""
    placed = []
    for rel in find_artifacts(repo_top):
        src, dst = repo_top / rel.rstrip("/"), tree / rel.rstrip("/")
        if os.path.lexists(dst) or not dst.parent.is_dir():
            continue
        if not copy:
            os.symlink(src, dst, target_is_directory=src.is_dir())
        elif src.is_dir():
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst)
        placed.append(rel)
    return placed


def _z(data: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in data.split(b"\0") if p]
