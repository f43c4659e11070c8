"""The vLLM venv for the tests that need one, and the `integration` mark that sets them apart.

A test needs the real vLLM when it lives in tests/integration/ or asks for `vllm_python`; such a
test is marked `integration`, so the suite splits in two without a list to keep up to date:
    pytest -m "not integration"   everything else: fixture servers, real git, real MLflow (minutes)
    pytest -m integration         a real vLLM on CPU (.ci/run runs it second, once .venv-vllm is built)
The vLLM venv is built by `scripts/setup-vllm-cpu.sh .venv-vllm`. Without it these tests are
skipped with the reason, unless HARNESS_REQUIRE_VLLM=1 (as in .ci/run), where a missing or broken
venv fails them: a CI run that skipped them all would look green and have tested nothing real.
  HARNESS_VLLM_PYTHON   the vLLM venv's python (default <repo>/.venv-vllm/bin/python)
  HARNESS_REQUIRE_VLLM  1: fail, not skip, where there is no working vLLM venv
"""
from __future__ import annotations

import gc
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INTEGRATION = REPO / "tests" / "integration"
DEFAULT_VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION) or "vllm_python" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


def pytest_collection_finish(session: pytest.Session) -> None:
    # What the test modules imported (mlflow, pandas, scipy, matplotlib: millions of objects) lives
    # until the end. Frozen, it is no longer walked by every full collection, which costs up to
    # 0.5 s each once all of it is loaded (statsmodels' holm calls gc.collect() on every call).
    gc.freeze()


def find_vllm_python() -> tuple[Path | None, str]:
    """(the vLLM venv's python, '') or (None, why there is none)."""
    given = os.environ.get("HARNESS_VLLM_PYTHON")
    python = Path(given) if given else DEFAULT_VLLM_PYTHON
    where = "HARNESS_VLLM_PYTHON" if given else "the default"
    if not python.is_file():
        return None, (f"no vLLM venv: {python} ({where}) is absent; build it with "
                      f"`bash scripts/setup-vllm-cpu.sh .venv-vllm` or set HARNESS_VLLM_PYTHON")
    # The metadata lookup `vllm serve` needs (workaround B in the setup script); fast, no import.
    try:
        proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"the vLLM venv's python {python} does not run: {e}"
    if proc.returncode != 0 or "cpu" not in proc.stdout:
        return None, (f"{python} has no vLLM CPU install (version lookup: {proc.stdout.strip() or proc.stderr[-200:]}); "
                      "rerun scripts/setup-vllm-cpu.sh")
    return python.absolute(), ""


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM venv's interpreter; skips the test when there is none (fails it under HARNESS_REQUIRE_VLLM=1)."""
    python, why = find_vllm_python()
    if python is None:
        if os.environ.get("HARNESS_REQUIRE_VLLM") == "1":
            pytest.fail(f"HARNESS_REQUIRE_VLLM=1 but {why}", pytrace=False)
        pytest.skip(why)
    return python
