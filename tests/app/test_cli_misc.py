"""classify, harness.load, the command line's words and messages: through the real entry points."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import harness
from harness.app.config import SETTINGS_KEYS
from harness.cli.words import normalize
from harness.core.schema import MATRIX_KEYS
from tests.app.conftest import REPO, fixture_target, run_cli, write_matrix

HEAVY = ("scipy", "statsmodels", "matplotlib", "mlflow", "pandas")

KEYS = {"file", "outcome", "first_error_line", "failing_bs", "failing_rank", "shapes_captured", "capture_s",
        "signature"}


def test_classify_json_one_object_per_file(tmp_path):
    crash = tmp_path / "crash.log"
    crash.write_text("INFO 11-29 10:00:00 [core.py:1] starting\n"
                     "(Worker_TP1 pid=7) ERROR 11-29 10:00:01 [multiproc_executor.py:1] "
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    ready = tmp_path / "ready.log"
    ready.write_text("INFO:     Application startup complete.\n")
    proc = run_cli("classify", "--json", str(crash), str(ready), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x["file"] for x in lines] == [str(crash), str(ready)]
    assert all(KEYS <= set(x) for x in lines)
    assert lines[0]["outcome"] == "IMA" and lines[0]["failing_rank"] == "TP1"
    assert lines[1]["outcome"] == "READY" and lines[1]["signature"] is None


def test_classify_missing_file_exits_2(tmp_path):
    proc = run_cli("classify", str(tmp_path / "nope.log"), cwd=tmp_path)
    assert proc.returncode == 2 and "no such file" in proc.stdout


def test_load_returns_one_row_per_trial(project):
    write_matrix(project, "small", {"target": fixture_target("ready"), "repeats": 3,
                                    "axes": {"a": {"x": {}, "y": {"env": {"Y": "1"}}}}})
    assert run_cli("run", "matrix=small", "tracking.enabled=false", cwd=project).returncode == 0
    df = harness.load("small", runs_dir=str(project / "runs"))
    assert len(df) == 6 and set(df["outcome"]) == {"READY"}
    assert sorted(df["level.a"]) == ["x", "x", "x", "y", "y", "y"]
    assert df.groupby("label")["ready"].sum().to_dict() == {"A": 3, "B": 3}


def test_classify_a_ready_log_names_its_ready_line_not_an_error(tmp_path):
    log = REPO / "tests" / "data" / "logs" / "demo_ready.log"
    ready = "INFO:     Application startup complete."
    info = json.loads(run_cli("classify", "--json", str(log), cwd=tmp_path).stdout)
    assert info["outcome"] == "READY" and info["first_error_line"] is None and info["ready_line"] == ready
    text = run_cli("classify", str(log), cwd=tmp_path).stdout
    assert f"ready_line: {ready}" in text and "first_error_line" not in text


def test_a_misspelled_key_is_answered_with_the_key_it_resembles(project):
    path = write_matrix(project, "m", {"target": fixture_target("ready")})
    proc = run_cli("run", "matrix=m", "repeat=3", cwd=project)
    assert proc.returncode == 2 and not (project / "runs").exists()
    assert f"{path}: repeat: unknown key 'repeat'" in proc.stderr and "did you mean repeats?" in proc.stderr
    assert "+repeat" not in proc.stderr
    nested = run_cli("run", "matrix=m", "target.startup_timeout=5", cwd=project)
    assert nested.returncode == 2 and "did you mean target.startup_timeout_s?" in nested.stderr


def test_matrix_is_also_an_option_and_other_options_say_how_to_write_them(project):
    write_matrix(project, "m", {"target": fixture_target("ready"), "repeats": 2})
    for words in (["--matrix", "m"], ["--matrix=m"]):
        proc = run_cli("run", *words, "dry_run=true", cwd=project)
        assert proc.returncode == 0 and "2 trials; nothing launched" in proc.stdout, proc.stderr
    proc = run_cli("run", "--matrix", "m", "--repeats", "3", cwd=project)
    assert proc.returncode == 2 and "write repeats=3 instead" in proc.stderr and "unrecognized" not in proc.stderr
    flag = run_cli("run", "matrix=m", "--dry-run", cwd=project)
    assert flag.returncode == 2 and "write dry_run=true instead" in flag.stderr
    assert not (project / "runs").exists()


def test_help_lists_the_keys_with_an_example(tmp_path):
    run = run_cli("run", "--help", cwd=tmp_path)
    assert run.returncode == 0
    listed = {line.split()[0] for line in run.stdout.splitlines() if line.startswith("  ") and line.split()}
    assert {"matrix", *SETTINGS_KEYS, *MATRIX_KEYS} <= listed
    assert "examples:" in run.stdout and "harness run matrix=demo" in run.stdout
    report = run_cli("report", "--help", cwd=tmp_path)
    assert "format" in report.stdout and "terminal | md | html | csv | json" in report.stdout


def test_ui_takes_key_value_words_and_its_options_alike(tmp_path):
    assert normalize(["ui", "--port", "5001", "--runs-dir", "x"]) == normalize(["ui", "port=5001", "runs_dir=x"]) \
        == normalize(["ui", "--port=5001", "--runs_dir=x"]) == ["ui", "port=5001", "runs_dir=x"]
    typo = run_cli("ui", "prot=5001", cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean port?" in typo.stderr
    bad = run_cli("ui", "--port", "many", cwd=tmp_path)
    assert bad.returncode == 2 and "expected a port number" in bad.stderr


def _modules_after(args: list[str], cwd) -> list[str]:
    code = ("import sys; from harness.cli.main import main; rc = main(sys.argv[1:]); "
            f"print(rc, sorted({{m for m in sys.modules if m.split('.')[0] in {HEAVY!r}}}))")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    rc, _, modules = proc.stdout.strip().splitlines()[-1].partition(" ")
    return [rc, modules]


def test_bad_input_and_a_dry_run_load_no_heavy_library(project):
    # What makes a typo take seconds: scipy, statsmodels, pandas, matplotlib and mlflow load on use only.
    write_matrix(project, "m", {"target": fixture_target("ready"), "axes": {"a": {"x": {}, "y": {}}}})
    assert _modules_after(["run", "matrix=m", "repeat=3"], project) == ["2", "[]"]
    assert _modules_after(["run", "matrix=m", "dry_run=true"], project) == ["0", "[]"]
    assert _modules_after(["report", "matrix=m", "format=pdf"], project) == ["2", "[]"]


def test_an_error_message_is_never_hard_wrapped(project):
    deep = project / ("long-folder-name-" * 4)
    for i in range(3):
        deep = deep / f"{'nested' * 6}-{i}"
    deep.mkdir(parents=True)
    path = deep / "wide.yaml"
    path.write_text("target: {engine: command, command: [srv]}\nrepeets: 3\n")
    assert len(str(path)) > 200
    proc = run_cli("run", f"matrix={path}", cwd=project)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "did you mean repeats?" in lines[0], proc.stderr
