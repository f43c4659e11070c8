"""The runtime import check against a real interpreter."""
from __future__ import annotations

import os
import sys

import pytest

from harness.adapters.source.git import PatchSpec
from harness.adapters.source.importcheck import ImportMismatch, check_imports, module_name
from harness.adapters.source.overlay import fingerprint, prepare_overlay


def test_module_names_come_from_regular_packages(tmp_path):
    (tmp_path / "python" / "pkg" / "sub").mkdir(parents=True)
    for f in ("python/pkg/__init__.py", "python/pkg/sub/__init__.py", "python/pkg/sub/m.py", "python/top.py",
              "python/pkg/sub/bad-name.py", "python/pkg/data.json"):
        (tmp_path / f).write_text("")
    assert module_name(tmp_path, "python/pkg/sub/m.py") == "pkg.sub.m"
    assert module_name(tmp_path, "python/pkg/sub/__init__.py") == "pkg.sub"
    assert module_name(tmp_path, "python/top.py") is None          # not inside a package
    assert module_name(tmp_path, "python/pkg/sub/bad-name.py") is None
    assert module_name(tmp_path, "python/pkg/data.json") is None


def _overlay(site, fix_diff, tmp_path):
    pkg = site / "fakeng"
    return prepare_overlay(pkg, "fakeng", fingerprint(pkg), [PatchSpec(diff=fix_diff)], tmp_path / "ov")


def test_the_overlay_first_on_pythonpath_passes(site, fix_diff, tmp_path):
    prep = _overlay(site, fix_diff, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(prep.path), str(site)])}
    check = check_imports(sys.executable, env, tmp_path, prep.path, prep.record.touched)
    assert check.mismatches == () and check.modules["fakeng.core"]["ok"] is True
    assert check.modules["fakeng.core"]["resolved"] == str(prep.path / "fakeng" / "core.py")


def test_another_copy_first_is_a_mismatch_naming_where_it_resolved(site, fix_diff, tmp_path):
    prep = _overlay(site, fix_diff, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(prep.path)])}
    check = check_imports(sys.executable, env, tmp_path, prep.path, prep.record.touched)
    assert check.modules["fakeng.core"]["ok"] is False
    assert f"fakeng.core resolves to {site / 'fakeng' / 'core.py'}" in check.detail()


def test_a_module_that_resolves_nowhere_is_not_held_against_the_arm(site, fix_diff, tmp_path):
    prep = _overlay(site, fix_diff, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = check_imports(sys.executable, env, tmp_path, prep.path, prep.record.touched)
    assert check.mismatches == () and check.modules["fakeng.core"]["ok"] is None


def test_a_check_that_cannot_run_proves_nothing(site, fix_diff, tmp_path):
    prep = _overlay(site, fix_diff, tmp_path)
    with pytest.raises(ImportMismatch, match="cannot check"):
        check_imports(str(tmp_path / "no-python"), dict(os.environ), tmp_path, prep.path, prep.record.touched)


def test_a_startup_hook_that_puts_another_copy_first_is_caught(site, fix_diff, tmp_path):
    """What a .pth line or a sitecustomize does (old easy-install, some editable installs):
    PYTHONPATH names the overlay first, yet another copy wins."""
    prep = _overlay(site, fix_diff, tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(f"import sys; sys.path.insert(0, {str(site)!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(prep.path), str(hook)])}
    check = check_imports(sys.executable, env, tmp_path, prep.path, prep.record.touched)
    assert check.mismatches and str(site / "fakeng" / "core.py") in check.mismatches[0]
