"""Launch a server, stream its log through a classifier, wait until it is ready or has failed.

A failed launch is data: wait_ready() returns a ServerRun saying how it ended and never raises for
a server failure. Process-group handling and the stop live in process.py."""
from __future__ import annotations

import http.client
import os
import re
import select
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Literal, Mapping, Protocol

from harness.adapters.process import JOIN_TIMEOUT_S, ProcessTree
from harness.core.outcome import Outcome
from harness.core.record import StopRecord
from harness.errors import ConfigError, HarnessError

TAIL_LINES = 50
MAX_LINE_BYTES = 64 * 1024     # a longer line is written and classified in pieces of this size
PROBE_TIMEOUT_S = 2.0
CHECK_TIMEOUT_S = 30.0         # an engine's own check may send a request (a completion): longer bound
_READ_POLL_S = 0.5             # how often the reader looks up from a silent pipe to check for close
_NEWLINE = re.compile(rb"\r\n|\n")

State = Literal["ready", "fatal", "exited", "hang", "timeout"]


class LineSink(Protocol):
    """The log classifier."""

    def feed(self, line: str) -> Outcome | None:
        """A fatal Outcome the first time a fatal line is seen, Outcome.READY the first time a
        ready marker is seen, else None."""
        ...


@dataclass(frozen=True)
class ReadyProbe:
    """How readiness is recognised: an HTTP GET returning 2xx, the sink's READY, or both.

    ``check`` (base URL, seconds left) is an engine's own test, run once the HTTP path has
    answered 2xx: vLLM's /v1/models must list a model, ATOM must answer a completion. It returns
    False while the server is not ready yet and never raises for a server's answer."""

    http_path: str | None = "/health"
    log_marker: bool = False
    require_both: bool = False
    interval_s: float = 0.25
    check: Callable[[str, float], bool] | None = None

    def __post_init__(self) -> None:
        if self.http_path is None and not self.log_marker:
            raise ConfigError("no readiness check: set http_path or log_marker", key="probe")
        if self.http_path is not None and not self.http_path.startswith("/"):
            raise ConfigError(f"http_path must start with '/', got {self.http_path!r}", key="probe.http_path")
        if self.interval_s <= 0:
            raise ConfigError(f"interval_s must be > 0, got {self.interval_s}", key="probe.interval_s")
        if self.check is not None and self.http_path is None:
            raise ConfigError("a readiness check runs after the HTTP probe: set http_path", key="probe.check")


@dataclass(frozen=True)
class LaunchSpec:
    """One launch of a server: what to run, where its log goes, and how long each phase may take."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    host: str = "127.0.0.1"
    port: int | None = None
    probe: ReadyProbe = ReadyProbe()
    startup_timeout_s: float = 600.0
    quiet_timeout_s: float = 300.0
    fatal_grace_s: float = 3.0
    stop_timeout_s: float = 10.0
    secrets: tuple[str, ...] = ()      # values masked in server.log (and in what the sink sees)

    def __post_init__(self) -> None:
        if isinstance(self.argv, str) or not self.argv:
            raise ConfigError("argv must be a non-empty sequence of arguments, not a shell string", key="argv")
        if self.probe.http_path is not None and self.port is None:
            raise ConfigError("an HTTP readiness probe needs a port", key="port")
        for name in ("startup_timeout_s", "quiet_timeout_s", "stop_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}", key=name)
        if self.fatal_grace_s < 0:
            raise ConfigError(f"fatal_grace_s must be >= 0, got {self.fatal_grace_s}", key="fatal_grace_s")


@dataclass(frozen=True)
class ServerRun:
    """How a launch went. Times are seconds since launch, on the monotonic clock."""

    state: State
    fatal: Outcome | None
    exit_code: int | None     # the server's returncode (-N: signal N) if it ended before we stopped it
    ready_s: float | None
    verdict_s: float | None
    stop: StopRecord | None
    log_tail: str


class _LogPump:
    """Reads the merged output, writes it to the log line by line, feeds the sink, keeps times."""

    def __init__(self, fd: int, log_path: Path, sink: LineSink, wake: threading.Event,
                 secrets: tuple[str, ...] = ()):
        self._secrets = tuple(s for s in secrets if s)
        self.last_output = time.monotonic()
        self.fatal: tuple[Outcome, float] | None = None
        self.ready_at: float | None = None
        self.eof = threading.Event()
        self.error: BaseException | None = None
        self._fd, self._sink, self._wake = fd, sink, wake
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()
        self._closing = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "a", encoding="utf-8")
        self._thread = threading.Thread(target=self._run, name=f"log-{log_path.name}", daemon=True)
        self._thread.start()

    def tail(self) -> str:
        with self._lock:
            return "\n".join(self._tail)

    def _run(self) -> None:
        pending = b""
        try:
            while True:
                ready, _, _ = select.select([self._fd], [], [], _READ_POLL_S)
                if not ready:
                    if self._closing:
                        break
                    continue
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    break
                self.last_output = time.monotonic()
                pending = self._emit_complete(pending + chunk)
            if pending:
                self._emit(pending)
        except BaseException as e:  # surfaced by wait_ready as a harness bug
            self.error = e
        finally:
            self._log.close()
            self.eof.set()
            self._wake.set()

    def _emit_complete(self, data: bytes) -> bytes:
        """Emit every complete line of data; return the incomplete rest."""
        *lines, rest = _NEWLINE.split(data)
        held = b""
        if rest.endswith(b"\r"):   # may be the first half of a \r\n split across reads
            rest, held = rest[:-1], b"\r"
        *redraws, rest = rest.split(b"\r")
        for line in lines:
            self._emit(line)
        for line in redraws:
            if line:
                self._emit(line)
        while len(rest) > MAX_LINE_BYTES:
            self._emit(rest[:MAX_LINE_BYTES])
            rest = rest[MAX_LINE_BYTES:]
        return rest + held

    def _emit(self, raw: bytes) -> None:
        # A progress bar redraws with a bare \r: each redraw is a line, the empty ones are dropped.
        for part in raw.split(b"\r") if b"\r" in raw else (raw,):
            if part or b"\r" not in raw:
                self._write(part.decode("utf-8", errors="replace"))

    def _write(self, line: str) -> None:
        for secret in self._secrets:
            if secret in line:
                line = line.replace(secret, "***")
        self._log.write(line + "\n")
        self._log.flush()
        with self._lock:
            self._tail.append(line)
        self._classify(line)

    def _classify(self, line: str) -> None:
        outcome = self._sink.feed(line)
        if outcome is None:
            return
        now = time.monotonic()
        if outcome is Outcome.READY:
            self.ready_at = self.ready_at or now
        elif self.fatal is None:
            self.fatal = (outcome, now)
        self._wake.set()

    def close(self, timeout_s: float) -> None:
        self._closing = True
        self._thread.join(timeout_s)


class Server:
    """A server launch as a context manager: `with Server(spec, sink) as srv: run = srv.wait_ready()`.

    Leaving the block always stops the server (TERM, wait, KILL the group; kill survivors)."""

    def __init__(self, spec: LaunchSpec, sink: LineSink):
        self.spec, self._sink = spec, sink
        self._tree: ProcessTree | None = None
        self._pump: _LogPump | None = None
        self._wake = threading.Event()
        self._run: ServerRun | None = None
        self._stop: StopRecord | None = None
        self.launched_at = 0.0   # monotonic time of the launch

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Launch the server (in its own session, under the reaper shim) and start reading its log."""
        if self._tree is not None:
            raise HarnessError("Server.start() called twice")
        self.launched_at = time.monotonic()
        self._tree = ProcessTree(self.spec.argv, self.spec.env, self.spec.cwd)
        self._tree.notify_exit(self._wake)
        self._pump = _LogPump(self._tree.stdout_fd, self.spec.log_path, self._sink, self._wake,
                              self.spec.secrets)

    @property
    def pid(self) -> int:
        """The server's own pid."""
        return self._started().pid

    @property
    def pgid(self) -> int:
        """The process group (and session) of the server's whole tree."""
        return self._started().pgid

    @property
    def base_url(self) -> str:
        """http://host:port of the server."""
        host = f"[{self.spec.host}]" if ":" in self.spec.host else self.spec.host
        return f"http://{host}:{self.spec.port}"

    @property
    def fatal(self) -> Outcome | None:
        """The first fatal outcome the sink reported, at any time (also after ready)."""
        return self._pump.fatal[0] if self._pump and self._pump.fatal else None

    @property
    def returncode(self) -> int | None:
        """The server's returncode once it has ended (-N: killed by signal N), else None."""
        return self._started().returncode

    @property
    def result(self) -> ServerRun | None:
        """The run as wait_ready returned it, with the stop record and final tail once stopped."""
        return self._run

    def log_tail(self) -> str:
        """The last lines the server printed."""
        return self._pump.tail() if self._pump else ""

    def wait_ready(self) -> ServerRun:
        """Block until the server is ready, or has failed (then stop it and return how).

        Never raises for a server failure; raises HarnessError only for the harness's own bugs."""
        if self._run is not None:
            return self._run
        tree, pump, spec = self._started(), self._pump, self.spec
        deadline = self.launched_at + spec.startup_timeout_s
        next_probe = self.launched_at
        probed_at_marker = False
        http_ready = False
        while True:
            self._wake.clear()
            if pump.error is not None:
                raise HarnessError(f"log reader failed: {pump.error!r}") from pump.error
            now = time.monotonic()
            if tree.exited.is_set():
                pump.eof.wait(spec.fatal_grace_s)   # the last lines may explain the exit
                state = "fatal" if pump.fatal else "exited"
                return self._decide(state, pump.fatal[1] if pump.fatal else now)
            if pump.fatal is not None:
                grace_end = pump.fatal[1] + spec.fatal_grace_s
                tree.exited.wait(max(0.0, grace_end - time.monotonic()))
                if tree.exited.is_set():
                    pump.eof.wait(max(0.0, grace_end - time.monotonic()))
                return self._decide("fatal", pump.fatal[1])
            if now - pump.last_output >= spec.quiet_timeout_s:
                return self._decide("hang", now)
            if now >= deadline:
                return self._decide("timeout", now)
            if spec.probe.http_path is not None and not http_ready:
                # The ready marker in the log is a strong hint: probe at once rather than at the next tick.
                if now >= next_probe or (pump.ready_at is not None and not probed_at_marker):
                    probed_at_marker = pump.ready_at is not None
                    http_ready = self._probe_http(min(PROBE_TIMEOUT_S, deadline - now))
                    if http_ready and spec.probe.check is not None:
                        left = deadline - time.monotonic()
                        http_ready = left > 0 and spec.probe.check(self.base_url, min(CHECK_TIMEOUT_S, left))
                    next_probe = time.monotonic() + spec.probe.interval_s
            if self._is_ready(http_ready):
                return self._decide("ready", time.monotonic())
            now = time.monotonic()
            quiet_left = pump.last_output + spec.quiet_timeout_s - now
            probe_left = next_probe - now if spec.probe.http_path is not None else spec.probe.interval_s
            self._wake.wait(max(0.0, min(probe_left, deadline - now, quiet_left)))

    def _is_ready(self, http_ready: bool) -> bool:
        probe = self.spec.probe
        checks = []
        if probe.http_path is not None:
            checks.append(http_ready)
        if probe.log_marker:
            checks.append(self._pump.ready_at is not None)
        return all(checks) if probe.require_both else any(checks)

    def _probe_http(self, timeout_s: float) -> bool:
        # No proxy: an http_proxy in the harness's environment must not intercept a local probe.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(self.base_url + self.spec.probe.http_path, timeout=max(timeout_s, 0.01)) as resp:
                return 200 <= resp.status < 300
        except (OSError, http.client.HTTPException):   # refused while starting, non-2xx, timeout
            return False

    def _decide(self, state: State, at: float) -> ServerRun:
        pump, tree = self._pump, self._started()
        ready_s = at - self.launched_at if state == "ready" else None
        run = ServerRun(state=state, fatal=pump.fatal[0] if pump.fatal else None,
                        exit_code=tree.returncode if tree.exited.is_set() else None,
                        ready_s=ready_s, verdict_s=at - self.launched_at, stop=None,
                        log_tail=pump.tail())
        self._run = run
        if state != "ready":
            self.stop()
        return self._run

    def stop(self) -> StopRecord:
        """Stop the server's whole tree and finish the log. Idempotent."""
        if self._stop is not None:
            return self._stop
        if self._tree is None:
            self._stop = StopRecord()
            return self._stop
        self._stop = self._tree.stop(self.spec.stop_timeout_s)
        self._pump.close(JOIN_TIMEOUT_S)
        self._tree.close()
        if self._run is not None:
            self._run = replace(self._run, stop=self._stop, log_tail=self._pump.tail())
        return self._stop

    def _started(self) -> ProcessTree:
        if self._tree is None:
            raise HarnessError("Server not started: use `with Server(spec, sink) as srv:`")
        return self._tree
