"""Every kind of bad input: one clear message naming file and key, exit code 2, nothing launched."""
from __future__ import annotations

import pytest

from tests.app.conftest import fixture_target, run_cli, write_matrix


def check(project, args, *words):
    proc = run_cli("run", *args, cwd=project)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr
    assert not (project / "runs").exists(), "nothing may be launched or written"
    assert "Traceback" not in proc.stderr
    return proc.stderr


def test_unknown_matrix_lists_available(project):
    write_matrix(project, "mine", {"target": fixture_target("ready")})
    check(project, ["matrix=nope"], "unknown matrix 'nope'", "mine", "demo")


def test_unknown_key_lists_valid_ones(project):
    m = write_matrix(project, "m", {"target": fixture_target("ready"), "repets": 3})
    check(project, ["matrix=m"], str(m), "repets", "valid keys", "repeats")


def test_unknown_key_in_override(project):
    write_matrix(project, "m", {"target": fixture_target("ready")})
    check(project, ["matrix=m", "repets=3"], "repets", "repeats")


def test_wrong_type(project):
    write_matrix(project, "m", {"target": fixture_target("ready", tp="eight")})
    check(project, ["matrix=m"], "target.tp", "expected an integer")


def test_axis_level_not_a_mapping(project):
    write_matrix(project, "m", {"target": fixture_target("ready"), "axes": {"fix": {"on": ["x.diff"]}}})
    check(project, ["matrix=m"], "axes.fix.on", "expected a mapping")


@pytest.mark.parametrize("key, entry, words", [
    ("include", {"fx": "on"}, ["include[0].fx", "no axis 'fx'"]),
    ("exclude", {"fix": "maybe"}, ["exclude[0].fix", "no level 'maybe'", "levels: off, on"]),
])
def test_include_exclude_name_missing_axis_or_level(project, key, entry, words):
    write_matrix(project, "m", {"target": fixture_target("ready"), "axes": {"fix": {"off": {}, "on": {}}},
                                key: [entry]})
    check(project, ["matrix=m"], *words)


def test_patch_file_missing(project, source_repo):
    write_matrix(project, "m", {"target": {**fixture_target("ready"), "source": {"repo": str(source_repo)}},
                                "axes": {"fix": {"off": {}, "on": {"patches": ["nope.diff"]}}}})
    check(project, ["matrix=m"], "axes.fix.on.patches[0]", "nope.diff")


def test_repo_not_git(project, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    write_matrix(project, "m", {"target": {**fixture_target("ready"), "source": {"repo": str(plain)}}})
    check(project, ["matrix=m"], "target.source.repo", str(plain))


def test_ref_does_not_resolve(project, source_repo):
    write_matrix(project, "m", {"target": {**fixture_target("ready"), "source": {"repo": str(source_repo),
                                                                                   "ref": "v9.9-nope"}}})
    check(project, ["matrix=m"], "target.source.ref", "v9.9-nope")


def test_unknown_engine(project):
    write_matrix(project, "m", {"target": fixture_target("ready", engine="trtllm")})
    check(project, ["matrix=m"], "target.engine", "unknown engine 'trtllm'", "command")


def test_port_not_a_number(project):
    write_matrix(project, "m", {"target": fixture_target("ready", port="http")})
    check(project, ["matrix=m"], "target.port", "expected an integer")


def test_port_override_not_a_number(project):
    write_matrix(project, "m", {"target": fixture_target("ready")})
    check(project, ["matrix=m", "target.port=abc"], "target.port", "expected an integer")


@pytest.mark.parametrize("value", ["0", "-1"])
def test_repeats_below_one(project, value):
    write_matrix(project, "m", {"target": fixture_target("ready")})
    check(project, ["matrix=m", f"repeats={value}"], "repeats", ">= 1")


def test_yaml_syntax_error(project):
    (project / "matrices" / "m.yaml").write_text("target: {engine: command\n")
    check(project, ["matrix=m"], "m.yaml", "not valid YAML")


def test_an_error_naming_a_long_path_keeps_path_and_message_on_one_line(tmp_path):
    # A console that wraps at its width would split the path (or the message) across lines, and
    # whether a word is cut depends on how long the temp folder's name happens to be.
    deep = tmp_path
    for i in range(4):
        deep = deep / f"a-folder-with-a-rather-long-name-{i}-{'x' * 20}"
    (deep / "matrices").mkdir(parents=True)
    path = deep / "matrices" / "m.yaml"
    path.write_text("target: {engine: command\n")
    assert len(str(path)) > 200
    err = check(deep, ["matrix=m"])
    assert any(str(path) in line and "not valid YAML" in line for line in err.splitlines()), err


def test_no_matrix_given(project):
    check(project, [], "matrix=NAME")


def test_python_that_does_not_exist(project):
    write_matrix(project, "m", {"target": fixture_target("ready", python="/nonexistent/bin/python")})
    check(project, ["matrix=m"], "target.python", "/nonexistent/bin/python")


def test_command_program_that_does_not_exist(project):
    write_matrix(project, "m", {"target": {**fixture_target("ready"), "command": ["no-such-server-xyz", "--p"]}})
    check(project, ["matrix=m"], "target.command[0]", "no-such-server-xyz")


def test_engine_flag_spelled_for_another_engine(project):
    write_matrix(project, "m", {"target": {"engine": "vllm", "model": "m", "args": ["--tp", "2"]}})
    err = check(project, ["matrix=m"], "target.args", "--tp")
    assert "tp" in err


def test_more_gpus_than_visible(project, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    write_matrix(project, "m", {"target": {"engine": "vllm", "model": "m", "tp": 8}})
    check(project, ["matrix=m"], "8")


AXES = {"fix": {"off": {}, "on": {}}}


@pytest.mark.parametrize("extra, args, words", [
    ({"baseline": "fix=maybe"}, [], ["baseline", "no arm 'fix=maybe'", "A (fix=off)", "B (fix=on)"]),
    ({"baseline": "C"}, [], ["baseline", "no arm 'C'"]),
    ({"baseline": {"fix": "on"}, "exclude": [{"fix": "on"}]}, [], ["baseline", "include/exclude leave out", "fix=on"]),
    ({"repeats": "auto"}, [], ["stats.max_repeats", "repeats: auto needs stats.max_repeats"]),
    ({}, ["repeats=auto"], ["stats.max_repeats", "repeats: auto needs"]),
    ({"repeats": "lots"}, [], ["repeats", "expected an integer >= 1 or auto"]),
    ({"stats": {"alpha": 0.5}}, [], ["stats.alpha", "a number in (0, 0.5)", "0.5"]),
    ({}, ["stats.alpha=0"], ["stats.alpha", "a number in (0, 0.5)"]),
    ({"stats": {"margin": 0}}, [], ["stats.margin", "expected a margin on rates"]),
    ({}, ["stats.margin=-0.1"], ["stats.margin", "-0.1"]),
    ({"stats": {"compare": "some"}}, [], ["stats.compare", "valid: baseline, all"]),
    ({"stats": {"test": "chi2"}}, [], ["stats.test", "valid: fisher, barnard"]),
    ({"stats": {"max_fail_rate": 1.5}}, [], ["stats.max_fail_rate"]),
    ({"stats": {"batch": 0}}, [], ["stats.batch", ">= 1"]),
    ({"stats": {"alhpa": 0.1}}, [], ["stats.alhpa", "valid keys", "alpha"]),
])
def test_stats_and_baseline_errors(project, extra, args, words):
    m = write_matrix(project, "m", {"target": fixture_target("ready"), "axes": AXES, **extra})
    check(project, ["matrix=m", *args], str(m), *words)


def test_report_format_unknown(project):
    write_matrix(project, "m", {"target": fixture_target("ready")})
    proc = run_cli("report", "matrix=m", "format=pdf", cwd=project)
    assert proc.returncode == 2 and "unknown report format 'pdf'" in proc.stderr and "html" in proc.stderr
