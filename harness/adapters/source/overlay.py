"""The arm's tree for an installed package without git (a container image, a wheel): an overlay, a
copy of the package folder with the arm's patches applied, whose parent goes first on PYTHONPATH.

Compiled files (*.so) are symlinked, not copied: a Python-only patch needs no rebuild and the copy
stays small. The copy is made a git repository of its own (one commit per patch, fixed identity),
so the touched-file hashes and the reuse check are those of the git worktrees. Layout under
cache_dir, for key = <package fingerprint[:12]>-<set hash>:
    <key>/<package>/    the patched copy (<key>/ is what goes on PYTHONPATH)
    <key>.done.json     written last: complete (the record, and the files each patch left out)
    <key>.patches/      NN-<name>.diff, the texts as given; NN-<name>.overlay.diff, the part applied
    <key>.lock          flock'ed while preparing
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

from harness.adapters.source.diffs import for_package
from harness.adapters.source.git import PreparedSource
from harness.adapters.source.gitcmd import git, stderr_of
from harness.adapters.source.patches import ENCODING, ERRORS, PatchSpec, patch_set_hash, patch_text
from harness.adapters.source.trees import touched_hashes
from harness.adapters.source.treecache import MARKER_VERSION, cached_tree, commit
from harness.core.record import PatchRecord, SourceRecord
from harness.errors import PatchFailed, SourceError

# The copy must hold exactly the files: no line-ending filters, no user excludes.
_PLAIN = ("-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.excludesFile=/dev/null",
          "-c", "core.symlinks=true")
_SKIP_DIRS = {"__pycache__"}


def is_compiled(name: str) -> bool:
    """A native library: linked into the overlay, never copied or patched."""
    return name.endswith((".so", ".pyd", ".dylib")) or ".so." in name


def fingerprint(package_dir: Path) -> str:
    """sha256 over (relative path, size, mtime) of every file of the installed package, bytecode
    caches aside: a reinstall or an edit in place gives another overlay (and another arm id)."""
    h = hashlib.sha256(str(package_dir.resolve()).encode())
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            h.update(f"{p.relative_to(package_dir).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode(
                ENCODING, ERRORS))
    return h.hexdigest()


def version_of(package_dir: Path, name: str) -> str | None:
    """The version in the <dist>-<version>.dist-info beside the package, if there is one."""
    norm = name.lower().replace("-", "_")
    for info in sorted(package_dir.parent.glob("*.dist-info")):
        dist, _, ver = info.name[:-len(".dist-info")].rpartition("-")
        if dist.lower().replace("-", "_").replace(".", "_") == norm:
            return ver
    return None


def prepare_overlay(
    package_dir: Path,
    name: str,
    base_fingerprint: str,
    patches: Sequence[PatchSpec],
    cache_dir: Path,
    *,
    repo_dir: str | None = None,
    lock_timeout_s: float = 900.0,
    git_timeout_s: float = 600.0,
) -> PreparedSource:
    """The overlay of package_dir with the patches applied (each restricted to the package's files;
    the rest is listed in `skipped`), cached and reused like a worktree. A patch that touches
    nothing of the package, or does not apply, raises PatchFailed; nothing half-made stays."""
    texts = [patch_text(package_dir, p) for p in patches]
    key = f"{base_fingerprint[:12]}-{patch_set_hash(base_fingerprint + name, texts)}"
    root = Path(cache_dir).expanduser().resolve()
    tree = cached_tree(cache_dir, key, patches, texts, lock_timeout_s=lock_timeout_s,
                       build=lambda path, diffs, shas: _build(package_dir, name, path, patches, texts, diffs,
                                                              shas, repo_dir, git_timeout_s),
                       discard=lambda path: _remove(root, key))
    path, marker, reused, diffs, shas = tree.path, tree.marker, tree.reused, tree.diffs, tree.shas
    version = version_of(package_dir, name)
    record = SourceRecord(
        repo=str(package_dir), ref=f"{name} {version}" if version else name, base_sha=base_fingerprint,
        worktree=str(path), patches=tuple(PatchRecord(p.name, s) for p, s in zip(patches, shas, strict=True)),
        touched={k: (v[0], v[1]) for k, v in marker["touched"].items()},
    )
    return PreparedSource(path=path, record=record, reused=reused, applied_diffs=tuple(diffs),
                          skipped={k: tuple(v) for k, v in marker["skipped"].items()})


def _build(
    package_dir: Path, name: str, path: Path, patches: Sequence[PatchSpec], texts: Sequence[str],
    diffs: Sequence[Path], shas: Sequence[str], repo_dir: str | None, timeout_s: float,
) -> dict[str, Any]:
    _copy(package_dir, path / name)
    git(path, ["init", "-q"], timeout_s=timeout_s)
    git(path, [*_PLAIN, "add", "-A", "--force", "."], timeout_s=timeout_s)
    revs = [commit(path, f"harness: {name} as installed", timeout_s)]
    skipped: dict[str, list[str]] = {}
    for p, text, diff in zip(patches, texts, diffs, strict=True):
        part = for_package(text, name, repo_dir)
        if part is None:
            raise PatchFailed(p.name, f"it changes no file of the package {name!r}"
                              + (f" under {repo_dir}/" if repo_dir else "") + " (check target.source.repo_dir)")
        applied = diff.with_name(diff.stem + ".overlay.diff")
        applied.write_bytes(part.text.encode(ENCODING, ERRORS))
        proc = git(path, [*_PLAIN, "apply", "--index", f"-p{part.strip}", "--whitespace=nowarn", "--", str(applied)],
                   check=False, timeout_s=timeout_s)
        if proc.returncode != 0:
            raise PatchFailed(p.name, stderr_of(proc))
        if part.skipped:
            skipped[p.name] = list(part.skipped)
        revs.append(commit(path, f"harness: apply {p.name}", timeout_s))
    touched = touched_hashes(path, revs)
    return {
        "version": MARKER_VERSION, "base": str(package_dir), "head": revs[-1], "patch_sha256": list(shas),
        "touched": {k: list(v) for k, v in touched.items()}, "skipped": skipped,
    }


def _copy(src: Path, dst: Path) -> None:
    """Copy the package; compiled libraries become absolute symlinks to the installed ones."""
    root = src.resolve()
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        target = dst / here.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        links = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and d not in links]
        for name in [*links, *filenames]:
            s = here / name
            if s.is_symlink():
                _link_like(s, target / name, root)
            elif is_compiled(name):
                os.symlink(s.resolve(), target / name)
            else:
                shutil.copy2(s, target / name)


def _link_like(link: Path, dst: Path, root: Path) -> None:
    """A symlink of the package: kept as written if it stays inside the package (it works in the
    copy too), else pointed at its absolute target (a relative one would dangle from the cache)."""
    resolved = link.resolve()
    os.symlink(os.readlink(link) if resolved.is_relative_to(root) else resolved, dst)


def _remove(root: Path, key: str) -> None:
    (root / f"{key}.done.json").unlink(missing_ok=True)
    try:
        for p in (root / key, root / f"{key}.patches"):
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.exists():
                shutil.rmtree(p)
    except OSError as e:
        raise SourceError(f"cannot remove {root / key}: {e}") from e
