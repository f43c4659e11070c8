"""Server against real processes: the fixture server in each mode, a harness killed with SIGKILL."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from harness.adapters.server import LaunchSpec, ReadyProbe, Server
from harness.core.outcome import Outcome
from harness.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "fixture_server.py"


class RegexSink:
    """Stands in for the real classifier: same feed() contract."""

    RULES = ((re.compile(r"illegal memory access"), Outcome.IMA),
             (re.compile(r"Application startup complete"), Outcome.READY))

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._seen: set[Outcome] = set()

    def feed(self, line: str) -> Outcome | None:
        self.lines.append(line)
        for rx, outcome in self.RULES:
            if rx.search(line) and outcome not in self._seen:
                self._seen.add(outcome)
                return outcome
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fixture_spec(tmp_path: Path, mode: str, *extra: str, **kw) -> LaunchSpec:
    port = free_port()
    argv = (sys.executable, str(FIXTURE), "--mode", mode, "--port", str(port), *extra)
    defaults = dict(startup_timeout_s=20.0, quiet_timeout_s=10.0, fatal_grace_s=0.5, stop_timeout_s=2.0)
    return LaunchSpec(argv=argv, env=dict(os.environ), cwd=tmp_path, log_path=tmp_path / "server.log",
                      port=port, **{**defaults, **kw})


def script_spec(tmp_path: Path, code: str, **kw) -> LaunchSpec:
    """A server that is a few lines of Python; ready only on the log marker."""
    return LaunchSpec(argv=(sys.executable, "-c", textwrap.dedent(code)), env=dict(os.environ), cwd=tmp_path,
                      log_path=tmp_path / "server.log", probe=ReadyProbe(http_path=None, log_marker=True),
                      **{"startup_timeout_s": 10.0, "fatal_grace_s": 0.5, "stop_timeout_s": 2.0, **kw})


def gone(procs: list[psutil.Process], within_s: float) -> list[int]:
    """Pids of procs still alive (zombies count as gone) after waiting up to within_s."""
    end = time.monotonic() + within_s
    while True:
        alive = [p.pid for p in procs if _alive(p)]
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.05)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ready_serves_http_and_stops_on_term(tmp_path):
    with Server(fixture_spec(tmp_path, "ready"), RegexSink()) as srv:
        run = srv.wait_ready()
        assert (run.state, run.fatal, run.exit_code, run.stop) == ("ready", None, None, None)
        assert 0 < run.ready_s == run.verdict_s < 10
        with urllib.request.urlopen(srv.base_url + "/health", timeout=5) as resp:
            assert resp.status == 200
        tree = [psutil.Process(srv.pgid), psutil.Process(srv.pid)]
    stop = srv.result.stop
    assert (stop.signal, stop.reaped, stop.force_killed, stop.survivors) == ("SIGTERM", True, False, ())
    assert gone(tree, 0) == []
    assert "Application startup complete" in srv.result.log_tail


# A server that exits by itself after its fatal line: the grace is a bound, not a wait, so a long one
# costs nothing and keeps a loaded machine from turning its own exit code into the harness's TERM.
EXITS_BY_ITSELF_GRACE_S = 60.0


def test_crash_is_fatal_with_exit_code_and_complete_log(tmp_path):
    sink = RegexSink()
    with Server(fixture_spec(tmp_path, "crash", fatal_grace_s=EXITS_BY_ITSELF_GRACE_S), sink) as srv:
        run = srv.wait_ready()
    assert (run.state, run.fatal, run.exit_code) == ("fatal", Outcome.IMA, 1)
    assert run.stop.exit_code == 1 and run.stop.signal is None and run.stop.reaped
    log = (tmp_path / "server.log").read_text().splitlines()
    assert log == sink.lines
    assert log[-2:] == ["RuntimeError: CUDA error: an illegal memory access was encountered",
                        "CUDA kernel errors might be asynchronously reported at some other API call."]
    assert len(log) == 12 and log[0].startswith("INFO ")


def test_ima_hang_fails_fast(tmp_path):
    stamp = tmp_path / "stamp"
    spec = fixture_spec(tmp_path, "ima-hang", "--stamp-file", str(stamp), fatal_grace_s=1.0)
    with Server(spec, RegexSink()) as srv:
        tree = [psutil.Process(srv.pgid), psutil.Process(srv.pid)]
        run = srv.wait_ready()
        decided_at = time.monotonic()
    fatal_at = float(stamp.read_text())
    verdict_at = srv.launched_at + run.verdict_s
    assert 0 <= verdict_at - fatal_at < 1.0
    assert decided_at - fatal_at < spec.fatal_grace_s + 2.0   # grace, then TERM worked at once
    assert (run.state, run.fatal, run.exit_code) == ("fatal", Outcome.IMA, None)
    assert run.stop.signal == "SIGTERM" and run.stop.reaped
    assert gone(tree, 0) == []


def test_segv_is_exited_with_signal(tmp_path):
    with Server(fixture_spec(tmp_path, "segv"), RegexSink()) as srv:
        run = srv.wait_ready()
    assert (run.state, run.fatal, run.exit_code) == ("exited", None, -signal.SIGSEGV)
    assert run.stop.signal == "SIGSEGV" and run.stop.reaped and not run.stop.force_killed
    assert "Compiling a graph" in run.log_tail


def test_silent_server_is_a_hang(tmp_path):
    spec = fixture_spec(tmp_path, "hang", quiet_timeout_s=1.0)
    with Server(spec, RegexSink()) as srv:
        run = srv.wait_ready()
    assert (run.state, run.fatal, run.exit_code) == ("hang", None, None)
    assert 1.0 <= run.verdict_s < 3.0
    assert run.stop.signal == "SIGTERM"


def test_chatty_server_that_is_never_ready_times_out(tmp_path):
    spec = fixture_spec(tmp_path, "never-ready", startup_timeout_s=1.5, quiet_timeout_s=1.0)
    with Server(spec, RegexSink()) as srv:
        run = srv.wait_ready()
    assert (run.state, run.exit_code) == ("timeout", None)
    assert 1.5 <= run.verdict_s < 3.5
    assert "Loading safetensors checkpoint shards: step 3" in (tmp_path / "server.log").read_text()


def test_slow_ready_waits_for_http(tmp_path):
    with Server(fixture_spec(tmp_path, "slow-ready", "--delay-s", "1.0"), RegexSink()) as srv:
        run = srv.wait_ready()
    assert run.state == "ready" and run.ready_s >= 1.0


def test_ignore_term_is_force_killed_without_survivors(tmp_path):
    with Server(fixture_spec(tmp_path, "ignore-term", stop_timeout_s=1.0), RegexSink()) as srv:
        assert srv.wait_ready().state == "ready"
        server = psutil.Process(srv.pid)
        t = time.monotonic()
        stop = srv.stop()
        assert 1.0 <= time.monotonic() - t < 4.0
    assert (stop.signal, stop.reaped, stop.force_killed, stop.survivors) == ("SIGKILL", False, True, ())
    assert srv.stop() is stop
    assert gone([server], 0) == []


def test_fork_leaves_no_process_behind(tmp_path):
    with Server(fixture_spec(tmp_path, "fork", stop_timeout_s=1.0), RegexSink()) as srv:
        assert srv.wait_ready().state == "ready"
        end = time.monotonic() + 5
        while len(psutil.Process(srv.pid).children()) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        tree = [psutil.Process(srv.pgid), *psutil.Process(srv.pgid).children(recursive=True)]
        assert len(tree) == 4   # shim, server, two workers
    # The server exits on TERM; its workers ignore it and need the KILL.
    assert srv.result.stop.force_killed and srv.result.stop.survivors == ()
    assert gone(tree, 0) == []


HARNESS = """
import json, os, sys, time
from pathlib import Path
import psutil
sys.path.insert(0, {root!r})
from harness.adapters.server import LaunchSpec, ReadyProbe, Server
from tests.adapters.test_server import RegexSink, fixture_spec
spec = fixture_spec(Path({tmp!r}), "fork")
srv = Server(spec, RegexSink())
srv.start()
assert srv.wait_ready().state == "ready"
while len(psutil.Process(srv.pid).children()) < 2:
    time.sleep(0.05)
pids = [srv.pgid] + [p.pid for p in psutil.Process(srv.pgid).children(recursive=True)]
Path({out!r}).write_text(json.dumps(pids))
time.sleep(600)
"""


def test_sigkill_of_the_harness_takes_the_server_tree_down(tmp_path):
    out = tmp_path / "pids.json"
    code = HARNESS.format(root=str(ROOT), tmp=str(tmp_path), out=str(out))
    harness = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    tree: list[psutil.Process] = []
    try:
        end = time.monotonic() + 20
        while not out.exists() and harness.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        tree = [psutil.Process(pid) for pid in json.loads(out.read_text())]
        assert len(tree) == 4 and all(_alive(p) for p in tree)
        harness.kill()
        harness.wait(5)
        assert gone(tree, 3.0) == []
    finally:
        harness.kill()
        harness.wait(5)
        for p in tree:   # if the test failed, do not leave its processes behind
            if _alive(p):
                p.kill()


def test_server_outlives_the_thread_that_started_it(tmp_path):
    # PDEATHSIG fires when the forking *thread* ends; the shim must not take that for the harness.
    srv = Server(fixture_spec(tmp_path, "ready"), RegexSink())
    t = threading.Thread(target=srv.start)
    t.start()
    t.join(10)
    try:
        time.sleep(0.5)
        assert srv.wait_ready().state == "ready"
        assert _alive(psutil.Process(srv.pid))
    finally:
        stop = srv.stop()
    assert stop.signal == "SIGTERM" and stop.reaped


def test_log_marker_readiness_and_require_both(tmp_path):
    code = 'import time; print("INFO:     Application startup complete.", flush=True); time.sleep(60)'
    with Server(script_spec(tmp_path, code), RegexSink()) as srv:
        assert srv.wait_ready().state == "ready"
    port = free_port()   # nothing listens there: HTTP never answers
    both = ReadyProbe(http_path="/health", log_marker=True, require_both=True)
    spec = replace(script_spec(tmp_path, code, startup_timeout_s=1.0), probe=both, port=port)
    with Server(spec, RegexSink()) as srv:
        assert srv.wait_ready().state == "timeout"


def test_every_line_reaches_log_and_sink_including_odd_ones(tmp_path):
    code = r"""
        import sys
        out = sys.stdout.buffer
        for i in range(2000):
            out.write(b"line %d\n" % i)
        out.write(b"bar 10%\rbar 50%\rbar 100%\n")
        out.write(b"crlf line\r\n")
        out.write(b"bad utf8 \xff\xfe end\n")
        out.write(b"x" * 200000 + b"\n")
        out.write(b"no newline at the end")
        out.flush()
        sys.exit(3)
    """
    sink = RegexSink()
    with Server(script_spec(tmp_path, code), sink) as srv:
        run = srv.wait_ready()
    assert (run.state, run.exit_code) == ("exited", 3)
    log = (tmp_path / "server.log").read_text(encoding="utf-8").split("\n")
    assert log[:2000] == [f"line {i}" for i in range(2000)]
    assert log[2000:2005] == ["bar 10%", "bar 50%", "bar 100%", "crlf line", "bad utf8 \ufffd\ufffd end"]
    assert "".join(log[2005:-2]) == "x" * 200000 and len(log[2005]) == 64 * 1024
    assert log[-2:] == ["no newline at the end", ""]
    assert sink.lines == log[:-1]
    assert run.log_tail.endswith("no newline at the end") and len(run.log_tail.splitlines()) == 50


def test_fatal_line_behind_a_burst_just_before_exit_is_not_lost(tmp_path):
    code = r"""
        import sys
        sys.stdout.write("".join("weights shard %d\n" % i for i in range(50000)))
        sys.stdout.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
        sys.exit(1)
    """
    with Server(script_spec(tmp_path, code, fatal_grace_s=EXITS_BY_ITSELF_GRACE_S), RegexSink()) as srv:
        run = srv.wait_ready()
    assert (run.state, run.fatal, run.exit_code) == ("fatal", Outcome.IMA, 1)


def test_child_gets_exactly_the_given_environment(tmp_path):
    env = {"PATH": os.environ["PATH"], "HARNESS_TEST": "a b", "PYTHONPATH": "/nowhere"}
    spec = replace(script_spec(tmp_path, ""), argv=("env",), env=env)
    with Server(spec, RegexSink()) as srv:
        run = srv.wait_ready()
    assert (run.state, run.exit_code) == ("exited", 0)
    assert sorted((tmp_path / "server.log").read_text().splitlines()) == sorted(f"{k}={v}" for k, v in env.items())


def test_stop_before_wait_and_twice(tmp_path):
    with Server(fixture_spec(tmp_path, "hang"), RegexSink()) as srv:
        first = srv.stop()
        assert srv.stop() is first and first.signal == "SIGTERM"
    assert srv.result is None


def test_launch_errors_are_typed(tmp_path):
    spec = script_spec(tmp_path, "")
    with pytest.raises(ConfigError, match="cannot start"):
        with Server(replace(spec, argv=("/no/such/program",)), RegexSink()):
            pass
    with pytest.raises(ConfigError, match="working directory"):
        with Server(replace(spec, cwd=tmp_path / "missing"), RegexSink()):
            pass
    with pytest.raises(ConfigError, match="readiness"):
        ReadyProbe(http_path=None, log_marker=False)
    with pytest.raises(ConfigError, match="port"):
        LaunchSpec(argv=("x",), env={}, cwd=tmp_path, log_path=tmp_path / "l")
    with pytest.raises(ConfigError, match="shell string"):
        LaunchSpec(argv="python -m x", env={}, cwd=tmp_path, log_path=tmp_path / "l", port=1)


def test_no_fd_or_thread_leaks(tmp_path):
    def launch():
        with Server(fixture_spec(tmp_path, "crash"), RegexSink()) as srv:
            srv.wait_ready()
    launch()   # warm up lazily created resources (psutil caches)
    fds, threads = len(os.listdir("/proc/self/fd")), threading.active_count()
    for _ in range(3):
        launch()
    assert (len(os.listdir("/proc/self/fd")), threading.active_count()) == (fds, threads)


def test_an_engine_check_runs_after_the_http_path_and_gates_readiness(tmp_path):
    calls: list[tuple[str, float]] = []

    def third_time_lucky(base_url: str, timeout_s: float) -> bool:
        calls.append((base_url, timeout_s))
        return len(calls) >= 3

    spec = fixture_spec(tmp_path, "ready")
    spec = replace(spec, probe=ReadyProbe(http_path="/health", interval_s=0.05, check=third_time_lucky))
    with Server(spec, RegexSink()) as srv:
        run = srv.wait_ready()
        assert run.state == "ready" and len(calls) == 3
        assert all(url == srv.base_url and 0 < t <= 30 for url, t in calls)


def test_a_check_that_never_passes_times_out_and_needs_an_http_path(tmp_path):
    spec = fixture_spec(tmp_path, "ready", startup_timeout_s=1.5)
    spec = replace(spec, probe=ReadyProbe(http_path="/health", interval_s=0.05, check=lambda url, t: False))
    with Server(spec, RegexSink()) as srv:
        assert srv.wait_ready().state == "timeout"
    with pytest.raises(ConfigError, match="set http_path"):
        ReadyProbe(http_path=None, log_marker=True, check=lambda url, t: True)
