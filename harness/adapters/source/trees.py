"""Content hashes of the files a sequence of commits touched, read from git's objects (so a
symlink hashes as its target string, as git stores it, and the disk is not trusted)."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

from harness.adapters.source.gitcmd import git


def touched_hashes(cwd: Path, revs: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
    """path -> (sha256 at revs[0], sha256 at revs[-1]) for every path changed between any two
    consecutive revs (a file one patch changes and the next restores is still listed); None
    where the path does not exist."""
    paths: dict[str, None] = {}
    for a, b in zip(revs, revs[1:]):
        out = git(cwd, ["diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b]).stdout
        paths.update((p.decode("utf-8", "surrogateescape"), None) for p in out.split(b"\0") if p)
    before, after = _hashes(cwd, revs[0], paths), _hashes(cwd, revs[-1], paths)
    return {p: (before.get(p), after.get(p)) for p in sorted(paths)}


def _hashes(cwd: Path, rev: str, wanted: dict[str, None]) -> dict[str, str]:
    if not wanted:
        return {}
    entries: dict[str, tuple[str, str]] = {}  # path -> (object type, object id)
    for line in git(cwd, ["ls-tree", "-r", "-z", "--full-tree", rev]).stdout.split(b"\0"):
        if not line:
            continue
        meta, _, raw = line.partition(b"\t")
        path = raw.decode("utf-8", "surrogateescape")
        if path in wanted:
            _mode, kind, oid = meta.decode().split()
            entries[path] = (kind, oid)
    blobs = sorted({oid for kind, oid in entries.values() if kind == "blob"})
    contents = _cat_blobs(cwd, blobs)
    out = {}
    for path, (kind, oid) in entries.items():
        # A submodule (gitlink) has no content here: its commit id stands for it.
        data = contents[oid] if kind == "blob" else f"{kind} {oid}".encode()
        out[path] = hashlib.sha256(data).hexdigest()
    return out


def _cat_blobs(cwd: Path, oids: Sequence[str]) -> dict[str, bytes]:
    if not oids:
        return {}
    out = git(cwd, ["cat-file", "--batch"], input="".join(f"{o}\n" for o in oids).encode()).stdout
    contents, pos = {}, 0
    for oid in oids:
        nl = out.index(b"\n", pos)
        _oid, _kind, size = out[pos:nl].split()  # "<oid> blob <size>"
        start = nl + 1
        contents[oid] = out[start:start + int(size)]
        pos = start + int(size) + 1  # content is followed by a newline
    return contents
