"""Helpers for app tests: matrices in a temporary project folder, a git source repo."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FIXTURE_SERVER = REPO / "tests" / "fixtures" / "fixture_server.py"
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working folder with matrices/ and runs/; the CWD for the test."""
    (tmp_path / "matrices").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_matrix(project: Path, name: str, data: dict) -> Path:
    path = project / "matrices" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def fixture_target(mode: str, **extra) -> dict:
    return {"engine": "command",
            "command": ["{python}", str(FIXTURE_SERVER), "--mode", mode, "--host", "{host}", "--port", "{port}"],
            "startup_timeout_s": 20, "quiet_timeout_s": 10, "fatal_grace_s": 0.5, "stop_timeout_s": 3, **extra}


@pytest.fixture
def source_repo(tmp_path):
    """A git repository holding a tiny server module and a fix diff for it."""
    repo = tmp_path / "src"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mode.py").write_text('MODE = "crash"\n')
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def run_cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
