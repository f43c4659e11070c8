"""Throughput and memory of the streaming log classifier on a large synthetic log.

    python benchmarks/bench_classifier.py [--size-mb 1024] [--run-lines 500000]

Writes a log of the given size to a temporary file (mostly ordinary INFO/DEBUG lines of vLLM,
sglang and NCCL, with the real excerpts of shared/fixtures/real-logs and the cases of
tests/data/logs spliced in), then reads it back line by line through LogClassifier, starting
a fresh classifier every --run-lines as a harness would for each launch. Prints MB/s and the
peak RSS of the process (resource.getrusage ru_maxrss).
"""
from __future__ import annotations

import argparse
import collections
import itertools
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.core.classify import LogClassifier  # noqa: E402
from tests.core.test_classify_fixtures import find_real_logs  # noqa: E402  (the same search as the tests)

MB = 1 << 20
_NORMAL = (
    "(EngineCore_DP0 pid={pid}) INFO 07-15 21:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt "
    "throughput: {f:.1f} tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: {n} reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: {p:.1f}%, Prefix cache hit rate: 0.0%",
    '(APIServer pid={pid}) INFO:     127.0.0.1:{port} - "POST /v1/completions HTTP/1.1" 200 OK',
    "[2025-06-22 16:{m:02d}:{s:02d} TP{r}] Decode batch. #running-req: {n}, #token: {t}, token usage: "
    "0.{p:02.0f}, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0",
    "[2025-06-22 16:{m:02d}:{s:02d} DP{r} TP{r}] Prefill batch. #new-seq: {n}, #new-token: {t}, "
    "#cached-token: {n}, token usage: 0.00, #running-req: {n}, #queue-req: 0",
    "(Worker_TP{r} pid={pid}) DEBUG 02-24 02:{m:02d}:{s:02d} [v1/worker/gpu_model_runner.py:4758] "
    "ubatch_slices: None, ubatch_slices_padded: None",
    "node-{r}:{pid}:{port} [{r}] NCCL INFO Channel {n:02d}/0 : {r}[{r}] -> {t}[{t}] via P2P/CUMEM/read",
    "Loading safetensors checkpoint shards:  {p:.0f}% Completed | {n}/17 [00:04<00:05,  1.70it/s]",
)


def excerpts() -> list[str]:
    """The real excerpts and the hand-written cases, each as one text."""
    dirs = [d for d in (find_real_logs(), REPO / "tests" / "data" / "logs") if d and d.is_dir()]
    texts = [p.read_text(encoding="utf-8", errors="replace") for d in dirs for p in sorted(d.glob("*.log"))]
    if not texts:
        raise SystemExit("no excerpts found (shared/fixtures/real-logs, tests/data/logs)")
    return [t if t.endswith("\n") else t + "\n" for t in texts]


def normal_block(rng: random.Random, size: int) -> str:
    """About ``size`` bytes of ordinary log lines."""
    lines, total = [], 0
    while total < size:
        line = rng.choice(_NORMAL).format(
            pid=rng.randint(100, 99999), m=rng.randint(0, 59), s=rng.randint(0, 59),
            f=rng.uniform(0, 9999), g=rng.uniform(0, 999), n=rng.randint(0, 99),
            p=rng.uniform(0, 99), r=rng.randint(0, 7), t=rng.randint(0, 99999),
            port=rng.randint(1024, 65535)) + "\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def write_log(path: Path, size_mb: int, seed: int) -> int:
    """Write the synthetic log; return its size in bytes."""
    rng = random.Random(seed)
    blocks = [normal_block(rng, 256 * 1024) for _ in range(8)]
    texts = excerpts()
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size_mb * MB:
            chunk = rng.choice(blocks) + rng.choice(texts)
            out.write(chunk)
            written += len(chunk.encode("utf-8"))
    return written


def classify_file(path: Path, run_lines: int) -> collections.Counter:
    """Feed the file line by line, a fresh classifier every ``run_lines``; count outcomes."""
    outcomes: collections.Counter = collections.Counter()
    with open(path, encoding="utf-8", errors="replace", newline="\n") as log:
        while True:
            classifier = LogClassifier()
            feed = classifier.feed
            n = 0
            for n, line in enumerate(itertools.islice(log, run_lines), start=1):
                feed(line)
            if n == 0:
                return outcomes
            outcomes[classifier.result().outcome] += 1


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--run-lines", type=int, default=500_000,
                        help="lines per classifier, i.e. per launch (about 64 MB)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-classifier-") as tmp:
        path = Path(tmp) / "server.log"
        t0 = time.perf_counter()
        size = write_log(path, args.size_mb, args.seed)
        t1 = time.perf_counter()
        outcomes = classify_file(path, args.run_lines)
        t2 = time.perf_counter()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"log: {size / MB:.0f} MB written in {t1 - t0:.1f} s")
    print(f"classified: {size / MB / (t2 - t1):.1f} MB/s ({t2 - t1:.1f} s, read + feed)")
    print(f"peak RSS: {rss_mb:.1f} MB")
    print("outcomes per run:", {(k.value if k else None): v for k, v in outcomes.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
