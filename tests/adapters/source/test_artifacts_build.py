"""Compiled artifacts of the base checkout in worktrees; the build of a tree."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness.adapters.source.artifacts import find_artifacts, place_artifacts
from harness.adapters.source.build import BuildFailed, run_build
from harness.adapters.source.git import prepare, resolve_repo
from tests.adapters.source.conftest import commit_all, g


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """An editable-install-like checkout: tracked package sources, and what the build left
    (ignored): a .so and a generated module inside the package, a folder of copied files, plus
    ignored things that are not artifacts (a venv, build/, bytecode, egg-info)."""
    r = tmp_path / "eng"
    (r / "eng" / "attn").mkdir(parents=True)
    (r / "eng" / "__init__.py").write_text("")
    (r / "eng" / "attn" / "__init__.py").write_text("")
    (r / ".gitignore").write_text("*.so\n_version.py\n.venv/\nbuild/\n__pycache__/\n*.egg-info/\neng/attn/gen/\n")
    g(r, "init", "-q")
    commit_all(r, "base")
    for f in ("eng/_C.abi3.so", "eng/_version.py", "eng/attn/_fa.so", "eng/attn/gen/iface.py",
              ".venv/lib/x.so", "build/lib/eng/_C.abi3.so", "eng/__pycache__/m.pyc", "eng.egg-info/PKG-INFO"):
        (r / f).parent.mkdir(parents=True, exist_ok=True)
        (r / f).write_text(f"built {f}\n")
    return r


def test_artifacts_are_the_ignored_files_inside_packages(checkout):
    assert find_artifacts(checkout) == ["eng/_C.abi3.so", "eng/_version.py", "eng/attn/_fa.so", "eng/attn/gen/"]


def test_links_without_a_build_copies_with_one_never_over_what_is_there(checkout, tmp_path):
    top, sha = resolve_repo(checkout, "HEAD")
    tree = prepare(top, "HEAD", sha, [], tmp_path / "wt").path
    assert place_artifacts(top, tree, copy=False) == find_artifacts(checkout)
    assert (tree / "eng" / "_C.abi3.so").is_symlink() and (tree / "eng" / "attn" / "gen").is_symlink()
    assert (tree / "eng" / "attn" / "gen" / "iface.py").read_text() == "built eng/attn/gen/iface.py\n"
    assert not (tree / ".venv").exists() and not (tree / "build").exists()
    assert place_artifacts(top, tree, copy=False) == []
    other = prepare(top, "HEAD", sha, [], tmp_path / "wt2").path
    (other / "eng" / "_C.abi3.so").write_text("rebuilt in the arm\n")
    place_artifacts(top, other, copy=True)
    assert (other / "eng" / "_C.abi3.so").read_text() == "rebuilt in the arm\n"
    assert not (other / "eng" / "_version.py").is_symlink() and (other / "eng" / "attn" / "gen" / "iface.py").is_file()
    (other / "eng" / "_version.py").write_text("rewritten\n")
    assert (checkout / "eng" / "_version.py").read_text() == "built eng/_version.py\n"


def test_build_runs_once_and_remembers(tmp_path):
    tree = tmp_path / "k"
    tree.mkdir()
    argv = [sys.executable, "-c", "import pathlib; p = pathlib.Path('n'); p.write_text(p.read_text() + 'x' "
            "if p.exists() else 'x'); print('built')"]
    first = run_build(tree, argv, dict(os.environ), {}, 30)
    again = run_build(tree, argv, dict(os.environ), {}, 30)
    assert (tree / "n").read_text() == "x" and not first.reused and again.reused
    assert first.log.read_text() == "built\n" and first.log.parent == tmp_path
    run_build(tree, argv, dict(os.environ), {"CC": "clang"}, 30)    # another env: another build
    assert (tree / "n").read_text() == "xx"


def test_a_failing_or_hanging_build_is_build_failed_and_leaves_nothing(tmp_path):
    tree = tmp_path / "k"
    tree.mkdir()
    with pytest.raises(BuildFailed, match=r"(?s)failed \(exit 2\).*error: boom") as e:
        run_build(tree, [sys.executable, "-c", "import sys; print('error: boom'); sys.exit(2)"], dict(os.environ), {}, 30)
    assert "error: boom" in e.value.log.read_text()
    with pytest.raises(BuildFailed, match="could not start"):
        run_build(tree, [str(tmp_path / "nope")], dict(os.environ), {}, 30)
    marker = str(tmp_path / "k")
    t0 = time.monotonic()
    with pytest.raises(BuildFailed, match="timed out"):
        run_build(tree, [sys.executable, "-c", f"import time; print({marker!r}, flush=True); time.sleep(60)"],
                  dict(os.environ), {}, 1.0)
    assert time.monotonic() - t0 < 20
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])
            and "sleep" in " ".join(p.info["cmdline"] or [])]
    assert not left, "the build outlived its timeout"


def test_trial_tmpdir_is_short_enough_for_sockets_and_lands_in_the_trial(tmp_path):
    import socket
    from harness.adapters.source.caches import SOCKET_DIR_MAX, trial_tmpdir
    campaign = tmp_path / ("very-long-runs-folder-" * 4) / "matrix"
    trial = campaign / "0123456789ab" / "1"
    tmp = trial_tmpdir(campaign, trial)
    assert len(str(tmp)) <= SOCKET_DIR_MAX and tmp.resolve() == (trial / "tmp").resolve()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp / "0b5e6f3c-5b2a-4c1e-9f7e-0123456789ab"))   # what vLLM does
    assert (trial / "tmp" / "0b5e6f3c-5b2a-4c1e-9f7e-0123456789ab").exists()
    link = tmp.parents[2]
    assert trial_tmpdir(campaign, campaign / "0123456789ab" / "2").parents[2] == link
    short = Path(tempfile.mkdtemp(prefix="h"))     # a path short enough is used as it is
    try:
        assert trial_tmpdir(short, short / "a" / "1") == (short / "a" / "1" / "tmp").resolve()
    finally:
        shutil.rmtree(short)
    link.unlink()   # the campaign's link, made again when gone
    assert trial_tmpdir(campaign, trial) == tmp
    link.unlink()


def test_a_worktree_build_rewrites_copies_never_the_checkout(checkout, tmp_path):
    from harness.adapters.source.armtree import TreeSpec, prepare_tree
    from harness.core.matrix import Source
    top, sha = resolve_repo(checkout, "HEAD")
    build = ["{python}", "-c", "import pathlib; p = pathlib.Path('eng/_C.abi3.so'); "
             "assert not p.is_symlink(); p.write_text('rebuilt'); print('in {worktree}')"]
    spec = TreeSpec(source=Source(str(checkout)), top=top, base=sha, patches=(), runs_dir=tmp_path / "runs",
                    build=tuple(build), python=sys.executable, build_env=dict(os.environ), build_timeout_s=60)
    first = prepare_tree(spec)
    tree = first.prepared.path
    assert "eng/_C.abi3.so" in first.artifacts and not first.build.reused
    assert (tree / "eng" / "_C.abi3.so").read_text() == "rebuilt" and first.build.log.read_text() == f"in {tree}\n"
    assert (checkout / "eng" / "_C.abi3.so").read_text() == "built eng/_C.abi3.so\n"
    again = prepare_tree(spec)
    assert again.artifacts == () and again.build.reused and (tree / "eng" / "_C.abi3.so").read_text() == "rebuilt"
    linked = prepare_tree(TreeSpec(source=Source(str(checkout)), top=top, base=sha, patches=(),
                                   runs_dir=tmp_path / "runs2"))
    assert linked.build is None and (linked.prepared.path / "eng" / "_C.abi3.so").is_symlink()
