"""A dry run works on any machine: it shows every arm and everything that would stop a real run, all
at once, as warnings (exit 0); a real run refuses the same problems together (exit 2), nothing
launched or written. Through the CLI's entry point, in this process."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.adapters.source import prcache
from harness.cli.main import main
from tests.app.conftest import fixture_target, git, write_matrix

OFFLINE = "http://127.0.0.1:9"   # nothing listens there: a fetch attempt would fail


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """An empty patch cache and a PR server that cannot be reached."""
    cache = tmp_path / "patch-cache"
    monkeypatch.setenv(prcache.CACHE_ENV, str(cache))
    monkeypatch.setenv(prcache.BASE_URL_ENV, OFFLINE)
    return cache


def cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def warnings_by_key(out: str, file: Path) -> dict[str, str]:
    """The warning lines of a dry run, by the key they name."""
    prefix = f"  {file}: "
    return {line[len(prefix):].split(": ", 1)[0]: line for line in out.splitlines() if line.startswith(prefix)}


def three_problem_matrix(project: Path, tmp_path: Path) -> Path:
    return write_matrix(project, "m", {
        "target": {**fixture_target("ready", python=str(tmp_path / "no-venv" / "bin" / "python")),
                   "source": {"repo": str(tmp_path / "no-checkout"), "ref": "main"}},
        "axes": {"fix": {"off": {}, "on": {"patches": [{"pr": "o/r#7"}]}}}})


def test_a_dry_run_lists_every_problem_and_a_real_run_refuses_them_together(project, tmp_path, offline, capsys):
    file = three_problem_matrix(project, tmp_path)
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    found = warnings_by_key(out, file)
    assert set(found) == {"target.python", "target.source.repo", "axes.fix.on.patches[0].pr"}, out
    assert str(tmp_path / "no-venv" / "bin" / "python") in found["target.python"]
    assert str(tmp_path / "no-checkout") in found["target.source.repo"]
    pr = found["axes.fix.on.patches[0].pr"]
    assert "not in the patch cache" in pr and "cannot fetch" not in pr, "a dry run never fetches"
    assert f"{OFFLINE}/o/r/pull/7.diff" in pr and str(offline / "o_r_7.diff") in pr
    assert "A fix=off" in out and "B fix=on" in out and "(provisional)" in out
    assert "3 problems would stop a real run" in out and "nothing launched (dry run)" in out
    assert not offline.exists() and not (project / "runs").exists()

    rc, out, err = cli(capsys, "run", "matrix=m")
    assert rc == 2, out + err
    assert "3 problems stop this run" in err
    for key, words in (("target.python", "no-venv"), ("target.source.repo", "no-checkout"),
                       ("axes.fix.on.patches[0].pr", "cannot fetch o/r#7")):
        assert any(f"{file}: {key}: " in line and words in line for line in err.splitlines()), (key, err)
    assert not (project / "runs").exists(), "nothing may be launched or written"


def test_the_offline_hint_is_never_wrapped(project, tmp_path, monkeypatch, capsys):
    deep = tmp_path
    while len(str(deep)) < 300:
        deep = deep / "a-long-folder-name-for-the-patch-cache"
    monkeypatch.setenv(prcache.CACHE_ENV, str(deep))
    monkeypatch.setenv(prcache.BASE_URL_ENV, OFFLINE)
    write_matrix(project, "m", {"target": {**fixture_target("ready"), "source": {"repo": str(tmp_path)}},
                                "axes": {"fix": {"on": {"patches": [{"pr": "o/r#7"}]}}}})
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    command = f"curl -fL {OFFLINE}/o/r/pull/7.diff -o {deep / 'o_r_7.diff'}"
    assert any(command in line for line in out.splitlines()), out


def test_argv_shows_paths_as_written_no_port_and_no_secret(project, tmp_path, monkeypatch, offline, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write_matrix(project, "m", {"target": {"engine": "vllm", "model": "../models/tiny", "args": ["--api-key", "sekrit"],
                                           "python": "~/venvs/vllm/bin/python", "env": {"HF_TOKEN": "hf_sekrit"}}})
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    argv = next(line for line in out.splitlines() if line.startswith("  argv: "))
    assert argv.startswith("  argv: ~/venvs/vllm/bin/python -m vllm.entrypoints.cli.main serve ../models/tiny ")
    assert "--port '<free port>'" in argv and str(tmp_path) not in argv
    assert "sekrit" not in out and "--api-key '***'" in argv and "HF_TOKEN='***'" in out
    assert "target.python" in warnings_by_key(out, project / "matrices" / "m.yaml")


def test_too_few_gpus_is_a_warning_in_a_dry_run(project, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    file = write_matrix(project, "m", {"target": {"engine": "vllm", "model": "m", "tp": 8}})
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    assert "needs 8 GPUs" in warnings_by_key(out, file)["target.tp"] and "2 are visible" in out


def _git_state(repo: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in sorted(repo.rglob("*")) if p.is_file()}


def test_a_patch_that_does_not_apply_is_named_and_the_checkout_is_untouched(project, source_repo, capsys):
    (project / "good.diff").write_text('--- a/pkg/mode.py\n+++ b/pkg/mode.py\n@@ -1 +1 @@\n-MODE = "crash"\n'
                                       '+MODE = "ready"\n')
    # Applies only on top of good.diff: checked in order, as the worktree applies them.
    (project / "then.diff").write_text('--- a/pkg/mode.py\n+++ b/pkg/mode.py\n@@ -1 +1 @@\n-MODE = "ready"\n'
                                       '+MODE = "done"\n')
    file = write_matrix(project, "m", {
        "target": {**fixture_target("ready"), "source": {"repo": str(source_repo), "ref": "main"}},
        "axes": {"fix": {"good": {"patches": ["../good.diff", "../then.diff"]},
                         "stale": {"patches": ["../then.diff"]}}}})
    before = _git_state(source_repo)
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    found = warnings_by_key(out, file)
    assert set(found) == {"axes.fix.stale.patches[0]"}, out
    assert "then.diff does not apply to main" in found["axes.fix.stale.patches[0]"]
    assert "arm B (fix=stale) as PATCH_FAILED" in found["axes.fix.stale.patches[0]"]
    assert "would stop a real run" not in out, "a patch that does not apply stops only its arm"
    assert _git_state(source_repo) == before and git(source_repo, "status", "--porcelain") == ""
    assert sorted(os.listdir(source_repo)) == [".git", "pkg"]


def test_brackets_in_a_path_or_level_are_printed_as_they_are(tmp_path, monkeypatch, capsys):
    project = tmp_path / "p[x]"
    (project / "matrices").mkdir(parents=True)
    monkeypatch.chdir(project)
    file = write_matrix(project, "m", {"target": fixture_target("ready"), "axes": {"mode": {"[bold]": {}, "b": {}}}})
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    assert f"({file})" in out and "mode=[bold]" in out


def test_gpus_that_cannot_be_counted_are_said_in_a_dry_run(project, monkeypatch, capsys):
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(project))          # no nvidia-smi to count with
    file = write_matrix(project, "m", {"target": {"engine": "vllm", "model": "m", "tp": 8}})
    rc, out, err = cli(capsys, "run", "matrix=m", "dry_run=true")
    assert rc == 0, out + err
    assert "arms need up to 8 GPUs; none can be counted on this machine" in warnings_by_key(out, file)["target.tp"]
