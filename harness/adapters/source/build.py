"""The optional build of an arm's tree (target.build, for C++/CUDA patches): run once per tree and
build command, in the tree, its log kept beside it; a failure is remembered too (same inputs, same
failure) and is PATCH_FAILED with the log's tail. Layout beside the tree <key>/:
    <key>.build-<h>.log    what the build printed
    <key>.build-<h>.json   written last: {argv, rc, seconds}
where h hashes the argv and the env the build was given."""
from __future__ import annotations

import hashlib
import json
import os
import select
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from harness.adapters.files import atomic_write
from harness.adapters.process import ProcessTree
from harness.errors import ConfigError, PatchFailed

TAIL_LINES = 30
_STOP_S = 10.0


class BuildFailed(PatchFailed):
    """The build command failed or ran out of time; carries its log."""

    def __init__(self, message: str, log: Path):
        self.patch, self.git_message, self.log = "", message, log
        Exception.__init__(self, message)


@dataclass(frozen=True)
class BuildRecord:
    """A build that succeeded (now or before)."""

    argv: tuple[str, ...]
    log: Path
    seconds: float
    reused: bool


def run_build(tree: Path, argv: Sequence[str], env: Mapping[str, str], keyed_env: Mapping[str, str],
              timeout_s: float) -> BuildRecord:
    """Run argv in tree unless this (argv, keyed_env) already ran there. The caller holds the
    tree's lock. keyed_env is the part of env that defines the build (the matrix's, not the
    shell's). BuildFailed with the log's tail on a non-zero exit or a timeout."""
    h = hashlib.sha256(json.dumps([list(argv), sorted(keyed_env.items())]).encode()).hexdigest()[:12]
    marker, log = tree.with_name(f"{tree.name}.build-{h}.json"), tree.with_name(f"{tree.name}.build-{h}.log")
    if marker.is_file():
        done = json.loads(marker.read_text())
        if done["rc"] != 0:
            raise BuildFailed(_failure(argv, done["rc"], log, f" (remembered; delete {marker} to build again)"), log)
        return BuildRecord(tuple(argv), log, float(done["seconds"]), reused=True)
    t0 = time.monotonic()
    rc = _run(tree, argv, env, log, timeout_s)
    seconds = time.monotonic() - t0
    atomic_write(marker, json.dumps({"argv": list(argv), "rc": rc, "seconds": round(seconds, 1)}).encode())
    if rc != 0:
        raise BuildFailed(_failure(argv, rc, log, ""), log)
    return BuildRecord(tuple(argv), log, seconds, reused=False)


def _run(tree: Path, argv: Sequence[str], env: Mapping[str, str], log: Path, timeout_s: float) -> int | str:
    """The build's exit code, or "timeout"; under the reaper, so it dies with the harness. A
    daemon the build leaves behind holding its output does not keep us waiting: once the build
    itself has ended, a second of silence ends the read, and stop() takes the rest down."""
    try:
        proc = ProcessTree(argv, env, tree)
    except ConfigError as e:
        log.write_text(f"[harness] {e}\n")
        return "not started"
    deadline = time.monotonic() + timeout_s
    try:
        with open(log, "wb") as out:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    out.write(f"\n[harness] build timed out after {timeout_s:g} s\n".encode())
                    return "timeout"
                ready, _, _ = select.select([proc.stdout_fd], [], [], min(left, 1.0))
                if ready:
                    chunk = os.read(proc.stdout_fd, 65536)
                    if not chunk:
                        break
                    out.write(chunk)
                elif proc.exited.is_set():
                    break
        proc.exited.wait(_STOP_S)
        return proc.returncode if proc.returncode is not None else "unknown"
    finally:
        proc.stop(_STOP_S)
        proc.close()


def _failure(argv: Sequence[str], rc: int | str, log: Path, note: str) -> str:
    how = {"timeout": "timed out", "not started": "could not start"}.get(str(rc), f"failed (exit {rc})")
    try:
        tail = log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
    except OSError:
        tail = []
    return f"build {' '.join(argv)} {how}{note}; log {log}, last lines:\n" + "\n".join(tail)
