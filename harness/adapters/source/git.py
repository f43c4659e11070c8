"""The arm's source tree: a git worktree of the target at its base commit with the arm's patches
applied (one commit per patch), cached by patch-set hash and shared across trials and invocations.

The user's checkout is never touched: we only read it, and `git worktree add --detach` adds
metadata under its .git/worktrees. Layout under cache_dir, for key = <base_sha[:12]>-<set hash>:
    <key>/              the worktree
    <key>.done.json     written last: the preparation is complete (its record is inside)
    <key>.patches/      NN-<name>.diff, the exact texts applied
    <key>.lock          flock'ed while preparing, verifying or removing <key>
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.adapters.source.gitcmd import git, stderr_of, stdout_of
from harness.adapters.source.lock import locked
from harness.adapters.source.patches import PatchSpec, check_patches, patch_set_hash, patch_text, rev_commit
from harness.adapters.source.trees import touched_hashes
from harness.adapters.source.treecache import MARKER_VERSION, cached_tree, commit
from harness.core.record import PatchRecord, SourceRecord
from harness.errors import ConfigError, PatchFailed, SourceError

__all__ = [
    "PatchSpec", "PreparedSource", "check_patches", "patch_set_hash", "patch_text", "prepare",
    "remove_worktrees", "resolve_repo",
]

REPO_KEY, REF_KEY = "target.source.repo", "target.source.ref"
_KEY_RE = re.compile(r"^[0-9a-f]{12}-[0-9a-f]{16}$")

@dataclass(frozen=True)
class PreparedSource:
    """A ready tree for one patch set: a git worktree, or an overlay of an installed package."""

    path: Path                            # the tree root the arm runs in (for an overlay: what goes on PYTHONPATH)
    record: SourceRecord
    reused: bool                          # True if the cached tree was reused
    applied_diffs: tuple[Path, ...] = ()  # the applied texts, in order (cache_dir/<key>.patches/)
    # overlay only: patch name -> files it changes outside the package (not applied)
    skipped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def resolve_repo(repo: Path, ref: str, *, file: str | None = None) -> tuple[Path, str]:
    """Check the source: repo must be the top of a git work tree, ref must resolve to a commit.
    Returns (toplevel, full base SHA); ConfigError naming the path or the ref otherwise."""
    repo = Path(repo).expanduser()
    if not repo.is_dir():
        raise ConfigError(f"{repo} is not a directory: expected a git checkout of the engine's source",
                          file=file, key=REPO_KEY)
    proc = git(repo, ["rev-parse", "--show-toplevel"], check=False)
    if proc.returncode != 0:
        raise ConfigError(f"{repo} is not a git repository: {stderr_of(proc).strip()}", file=file, key=REPO_KEY)
    top = Path(stdout_of(proc).strip())
    if top.resolve() != repo.resolve():
        # A directory inside some other repository (dotfiles in $HOME) must not silently become the target.
        raise ConfigError(f"{repo} is inside the git repository {top}, not the top of one", file=file, key=REPO_KEY)
    sha = rev_commit(top, ref)
    if sha is None:
        raise ConfigError(f"ref {ref!r} does not resolve to a commit in {top}", file=file, key=REF_KEY)
    return top, sha


def prepare(
    repo_top: Path,
    ref: str,
    base_sha: str,
    patches: Sequence[PatchSpec],
    cache_dir: Path,
    *,
    lock_timeout_s: float = 900.0,
    git_timeout_s: float = 600.0,
) -> PreparedSource:
    """A worktree at base_sha with the patches applied in order, cached at
    cache_dir/<base_sha[:12]>-<patch_set_hash> and reused when complete and unchanged. A patch that
    does not apply raises PatchFailed(name, git's stderr) and leaves nothing cached; a cached
    worktree whose tracked files were changed raises SourceError (it is not silently rebuilt: a
    trial may be running in it). Safe against concurrent preparation of the same key."""
    texts = [patch_text(repo_top, p) for p in patches]
    key = f"{base_sha[:12]}-{patch_set_hash(base_sha, texts)}"
    tree = cached_tree(cache_dir, key, patches, texts, lock_timeout_s=lock_timeout_s,
                       build=lambda path, diffs, shas: _build(repo_top, path, base_sha, patches, diffs, shas,
                                                              git_timeout_s),
                       discard=lambda path: _discard(repo_top, path, git_timeout_s))
    path, marker, reused, diffs, shas = tree.path, tree.marker, tree.reused, tree.diffs, tree.shas
    record = SourceRecord(
        repo=str(repo_top), ref=ref, base_sha=base_sha, worktree=str(path),
        patches=tuple(PatchRecord(p.name, s) for p, s in zip(patches, shas, strict=True)),
        touched={k: (v[0], v[1]) for k, v in marker["touched"].items()},
    )
    return PreparedSource(path=path, record=record, reused=reused, applied_diffs=tuple(diffs))


def remove_worktrees(repo_top: Path, cache_dir: Path, *, lock_timeout_s: float = 60.0) -> list[Path]:
    """Remove the harness worktrees of repo_top under cache_dir (with their markers and applied
    diffs), then prune; returns the worktree paths removed. Other worktrees are left alone."""
    root = Path(cache_dir).expanduser().resolve()
    removed: list[Path] = []
    if root.is_dir():
        for wt in _registered(repo_top):
            if wt.parent == root and _KEY_RE.match(wt.name):
                with locked(root / f"{wt.name}.lock", lock_timeout_s):
                    _discard(repo_top, wt, 120.0)
                removed.append(wt)
    git(repo_top, ["worktree", "prune"])
    return removed


def _build(
    repo_top: Path, path: Path, base_sha: str, patches: Sequence[PatchSpec], diffs: Sequence[Path],
    shas: Sequence[str], timeout_s: float,
) -> dict[str, Any]:
    git(repo_top, ["worktree", "add", "--detach", str(path), base_sha], timeout_s=timeout_s)
    revs = [base_sha]
    for p, diff in zip(patches, diffs, strict=True):
        # --whitespace=nowarn: apply exactly what was given, whatever apply.whitespace says.
        proc = git(path, ["apply", "--index", "--whitespace=nowarn", "--", str(diff)], check=False, timeout_s=timeout_s)
        if proc.returncode != 0:
            raise PatchFailed(p.name, stderr_of(proc))
        revs.append(commit(path, f"harness: apply {p.name}", timeout_s))
    touched = touched_hashes(path, revs)
    return {
        "version": MARKER_VERSION, "base_sha": base_sha, "head": revs[-1], "patch_sha256": list(shas),
        "touched": {k: list(v) for k, v in touched.items()},
    }





def _discard(repo_top: Path, path: Path, timeout_s: float) -> None:
    """Remove a worktree of ours, complete or not, registered or not; the marker goes first so a
    crash half-way leaves an incomplete (rebuildable) entry, never a complete-looking one."""
    root, key = path.parent, path.name
    (root / f"{key}.done.json").unlink(missing_ok=True)
    # -f -f: also a worktree left locked by a `worktree add` that was killed.
    git(repo_top, ["worktree", "remove", "--force", "--force", str(path)], check=False, timeout_s=timeout_s)
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        if (root / f"{key}.patches").exists():
            shutil.rmtree(root / f"{key}.patches")
    except OSError as e:
        raise SourceError(f"cannot remove {path}: {e}") from e
    git(repo_top, ["worktree", "prune"], timeout_s=timeout_s)


def _registered(repo_top: Path) -> list[Path]:
    out = stdout_of(git(repo_top, ["worktree", "list", "--porcelain"]))
    return [Path(line[len("worktree "):]).resolve() for line in out.splitlines() if line.startswith("worktree ")]
