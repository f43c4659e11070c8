"""A real `mlflow server` on 127.0.0.1, for tests and `harness ui`.

Started in its own session (it forks uvicorn workers), ready when /health answers, stopped by
SIGTERM to the whole process group, then SIGKILL. The sandbox's PID 1 may not reap orphans, so
"still running" ignores zombies.
"""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

# Job execution off: otherwise the server also forks a job runner and 7 huey consumers (15 s start, not 7).
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


class MlflowServerError(HarnessError):
    """The server did not come up (exited, or no /health before the deadline); carries its log tail."""

    def __init__(self, message: str, log_tail: str = ""):
        self.log_tail = log_tail
        super().__init__(f"{message}\n--- server log tail ---\n{log_tail}" if log_tail else message)


@dataclass(frozen=True)
class ServerStop:
    """How the server was stopped."""

    reaped: bool             # the group ended after SIGTERM
    force_killed: bool       # SIGKILL was needed
    survivors: tuple[int, ...] = ()  # pids of the group alive (not zombie) after SIGKILL


def server_command(backend_store_uri: str, artifacts_dir: Path, port: int, host: str = "127.0.0.1",
                   workers: int = 1) -> list[str]:
    """argv of `mlflow server` (the running interpreter's mlflow), artifacts proxied into artifacts_dir."""
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri,
            "--artifacts-destination", str(artifacts_dir), "--host", host, "--port", str(port),
            "--workers", str(workers)]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _answers(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def group_alive(pgid: int) -> list[int]:
    """Pids of the process group that are not zombies (reads /proc: Linux)."""
    alive = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


class MlflowServer:
    """`with MlflowServer(uri, artifacts_dir, log_path) as srv:` … srv.url … ; srv.stopped after."""

    def __init__(self, backend_store_uri: str, artifacts_dir: Path, log_path: Path, *, host: str = "127.0.0.1",
                 port: int | None = None, workers: int = 1, start_timeout_s: float = 90.0,
                 stop_timeout_s: float = 15.0, env: dict[str, str] | None = None):
        self.host, self.port = host, port or free_port(host)
        self.argv = server_command(backend_store_uri, artifacts_dir, self.port, host, workers)
        self.artifacts_dir, self.log_path = artifacts_dir, log_path
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s
        self.env = {**os.environ, **SERVER_ENV, **(env or {})}
        self.url = f"http://{host}:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.stopped: ServerStop | None = None

    def __enter__(self) -> "MlflowServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Launch and wait for /health; raises MlflowServerError (after stopping what it started)."""
        if _answers(self.host, self.port):
            raise MlflowServerError(f"something already listens on {self.host}:{self.port}")
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:  # whatever stopped the start (Ctrl-C too): stop the server, re-raise
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise MlflowServerError(f"mlflow server exited with {rc} during start", self.log_tail())
            left = deadline - time.monotonic()
            if left <= 0:
                raise MlflowServerError(f"no answer on {self.url}/health after {self.start_timeout_s} s", self.log_tail())
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=min(2.0, left)) as r:
                    if r.status == 200:
                        return
            except (OSError, http.client.HTTPException):
                pass  # not listening yet
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))

    def stop(self) -> ServerStop:
        """SIGTERM to the group, wait, SIGKILL what is left. Idempotent."""
        if self.proc is None or self.stopped is not None:
            return self.stopped or ServerStop(reaped=True, force_killed=False)
        pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while time.monotonic() < deadline:
            self.proc.poll()
            if not group_alive(pgid):
                break
            time.sleep(0.1)
        force = bool(group_alive(pgid))
        if force:
            _signal_group(pgid, signal.SIGKILL)
            time.sleep(0.5)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # reported through survivors
        self.stopped = ServerStop(reaped=not force, force_killed=force, survivors=tuple(group_alive(pgid)))
        return self.stopped

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the whole group is gone already
