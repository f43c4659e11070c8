"""Whether an arm's patches apply to the base commit, without a worktree and without writing
anything into the repository: git reads the base into a scratch index and writes the patched blobs
into a scratch object folder that borrows the repository's objects (an alternate). What a dry run
uses to say which arms a real run would record as PATCH_FAILED."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.adapters.source.gitcmd import git, stderr_of, stdout_of
from harness.adapters.source.patches import ENCODING, ERRORS, PatchSpec, patch_text


@dataclass(frozen=True)
class NotApplied:
    """The first patch of a set that does not apply (index into the set) and git's message."""

    index: int
    message: str


def first_not_applying(repo_top: Path, base_sha: str, patches: Sequence[PatchSpec], *,
                       timeout_s: float = 120.0) -> NotApplied | None:
    """Apply the patches in order on top of base_sha, as a worktree would; None when all apply.
    The user's index, work tree and object store are left as they were."""
    if not patches:
        return None
    objects = stdout_of(git(repo_top, ["rev-parse", "--path-format=absolute", "--git-path", "objects"])).strip()
    with tempfile.TemporaryDirectory(prefix="harness-apply-") as tmp:
        scratch = Path(tmp)
        (scratch / "objects").mkdir()
        env = {"GIT_INDEX_FILE": str(scratch / "index"), "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
               "GIT_ALTERNATE_OBJECT_DIRECTORIES": objects}
        git(repo_top, ["read-tree", base_sha], env=env, timeout_s=timeout_s)
        for i, p in enumerate(patches):
            diff = p.diff
            if diff is None:   # a commit or range: git's diff of it, as the worktree would apply
                diff = scratch / f"{i:02d}.diff"
                diff.write_bytes(patch_text(repo_top, p).encode(ENCODING, ERRORS))
            # --cached: the scratch index only, never a work tree; --whitespace=nowarn as in prepare.
            proc = git(repo_top, ["apply", "--cached", "--whitespace=nowarn", "--", str(diff)], check=False,
                       env=env, timeout_s=timeout_s)
            if proc.returncode != 0:
                return NotApplied(i, "; ".join(ln.strip() for ln in stderr_of(proc).splitlines() if ln.strip()))
    return None
