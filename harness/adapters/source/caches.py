"""Cache isolation between arms: the JIT/compile caches that any engine may fill, each pointed into
the trial's cache folder (target.cache: per_arm, per_trial, shared). An engine adds its own
(VLLM_CACHE_ROOT...) through Engine.cache_env; the engine's and the arm's env win over these.

A JIT cache keyed by source hash can still leak across arms: a kernel compiled from the base tree
and reused by a patched arm that changed a header the key does not cover (seed 003 cleared the
TVM-FFI cache by hand after changing a patch)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

# Variable -> folder under the cache dir. Names as read by the libraries themselves.
JIT_CACHES = {
    "TRITON_CACHE_DIR": "triton",                  # triton: ~/.triton/cache
    "TORCHINDUCTOR_CACHE_DIR": "inductor",         # torch._inductor: /tmp/torchinductor_<user>
    "TORCH_EXTENSIONS_DIR": "torch_extensions",    # torch.utils.cpp_extension.load: ~/.cache/torch_extensions
    "TVM_FFI_CACHE_DIR": "tvm-ffi",                # tvm_ffi.cpp (sglang jit_kernel): ~/.cache/tvm-ffi
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",     # flashinfer.jit.env: <base>/.cache/flashinfer
    "DG_JIT_CACHE_DIR": "deep_gemm",               # deep_gemm jit: ~/.deep_gemm
    "TILELANG_CACHE_DIR": "tilelang",              # tilelang: ~/.tilelang/cache
    "CUDA_CACHE_PATH": "cuda",                     # the driver's PTX JIT cache: ~/.nv/ComputeCache
}


def jit_cache_env(cache_dir: Path) -> Mapping[str, str]:
    """The variables above, each at its own folder under cache_dir."""
    return {var: str(cache_dir / sub) for var, sub in JIT_CACHES.items()}
