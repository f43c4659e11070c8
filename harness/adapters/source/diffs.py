"""Unified diffs read as files: which paths a diff touches, and the part of a repository's diff that
falls inside one package (what an overlay of an installed package can apply). Pure text work."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_GIT_HEADER = re.compile(r"^diff --git ", re.M)


@dataclass(frozen=True)
class PackageDiff:
    """The sections of a diff inside the package, and how to apply them from the package's parent."""

    text: str                   # the kept sections (a preamble, if any, stays: git apply skips it)
    strip: int                  # for `git apply -p<strip>`: a/ plus the folders above the package
    kept: tuple[str, ...]       # repository paths applied
    skipped: tuple[str, ...]    # repository paths outside the package, not applied


def _unquote(path: str) -> str:
    """git quotes unusual paths C-style ("a/\\303\\251.py"); a Python bytes literal reads the same escapes."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        try:
            return ast.literal_eval("b" + path).decode("utf-8", "surrogateescape")
        except (ValueError, SyntaxError):
            return path
    return path


def _drop_prefix(path: str) -> str:
    """Remove the a/ or b/ git puts in front (what -p1 does)."""
    return path.split("/", 1)[1] if "/" in path else path


def split_sections(text: str) -> tuple[str, list[str]]:
    """(preamble, one text per file) for a git diff; ("", []) for a plain unified diff, whose
    files cannot be told apart safely (a removed line may itself start with "--- ")."""
    starts = [m.start() for m in _GIT_HEADER.finditer(text)]
    if not starts:
        return "", []
    bounds = [*starts, len(text)]
    return text[:starts[0]], [text[a:b] for a, b in zip(bounds, bounds[1:])]


def section_path(section: str) -> str | None:
    """The repository path one git diff section changes (the new name; the old one for a deletion)."""
    old = new = None
    lines = section.split("\n")
    for line in lines[1:]:
        if line.startswith(("@@", "GIT binary patch", "Binary files ")):
            break
        if line.startswith("+++ "):
            new = line[4:].split("\t")[0]
        elif line.startswith("--- "):
            old = line[4:].split("\t")[0]
        elif line.startswith(("rename to ", "copy to ")):
            return _unquote(line.split(" to ", 1)[1])
    for p in (new, old):
        if p is not None and p != "/dev/null":
            return _drop_prefix(_unquote(p))
    head = lines[0][len("diff --git "):]
    # "a/P b/P" (same path, no quotes): the halves have equal length.
    if not head.startswith('"') and len(head) % 2 == 1:
        half = (len(head) - 1) // 2
        if head[half] == " ":
            return _drop_prefix(head[half + 1:])
    return None


def touched_paths(text: str) -> tuple[str, ...]:
    """Every repository path a git diff changes, in order (unknown ones left out)."""
    return tuple(p for p in (section_path(s) for s in split_sections(text)[1]) if p is not None)


def _plain_paths(text: str) -> list[str]:
    out, prev = [], ""
    for line in text.split("\n"):
        if line.startswith("+++ ") and prev.startswith("--- "):
            p = line[4:].split("\t")[0]
            out.append(_drop_prefix(_unquote(p if p != "/dev/null" else prev[4:].split("\t")[0])))
        prev = line
    return out


def _prefix(paths: list[str], package: str, repo_dir: str | None) -> tuple[str, ...] | None:
    if repo_dir is not None:
        return tuple(c for c in repo_dir.split("/") if c)
    found = []
    for p in paths:
        parts = p.split("/")
        if package in parts[:-1]:
            found.append(tuple(parts[:parts.index(package)]))
    return min(found, key=len) if found else None


def for_package(text: str, package: str, repo_dir: str | None = None) -> PackageDiff | None:
    """The part of a repository diff inside package, applied from the folder holding the package.
    repo_dir is where that folder sits in the repository ("python" for sglang); None = the
    shallowest folder above a path component named like the package. None when nothing is inside."""
    preamble, sections = split_sections(text)
    paths = [section_path(s) for s in sections] if sections else _plain_paths(text)
    prefix = _prefix([p for p in paths if p is not None], package, repo_dir)
    if prefix is None:
        return None
    inside = (*prefix, package)
    def within(p: str | None) -> bool:
        return p is not None and tuple(p.split("/")[:len(inside)]) == inside
    if not sections:  # a plain diff is applied whole; git apply says so if a file is outside
        return PackageDiff(text, 1 + len(prefix), tuple(p for p in paths if within(p)), ()) \
            if any(within(p) for p in paths) else None
    kept = [(s, p) for s, p in zip(sections, paths, strict=True) if within(p)]
    if not kept:
        return None
    skipped = tuple(p or "?" for p in paths if not within(p))
    return PackageDiff(preamble + "".join(s for s, _ in kept), 1 + len(prefix),
                       tuple(p for _, p in kept if p is not None), skipped)
