"""Overlays of an installed package: real copies, real git, the engine's real interpreter."""
from __future__ import annotations

import os
import sys

import pytest

from harness.adapters.source.git import PatchSpec
from harness.adapters.source.installed import find_package
from harness.adapters.source.overlay import fingerprint, prepare_overlay, version_of
from harness.errors import ConfigError, PatchFailed
from tests.adapters.source.conftest import CORE


def test_overlay_copies_links_compiled_files_and_applies_the_package_part(site, fix_diff, tmp_path):
    pkg = site / "fakeng"
    fp = fingerprint(pkg)
    prep = prepare_overlay(pkg, "fakeng", fp, [PatchSpec(diff=fix_diff)], tmp_path / "ov")
    copy = prep.path / "fakeng"
    assert 'MODE = "ready"' in (copy / "core.py").read_text() and (copy / "sub" / "x.py").read_text() == "X = 1\n"
    assert (copy / "_C.abi3.so").is_symlink() and os.readlink(copy / "_C.abi3.so") == str(pkg / "_C.abi3.so")
    assert not (copy / "__pycache__").exists() and not (prep.path / "test").exists()
    assert prep.skipped == {"fix.diff": ("test/test_core.py",)}
    assert set(prep.record.touched) == {"fakeng/core.py"} and prep.record.ref == "fakeng 1.2"
    assert prep.record.base_sha == fp and prep.record.repo == str(pkg) and not prep.reused
    assert (pkg / "core.py").read_text() == CORE, "the installed package must not change"
    again = prepare_overlay(pkg, "fakeng", fp, [PatchSpec(diff=fix_diff)], tmp_path / "ov")
    assert again.reused and again.path == prep.path and again.record.touched == prep.record.touched
    assert next(prep.path.parent.glob("*.patches/00-fix.overlay.diff")).read_text().count("diff --git") == 1


def test_a_patch_that_fails_or_misses_the_package_leaves_nothing(site, tmp_path):
    pkg = site / "fakeng"
    bad = tmp_path / "bad.diff"
    bad.write_text("diff --git a/fakeng/core.py b/fakeng/core.py\n--- a/fakeng/core.py\n+++ b/fakeng/core.py\n"
                   "@@ -1 +1 @@\n-MODE = \"nope\"\n+MODE = \"x\"\n")
    with pytest.raises(PatchFailed, match="core.py"):
        prepare_overlay(pkg, "fakeng", fingerprint(pkg), [PatchSpec(diff=bad)], tmp_path / "ov")
    other = tmp_path / "other.diff"
    other.write_text("diff --git a/docs/x.md b/docs/x.md\n--- a/docs/x.md\n+++ b/docs/x.md\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(PatchFailed, match="changes no file of the package 'fakeng'"):
        prepare_overlay(pkg, "fakeng", fingerprint(pkg), [PatchSpec(diff=other)], tmp_path / "ov")
    assert [p.name for p in (tmp_path / "ov").iterdir() if not p.name.endswith(".lock")] == []


def test_fingerprint_follows_the_installed_files_but_not_bytecode(site):
    pkg = site / "fakeng"
    fp = fingerprint(pkg)
    (pkg / "__pycache__" / "more.pyc").write_bytes(b"x")
    assert fingerprint(pkg) == fp
    (pkg / "core.py").write_text(CORE + "# edited in place\n")
    assert fingerprint(pkg) != fp
    assert version_of(pkg, "fakeng") == "1.2" and version_of(pkg, "other") is None


def test_find_package_asks_the_engines_interpreter(site):
    env = {**os.environ, "PYTHONPATH": str(site)}
    assert find_package(sys.executable, "fakeng", env) == (site / "fakeng").resolve()
    with pytest.raises(ConfigError, match="finds no package 'nopkg_xyz'") as e:
        find_package(sys.executable, "nopkg_xyz", env, file="m.yaml")
    assert e.value.key == "target.source.package"
    (site / "single.py").write_text("")
    with pytest.raises(ConfigError, match="single module"):
        find_package(sys.executable, "single", env)
    with pytest.raises(ConfigError, match="cannot ask"):
        find_package(str(site / "no-python"), "fakeng", env)


def test_symlinks_of_the_package_stay_valid_in_the_copy(site, tmp_path):
    pkg = site / "fakeng"
    (site / "shared").mkdir()
    (site / "shared" / "data.json").write_text("{}")
    os.symlink("../shared", pkg / "outside")       # relative, out of the package: would dangle if copied as is
    os.symlink("core.py", pkg / "alias.py")         # relative, inside: works as written
    prep = prepare_overlay(pkg, "fakeng", fingerprint(pkg), [], tmp_path / "ov")
    copy = prep.path / "fakeng"
    assert (copy / "outside" / "data.json").read_text() == "{}" and os.path.isabs(os.readlink(copy / "outside"))
    assert os.readlink(copy / "alias.py") == "core.py" and (copy / "alias.py").read_text() == CORE
