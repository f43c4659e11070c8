"""Run git: argv lists only, a timeout on every call, an environment that cannot redirect it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from harness.errors import SourceError

DEFAULT_TIMEOUT_S = 120.0

# Inherited from a parent git process (a hook, `git rebase -x`), these would point our commands at
# another repository, index or identity.
_SCRUBBED = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_EXTERNAL_DIFF",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
)

# Hooks of the user's repository must not run in our worktrees (post-checkout on `worktree add`,
# pre-commit on our commits), and nothing we run may trigger gc/maintenance in their repository.
QUIET_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0", "-c", "maintenance.auto=false")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for every git call: no prompts, no optional index writes in the user's checkout."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env.update(extra or {})
    return env


def git(
    cwd: Path,
    args: Sequence[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    check: bool = True,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git -C cwd ARGS`; output as bytes. A timeout, a missing git, or (with check) a non-zero
    exit raises SourceError carrying git's stderr."""
    argv = ["git", "-C", str(cwd), *QUIET_CONFIG, *args]
    try:
        proc = subprocess.run(
            argv, input=input, capture_output=True, timeout=timeout_s, env=git_env(env),
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        raise SourceError(f"`{_show(args)}` in {cwd} timed out after {timeout_s:g} s") from e
    except OSError as e:  # git not installed, cwd vanished
        raise SourceError(f"cannot run `{_show(args)}` in {cwd}: {e}") from e
    if check and proc.returncode != 0:
        raise SourceError(f"`{_show(args)}` in {cwd} failed (exit {proc.returncode}): {stderr_of(proc).strip()}")
    return proc


def stderr_of(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode("utf-8", "replace")


def stdout_of(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode("utf-8", "surrogateescape")


def _show(args: Sequence[str]) -> str:
    return "git " + " ".join(args)
