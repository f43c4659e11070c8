"""Whether an arm's patches apply to the base commit, without a worktree and without writing
anything into the repository: git reads the base into a scratch index and checks the patches
against it (`apply --check --cached` writes no object). What a dry run uses to say which arms a
real run would record as PATCH_FAILED."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.adapters.source.gitcmd import git, stderr_of
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
    texts = [patch_text(repo_top, p) for p in patches]
    texts = [t if t.endswith("\n") else t + "\n" for t in texts]
    with tempfile.TemporaryDirectory(prefix="harness-apply-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo_top, ["read-tree", base_sha], env=env, timeout_s=timeout_s)

        def check(k: int) -> str | None:
            # One input holding patches 1..k: git applies them in turn, in memory (a later patch of the
            # same file sees the earlier ones), and --check writes nothing.
            proc = git(repo_top, ["apply", "--check", "--cached", "--whitespace=nowarn", "-"], check=False, env=env,
                       input="".join(texts[:k]).encode(ENCODING, ERRORS), timeout_s=timeout_s)
            return None if proc.returncode == 0 else "; ".join(
                ln.strip() for ln in stderr_of(proc).splitlines() if ln.strip())

        whole = check(len(texts))
        if whole is None:
            return None
        for k in range(1, len(texts)):
            message = check(k)
            if message is not None:
                return NotApplied(k - 1, message)
    return NotApplied(len(texts) - 1, whole)
