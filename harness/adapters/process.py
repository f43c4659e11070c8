"""The server's process tree: started through the reaper shim in a session of its own, stopped as a
group (TERM, wait, KILL), with a psutil check that nothing of it is left."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

import psutil

from harness.core.record import StopRecord
from harness.errors import ConfigError, HarnessError

REAPER = Path(__file__).with_name("reaper.py")
SHIM_START_TIMEOUT_S = 30.0   # python start-up of the shim, on a loaded host
KILL_WAIT_S = 5.0             # after SIGKILL; only an uninterruptible (D-state) process takes longer
JOIN_TIMEOUT_S = 5.0
_POLL_S = 0.02


def signal_name(returncode: int | None) -> str | None:
    """"SIGSEGV" for a returncode of -11; None for a normal exit or an unknown one."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"SIG{-returncode}"


class ProcessTree:
    """A server started under the reaper shim (see reaper.py for why a shim).

    The shim's pid is the group and session id of the whole tree; `pid` is the server's own pid.
    Its stdout+stderr come out merged on `stdout_fd`."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path):
        if not Path(cwd).is_dir():
            raise ConfigError(f"working directory {cwd} does not exist", key="cwd")
        self.returncode: int | None = None   # the server's, once it has ended
        self.exited = threading.Event()      # the server ended (or the shim vanished)
        self._started = threading.Event()
        self._error: str | None = None
        self._pid: int | None = None
        self._stop: StopRecord | None = None
        self._stop_lock = threading.Lock()
        self._listeners: list[threading.Event] = []
        report_r, report_w = os.pipe()
        try:
            # The shim gets an empty environment: the server's (LD_PRELOAD, PYTHONHOME...) is for
            # the server only and travels on stdin.
            self._popen = subprocess.Popen(
                [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), str(report_w)],
                env={}, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(report_w,), bufsize=0)
        except BaseException:  # the pipe end must not leak, whatever Popen raised; re-raised
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        self.pgid = self._popen.pid
        self.stdout_fd = self._popen.stdout.fileno()
        self._reports = threading.Thread(target=self._read_reports, args=(report_r,),
                                         name=f"reports-{self.pgid}", daemon=True)
        self._reports.start()
        self._handshake(argv, env)

    def _handshake(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        try:
            self._popen.stdin.write(json.dumps({"argv": list(argv), "env": dict(env)}).encode())
            self._popen.stdin.close()
        except BrokenPipeError:
            pass  # the shim died: the report channel says why
        if not self._started.wait(SHIM_START_TIMEOUT_S) or self._error or self._pid is None:
            self.stop(timeout_s=1.0)
            self.close()
            if self._error:
                raise ConfigError(f"cannot start {argv[0]!r}: {self._error}", key="argv")
            raise HarnessError(f"reaper shim did not start the server (shim rc={self._popen.returncode})")

    def _read_reports(self, fd: int) -> None:
        buf = b""
        try:
            with os.fdopen(fd, "rb", buffering=0) as f:
                while chunk := f.read(4096):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        self._on_report(json.loads(line))
        finally:
            self._started.set()   # EOF: the shim is gone, whatever it managed to say
            self._set_exited()

    def _on_report(self, msg: dict) -> None:
        if "pid" in msg:
            self._pid = msg["pid"]
            self._started.set()
        elif "error" in msg:
            self._error = msg["error"]
            self._started.set()
        elif "status" in msg:
            self.returncode = os.waitstatus_to_exitcode(msg["status"])
            self._set_exited()

    def _set_exited(self) -> None:
        self.exited.set()
        for ev in self._listeners:
            ev.set()

    def notify_exit(self, ev: threading.Event) -> None:
        """Set ev when the server ends (in addition to `exited`)."""
        self._listeners.append(ev)
        if self.exited.is_set():
            ev.set()

    @property
    def pid(self) -> int:
        """The server's pid (the shim's child)."""
        assert self._pid is not None
        return self._pid

    def stop(self, timeout_s: float) -> StopRecord:
        """TERM the group, wait up to timeout_s for the whole tree, KILL it, kill any survivor.

        Idempotent. The shim exits only when its last descendant is gone, so waiting for the shim
        is waiting for the tree."""
        with self._stop_lock:
            if self._stop is None:
                self._stop = self._stop_tree(timeout_s)
            return self._stop

    def _stop_tree(self, timeout_s: float) -> StopRecord:
        watched = self._descendants()
        force = False
        if self._signal_group(signal.SIGTERM) and not self._wait_shim(timeout_s):
            force = True
            self._signal_group(signal.SIGKILL)
            self._wait_shim(KILL_WAIT_S)
        # The shim is at most a zombie here, so its pid cannot have been reused as a group id yet.
        found = self._survivors(watched)
        for p in found:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(found, timeout=KILL_WAIT_S)
        # A survivor is what is still alive after its KILL and the wait: a process found while it
        # was dying of the group's KILL (slow on a loaded host) was killed, not left behind.
        left = [p for p in found if _alive(p)]
        try:
            self._popen.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            left.append(psutil.Process(self.pgid))
        self._reports.join(JOIN_TIMEOUT_S)
        returncode = self.returncode
        if returncode is None and force:
            returncode = -signal.SIGKILL   # the shim died with the server; we know what we sent
        return StopRecord(exit_code=returncode, signal=signal_name(returncode),
                          reaped=not force and not found and not left, force_killed=force or bool(found),
                          survivors=tuple(sorted(p.pid for p in left)))

    def _signal_group(self, sig: int) -> bool:
        """Signal the group while the shim (its leader) lives; False if it has already ended."""
        if self._shim_ended():
            return False
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            return False
        return True

    def _shim_ended(self) -> bool:
        if self._popen.returncode is not None:
            return True
        try:
            # WNOWAIT: leave it a zombie, which keeps its pid (our group id) from being reused.
            info = os.waitid(os.P_PID, self.pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def _wait_shim(self, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while not self._shim_ended():
            if time.monotonic() >= end:
                return False
            time.sleep(_POLL_S)
        return True

    def _descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pgid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def _survivors(self, watched: list[psutil.Process]) -> list[psutil.Process]:
        found: dict[int, psutil.Process] = {}
        for p in psutil.process_iter():
            if p.pid == self.pgid:
                continue
            try:
                if self.pgid in (os.getpgid(p.pid), os.getsid(p.pid)):
                    found[p.pid] = p
            except (ProcessLookupError, PermissionError):
                continue
        for p in watched:
            if p.is_running():
                found.setdefault(p.pid, p)
        return [p for p in found.values() if _alive(p)]

    def close(self) -> None:
        """Close the output pipe (after its reader has finished)."""
        self._popen.stdout.close()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
