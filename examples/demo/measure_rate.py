"""Measure how often the demo server fails to start, with or without the fix.

    python examples/demo/measure_rate.py --runs 30 --unpatched --load-fraction 0.5
    python examples/demo/measure_rate.py --runs 30 --patched

Each run starts demo_server on a free port in its own process group, waits until /health
answers 200 or the process exits, then stops it. With --load-fraction f, every run whose index
i satisfies (i * f) crossing an integer (f=0.5: every other run) is made under load: one
busy-loop process per CPU core runs for the whole launch. Stdlib only.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DIFF = HERE / "fix-record-stream.diff"
IMA_RE = re.compile(r"illegal memory access")
FAILING_BS_RE = re.compile(r"failed while capturing bs=(\d+)")


@dataclass(frozen=True)
class Launch:
    outcome: str            # READY | IMA | OTHER | TIMEOUT
    loaded: bool
    seconds: float          # to READY, or to exit
    failing_bs: int | None
    first_error: str | None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def patched_copy(dest: Path) -> Path:
    """Copy demo_server.py under dest as the repository lays it out, apply the fix; return its folder."""
    target = dest / "examples" / "demo"
    target.mkdir(parents=True)
    shutil.copy2(HERE / "demo_server.py", target / "demo_server.py")
    subprocess.run(["git", "apply", str(DIFF)], cwd=dest, check=True, timeout=30)
    return target


def _health_ok(port: int, timeout_s: float) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout_s) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(proc: subprocess.Popen, grace_s: float = 5.0) -> int:
    """TERM the server's process group, then KILL it if it has not exited; return the exit code."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            return proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.wait(timeout=grace_s)


def launch(server_dir: Path, log_path: Path, loaded: bool, timeout_s: float,
           python: str = sys.executable) -> Launch:
    """Start one server, wait for READY or its exit, stop it, and classify the launch."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(server_dir), PYTHONUNBUFFERED="1")
    hogs = [subprocess.Popen([python, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] \
        if loaded else []
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([python, "-m", "demo_server", "--port", str(port)], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        outcome = "TIMEOUT"
        while time.monotonic() - t0 < timeout_s:
            if proc.poll() is not None:
                outcome = "EXITED"
                break
            if _health_ok(port, timeout_s=1.0):
                outcome = "READY"
                break
            time.sleep(0.05)
        seconds = time.monotonic() - t0
    finally:
        stop(proc)
        for hog in hogs:
            hog.kill()
            hog.wait()
    text = log_path.read_text(errors="replace")
    first_error = next((line for line in text.splitlines() if IMA_RE.search(line)), None)
    if outcome == "EXITED":
        outcome = "IMA" if first_error else "OTHER"
    m = FAILING_BS_RE.search(text)
    return Launch(outcome, loaded, seconds, int(m.group(1)) if m else None, first_error)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval for k successes out of n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarise(label: str, launches: list[Launch]) -> str:
    fails = [x for x in launches if x.outcome != "READY"]
    lo, hi = wilson(len(fails), len(launches))
    ready_s = [x.seconds for x in launches if x.outcome == "READY"]
    parts = [f"{label}: failed {len(fails)}/{len(launches)} = {len(fails) / max(1, len(launches)):.2f} "
             f"(95% CI {lo:.2f}-{hi:.2f})"]
    if ready_s:
        parts.append(f"time-to-ready median {statistics.median(ready_s):.2f}s max {max(ready_s):.2f}s")
    outcomes = Counter(x.outcome for x in launches)
    parts.append("outcomes " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    bs = Counter(x.failing_bs for x in fails if x.failing_bs is not None)
    if bs:
        parts.append("failing bs " + ", ".join(f"{k}:{v}" for k, v in sorted(bs.items())))
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=30)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--patched", action="store_true", help="apply fix-record-stream.diff first")
    which.add_argument("--unpatched", action="store_true")
    p.add_argument("--load-fraction", type=float, default=0.0,
                   help="fraction of runs made with every CPU core busy (default 0)")
    p.add_argument("--timeout-s", type=float, default=30.0)
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the server")
    p.add_argument("--keep-logs", type=Path, default=None, help="copy each run's log here")
    args = p.parse_args(argv)
    if not 0.0 <= args.load_fraction <= 1.0:
        p.error("--load-fraction must be within [0, 1]")
    with tempfile.TemporaryDirectory(prefix="demo-rate-") as tmp:
        tmp_path = Path(tmp)
        server_dir = patched_copy(tmp_path / "src") if args.patched else HERE
        launches = []
        for i in range(args.runs):
            loaded = math.floor((i + 1) * args.load_fraction) > math.floor(i * args.load_fraction)
            log_path = tmp_path / f"run{i:03d}.log"
            x = launch(server_dir, log_path, loaded, args.timeout_s, args.python)
            launches.append(x)
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                shutil.copy2(log_path, args.keep_logs / log_path.name)
            print(f"run {i + 1:3d}/{args.runs} {'loaded' if loaded else 'idle  '} {x.outcome:7s} "
                  f"{x.seconds:5.2f}s" + (f" bs={x.failing_bs}" if x.failing_bs else ""), flush=True)
    label = "patched" if args.patched else "unpatched"
    print(summarise(f"{label} all", launches))
    for loaded in (False, True):
        subset = [x for x in launches if x.loaded == loaded]
        if subset and len(subset) != len(launches):
            print(summarise(f"{label} {'loaded' if loaded else 'idle'}", subset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
