"""How fast a fatal line becomes a verdict and a dead process tree; what readiness costs.

    .venv/bin/python benchmarks/bench_failfast.py [--runs 10]

Fail-fast: the `ima-hang` fixture prints an illegal-memory-access traceback and then hangs without
exiting. It writes time.monotonic() (one clock for the whole host) to a side file just before the
line, so we measure fatal line -> verdict recorded (goal <= 1 s) and fatal line -> process tree gone
(goal <= 10 s: grace 3 s + stop).

Ready overhead: the `ready` fixture started directly (Popen, /health polled every 10 ms) against
the same fixture started by Server with the default probe (/health every 0.25 s) and with the log
marker.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.adapters.server import LaunchSpec, ReadyProbe, Server  # noqa: E402
from tests.adapters.test_server import RegexSink  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "fixture_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec(tmp: Path, mode: str, *extra: str, probe: ReadyProbe = ReadyProbe()) -> LaunchSpec:
    port = free_port()
    return LaunchSpec(argv=(sys.executable, str(FIXTURE), "--mode", mode, "--port", str(port), *extra),
                      env=dict(os.environ), cwd=tmp, log_path=tmp / f"{mode}.log", port=port, probe=probe)


def failfast_once(tmp: Path) -> tuple[float, float]:
    stamp = tmp / "stamp"
    with Server(spec(tmp, "ima-hang", "--stamp-file", str(stamp)), RegexSink()) as srv:
        tree = [psutil.Process(srv.pgid), psutil.Process(srv.pid)]
        run = srv.wait_ready()   # decides, waits the grace, stops the tree
        gone_at = time.monotonic()
    assert run.state == "fatal" and run.stop.survivors == (), run
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)
    fatal_at = float(stamp.read_text())
    return srv.launched_at + run.verdict_s - fatal_at, gone_at - fatal_at


def direct_ready_once(tmp: Path) -> float:
    port = free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(FIXTURE), "--mode", "ready", "--port", str(port)],
                            stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                    return time.monotonic() - t0
            except OSError:
                time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait(5)


def server_ready_once(tmp: Path, probe: ReadyProbe) -> float:
    with Server(spec(tmp, "ready", probe=probe), RegexSink()) as srv:
        run = srv.wait_ready()
    assert run.state == "ready", run
    return run.ready_s


def show(name: str, xs: list[float], goal: str = "") -> None:
    print(f"  {name:<46} median {statistics.median(xs) * 1e3:7.1f} ms   max {max(xs) * 1e3:7.1f} ms  {goal}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10)
    n = p.parse_args().runs
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ff = [failfast_once(tmp) for _ in range(n)]
        print(f"fail-fast, ima-hang fixture, N={n}, fatal_grace_s=3.0, stop_timeout_s=10.0")
        show("fatal line -> verdict recorded", [a for a, _ in ff], "(goal <= 1 s)")
        show("fatal line -> process tree gone", [b for _, b in ff], "(goal <= 10 s)")
        direct = [direct_ready_once(tmp) for _ in range(n)]
        http = [server_ready_once(tmp, ReadyProbe()) for _ in range(n)]
        marker = [server_ready_once(tmp, ReadyProbe(http_path=None, log_marker=True)) for _ in range(n)]
        print(f"ready at once, ready fixture, N={n}")
        show("fixture alone: Popen -> /health 200", direct)
        show("Server: start -> ready (/health every 0.25 s)", http)
        show("Server: start -> ready (log marker)", marker)
        over = [(statistics.median(xs) - statistics.median(direct)) * 1e3 for xs in (http, marker)]
        print(f"  overhead (median, Server - fixture alone): /health {over[0]:+.1f} ms, log marker {over[1]:+.1f} ms")


if __name__ == "__main__":
    main()
