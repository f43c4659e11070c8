"""Patches as the matrix names them: a diff file, a commit, or a range of the target repository.
Turned into unified diff text here; applied in a worktree by `git.prepare`."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from harness.adapters.source.gitcmd import git, stdout_of
from harness.errors import ConfigError

# Text round-trips bytes that are not UTF-8 (a diff of a latin-1 file) through str unchanged.
ENCODING, ERRORS = "utf-8", "surrogateescape"

# The diff of a commit must not depend on the user's git config (it is hashed and becomes part of
# the worktree's cache key), and must be something `git apply` accepts (no ext-diff, no textconv,
# no submodule logs, binary hunks in full).
_DIFF = (
    "-c", "diff.relative=false", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
    "-c", "core.quotePath=true",
    "diff", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv",
    "--no-renames", "--submodule=short", "--src-prefix=a/", "--dst-prefix=b/", "-U3",
    "--inter-hunk-context=0", "--diff-algorithm=myers", "--indent-heuristic", "-O/dev/null",
)


@dataclass(frozen=True)
class PatchSpec:
    """One patch as the matrix names it: exactly one of diff (an absolute path to a unified diff
    file), commit (a commit-ish in the target repo: its change against its first parent), or range
    ("A..B": the change `git diff A B`)."""

    diff: Path | None = None
    commit: str | None = None
    range: str | None = None
    label: str | None = None   # the name to show instead (a PR's diff: "pr:owner/repo#N")

    def __post_init__(self) -> None:
        given = [k for k in ("diff", "commit", "range") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a PatchSpec needs exactly one of diff, commit, range; got {given or 'none'}")
        if self.diff is not None and not Path(self.diff).is_absolute():
            raise ValueError(f"PatchSpec.diff must be resolved to an absolute path, got {self.diff}")

    @property
    def name(self) -> str:
        """The label, the diff's file name, "commit:<c>", or "range:<a..b>"."""
        if self.label is not None:
            return self.label
        if self.diff is not None:
            return Path(self.diff).name
        if self.commit is not None:
            return f"commit:{self.commit}"
        return f"range:{self.range}"


def rev_commit(repo_top: Path, rev: str) -> str | None:
    """The full SHA of the commit `rev` names in the repository, or None if it names none."""
    if not rev or rev.startswith("-") or any(c.isspace() for c in rev):
        return None  # never let a ref be read as an option
    proc = git(repo_top, ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], check=False)
    return stdout_of(proc).strip() if proc.returncode == 0 else None


def split_range(text: str) -> tuple[str, str] | None:
    """"A..B" -> (A, B); None for anything else ("A...B" included: merge-base semantics would
    silently differ from `git diff A B`)."""
    if "..." in text or text.count("..") != 1:
        return None
    a, b = text.split("..")
    return (a, b) if a and b else None


def check_patches(
    repo_top: Path, patches: Sequence[PatchSpec], *, file: str | None, key_of: Callable[[int], str]
) -> None:
    """Validate before anything launches: each diff file exists, is readable and not empty; each
    commit and both ends of each range resolve to commits. ConfigError names the file and key."""
    for i, p in enumerate(patches):
        key = key_of(i)
        if p.diff is not None:
            try:
                data = Path(p.diff).read_bytes()
            except OSError as e:
                raise ConfigError(f"patch file {p.diff} cannot be read: {e.strerror or e}", file=file, key=key) from e
            if not data.strip():
                raise ConfigError(f"patch file {p.diff} is empty", file=file, key=key)
        elif p.commit is not None:
            if rev_commit(repo_top, p.commit) is None:
                raise ConfigError(f"commit {p.commit!r} does not resolve to a commit in {repo_top}", file=file, key=key)
        else:
            ends = split_range(p.range or "")
            if ends is None:
                raise ConfigError(f"range {p.range!r} is not of the form A..B", file=file, key=key)
            for end in ends:
                if rev_commit(repo_top, end) is None:
                    raise ConfigError(
                        f"range {p.range!r}: {end!r} does not resolve to a commit in {repo_top}", file=file, key=key
                    )


def patch_text(repo_top: Path, patch: PatchSpec) -> str:
    """The unified diff to apply: the file's contents, or git's diff for a commit or range.
    Raises ConfigError (no key: call check_patches first for one) if a rev does not resolve."""
    if patch.diff is not None:
        return Path(patch.diff).read_bytes().decode(ENCODING, ERRORS)
    if patch.commit is not None:
        new = _must(repo_top, patch.commit)
        # A root commit has no parent: its change is against the empty tree.
        old = rev_commit(repo_top, f"{new}^") or _empty_tree(repo_top)
    else:
        ends = split_range(patch.range or "")
        if ends is None:
            raise ConfigError(f"range {patch.range!r} is not of the form A..B")
        old, new = _must(repo_top, ends[0]), _must(repo_top, ends[1])
    return stdout_of(git(repo_top, [*_DIFF, old, new, "--"]))


def patch_set_hash(base_sha: str, texts: Sequence[str]) -> str:
    """sha256 (hex, first 16 chars) over the base SHA and the ordered patch texts, each framed by
    its length so that no two different sequences collide by concatenation."""
    h = hashlib.sha256(base_sha.encode())
    for t in texts:
        b = t.encode(ENCODING, ERRORS)
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()[:16]


def text_sha256(text: str) -> str:
    """sha256 of a patch text's bytes, as recorded in PatchRecord."""
    return hashlib.sha256(text.encode(ENCODING, ERRORS)).hexdigest()


def _must(repo_top: Path, rev: str) -> str:
    sha = rev_commit(repo_top, rev)
    if sha is None:
        raise ConfigError(f"{rev!r} does not resolve to a commit in {repo_top}")
    return sha


def _empty_tree(repo_top: Path) -> str:
    # Computed, not hard-coded: SHA-256 repositories have a different empty tree.
    return stdout_of(git(repo_top, ["hash-object", "-t", "tree", "--stdin"], input=b"")).strip()
