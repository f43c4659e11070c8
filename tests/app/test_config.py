"""Hydra composition: matrix lookup order, overrides, YAML 1.2 booleans, no output folders."""
from __future__ import annotations

import os

import pytest

from harness.app.config import available_matrices, load
from harness.errors import ConfigError
from tests.app.conftest import fixture_target, write_matrix


def test_cwd_matrices_shadow_the_packaged_ones(project):
    path = write_matrix(project, "demo", {"target": fixture_target("ready"), "repeats": 2})
    matrix, _ = load(["matrix=demo"], cwd=project)
    assert matrix.file == str(path) and matrix.repeats == 2
    assert available_matrices(project)["demo"] == path


def test_overrides_reach_any_key(project):
    write_matrix(project, "m", {"target": fixture_target("ready", env={"A": "1"}),
                                "axes": {"fix": {"off": {}, "on": {}}}})
    matrix, settings = load(["matrix=m", "repeats=3", "target.env.FOO=1", "axes.fix.on.env.X=y", "target.tp=2",
                             "axes.fix.on.tp=4", "target.port=8100", "schedule=blocked", "runs_dir=elsewhere",
                             "tracking.enabled=false", "target.ready.log_marker=ready_now"], cwd=project)
    assert matrix.repeats == 3 and matrix.schedule.value == "blocked"
    assert matrix.target.env == {"A": "1", "FOO": "1"} and matrix.target.tp == 2 and matrix.target.port == 8100
    on = matrix.axes[0].level("on")
    assert on.env == {"X": "y"} and on.tp == 4
    assert matrix.target.ready.log_marker == "ready_now" and matrix.target.ready.http_path == "/health"
    assert str(settings.runs_dir) == "elsewhere" and settings.tracking_enabled is False
    assert not (project / "outputs").exists() and not (project / ".hydra").exists()
    assert os.listdir(project) == ["matrices"]


def test_on_off_stay_level_names(project):
    (project / "matrices" / "m.yaml").write_text(
        "target: {engine: command, command: [srv]}\naxes:\n  fix: {off: {}, on: {env: {X: 1}}}\n"
        "baseline: {fix: off}\n")
    matrix, _ = load(["matrix=m"], cwd=project)
    assert [lv.name for lv in matrix.axes[0].levels] == ["off", "on"] and matrix.baseline == {"fix": "off"}


def test_command_engine_needs_a_command(project):
    write_matrix(project, "m", {"target": {"engine": "command"}})
    with pytest.raises(ConfigError) as exc:
        load(["matrix=m"], cwd=project)
    assert exc.value.key == "target.command"


def test_local_paths_are_relative_to_the_matrix_file(project, tmp_path):
    write_matrix(project, "m", {"target": fixture_target("ready", python="../venv/bin/python", model="./tiny"),
                                "axes": {"m": {"hub": {"model": "org/name"}, "home": {"model": "~/models/x"}}}})
    matrix, _ = load(["matrix=m"], cwd=tmp_path)
    assert matrix.target.python == str(project / "venv" / "bin" / "python")
    assert matrix.target.model == str(project / "matrices" / "tiny")
    hub, home = matrix.axes[0].levels
    assert hub.model == "org/name" and home.model.startswith("/") and home.model.endswith("/models/x")


def test_a_venv_python_symlink_is_not_followed(project):
    venv_bin = project / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to("/usr/bin/env")
    write_matrix(project, "m", {"target": fixture_target("ready", python="../venv/bin/python")})
    matrix, _ = load(["matrix=m"], cwd=project)
    assert matrix.target.python == str(venv_bin / "python")


@pytest.mark.parametrize(("override", "key", "hint"), [
    ("repeat=3", "repeat", "did you mean repeats?"),
    ("target.startup_timeout=5", "target.startup_timeout", "did you mean target.startup_timeout_s?"),
    ("target.ready.http=/h", "target.ready.http", "did you mean target.ready.http_path?"),
    ("axes.fix.of.env.X=1", "axes.fix.of", "did you mean axes.fix.off?"),
    ("axes.fix.on.patchs=[]", "axes.fix.on.patchs", "did you mean axes.fix.on.patches?"),
    ("stats.alpah=0.1", "stats.alpah", "did you mean stats.alpha?"),
    ("tracking.enable=false", "tracking.enable", "did you mean tracking.enabled?"),
    ("dryrun=true", "dryrun", "did you mean dry_run?"),
])
def test_a_misspelled_override_names_the_closest_key_at_its_level(project, override, key, hint):
    path = write_matrix(project, "m", {"target": fixture_target("ready"), "axes": {"fix": {"off": {}, "on": {}}}})
    with pytest.raises(ConfigError) as exc:
        load(["matrix=m", override], cwd=project)
    assert exc.value.key == key and exc.value.file == str(path)
    assert hint in exc.value.message and "+" not in exc.value.message
    assert f"(in the override {override})" in exc.value.message


def test_an_override_unlike_any_key_lists_the_valid_ones(project):
    write_matrix(project, "m", {"target": fixture_target("ready")})
    with pytest.raises(ConfigError) as exc:
        load(["matrix=m", "target.zzzz=1"], cwd=project)
    assert "did you mean" not in exc.value.message and "valid keys under target: engine, command" in exc.value.message
    with pytest.raises(ConfigError) as exc:
        load(["matrix=m", "repeats"], cwd=project)
    assert "expected key=value" in exc.value.message


def test_a_misspelled_key_in_the_file_names_the_closest_key(project):
    path = write_matrix(project, "m", {"target": fixture_target("ready"), "repeets": 3})
    with pytest.raises(ConfigError) as exc:
        load(["matrix=m"], cwd=project)
    assert exc.value.key == "repeets" and exc.value.file == str(path) and "did you mean repeats?" in exc.value.message


def test_a_misspelled_matrix_word_is_named(project):
    write_matrix(project, "m", {"target": fixture_target("ready")})
    with pytest.raises(ConfigError) as exc:
        load(["matrx=m"], cwd=project)
    assert exc.value.key == "matrix" and "'matrx': did you mean matrix?" in exc.value.message
