"""What the two kinds of arm trees share (git worktrees of a checkout, overlays of an installed
package): our fixed-identity commits, the applied diffs kept beside the tree, the completion marker
and the check that a reused tree is still what its marker says."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.adapters.files import atomic_write
from harness.adapters.source.gitcmd import git, stdout_of
from harness.adapters.source.lock import locked
from harness.adapters.source.patches import ENCODING, ERRORS, PatchSpec, text_sha256
from harness.errors import SourceError

MARKER_VERSION = 1

# Our commits: a fixed identity and date (so the same patch set gives the same HEAD everywhere),
# never signed, never running the user's hooks.
COMMIT_ARGS = (
    "-c", "user.name=harness", "-c", "user.email=harness@localhost", "-c", "commit.gpgSign=false",
    "commit", "-q", "--no-verify", "--no-gpg-sign", "--allow-empty",
)
COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
    "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def commit(path: Path, message: str, timeout_s: float) -> str:
    """Commit what is staged in path with our identity; the new HEAD."""
    git(path, [*COMMIT_ARGS, "-m", message], env=COMMIT_ENV, timeout_s=timeout_s)
    return stdout_of(git(path, ["rev-parse", "HEAD"])).strip()


def write_diffs(folder: Path, patches: Sequence[PatchSpec], texts: Sequence[str]) -> list[Path]:
    """NN-<name>.diff for each patch; on reuse by an arm that names the same texts differently,
    its names are added beside the first arm's."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, (p, t) in enumerate(zip(patches, texts, strict=True)):
        stem = re.sub(r"\.(diff|patch)$", "", p.name)
        f = folder / f"{i:02d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', stem)[:80]}.diff"
        data = t.encode(ENCODING, ERRORS)
        if not f.is_file() or f.read_bytes() != data:
            atomic_write(f, data)
        out.append(f)
    return out


def read_marker(marker_path: Path) -> dict[str, Any] | None:
    """The completion marker, or None when absent, damaged or of another version (rebuild)."""
    try:
        marker = json.loads(marker_path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # written atomically, so unreadable means foreign or damaged: rebuild
    return marker if isinstance(marker, dict) and marker.get("version") == MARKER_VERSION else None


def write_marker(marker_path: Path, marker: dict[str, Any]) -> None:
    """Written last: the tree is complete."""
    atomic_write(marker_path, json.dumps(marker, indent=1, sort_keys=True).encode())


def verify(path: Path, marker: dict[str, Any], shas: Sequence[str]) -> None:
    """A complete cached tree must still be what its marker says it is."""
    if marker.get("patch_sha256") != list(shas):
        raise SourceError(f"cached tree {path} was prepared from other patches (hash collision?)")
    head = stdout_of(git(path, ["rev-parse", "HEAD"], check=False)).strip()
    if head != marker.get("head"):
        raise SourceError(f"cached tree {path} is at {head or '?'}, not at {marker.get('head')}; remove it to rebuild")
    dirty = stdout_of(git(path, ["status", "--porcelain", "--untracked-files=no"])).strip()
    if dirty:
        raise SourceError(f"cached tree {path} has changed tracked files; remove it to rebuild:\n{dirty}")


@dataclass(frozen=True)
class CachedTree:
    """A complete tree in the cache: where it is, its marker, whether it was reused, its diffs."""

    path: Path
    marker: dict[str, Any]
    reused: bool
    diffs: list[Path]
    shas: list[str]


def cached_tree(cache_dir: Path, key: str, patches: Sequence[PatchSpec], texts: Sequence[str], *,
                build: Callable[[Path, list[Path], list[str]], dict[str, Any]], discard: Callable[[Path], None],
                lock_timeout_s: float) -> CachedTree:
    """The tree cache_dir/<key>, reused when its marker says it is complete (and verify agrees),
    else built: discard leftovers, write the diffs, build(path, diffs, patch sha256s) → marker, write the marker
    last. A failed build is discarded and its error re-raised, so nothing half-made stays cached.
    Under a lock, so two processes preparing the same key get one tree."""
    root = Path(cache_dir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    path, marker_path = root / key, root / f"{key}.done.json"
    shas = [text_sha256(t) for t in texts]
    with locked(root / f"{key}.lock", lock_timeout_s):
        marker = read_marker(marker_path)
        reused = marker is not None and path.is_dir()
        if marker is not None and reused:
            verify(path, marker, shas)
            return CachedTree(path, marker, True, write_diffs(root / f"{key}.patches", patches, texts), shas)
        discard(path)
        try:
            diffs = write_diffs(root / f"{key}.patches", patches, texts)
            marker = build(path, diffs, shas)
            write_marker(marker_path, marker)
        except BaseException as e:  # PatchFailed, SourceError, KeyboardInterrupt alike: clean up, re-raise
            try:
                discard(path)
            except SourceError as cleanup:
                if hasattr(e, "add_note"):  # Python >= 3.11
                    e.add_note(f"and removing the half-prepared tree failed: {cleanup}")
            raise
    return CachedTree(path, marker, False, diffs, shas)
