"""A tiny stand-in for an LLM inference server, with a real dual-batch-overlap race.

Run with this folder on PYTHONPATH:
    python -m demo_server --port 8000 [--host 127.0.0.1] [--model demo-tiny] [--max-bs 32]

It logs a vLLM-style start-up (weights, KV cache, a CUDA-graph-like capture ladder), then
serves /health, /v1/models and /v1/completions with the standard library only.

The capture ladder warms every batch shape up by running microbatches through a two-thread
pipeline modelled on DBO + DeepEP high-throughput (vllm-project/vllm#60735): a "comm stream"
thread dispatches each microbatch into blocks taken from a caching-allocator-like pool and a
"compute stream" thread reads them. The comm stream returns the blocks to the pool as soon as
it has handed them over, not when the compute stream is done with them (the missing
record_stream). When the compute thread is slow to wake, the next dispatch gets the same block
and writes activations where expert ids were, and the compute thread's expert_map lookup goes
out of range. Whether that happens depends only on thread scheduling, so some launches crash
during capture and some reach READY. fix-record-stream.diff in this folder is the fix.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__version__ = "0.1.0"

logger = logging.getLogger("demo_server")

NUM_EXPERTS = 64
TOPK = 4
HIDDEN = 8                     # activation values carried per token (int8-like, 0..255)
BLOCK_SLOTS = 1024             # one pool block holds up to 1024 ints, like a 4 KiB allocator block
WARMUP_STEPS_PER_SHAPE = 13    # DBO steps (two microbatches each) run to warm up one shape
KERNEL_LAUNCH_S = 1e-6         # host-side launch latency after each dispatch (a short sleep)
CAPTURE_S = 0.08               # time "capturing" one shape takes once warmed up


class _EveryLineFormatter(logging.Formatter):
    """Prefix every line of a multi-line record, as vLLM's NewLineFormatter does."""

    def format(self, record: logging.LogRecord) -> str:
        msg = super().format(record)
        if record.message:
            prefix = msg.split(record.message)[0]
            msg = msg.replace("\n", "\n" + prefix)
        return msg


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)  # StreamHandler flushes after every record
    handler.setFormatter(_EveryLineFormatter(
        "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _uvicorn(msg: str) -> None:
    print(f"INFO:     {msg}", flush=True)


# --------------------------------------------------------------------------- the "device"
class BlockPool:
    """Caching-allocator analogue: a freed block is handed out again, most recently freed first.

    Like torch's allocator it knows nothing about which thread ("stream") still reads a block:
    a block may only be freed once every reader is done with it.
    """

    def __init__(self) -> None:
        self._free: list[list[int]] = []
        self._lock = threading.Lock()
        self.num_blocks = 0

    def alloc(self) -> list[int]:
        with self._lock:
            if self._free:
                return self._free.pop()
            self.num_blocks += 1
        return [0] * BLOCK_SLOTS

    def free(self, block: list[int]) -> None:
        with self._lock:
            self._free.append(block)


class DeviceTable:
    """A table in device memory; a load outside it is an illegal memory access."""

    def __init__(self, name: str, values: list[int]) -> None:
        self.name, self._values = name, values

    def load(self, index: int) -> int:
        if not 0 <= index < len(self._values):
            raise RuntimeError(
                "demo device error: an illegal memory access was encountered "
                f"({self.name} index {index} out of range for {len(self._values)} experts)")
        return self._values[index]


@dataclass
class Microbatch:
    """The dispatch outputs of one microbatch: both blocks come from the comm stream's pool."""

    ubatch: int
    num_tokens: int
    recv_x: list[int]      # num_tokens * HIDDEN activations
    topk_ids: list[int]    # num_tokens * TOPK global expert ids, each < NUM_EXPERTS


class DboPipeline:
    """Dual-batch overlap on two threads: the comm stream dispatches, the compute stream runs experts."""

    def __init__(self) -> None:
        self.pool = BlockPool()
        # global expert id -> local expert slot (identity with a twist, like an EP expert map)
        self.expert_map = DeviceTable("expert_map", [(e * 5) % NUM_EXPERTS for e in range(NUM_EXPERTS)])
        self._jobs: queue.Queue[tuple[int, int]] = queue.Queue()
        self._dispatched: queue.Queue[Microbatch | None] = queue.Queue(maxsize=2)
        self._done: queue.Queue[BaseException | int] = queue.Queue()
        for name, target in (("comm_stream", self._comm_loop), ("compute_stream", self._compute_loop)):
            threading.Thread(target=target, name=name, daemon=True).start()

    def warmup(self, bs: int, steps: int) -> int:
        """Run `steps` DBO steps at batch size `bs`; return a checksum or raise the compute error."""
        self._jobs.put((bs, steps))
        result = self._done.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def _dispatch(self, bs: int, step: int, ubatch: int) -> Microbatch:
        n = max(1, bs // 2)
        recv_x = self.pool.alloc()
        for i in range(n * HIDDEN):
            recv_x[i] = (131 * (step + 1) + 29 * ubatch + 7 * i) % 256
        topk_ids = self.pool.alloc()
        for i in range(n * TOPK):
            topk_ids[i] = (3 * step + 11 * ubatch + 5 * i) % NUM_EXPERTS
        return Microbatch(ubatch, n, recv_x, topk_ids)

    def _comm_loop(self) -> None:
        while True:
            bs, steps = self._jobs.get()
            for step in range(steps):
                for ubatch in (0, 1):
                    mb = self._dispatch(bs, step, ubatch)
                    self._dispatched.put(mb)
                    # The comm stream drops its references once the compute stream has the
                    # microbatch, so the blocks go back to the pool while they are still unread.
                    self.pool.free(mb.recv_x)
                    self.pool.free(mb.topk_ids)
                    time.sleep(KERNEL_LAUNCH_S)
            self._dispatched.put(None)

    def _compute_loop(self) -> None:
        checksum = 0
        while True:
            mb = self._dispatched.get()
            if mb is None:
                self._done.put(checksum)
                checksum = 0
                continue
            try:
                checksum += self._run_experts(mb)
            except BaseException as exc:  # reported to the engine, which fails start-up
                self._done.put(exc)
                return

    def _run_experts(self, mb: Microbatch) -> int:
        """ep_scatter + a toy expert GEMM: each token's activations go to its top-k experts."""
        acc = 0
        for t in range(mb.num_tokens):
            x = mb.recv_x[t * HIDDEN]
            for k in range(TOPK):
                slot = self.expert_map.load(mb.topk_ids[t * TOPK + k])
                acc += (slot + 1) * x
        return acc


# --------------------------------------------------------------------------- the engine
def capture_sizes(max_bs: int) -> list[int]:
    """Batch sizes to capture, largest first, as vLLM does: 1, 2, 4, then multiples of 8."""
    sizes = [s for s in (1, 2, 4) if s <= max_bs] + list(range(8, max_bs + 1, 8))
    return sorted(sizes, reverse=True)


def start_engine(args: argparse.Namespace) -> None:
    """Load the toy model and capture the ladder; raise SystemExit(1) if a worker fails."""
    t_start = time.monotonic()
    logger.info("Initializing demo engine (model=%s, max_bs=%d)", args.model, args.max_bs)
    pipeline = DboPipeline()
    logger.info("Using DBO with 2 microbatches, comm stream + compute stream, %d experts, top-%d",
                NUM_EXPERTS, TOPK)
    logger.info("Loading weights for %s", args.model)
    time.sleep(0.3)
    logger.info("Loading weights took %.2f seconds", time.monotonic() - t_start)
    logger.info("Model loading took 0.12 GiB memory and %.2f seconds", time.monotonic() - t_start)
    time.sleep(0.1)
    logger.info("Available KV cache memory: 1.50 GiB")
    logger.info("GPU KV cache size: 65,536 tokens")
    logger.info("Maximum concurrency for 2,048 tokens per request: 32.00x")
    sizes = capture_sizes(args.max_bs)
    t_capture = time.monotonic()
    for n, bs in enumerate(sizes, start=1):
        try:
            pipeline.warmup(bs, WARMUP_STEPS_PER_SHAPE)
        except Exception:
            logger.exception("Worker compute stream failed while capturing bs=%d", bs)
            logger.error("EngineCore failed to start.")
            sys.stdout.flush()
            os._exit(1)  # the HTTP server and stream threads must not outlive the engine
        time.sleep(CAPTURE_S)
        logger.info("Capturing CUDA graphs (decode, FULL): %d/%d bs=%d", n, len(sizes), bs)
    logger.info("Graph capturing finished in %.2f secs, took 0.05 GiB", time.monotonic() - t_capture)
    logger.info("init engine (profile, create kv cache, warmup model) took %.2f seconds",
                time.monotonic() - t_start)


# --------------------------------------------------------------------------- the API server
def complete(prompt: str, max_tokens: int) -> str:
    """The toy model: echo the prompt's words in reverse order, at most max_tokens of them."""
    words = prompt.split()[::-1][:max(0, max_tokens)]
    return " " + " ".join(words) if words else ""


class Handler(BaseHTTPRequestHandler):
    server: "DemoHTTPServer"

    def log_message(self, fmt: str, *args: object) -> None:
        pass  # access lines are written by _send, in uvicorn's format

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        phrase = self.responses.get(code, ("",))[0]
        _uvicorn(f'{self.client_address[0]}:{self.client_address[1]} - "{self.command} {self.path} '
                 f'{self.request_version}" {code} {phrase}')

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200 if self.server.ready.is_set() else 503, None)
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{
                "id": self.server.model_name, "object": "model", "created": int(self.server.started),
                "owned_by": "demo", "root": self.server.model_name, "max_model_len": 2048}]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        if self.path != "/v1/completions":
            self._send(404, {"detail": "Not Found"})
            return
        if not self.server.ready.is_set():
            self._send(503, {"error": {"message": "engine is starting", "code": 503}})
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            prompts = req["prompt"] if isinstance(req["prompt"], list) else [req["prompt"]]
            max_tokens = int(req.get("max_tokens", 16))
            texts = [complete(str(p), max_tokens) for p in prompts]
        except (ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": {"message": f"bad request: {exc}", "code": 400}})
            return
        n_prompt = sum(len(str(p).split()) for p in prompts)
        n_out = sum(len(t.split()) for t in texts)
        self.server.requests += 1
        self._send(200, {
            "id": f"cmpl-demo-{self.server.requests}", "object": "text_completion",
            "created": int(time.time()), "model": self.server.model_name,
            "choices": [{"index": i, "text": t, "logprobs": None, "finish_reason": "stop"}
                        for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out,
                      "total_tokens": n_prompt + n_out}})


class DemoHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], model_name: str) -> None:
        super().__init__(address, Handler)
        self.ready = threading.Event()
        self.model_name = model_name
        self.started = time.time()
        self.requests = 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="demo_server", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", default="demo-tiny")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--max-bs", type=int, default=32)
    args = p.parse_args(argv)
    if args.max_bs < 1:
        p.error("--max-bs must be >= 1")
    return args


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _setup_logging()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    logger.info("demo_server version %s", __version__)
    logger.info("non-default args: %s", {k: v for k, v in vars(args).items() if v is not None})
    try:
        httpd = DemoHTTPServer((args.host, args.port), args.served_model_name or args.model)
    except OSError as exc:
        logger.error("Cannot listen on %s:%d: %s", args.host, args.port, exc)
        return 1
    threading.Thread(target=httpd.serve_forever, name="api_server", daemon=True).start()
    try:
        start_engine(args)
        logger.info("Starting demo API server on http://%s:%d", args.host, args.port)
        for route, methods in (("/health", "GET"), ("/v1/models", "GET"), ("/v1/completions", "POST")):
            logger.info("Route: %s, Methods: %s", route, methods)
        _uvicorn(f"Started server process [{os.getpid()}]")
        _uvicorn("Waiting for application startup.")
        httpd.ready.set()
        _uvicorn("Application startup complete.")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the shutdown short
        logger.info("Shutting down demo API server (signal received)")
        _uvicorn("Shutting down")
        httpd.shutdown()
        httpd.server_close()
        _uvicorn("Application shutdown complete.")
        _uvicorn(f"Finished server process [{os.getpid()}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
