"""A real vLLM for the integration tests: a tiny model for it (the venv, `vllm_python`, and the
`integration` mark are in tests/conftest.py; without the venv every test here is skipped).
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
DEFAULT_MODEL = REPO / "runs" / ".tiny-model"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


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
