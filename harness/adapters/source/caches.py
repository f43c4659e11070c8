"""Cache isolation between arms: the JIT/compile caches that any engine may fill, each pointed into
the trial's cache folder (target.cache: per_arm, per_trial, shared). An engine adds its own
(VLLM_CACHE_ROOT...) through Engine.cache_env; the engine's and the arm's env win over these.

A JIT cache keyed by source hash can still leak across arms: a kernel compiled from the base tree
and reused by a patched arm that changed a header the key does not cover (seed 003 cleared the
TVM-FFI cache by hand after changing a patch)."""
from __future__ import annotations

import hashlib
import os
import tempfile
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


# TMPDIR + "/" + a uuid4 (vLLM's ZMQ IPC socket: ipc://<tmp>/<uuid>) must fit a unix socket path
# (107 bytes); a longer TMPDIR makes the engine fail in a way that looks like its own bug.
SOCKET_DIR_MAX = 60


def trial_tmpdir(campaign: Path, trial_dir: Path) -> Path:
    """The trial's TMPDIR: trial_dir/tmp (created), named, when that path is too long for the unix
    sockets engines make there, through one short symlink per campaign in the system temp folder
    (`<tmp>/harness-<uid>/<hash>` -> campaign), so the files still land in the trial folder."""
    campaign, trial_dir = campaign.resolve(), trial_dir.resolve()
    real = trial_dir / "tmp"
    real.mkdir(parents=True, exist_ok=True)
    if len(str(real)) <= SOCKET_DIR_MAX:
        return real
    digest = hashlib.sha256(str(campaign).encode()).hexdigest()[:10]
    link = Path(tempfile.gettempdir()) / f"harness-{os.getuid()}" / digest
    short = link / real.relative_to(campaign)
    return short if _ensure_link(link, campaign) and len(str(short)) <= SOCKET_DIR_MAX else real


def _ensure_link(link: Path, target: Path) -> bool:
    """link -> target, made or repaired if it is ours; False if something else holds the name."""
    try:
        link.parent.mkdir(mode=0o700, exist_ok=True)
        st = link.parent.lstat()
        if link.parent.is_symlink() or not link.parent.is_dir() or st.st_uid != os.getuid():
            return False   # another user's folder (or a trap): use the long path
        if link.is_symlink() and os.readlink(link) == str(target):
            return True
        if os.path.lexists(link) and not (link.is_symlink() and link.lstat().st_uid == os.getuid()):
            return False
        tmp = link.with_name(f"{link.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        os.symlink(target, tmp)
        os.replace(tmp, link)   # atomic: a concurrent trial sees the old link or the new one
        return True
    except OSError:
        return False
