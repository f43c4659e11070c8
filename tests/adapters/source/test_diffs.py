"""Diff text read as files, and the part of a repository diff inside one package."""
from harness.adapters.source.diffs import for_package, section_path, touched_paths
from tests.adapters.source.conftest import FIX

VLLM = """diff --git a/vllm/a.py b/vllm/a.py
--- a/vllm/a.py
+++ b/vllm/a.py
@@ -1 +1 @@
-x
+y
diff --git a/tests/vllm/test_a.py b/tests/vllm/test_a.py
--- a/tests/vllm/test_a.py
+++ b/tests/vllm/test_a.py
@@ -1 +1 @@
-x
+y
diff --git a/csrc/ops.cu b/csrc/ops.cu
deleted file mode 100644
--- a/csrc/ops.cu
+++ /dev/null
@@ -1 +0,0 @@
-x
"""


def test_repository_layouts_give_the_strip_and_the_files_left_out():
    sg = for_package(FIX, "fakeng")
    assert sg.strip == 2 and sg.kept == ("python/fakeng/core.py",) and sg.skipped == ("test/test_core.py",)
    assert "test_core" not in sg.text and 'MODE = "ready"' in sg.text
    vl = for_package(VLLM, "vllm")
    assert vl.strip == 1 and vl.kept == ("vllm/a.py",)
    assert vl.skipped == ("tests/vllm/test_a.py", "csrc/ops.cu")   # the shallowest vllm/ is the package


def test_repo_dir_is_taken_as_given_and_nothing_inside_is_none():
    assert for_package(FIX, "fakeng", repo_dir="python").strip == 2
    assert for_package(FIX, "fakeng", repo_dir="src") is None
    assert for_package(VLLM, "sglang") is None


def test_paths_of_renames_binaries_quotes_and_plain_diffs():
    rename = "diff --git a/p/old.py b/p/new.py\nsimilarity index 100%\nrename from p/old.py\nrename to p/new.py\n"
    binary = "diff --git a/p/k.bin b/p/k.bin\nindex 1..2\nGIT binary patch\nliteral 1\nA\n"
    quoted = 'diff --git "a/p/\\303\\251.py" "b/p/\\303\\251.py"\n--- "a/p/\\303\\251.py"\n+++ "b/p/\\303\\251.py"\n@@\n'
    assert touched_paths(rename + binary + quoted) == ("p/new.py", "p/k.bin", "p/\u00e9.py")
    assert section_path("diff --git a/x b/x\nold mode 100644\nnew mode 100755\n") == "x"
    plain = "--- a/pkg/m.py\t2024\n+++ b/pkg/m.py\t2024\n@@ -1 +1 @@\n-a\n+b\n"
    part = for_package(plain, "pkg")
    assert touched_paths(plain) == () and part.strip == 1 and part.kept == ("pkg/m.py",) and part.text == plain
