"""A lock file held with flock (bounded wait): what lets two processes prepare the same worktree
at once."""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.errors import SourceError

_POLL_S = 0.1


@contextmanager
def locked(lock_path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive flock on lock_path, waiting at most timeout_s; SourceError past that.
    The file is never deleted (deleting a flock'ed file lets a third process lock a new inode)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise SourceError(f"cannot open lock file {lock_path}: {e}") from e
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SourceError(
                        f"{lock_path} is still locked after {timeout_s:g} s (another preparation running?)"
                    ) from None
                time.sleep(_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock, also when the process dies
