"""Helpers for the source adapter tests: a fake installed engine package and git repositories."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
ID = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main"]


def g(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *ID, *args], check=True, capture_output=True, text=True, env=ENV,
                          timeout=60).stdout


def commit_all(repo: Path, msg: str) -> str:
    g(repo, "add", "-A")
    g(repo, "commit", "-q", "-m", msg)
    return g(repo, "rev-parse", "HEAD").strip()


CORE = 'MODE = "crash"\n\n\ndef mode():\n    return MODE\n'
FIX = """diff --git a/python/fakeng/core.py b/python/fakeng/core.py
--- a/python/fakeng/core.py
+++ b/python/fakeng/core.py
@@ -1,4 +1,4 @@
-MODE = "crash"
+MODE = "ready"
 
 
 def mode():
diff --git a/test/test_core.py b/test/test_core.py
new file mode 100644
--- /dev/null
+++ b/test/test_core.py
@@ -0,0 +1 @@
+import fakeng
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site folder holding the installed package fakeng 1.2 (a compiled _C.so, a subpackage, a
    bytecode cache) — what a wheel or a container image gives."""
    site = tmp_path / "site"
    pkg = site / "fakeng"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text(CORE)
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "x.py").write_text("X = 1\n")
    (pkg / "_C.abi3.so").write_bytes(b"\x7fELF not really")
    (pkg / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"junk")
    (site / "fakeng-1.2.dist-info").mkdir()
    return site


@pytest.fixture
def fix_diff(tmp_path: Path) -> Path:
    p = tmp_path / "fix.diff"
    p.write_text(FIX)
    return p
