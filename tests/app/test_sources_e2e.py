"""Patch arms on real sources, end to end through the CLI with real processes: an overlay of an
installed package proven by the import check, a copy that shadows the patched one, builds, PR
patches from a (local) HTTP server and the patch cache, and cache isolation."""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.adapters.source.conftest import CORE, FIX
from tests.app.conftest import FIXTURE_SERVER, REPO, git, write_matrix

LAUNCH = '''import os, sys
import fakeng.core as core
print(f"fakeng.core from {core.__file__} mode {core.MODE} version {core.VERSION}", flush=True)
os.execv(sys.executable, [sys.executable, sys.argv[1], "--mode", core.MODE, "--port", sys.argv[2]])
'''
VERSIONED = CORE.replace('MODE = "crash"\n', 'from fakeng._version import VERSION\nMODE = "crash"\n')
FIXV = FIX.replace("@@ -1,4 +1,4 @@\n-MODE", "@@ -2,4 +2,4 @@\n-MODE").replace(
    ' MODE = "ready"\n \n \n def mode():', ' MODE = "ready"\n \n \n def mode():')


def _run(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", *args, "tracking.enabled=false"], cwd=project,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "HARNESS_PATCH_CACHE": str(project / "patch-cache"),
                               "TMPDIR": str(project), **env})   # a campaign link, if one is made, goes here


def _results(project: Path, matrix: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in sorted((project / "runs" / matrix).glob("*/*/result.json")):
        r = json.loads(p.read_text())
        out.setdefault(r["levels"].get("fix", "base"), []).append(r)
    return out


def _log(project: Path, matrix: str, r: dict, name: str = "server.log") -> str:
    return (project / "runs" / matrix / r["arm_id"] / str(r["trial"]) / name).read_text()


@pytest.fixture
def engine(project: Path) -> dict:
    """An installed engine package fakeng (site folder) and a target that launches it."""
    site = project / "site"
    (site / "fakeng").mkdir(parents=True)
    (site / "fakeng" / "__init__.py").write_text("")
    (site / "fakeng" / "core.py").write_text(VERSIONED)
    (site / "fakeng" / "_version.py").write_text('VERSION = "1.0-installed"\n')
    (site / "fakeng" / "_C.abi3.so").write_bytes(b"not really ELF")
    (project / "launch.py").write_text(LAUNCH)
    (project / "fix.diff").write_text(FIXV)
    return {"engine": "command", "command": ["{python}", str(project / "launch.py"), str(FIXTURE_SERVER), "{port}"],
            "env": {"PYTHONPATH": str(site)}, "startup_timeout_s": 20, "fatal_grace_s": 0.5, "stop_timeout_s": 3}


def test_overlay_of_an_installed_package_is_imported_and_proven(project, engine):
    target = {**engine, "source": {"package": "fakeng"}}
    write_matrix(project, "ov", {"target": target, "repeats": 2,
                                 "axes": {"fix": {"off": {}, "on": {"patches": ["../fix.diff"]}}}})
    proc = _run(project, "run", "matrix=ov")
    assert proc.returncode == 0, proc.stderr
    rs = _results(project, "ov")
    assert [r["outcome"] for r in rs["off"]] == ["IMA", "IMA"] and [r["outcome"] for r in rs["on"]] == ["READY"] * 2
    on = rs["on"][0]
    overlay = Path(on["source"]["worktree"])
    assert f"fakeng.core from {overlay / 'fakeng' / 'core.py'} mode ready version 1.0-installed" in _log(project, "ov", on)
    check = json.loads(_log(project, "ov", on, "import_check.json"))
    assert check["modules"]["fakeng.core"] == {"expected": str(overlay / "fakeng" / "core.py"),
                                               "resolved": str(overlay / "fakeng" / "core.py"), "ok": True}
    assert on["env"]["PYTHONPATH"].split(os.pathsep)[:2] == [str(overlay), str(project / "site")]
    assert on["source"]["repo"] == str((project / "site" / "fakeng").resolve())
    assert list(on["source"]["touched"]) == ["fakeng/core.py"] and (overlay / "fakeng" / "_C.abi3.so").is_symlink()
    assert "test/test_core.py" in _log(project, "ov", on, "patches/not_applied.txt")
    assert (project / "site" / "fakeng" / "core.py").read_text() == VERSIONED
    assert rs["off"][0]["source"]["base_sha"] == on["source"]["base_sha"]


def test_a_copy_that_shadows_the_patched_one_is_patch_failed(project, engine):
    """A git checkout whose package sits under python/, but target.pythonpath forgot it: the
    installed copy is what the server would import."""
    repo = project / "src"
    (repo / "python" / "fakeng").mkdir(parents=True)
    (repo / "python" / "fakeng" / "__init__.py").write_text("")
    (repo / "python" / "fakeng" / "core.py").write_text(VERSIONED)
    (repo / "test").mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / ".gitignore").write_text("python/fakeng/_version.py\n")   # generated by the build
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ignore")
    (repo / "python" / "fakeng" / "_version.py").write_text('VERSION = "2.0-checkout"\n')
    target = {**engine, "source": {"repo": str(repo), "ref": "main"}}
    axes = {"fix": {"off": {}, "on": {"patches": ["../fix.diff"]}}}
    write_matrix(project, "shadow", {"target": target, "axes": axes})
    write_matrix(project, "wt", {"target": {**target, "pythonpath": ["python"]}, "axes": axes})
    assert _run(project, "run", "matrix=shadow").returncode == 0
    rs = _results(project, "shadow")
    assert rs["off"][0]["outcome"] == "IMA"   # nothing touched: nothing to prove
    on = rs["on"][0]
    assert on["outcome"] == "PATCH_FAILED" and not (project / "runs" / "shadow" / on["arm_id"] / "1" / "server.log").exists()
    assert f"fakeng.core resolves to {project / 'site' / 'fakeng' / 'core.py'}" in on["detail"]
    assert on["source"]["touched"], "the record says what the arm claimed"
    # With the pythonpath right the worktree runs, with the checkout's generated _version.py linked in.
    assert _run(project, "run", "matrix=wt").returncode == 0
    on = _results(project, "wt")["on"][0]
    assert on["outcome"] == "READY" and "mode ready version 2.0-checkout" in _log(project, "wt", on)
    assert (Path(on["source"]["worktree"]) / "python" / "fakeng" / "_version.py").is_symlink()
    assert git(repo, "status", "--porcelain") == ""


def test_build_once_per_patch_set_and_a_failing_build_is_patch_failed(project, engine):
    count = project / "builds.txt"
    ok = ["{python}", "-c", f"open({str(count)!r}, 'a').write('built\\n'); print('compiled {{worktree}}')"]
    target = {**engine, "source": {"package": "fakeng"}, "build": ok}
    axes = {"fix": {"off": {}, "on": {"patches": ["../fix.diff"]}}}
    write_matrix(project, "built", {"target": target, "axes": axes, "repeats": 2})
    assert _run(project, "run", "matrix=built").returncode == 0
    rs = _results(project, "built")
    assert [r["outcome"] for r in rs["off"] + rs["on"]] == ["IMA", "IMA", "READY", "READY"]
    assert count.read_text() == "built\n" * 2, "one build per patch set, not per trial"
    assert "compiled " + rs["on"][0]["source"]["worktree"] in _log(project, "built", rs["on"][1], "build.log")
    bad = ["{python}", "-c", "import sys; print('nvcc: error: kernel.cu:12 bad'); sys.exit(3)"]
    write_matrix(project, "badbuild", {"target": {**target, "build": bad}, "axes": axes, "repeats": 2})
    assert _run(project, "run", "matrix=badbuild").returncode == 0
    rs = _results(project, "badbuild")
    assert {r["outcome"] for r in rs["off"] + rs["on"]} == {"PATCH_FAILED"}
    first, second = rs["on"]
    assert "failed (exit 3)" in first["detail"] and "nvcc: error: kernel.cu:12 bad" in first["detail"]
    assert "remembered" in second["detail"], "the same failing build is not run again"
    assert "kernel.cu:12" in _log(project, "badbuild", first, "build.log")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_pr_patch_fetched_once_then_cached_and_offline_without_cache_exit_2(project, engine):
    served = project / "served" / "acme" / "fakeng" / "pull"
    served.mkdir(parents=True)
    (served / "7.diff").write_text(FIXV)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(project / "served")))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    target = {**engine, "source": {"package": "fakeng"}}
    write_matrix(project, "pr", {"target": target, "axes": {"fix": {"off": {}, "on": {"patches": [{"pr": "acme/fakeng#7"}]}}}})
    try:
        proc = _run(project, "run", "matrix=pr", HARNESS_PR_BASE_URL=url)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert proc.returncode == 0, proc.stderr
    cached = project / "patch-cache" / "acme_fakeng_7.diff"
    sha = hashlib.sha256(FIXV.encode()).hexdigest()
    assert cached.read_text() == FIXV and json.loads(cached.with_suffix(".json").read_text())["sha256"] == sha
    on = _results(project, "pr")["on"][0]
    assert on["outcome"] == "READY" and on["source"]["patches"] == [{"name": "pr:acme/fakeng#7", "sha256": sha}]
    # The server is gone: the cache serves.
    assert _run(project, "run", "matrix=pr", "rerun=true", HARNESS_PR_BASE_URL=url).returncode == 0
    # Another PR, no network, nothing cached: exit 2 before anything launches, saying where the file goes.
    write_matrix(project, "pr2", {"target": target, "axes": {"fix": {"on": {"patches": [{"pr": "acme/fakeng#8"}]}}}})
    proc = _run(project, "run", "matrix=pr2", HARNESS_PR_BASE_URL=url)
    assert proc.returncode == 2
    assert "axes.fix.on.patches[0].pr" in proc.stderr and "cannot fetch acme/fakeng#8" in proc.stderr
    assert str(project / "patch-cache" / "acme_fakeng_8.diff") in proc.stderr.replace("\n", "")
    assert not (project / "runs" / "pr2").exists()


@pytest.mark.parametrize("policy", ["per_arm", "per_trial", "shared"])
def test_cache_dirs_by_policy(project, engine, policy):
    write_matrix(project, "c", {"target": {**engine, "cache": policy}, "repeats": 2})
    assert _run(project, "run", "matrix=c").returncode == 0
    (r1, r2), = _results(project, "c").values()
    arm = project / "runs" / "c" / r1["arm_id"]
    if policy == "shared":
        assert "TRITON_CACHE_DIR" not in r1["env"] and "TVM_FFI_CACHE_DIR" not in r1["env"]
        return
    dirs = [Path(r["env"]["TVM_FFI_CACHE_DIR"]) for r in (r1, r2)]
    if policy == "per_arm":
        assert dirs == [arm / "cache" / "tvm-ffi"] * 2 and dirs[0].is_dir()
    else:
        assert dirs == [arm / "1" / "cache" / "tvm-ffi", arm / "2" / "cache" / "tvm-ffi"]
        assert not (arm / "1" / "cache").exists(), "a per-trial cache is removed with the trial"
    assert Path(r1["env"]["TRITON_CACHE_DIR"]).parent == dirs[0].parent


def test_cache_policy_is_part_of_the_arm_and_settable_on_the_command_line(project, engine):
    write_matrix(project, "cc", {"target": engine})
    proc = _run(project, "run", "matrix=cc", "target.cache=per_trial", "dry_run=true")
    proc2 = _run(project, "run", "matrix=cc", "dry_run=true")
    assert proc.returncode == proc2.returncode == 0, proc.stderr
    ids = [line.split("id ")[1] for p in (proc, proc2) for line in p.stdout.splitlines() if " id " in line]
    assert len(set(ids)) == 2


def test_tmpdir_per_trial_unless_shared(project, engine):
    write_matrix(project, "t", {"target": engine, "repeats": 2})
    assert _run(project, "run", "matrix=t").returncode == 0
    (r1, r2), = _results(project, "t").values()
    arm = project / "runs" / "t" / r1["arm_id"]
    assert [Path(r["env"]["TMPDIR"]).resolve() for r in (r1, r2)] == [arm / "1" / "tmp", arm / "2" / "tmp"]
