"""The default markdown is pasted unchanged into a pull request: a setup line, the changes as
ON/OFF columns named like the change, a result cell in words, one line per verdict, and the
details (full hashes, argv) folded, relative, without ports or the harness's own env."""
from __future__ import annotations

import re
from pathlib import Path

from harness.adapters.store import Store
from harness.app.report import build_report
from harness.core.arms import expand
from harness.core.outcome import Outcome
from harness.core.record import Ladder, SourceRecord, TrialResult
from harness.core.schema import parse_matrix
from tests.fixtures.campaign import campaign_matrix, write_campaign

ENGINES = ("command", "vllm", "sglang", "atom")


def _outside_details(md: str) -> str:
    return md.split("<details>", 1)[0]


def test_the_four_arm_report_reads_like_the_seeds_table(tmp_path):
    matrix = campaign_matrix(tmp_path)
    write_campaign(tmp_path / "runs", matrix)
    md = build_report(matrix, tmp_path / "runs", ("md",)).markdown
    top = _outside_details(md)
    setup = next(line for line in md.splitlines() if line.startswith("Setup: "))
    assert setup.startswith("Setup: hardware not recorded · sglang · deepseek-ai/DeepSeek-V4-Pro-DSpark · TP8 · ")
    for part in (
                 "build v0.5.16 @ f01f70600000", "env SGLANG_RAGGED_VERIFY_MODE=compact"):
        assert part in setup
    assert "| Arm | pr32467 | pr33795 | Result | READY rate [95% CI] | Gates |" in top
    assert "| C | ON | OFF | 6/6 READY, 35/35 shapes each | 1.00 [0.61, 1.00] |" in top
    assert "1/6 library error at bs=104, TP7 (CUBLAS_STATUS_EXECUTION_FAILED)" in top
    verdicts = [line for line in top.splitlines() if line.startswith("- ") and " vs A (pr32467=off, pr33795=off), " in line]
    assert len(verdicts) == len(build_report(matrix, tmp_path / "runs", ()).data.comparisons) == 6
    assert "- C (pr32467=on, pr33795=off) vs A (pr32467=off, pr33795=off), READY: **BETTER** — 6/6 vs 1/6, +0.83 [0.28, 0.97]" in top
    assert not re.search(r"\b[0-9a-f]{64}\b", top) and "sha256:" not in top     # hashes only in the details
    assert "hf_secret" not in md and "<details>" in md and md.rstrip().endswith("</details>")


def _store_with_paths(tmp_path: Path, axes: dict, config: bool = False):
    data = {"target": {"engine": "vllm", "model": "Qwen/Qwen3-0.6B", "env": {"VLLM_LOGGING_LEVEL": "DEBUG"}},
            "axes": axes, "repeats": 1}
    matrix = parse_matrix(data, name="paths", file=str(tmp_path / "paths.yaml"), engines=ENGINES)
    store = Store(tmp_path / "runs", "paths")
    arms = expand(matrix, "ab" * 20)
    store.write_arms(arms, {"file": matrix.file}, size=1)
    worktree = str(tmp_path / "runs" / ".worktrees" / "abab-1234")
    for arm in arms:
        store.write_result(TrialResult(
            matrix="paths", arm_id=arm.arm_id, label=arm.label, levels=dict(arm.levels), trial=1,
            outcome=Outcome.READY, ladder=Ladder(3, 3, 1.0, None), engine="vllm", model="Qwen/Qwen3-0.6B",
            argv=(str(Path.home() / "venvs" / "vllm" / "bin" / "python"), "-m", "vllm.entrypoints.cli.main",
                  "serve", "Qwen/Qwen3-0.6B", "--port", "43121", "--chat-template", f"{worktree}/tpl.jinja",
                  "--probe-url=http://127.0.0.1:43121/health", "43121"), port=43121,
            env={**arm.env, "TMPDIR": f"{worktree}/tmp", "TRITON_CACHE_DIR": f"{worktree}/cache/triton",
                 "PYTHONPATH": f"{worktree}/python"},
            source=SourceRecord(repo="/src/vllm", ref="main", base_sha="ab" * 20, worktree=worktree),
            config={"env": {"VLLM_USE_V1": "1", "HF_TOKEN": "***", **{k: v for k, v in arm.env.items() if k == "ZSYNC"}},
                    "args": ["--max-num-seqs", "8"]}
            if config else {},
            started_at="2026-11-20T08:00:00+00:00", startup_s=10.0, duration_s=12.0))
    return matrix


def test_details_are_relative_without_ports_and_env_is_as_declared_for_any_axis_order(tmp_path):
    # Axes declared in another order than sorted: the legend must still find each arm's declaration.
    matrix = _store_with_paths(tmp_path, {"zsync": {"off": {}, "on": {"env": {"ZSYNC": "1"}}},
                                          "alloc": {"default": {}, "expandable": {
                                              "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}}})
    md = build_report(matrix, tmp_path / "runs", ("md",)).markdown
    assert "43121" not in md and "--port {port}" in md and "http://127.0.0.1:{port}/health {port}`" in md
    assert str(tmp_path) not in md and str(Path.home()) not in md
    assert "--chat-template <worktree>/tpl.jinja" in md and "~/venvs/vllm/bin/python" in md
    for leaked in ("TMPDIR", "TRITON_CACHE_DIR", "PYTHONPATH"):
        assert leaked not in md
    legend = [line for line in md.splitlines() if line.startswith("- **")]
    assert any("(zsync=on, alloc=default)" in line and "ZSYNC=1" in line for line in legend)
    assert any("alloc=expandable" in line and "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in line
               for line in legend)
    assert "Gates" not in md                     # no gate ran: no all-dash column


def test_a_switch_that_applies_one_pull_request_is_named_by_it(tmp_path):
    matrix = _store_with_paths(tmp_path, {"pr32467": {"off": {}, "on": {"patches": [{"pr": "sgl-project/sglang#32467"}]}}})
    md = build_report(matrix, tmp_path / "runs", ("md",)).markdown
    assert "| Arm | #32467 | Result |" in md


def test_setup_and_arm_env_are_the_launches_own_not_the_edited_matrix(tmp_path):
    # The records say how the arms were launched; the matrix file (env VLLM_LOGGING_LEVEL) was edited since.
    matrix = _store_with_paths(tmp_path, {"zsync": {"off": {}, "on": {"env": {"ZSYNC": "1"}}}}, config=True)
    md = build_report(matrix, tmp_path / "runs", ("md",)).markdown
    setup = next(line for line in md.splitlines() if line.startswith("Setup: "))
    assert "env HF_TOKEN=*** VLLM_USE_V1=1 · args --max-num-seqs 8" in setup and "ZSYNC" not in setup
    assert "VLLM_LOGGING_LEVEL" not in md
    assert any(line.startswith("- **B** (zsync=on)") and "ZSYNC=1" in line for line in md.splitlines())
