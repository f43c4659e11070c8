"""The seed investigations shipped as matrices: each dry-runs through the CLI (exit 0, nothing
launched) and prints every arm's exact command line, checked here token by token.

The matrices name the machines they ran on (~/src/sglang, ~/venvs/...). On a machine without them
(a fresh HOME, an empty patch cache, no network) every matrix still dry-runs and says what a real
run would lack; pointed at a throwaway git repository and a patch cache holding stand-in diffs of
the PRs (target.source.repo=..., HARNESS_PATCH_CACHE), it prints every arm's exact command."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from harness.adapters.source import prcache
from tests.app.conftest import REPO, git, run_cli

PY = sys.executable
VLLM_ARGS = ["--all2all-backend", "deepep_high_throughput", "--compilation-config", '{"cudagraph_mode": "NONE"}',
             "--kv-cache-dtype", "fp8", "--max-model-len", "8192", "--gpu-memory-utilization", "0.90",
             "--enable-prefix-caching"]


def sglang(*extra: str) -> list[str]:
    return [PY, "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V4-Pro-DSpark", "--host",
            "127.0.0.1", "--port", "<free port>", "--tp-size", "8", "--speculative-algorithm", "DSPARK",
            "--speculative-num-draft-tokens", "6", "--cuda-graph-max-bs", "128", "--max-running-requests", "128",
            *extra]


def atom(model: str, parallel: list[str], *extra: str) -> list[str]:
    return [PY, "-m", "atom.entrypoints.openai_server", "--model", model, "--host", "127.0.0.1", "--server-port",
            "<free port>", *parallel, *extra]


def vllm(*extra: str) -> list[str]:
    return [PY, "-m", "vllm.entrypoints.cli.main", "serve", "zai-org/GLM-5.3", "--host", "127.0.0.1", "--port",
            "<free port>", "--tensor-parallel-size", "2", "--data-parallel-size", "4", "--enable-expert-parallel",
            *VLLM_ARGS, *extra]


V4 = ("deepseek-ai/DeepSeek-V4-Flash-FP8", ["-tp", "4", "--data-parallel-size", "2", "--enable-expert-parallel"])
OSS = ("openai/gpt-oss-120b", ["-tp", "2", "--enable-expert-parallel"])
# matrix -> [(arm title, argv, env shown, patches shown)], in label order A, B, C, ...
SEEDS = {
    "b300_four_arm": [
        ("pr32467=off, pr33795=off", sglang(), "SGLANG_RAGGED_VERIFY_MODE=compact", None),
        ("pr32467=off, pr33795=on", sglang(), "SGLANG_RAGGED_VERIFY_MODE=compact", "pr:sgl-project/sglang#33795"),
        ("pr32467=on, pr33795=off", sglang(), "SGLANG_RAGGED_VERIFY_MODE=compact", "pr:sgl-project/sglang#32467"),
        ("pr32467=on, pr33795=on", sglang(), "SGLANG_RAGGED_VERIFY_MODE=compact",
         "pr:sgl-project/sglang#32467, pr:sgl-project/sglang#33795"),
    ],
    "tbo_decode_isolation": [
        ("tbo=off, graphs=cudagraph", atom(*V4, "--enable-dp-attention"), "(none added)", None),
        ("tbo=prefill, graphs=cudagraph", atom(*V4, "--enable-dp-attention", "--enable-tbo", "prefill"),
         "(none added)", None),
        ("tbo=all, graphs=cudagraph", atom(*V4, "--enable-dp-attention", "--enable-tbo", "all"), "(none added)", None),
        ("tbo=all, graphs=eager", atom(*V4, "--enable-dp-attention", "--enable-tbo", "all", "--enforce-eager"),
         "(none added)", None),
    ],
    "tbo_accuracy": [
        (f"tbo={t}, fix={f}", atom(*OSS, "--enable-dp-attention", "--kv_cache_dtype", "fp8",
                                   *(["--enable-tbo", t] if t != "off" else [])),
         "(none added)", "pr:ROCm/ATOM#2692" if f == "on" else None)
        for t in ("off", "prefill", "all") for f in ("off", "on")
    ],
    "dbo_record_stream": [
        (f"base=glm5, dbo={d}, record_stream={r}, workaround={w}", vllm(*(["--enable-dbo"] if d == "on" else [])),
         env, "pr:vllm-project/vllm#60732, pr:vllm-project/vllm#60734"
         + (", pr:vllm-project/vllm#60735" if r == "on" else ""))
        for d, r, w, env in (
            ("off", "off", "none", ""), ("off", "on", "none", ""), ("on", "off", "none", ""),
            ("on", "off", "launch_blocking", "CUDA_LAUNCH_BLOCKING=1"),
            ("on", "off", "no_caching_allocator", "PYTORCH_NO_CUDA_MEMORY_CACHING=1"),
            ("on", "off", "comm_sms_0", "VLLM_DBO_COMM_SMS=0"), ("on", "on", "none", ""))
    ],
}
DEEPGEMM_ENV = "VLLM_USE_DEEP_GEMM=1 VLLM_MOE_USE_DEEP_GEMM=1 VLLM_USE_DEEP_GEMM_E8M0=0 VLLM_DEEP_GEMM_WARMUP=skip"
PRS = ["sgl-project/sglang#32467", "sgl-project/sglang#33795", "ROCm/ATOM#2692", "vllm-project/vllm#60732",
       "vllm-project/vllm#60734", "vllm-project/vllm#60735"]


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """A git repository to stand for every seed's source, and a stand-in diff for every PR."""
    repo = tmp_path / "src"
    repo.mkdir()
    (repo / "README").write_text("stand-in\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    monkeypatch.setenv(prcache.CACHE_ENV, str(tmp_path / "patches"))
    monkeypatch.setenv(prcache.BASE_URL_ENV, "http://127.0.0.1:9")   # never the network
    for pr in PRS:
        path = prcache.diff_path(pr)
        path.parent.mkdir(parents=True, exist_ok=True)
        name = pr.replace("/", "_").replace("#", "_")
        path.write_text(f"diff --git a/{name}.txt b/{name}.txt\nnew file mode 100644\n--- /dev/null\n"
                        f"+++ b/{name}.txt\n@@ -0,0 +1 @@\n+{pr}\n")
    project = tmp_path / "project"
    project.mkdir()
    return repo, project


def dry_run(name: str, repo: Path, project: Path) -> str:
    source = [f"target.source.repo={repo}", "target.source.ref=HEAD"]
    if name == "dbo_record_stream":   # an installed package there; a git checkout here
        source = ["target.source.package=null", *source]
    proc = run_cli("run", f"matrix={REPO / 'matrices' / (name + '.yaml')}", "dry_run=true",
                   f"target.python={PY}", *source, cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (project / "runs").exists(), "a dry run launches and writes nothing"
    return proc.stdout


def arms_of(out: str) -> list[dict]:
    arms: list[dict] = []
    for line in out.splitlines():
        if line.strip().startswith("argv: "):
            arms[-1]["argv"] = shlex.split(line.split("argv: ", 1)[1])
        elif line.strip().startswith("env: "):
            arms[-1]["env"] = line.split("env: ", 1)[1].strip()
        elif line.strip().startswith("patches: "):
            arms[-1]["patches"] = line.split("patches: ", 1)[1].strip()
        elif "  id " in line and line[:1].isupper():
            label, rest = line.split(" ", 1)
            arms.append({"label": label, "title": rest.split("  id ")[0], "patches": None})
    return arms


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_matrix_dry_runs_with_every_arms_exact_command(name, stand_ins) -> None:
    repo, project = stand_ins
    out = dry_run(name, repo, project)
    arms = arms_of(out)
    want = SEEDS[name]
    assert [a["title"] for a in arms] == [w[0] for w in want]
    assert [a["label"] for a in arms] == [chr(ord("A") + i) for i in range(len(want))]
    for arm, (title, argv, env, patches) in zip(arms, want, strict=True):
        assert arm["argv"] == argv, title
        expected_env = f"{DEEPGEMM_ENV} {env}".strip() if name == "dbo_record_stream" else env
        assert arm["env"] == expected_env, title
        assert arm["patches"] == patches, title
    assert "nothing launched (dry run)" in out


def test_seed_repeats_and_gates() -> None:
    from harness.app.yaml_loader import load_yaml
    data = {n: load_yaml(REPO / "matrices" / f"{n}.yaml") for n in SEEDS}
    assert data["b300_four_arm"]["repeats"] == "auto" and data["b300_four_arm"]["stats"]["max_repeats"] == 12
    assert data["b300_four_arm"]["target"]["args"][4:] == [
        "--cuda-graph-max-bs", 128, "--max-running-requests", 128]
    assert data["tbo_accuracy"]["gates"][0]["gsm8k"]["threshold"] == 0.87
    for n in SEEDS:   # PRs are referenced, never copied
        text = (REPO / "matrices" / f"{n}.yaml").read_text()
        assert ".diff" not in text, n


# What a fresh machine lacks for each shipped matrix (empty HOME and patch cache, no network, two
# GPUs visible): its arms, then the keys of its warnings. vllm_cpu's venv is built by CI beside the
# repository; here it is pointed at one that does not exist, as on a fresh clone.
FRESH = {
    "demo": (2, set()),
    "b300_four_arm": (4, {"target.python", "target.tp", "target.source.repo", "axes.pr32467.on.patches[0].pr",
                          "axes.pr33795.on.patches[0].pr"}),
    "dbo_record_stream": (7, {"target.python", "target.tp", "axes.base.glm5.patches[0].pr",
                              "axes.base.glm5.patches[1].pr", "axes.record_stream.on.patches[0].pr"}),
    "tbo_accuracy": (6, {"target.python", "target.source.repo", "axes.fix.on.patches[0].pr"}),
    "tbo_decode_isolation": (4, {"target.python", "target.tp", "target.source.repo"}),
    "vllm_cpu": (4, {"target.python"}),
}


def test_every_shipped_matrix_is_covered() -> None:
    assert sorted(FRESH) == sorted(p.stem for p in (REPO / "matrices").glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(FRESH))
def test_shipped_matrix_dry_runs_on_a_fresh_machine(name, tmp_path, monkeypatch, capsys) -> None:
    from harness.cli.main import main

    cache = tmp_path / "patch-cache"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(prcache.CACHE_ENV, str(cache))
    monkeypatch.setenv(prcache.BASE_URL_ENV, "http://127.0.0.1:9")   # a fetch attempt would fail
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.chdir(tmp_path)
    file = REPO / "matrices" / f"{name}.yaml"
    extra = [f"target.python={tmp_path / 'no-venv' / 'bin' / 'python'}"] if name == "vllm_cpu" else []
    rc = main(["run", f"matrix={file}", "dry_run=true", *extra])
    out = capsys.readouterr().out
    assert rc == 0, out
    n_arms, keys = FRESH[name]
    assert [a["label"] for a in arms_of(out)] == [chr(ord("A") + i) for i in range(n_arms)], out
    warned = {line.split(": ")[1] for line in out.splitlines() if line.startswith(f"  {file}: ")}
    assert warned == keys, out
    for line in out.splitlines():
        if ".pr: " in line:
            assert "not in the patch cache" in line and "curl -fL http://127.0.0.1:9/" in line, line
    assert "cannot fetch" not in out and not cache.exists(), "a dry run never touches the network"
    assert not (tmp_path / "runs").exists() and "nothing launched (dry run)" in out
