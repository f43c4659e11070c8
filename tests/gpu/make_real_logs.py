"""Produce real GPU failure logs with PyTorch, for the classifier's held-out tests.

Run on a machine with an NVIDIA GPU and torch:  python tests/gpu/make_real_logs.py OUTDIR
Each scenario runs in its own process (a CUDA error poisons the context) and its whole
stdout+stderr is saved as OUTDIR/<name>.log, exactly as printed. Not run by the test suite.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PRELUDE = """
import logging, sys, torch
logging.basicConfig(format="%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
                    datefmt="%m-%d %H:%M:%S", level=logging.INFO, stream=sys.stdout)
log = logging.getLogger("gpu")
log.info("torch %s, device %s", torch.__version__, torch.cuda.get_device_name(0))
def ladder(sizes, body):
    total = len(sizes)
    for i, bs in enumerate(sizes):
        log.info("Capturing CUDA graphs (decode, FULL): %d/%d bs=%d", i, total, bs)
        body(bs)
    log.info("Capturing CUDA graphs (decode, FULL): %d/%d", total, total)
    log.info("Graph capturing finished in 1.0 secs")
"""

SCENARIOS = {
    # A host sync inside capture: what a JIT or a .item() does during warmup-to-capture.
    "capture_sync": """
def body(bs):
    x = torch.randn(bs, 1024, device="cuda")
    x @ x.T                                  # warmup outside capture (cuBLAS handle, workspace)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x @ x.T
        if bs >= 16:
            n = int((y > 0).sum().item())   # sync while capturing
ladder([1, 2, 4, 8, 16, 32], body)
""",
    # An index out of range on the device: a device-side assert.
    "device_assert": """
emb = torch.nn.Embedding(64, 128).cuda()
def body(bs):
    ids = torch.arange(bs, device="cuda") * 9    # bs=8 reaches id 63, bs=16 reaches 135
    out = emb(ids)
    torch.cuda.synchronize()
ladder([1, 2, 4, 8, 16], body)
""",
    # Too much memory at once.
    "oom": """
def body(bs):
    t = torch.empty(bs * (1 << 37), dtype=torch.uint8, device="cuda")   # bs=2 → 256 GiB
ladder([1, 2], body)
""",
    # A read through a bad pointer: an illegal memory access (Triton kernel with a wild offset).
    "ima_triton": """
import triton, triton.language as tl
@triton.jit
def gather(src, idx, dst, n: tl.constexpr):
    i = tl.arange(0, n)
    j = tl.load(idx + i)
    tl.store(dst + i, tl.load(src + j))
src = torch.randn(64, device="cuda")
def body(bs):
    idx = torch.arange(bs, device="cuda", dtype=torch.int64)
    if bs == 32:
        idx[5] = 1 << 40            # another request's data: a wild offset
    dst = torch.empty(bs, device="cuda")
    gather[(1,)](src, idx, dst, n=bs)
    torch.cuda.synchronize()
ladder([8, 16, 32], body)
""",
    "ready": """
def body(bs):
    x = torch.randn(bs, 256, device="cuda")
    x @ x.T
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x @ x.T
    g.replay(); torch.cuda.synchronize()
ladder([1, 2, 4, 8], body)
print("INFO:     Application startup complete.", flush=True)
""",
}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, body in SCENARIOS.items():
        script = out / f"{name}.py"          # Triton's @jit needs a real source file
        script.write_text(PRELUDE + body)
        proc = subprocess.run([sys.executable, "-u", str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=300)
        script.unlink()
        (out / f"{name}.log").write_bytes(proc.stdout)
        print(f"{name}: exit {proc.returncode}, {len(proc.stdout)} bytes")


if __name__ == "__main__":
    main()
