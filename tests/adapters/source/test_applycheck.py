"""Whether a patch set applies to the base, checked without a worktree and without writing into the
repository (a scratch index and object folder), in order, as a worktree would apply it."""
from __future__ import annotations

from pathlib import Path

from harness.adapters.source.applycheck import first_not_applying
from harness.adapters.source.patches import PatchSpec
from tests.adapters.source.conftest import commit_all, g

FIRST = '--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-MODE = "crash"\n+MODE = "ready"\n'
SECOND = '--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-MODE = "ready"\n+MODE = "done"\n'


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    g(repo, "init", "-q")
    (repo / "m.py").write_text('MODE = "crash"\n')
    base = commit_all(repo, "base")
    (repo / "m.py").write_text('MODE = "ready"\n')
    commit_all(repo, "ready")
    return repo, base


def _diff(tmp_path: Path, name: str, text: str) -> PatchSpec:
    (tmp_path / name).write_text(text)
    return PatchSpec(diff=tmp_path / name)


def _snapshot(repo: Path) -> dict[str, tuple[float, int]]:
    return {str(p): (p.stat().st_mtime, p.stat().st_size) for p in repo.rglob("*") if p.is_file()}


def test_patches_apply_in_order_on_the_base_and_nothing_is_written(tmp_path) -> None:
    repo, base = _repo(tmp_path)
    first, second = _diff(tmp_path, "1.diff", FIRST), _diff(tmp_path, "2.diff", SECOND)
    before = _snapshot(repo)
    assert first_not_applying(repo, base, [first, second]) is None
    assert first_not_applying(repo, base, [PatchSpec(commit="HEAD"), second]) is None
    failed = first_not_applying(repo, base, [second])
    assert failed is not None and failed.index == 0 and "patch does not apply" in failed.message
    assert first_not_applying(repo, base, [first, first]).index == 1
    assert _snapshot(repo) == before, "the user's index, work tree and objects are left as they were"
    assert g(repo, "status", "--porcelain") == "" and (repo / "m.py").read_text() == 'MODE = "ready"\n'


def test_no_patches_apply_trivially(tmp_path) -> None:
    repo, base = _repo(tmp_path)
    assert first_not_applying(repo, base, []) is None
