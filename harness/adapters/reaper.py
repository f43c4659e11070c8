"""Reaper shim: runs the server as its child and takes the server's whole tree down with the harness.

    python -I -S reaper.py PARENT_PID REPORT_FD      (launch spec as one JSON object on stdin)

The harness starts this file (stdlib only, run by path so that the server's environment, which
may set PYTHONPATH or PYTHONHOME, never touches it) with start_new_session=True, so the shim leads
the session and the process group that the server and its workers are born into. The shim

* is a child subreaper: orphaned workers are re-parented to it, so it sees every descendant
  and exits only when all of them are gone (the harness's wait on the shim is a wait on the tree);
* reports on REPORT_FD, one JSON object a line: {"pid": N} once the server runs,
  {"error": "..."} if it could not be started, {"status": raw_wait_status} when it ends;
* kills the group and every descendant with SIGKILL as soon as its parent (the harness) is gone.
  PR_SET_PDEATHSIG wakes it at once; because PDEATHSIG fires when the *thread* that forked the shim
  ends, the signal only prompts a getppid() check, which is also polled every POLL_S.

SIGTERM sent to the group by the harness's stop() is meant for the server; the shim stays to reap.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.2
EXIT_NOT_STARTED = 127


def _prctl(option: int, arg: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def _ppid_map() -> dict[int, int]:
    ppids: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # comm may hold spaces and parentheses: the fields after the last ')' are fixed.
        ppids[int(name)] = int(stat.rsplit(b")", 1)[1].split()[1])
    return ppids


def descendants(root: int) -> list[int]:
    """Pids of every live descendant of root (from /proc)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _ppid_map().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), ()):
            out.append(kid)
            todo.append(kid)
    return out


def _kill_everything() -> None:
    # Descendants first: one that left our group with setsid() is still below us.
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.killpg(0, signal.SIGKILL)  # the rest of the group, this shim included


class _Reporter:
    def __init__(self, fd: int):
        os.set_inheritable(fd, False)
        self._fd = fd

    def send(self, **msg: object) -> None:
        try:
            os.write(self._fd, (json.dumps(msg) + "\n").encode())
        except OSError:  # harness gone: the parent check below acts on that
            pass


def main(argv: list[str]) -> int:
    parent = int(argv[1])
    report = _Reporter(int(argv[2]))
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: None)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the harness died before PDEATHSIG was armed
        _kill_everything()
    spec = json.loads(sys.stdin.buffer.read())
    try:
        server = subprocess.Popen(spec["argv"], env=spec["env"], stdin=subprocess.DEVNULL)
    except OSError as e:
        report.send(error=f"{type(e).__name__}: {e}")
        return EXIT_NOT_STARTED
    report.send(pid=server.pid)
    # The log's EOF should mean "the server tree closed its output", not "the shim exited".
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    status = None
    while True:
        if os.getppid() != parent:
            _kill_everything()
        try:
            while True:
                pid, raw = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                if pid == server.pid:
                    status = raw
                    server.returncode = os.waitstatus_to_exitcode(raw)
                    report.send(status=raw)
        except ChildProcessError:  # no descendant left
            break
        select.select([wake_r], [], [], POLL_S)
        try:
            while os.read(wake_r, 512):
                pass
        except BlockingIOError:
            pass
    if status is None:
        return 0
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
