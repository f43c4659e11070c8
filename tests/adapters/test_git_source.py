"""The git source adapter against real git repositories in tmp dirs."""
from __future__ import annotations

import fcntl
import hashlib
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

from harness.adapters.source.git import (
    PatchSpec, PreparedSource, check_patches, patch_set_hash, patch_text, prepare, remove_worktrees, resolve_repo,
)
from harness.errors import ConfigError, PatchFailed, SourceError

ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
ID = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main"]


def g(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *ID, *args], check=True, capture_output=True, text=True, env=ENV, timeout=60
    ).stdout


def commit_all(repo: Path, msg: str) -> str:
    g(repo, "add", "-A")
    g(repo, "commit", "-q", "-m", msg)
    return g(repo, "rev-parse", "HEAD").strip()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: c1 (a, b, gone) -> c2 (a changed) -> c3 (sub/c.py added); a dirty a.txt, an untracked
    file, a stash entry and a second branch that prepare must all leave alone."""
    r = tmp_path / "repo"
    r.mkdir()
    g(r, "init", "-q")
    (r / "a.txt").write_text("one\ntwo\nthree\n")
    (r / "b.txt").write_text("bee\n")
    (r / "gone.txt").write_text("to be deleted\n")
    commit_all(r, "c1")
    (r / "a.txt").write_text("one\nTWO\nthree\n")
    commit_all(r, "c2")
    (r / "sub").mkdir()
    (r / "sub" / "c.py").write_text("x = 1\n")
    commit_all(r, "c3")
    g(r, "branch", "other", "HEAD~1")
    (r / "b.txt").write_text("stashed\n")
    g(r, "stash", "-q")
    (r / "a.txt").write_text("DIRTY uncommitted change\n")
    (r / "untracked.txt").write_text("mine\n")
    return r


def head(repo: Path, rev: str = "HEAD") -> str:
    return g(repo, "rev-parse", rev).strip()


def diff_file(tmp_path: Path, name: str, text: str) -> PatchSpec:
    p = tmp_path / name
    p.write_text(text)
    return PatchSpec(diff=p)


FIX_A = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n TWO\n-three\n+THREE\n"
FIX_A_AGAIN = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-TWO\n+2\n THREE\n"   # needs FIX_A first
NEW_FILE = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+brand new\n"
DELETE = "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-to be deleted\n"
BAD = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n not\n in\n-the file\n+at all\n"


def cached_entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) if cache.exists() else []


def worktrees(repo: Path) -> list[str]:
    lines = g(repo, "worktree", "list", "--porcelain").splitlines()
    return [ln.split(" ", 1)[1] for ln in lines if ln.startswith("worktree ")]


def snapshot(repo: Path) -> dict[str, object]:
    return {
        "status": g(repo, "status", "--porcelain", "--untracked-files=all"),
        "head": head(repo),
        "symbolic": g(repo, "symbolic-ref", "HEAD"),
        "stash": g(repo, "stash", "list", "--format=%H %s"),
        "refs": g(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "index": (repo / ".git" / "index").read_bytes(),
        "a": (repo / "a.txt").read_bytes(),
        "untracked": (repo / "untracked.txt").read_bytes(),
    }


# --- resolve_repo / check_patches ---------------------------------------------------------------

def test_resolve_repo_returns_toplevel_and_full_sha(repo: Path) -> None:
    top, sha = resolve_repo(repo, "other")
    assert top == repo.resolve() and sha == head(repo, "HEAD~1") and len(sha) == 40


def test_resolve_repo_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for path in (plain, tmp_path / "missing"):
        with pytest.raises(ConfigError) as e:
            resolve_repo(path, "main", file="m.yaml")
        assert e.value.key == "target.source.repo" and e.value.file == "m.yaml" and str(path) in str(e.value)


def test_resolve_repo_subdirectory_is_not_the_repository(repo: Path) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_repo(repo / "sub", "main")
    assert e.value.key == "target.source.repo" and str(repo.resolve()) in str(e.value)


@pytest.mark.parametrize("ref", ["no-such-branch", "-h", "", "HEAD~99"])
def test_resolve_repo_bad_ref(repo: Path, ref: str) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_repo(repo, ref, file="m.yaml")
    assert e.value.key == "target.source.ref" and repr(ref) in str(e.value)


def test_check_patches_accepts_good_ones(repo: Path, tmp_path: Path) -> None:
    good = [diff_file(tmp_path, "fix.diff", FIX_A), PatchSpec(commit="HEAD"), PatchSpec(range="HEAD~2..HEAD")]
    check_patches(repo, good, file="m.yaml", key_of=lambda i: f"axes.fix.on.patches[{i}]")


@pytest.mark.parametrize(
    "bad, words",
    [
        (PatchSpec(diff=Path("/nonexistent/x.diff")), "/nonexistent/x.diff"),
        (PatchSpec(commit="deadbeefdeadbeef"), "deadbeefdeadbeef"),
        (PatchSpec(range="HEAD..nope"), "'nope'"),
        (PatchSpec(range="HEAD...HEAD~1"), "A..B"),
        (PatchSpec(range="HEAD"), "A..B"),
    ],
)
def test_check_patches_names_file_and_key(repo: Path, tmp_path: Path, bad: PatchSpec, words: str) -> None:
    patches = [diff_file(tmp_path, "fix.diff", FIX_A), bad]
    with pytest.raises(ConfigError) as e:
        check_patches(repo, patches, file="m.yaml", key_of=lambda i: f"axes.fix.on.patches[{i}]")
    assert (e.value.file, e.value.key) == ("m.yaml", "axes.fix.on.patches[1]")
    assert words in str(e.value)


def test_check_patches_empty_diff(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="empty"):
        check_patches(repo, [diff_file(tmp_path, "e.diff", "\n")], file=None, key_of=str)


def test_patchspec_needs_exactly_one_absolute_source() -> None:
    for kw in ({}, {"commit": "a", "range": "a..b"}, {"diff": Path("rel.diff")}):
        with pytest.raises(ValueError):
            PatchSpec(**kw)
    assert PatchSpec(diff=Path("/p/x.diff")).name == "x.diff"
    assert PatchSpec(commit="abc").name == "commit:abc"
    assert PatchSpec(range="a..b").name == "range:a..b"


def test_patch_set_hash_depends_on_base_order_and_framing() -> None:
    h = patch_set_hash("a" * 40, ["x", "y"])
    assert len(h) == 16 and h == patch_set_hash("a" * 40, ["x", "y"])
    assert len({h, patch_set_hash("b" * 40, ["x", "y"]), patch_set_hash("a" * 40, ["y", "x"]),
                patch_set_hash("a" * 40, ["xy"]), patch_set_hash("a" * 40, ["x", "y", ""])}) == 5


# --- prepare -------------------------------------------------------------------------------------

def test_diff_patch_applies(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix-a.diff", FIX_A)
    src = prepare(top, "main", base, [spec], tmp_path / "cache")
    assert not src.reused and src.path.parent == (tmp_path / "cache").resolve()
    assert src.path.name == f"{base[:12]}-{patch_set_hash(base, [FIX_A])}"
    assert (src.path / "a.txt").read_text() == "one\nTWO\nTHREE\n"
    assert (src.path / "sub" / "c.py").read_text() == "x = 1\n"
    r = src.record
    assert (r.repo, r.ref, r.base_sha, r.worktree) == (str(top), "main", base, str(src.path))
    assert [(p.name, p.sha256) for p in r.patches] == [("fix-a.diff", sha256(FIX_A.encode()))]
    assert [d.name for d in src.applied_diffs] == ["00-fix-a.diff"]
    assert src.applied_diffs[0].read_text() == FIX_A
    assert g(src.path, "log", "-1", "--format=%s %an").strip() == "harness: apply fix-a.diff harness"
    assert head(src.path, "HEAD~1") == base
    assert g(src.path, "status", "--porcelain", "--untracked-files=no") == ""


def test_two_patches_apply_in_order(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    first, second = diff_file(tmp_path, "1.diff", FIX_A), diff_file(tmp_path, "2.patch", FIX_A_AGAIN)
    src = prepare(top, "main", base, [first, second], tmp_path / "cache")
    assert (src.path / "a.txt").read_text() == "one\n2\nTHREE\n"
    assert [d.name for d in src.applied_diffs] == ["00-1.diff", "01-2.diff"]
    with pytest.raises(PatchFailed):  # the order matters: reversed, the second no longer applies
        prepare(top, "main", base, [second, first], tmp_path / "cache")


def test_commit_and_range_patches(repo: Path, tmp_path: Path) -> None:
    top = repo.resolve()
    c1 = head(repo, "main~2")
    # c2's change (three -> ...) and c3's change, applied on c1, rebuild main's tree.
    src = prepare(top, c1, c1, [PatchSpec(commit="main~1"), PatchSpec(range="main~1..main")], tmp_path / "cache")
    assert (src.path / "a.txt").read_text() == "one\nTWO\nthree\n"
    assert (src.path / "sub" / "c.py").read_text() == "x = 1\n"
    assert g(src.path, "diff", "--stat", "main", "HEAD") == ""
    names = [p.name for p in src.record.patches]
    assert names == ["commit:main~1", "range:main~1..main"]
    assert [d.name for d in src.applied_diffs] == ["00-commit_main_1.diff", "01-range_main_1..main.diff"]
    text = patch_text(top, PatchSpec(commit="main~1"))
    assert "-two\n+TWO\n" in text and src.record.patches[0].sha256 == sha256(text.encode())


def test_root_commit_as_patch(repo: Path, tmp_path: Path) -> None:
    text = patch_text(repo, PatchSpec(commit="main~2"))
    assert "+++ b/gone.txt" in text and "--- /dev/null" in text


def test_patch_that_does_not_apply(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    cache = tmp_path / "cache"
    good, bad = diff_file(tmp_path, "good.diff", FIX_A), diff_file(tmp_path, "bad.diff", BAD)
    before = snapshot(repo)
    with pytest.raises(PatchFailed) as e:
        prepare(top, "main", base, [good, bad], cache)
    assert e.value.patch == "bad.diff"
    assert "patch failed" in e.value.git_message and "a.txt" in e.value.git_message
    assert cached_entries(cache) == []
    assert worktrees(repo) == [str(top)]
    assert snapshot(repo) == before


def test_user_checkout_untouched(repo: Path, tmp_path: Path) -> None:
    before = snapshot(repo)
    top, base = resolve_repo(repo, "main")
    cache = tmp_path / "cache"
    src = prepare(top, "main", base, [diff_file(tmp_path, "n.diff", NEW_FILE)], cache)
    prepare(top, "main", base, [diff_file(tmp_path, "n.diff", NEW_FILE)], cache)
    prepare(top, "other", head(repo, "other"), [PatchSpec(commit="main")], cache)
    assert (src.path / "a.txt").read_text() == "one\nTWO\nthree\n"  # committed, not the dirty change
    assert not (src.path / "untracked.txt").exists() and not (repo / "new.txt").exists()
    assert snapshot(repo) == before
    assert len(remove_worktrees(top, cache)) == 2
    assert snapshot(repo) == before
    assert before["a"] == b"DIRTY uncommitted change\n" and "stashed" in g(repo, "stash", "show", "-p")


def test_empty_patch_list_gets_a_worktree_at_base(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "other")
    src = prepare(top, "other", base, [], tmp_path / "cache")
    assert head(src.path) == base and src.record.patches == () and src.record.touched == {}
    assert (src.path / "a.txt").read_text() == "one\nTWO\nthree\n" and not (src.path / "sub").exists()
    assert src.applied_diffs == ()


def test_second_prepare_reuses(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix.diff", FIX_A)
    a = prepare(top, "main", base, [spec], tmp_path / "cache")
    (a.path / "build-artifact.so").write_bytes(b"untracked output of a trial")
    b = prepare(top, "main", base, [spec], tmp_path / "cache")
    assert (a.reused, b.reused) == (False, True)
    assert b.path == a.path and b.record == a.record and b.applied_diffs == a.applied_diffs
    assert (b.path / "build-artifact.so").exists()  # reused as is, not rebuilt


def test_reuse_under_another_name_adds_its_diff_names(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    a = prepare(top, "main", base, [diff_file(tmp_path, "x.diff", FIX_A)], tmp_path / "cache")
    b = prepare(top, "main", base, [diff_file(tmp_path, "y.diff", FIX_A)], tmp_path / "cache")
    assert b.reused and b.path == a.path and [p.name for p in b.record.patches] == ["y.diff"]
    assert [d.name for d in b.applied_diffs] == ["00-y.diff"] and b.applied_diffs[0].read_text() == FIX_A


def test_incomplete_worktree_is_rebuilt(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix.diff", FIX_A)
    cache = tmp_path / "cache"
    a = prepare(top, "main", base, [spec], cache)
    # A crash before the marker: registered worktree, half-applied state, no marker.
    (cache / f"{a.path.name}.done.json").unlink()
    (a.path / "a.txt").write_text("half applied\n")
    (a.path / "junk").write_text("x")
    b = prepare(top, "main", base, [spec], cache)
    assert not b.reused and b.path == a.path and not (b.path / "junk").exists()
    assert (b.path / "a.txt").read_text() == "one\nTWO\nTHREE\n"
    assert worktrees(repo).count(str(b.path)) == 1


def test_unregistered_leftover_directory_is_rebuilt(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix.diff", FIX_A)
    leftover = tmp_path / "cache" / f"{base[:12]}-{patch_set_hash(base, [FIX_A])}"
    leftover.mkdir(parents=True)
    (leftover / "a.txt").write_text("garbage\n")
    src = prepare(top, "main", base, [spec], tmp_path / "cache")
    assert not src.reused and (src.path / "a.txt").read_text() == "one\nTWO\nTHREE\n"


def test_worktree_deleted_behind_our_back_is_rebuilt(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix.diff", FIX_A)
    a = prepare(top, "main", base, [spec], tmp_path / "cache")
    subprocess.run(["rm", "-rf", str(a.path)], check=True, timeout=60)
    b = prepare(top, "main", base, [spec], tmp_path / "cache")
    assert not b.reused and (b.path / "a.txt").read_text() == "one\nTWO\nTHREE\n"


def test_modified_cached_worktree_is_an_error_not_a_silent_rebuild(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix.diff", FIX_A)
    a = prepare(top, "main", base, [spec], tmp_path / "cache")
    (a.path / "b.txt").write_text("edited by hand\n")
    with pytest.raises(SourceError, match="b.txt"):
        prepare(top, "main", base, [spec], tmp_path / "cache")
    assert (a.path / "b.txt").read_text() == "edited by hand\n"


def test_touched_hashes(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    patches = [diff_file(tmp_path, n, t) for n, t in (("1.diff", FIX_A), ("2.diff", NEW_FILE), ("3.diff", DELETE))]
    src = prepare(top, "main", base, patches, tmp_path / "cache")
    at_base = {p: subprocess.run(["git", "-C", str(repo), "show", f"{base}:{p}"], capture_output=True,
                                 check=True, timeout=60).stdout for p in ("a.txt", "gone.txt")}
    assert src.record.touched == {
        "a.txt": (sha256(at_base["a.txt"]), sha256((src.path / "a.txt").read_bytes())),
        "gone.txt": (sha256(b"to be deleted\n"), None),
        "new.txt": (None, sha256(b"brand new\n")),
    }
    assert sha256(at_base["a.txt"]) == sha256(b"one\nTWO\nthree\n")


def test_a_file_changed_and_restored_is_still_touched(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    undo = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n TWO\n-THREE\n+three\n"
    src = prepare(top, "main", base, [diff_file(tmp_path, "1.diff", FIX_A), diff_file(tmp_path, "2.diff", undo)],
                  tmp_path / "cache")
    h = sha256(b"one\nTWO\nthree\n")
    assert src.record.touched == {"a.txt": (h, h)}


def test_lock_wait_is_bounded(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    cache = tmp_path / "cache"
    cache.mkdir()
    lock = cache / f"{base[:12]}-{patch_set_hash(base, [])}.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(SourceError, match="still locked"):
            prepare(top, "main", base, [], cache, lock_timeout_s=0.3)
    assert prepare(top, "main", base, [], cache).path.is_dir()


def _prepare_in_child(top: str, base: str, diff: str, cache: str, start: object, out: object) -> None:
    start.wait(30)  # type: ignore[attr-defined]
    try:
        src: PreparedSource = prepare(Path(top), "main", base, [PatchSpec(diff=Path(diff))], Path(cache))
        out.put((str(src.path), src.reused, (src.path / "a.txt").read_text()))  # type: ignore[attr-defined]
    except Exception as e:  # reported to the parent, which fails the test
        out.put(("error", repr(e), ""))  # type: ignore[attr-defined]


def test_concurrent_prepare_of_one_key(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    spec = diff_file(tmp_path, "fix.diff", FIX_A)
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    args = (str(top), base, str(spec.diff), str(tmp_path / "cache"), start, out)
    procs = [ctx.Process(target=_prepare_in_child, args=args) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] != "error" for r in results), results
    assert results[0][0] == results[1][0] and [r[1] for r in results] == [False, True]
    assert all(r[2] == "one\nTWO\nTHREE\n" for r in results)
    assert worktrees(repo) == [str(top), results[0][0]]


def test_remove_worktrees_only_removes_ours(repo: Path, tmp_path: Path) -> None:
    top, base = resolve_repo(repo, "main")
    cache = tmp_path / "cache"
    mine = prepare(top, "main", base, [diff_file(tmp_path, "fix.diff", FIX_A)], cache)
    g(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "users-own"), "main")
    assert remove_worktrees(top, cache) == [mine.path]
    assert not mine.path.exists() and cached_entries(cache) == []
    assert worktrees(repo) == [str(top), str((tmp_path / "users-own").resolve())]
    assert remove_worktrees(top, tmp_path / "never-made") == []
