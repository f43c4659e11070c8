"""Prove, before a trial counts, that the engine's interpreter imports the arm's patched files.

For every touched .py file inside a regular package of the arm's tree, the module name is read off
the folders (each with an __init__.py); the engine's python, run with the trial's env and cwd,
resolves where that module would load from, without importing anything (the top-level spec via
importlib.util.find_spec, then PathFinder down the package's __path__, as the import system does),
and hashes that file. Another content than the patched one is PATCH_FAILED: the server would run
other code than the arm claims (an editable install of the base checkout, a .pth that puts another
copy first, a missing pythonpath entry)."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from harness.errors import PatchFailed

TIMEOUT_S = 120.0
_TAG = "HARNESS_IMPORT_CHECK "
_SCRIPT = """import hashlib, importlib.machinery, importlib.util, json, sys
def origin(name):
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])
    for i in range(1, len(parts)):
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]),
                                                        list(spec.submodule_search_locations))
    return getattr(spec, "origin", None)
out = {}
for name in json.loads(sys.argv[1]):
    try:
        o = origin(name)
        h = hashlib.sha256(open(o, "rb").read()).hexdigest() if o and o not in ("built-in", "frozen") else None
        out[name] = {"origin": o, "sha256": h}
    except Exception as e:
        out[name] = {"origin": None, "sha256": None, "error": repr(e)}
print(%r + json.dumps(out))
""" % _TAG


class ImportMismatch(PatchFailed):
    """The engine's interpreter would import other code than the arm's patched files, or the
    check could not be run (then nothing is proven either)."""

    def __init__(self, message: str):
        self.patch, self.git_message = "", message
        Exception.__init__(self, message)


@dataclass(frozen=True)
class ImportCheck:
    """What was checked: module -> {expected, resolved, ok}; touched files that are no module of a
    package (not checked); and the mismatches, in words (empty: the arm's code is what runs)."""

    modules: Mapping[str, dict[str, object]] = field(default_factory=dict)
    not_modules: tuple[str, ...] = ()
    mismatches: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """For import_check.json in the trial folder."""
        return {"modules": dict(self.modules), "not_modules": list(self.not_modules),
                "mismatches": list(self.mismatches)}

    def detail(self) -> str:
        """The PATCH_FAILED detail."""
        return ("the engine's python would not import the patched code: " + "; ".join(self.mismatches)
                + " (check target.pythonpath, editable installs and .pth files)")


def module_name(tree: Path, rel: str) -> str | None:
    """The dotted name of tree/rel if it is a .py file inside a regular package (every folder from
    the top package down holds an __init__.py); None otherwise."""
    path = tree / rel
    if path.suffix != ".py" or not path.stem.isidentifier():
        return None
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while folder != tree.parent and (folder / "__init__.py").is_file() and folder.name.isidentifier():
        parts.insert(0, folder.name)
        if folder == tree:
            break
        folder = folder.parent
    return ".".join(parts) if parts and (path.parent / "__init__.py").is_file() else None


def check_imports(python: str, env: Mapping[str, str], cwd: Path, tree: Path,
                  touched: Mapping[str, tuple[str | None, str | None]], *, timeout_s: float = TIMEOUT_S) -> ImportCheck:
    """Resolve each touched module with the engine's python. A module that resolves to other
    content than the patched file is a mismatch; one that resolves nowhere (a test folder, a
    script) is recorded and not held against the arm. ImportMismatch if the check cannot run."""
    expected: dict[str, tuple[str, str]] = {}
    not_modules = []
    for rel, (_before, after) in sorted(touched.items()):
        name = module_name(tree, rel) if after is not None else None
        if name is None:
            not_modules.append(rel)
        else:
            expected[name] = (str(tree / rel), after)
    if not expected:
        return ImportCheck({}, tuple(not_modules))
    try:
        proc = subprocess.run([python, "-c", _SCRIPT, json.dumps(sorted(expected))], capture_output=True, text=True,
                              timeout=timeout_s, env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ImportMismatch(f"cannot check which code {python} imports: {e}") from e
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_TAG)]
    if proc.returncode != 0 or not lines:
        raise ImportMismatch(f"cannot check which code {python} imports (exit {proc.returncode}): "
                             f"{proc.stderr.strip()[-1000:]}")
    seen = json.loads(lines[-1][len(_TAG):])
    modules: dict[str, dict[str, object]] = {}
    wrong = []
    for name, (file, sha) in expected.items():
        got = seen.get(name, {})
        ok = got.get("sha256") == sha if got.get("origin") else None   # None: resolves nowhere
        modules[name] = {"expected": file, "resolved": got.get("origin"), "ok": ok, **(
            {"error": got["error"]} if "error" in got else {})}
        if ok is False:
            wrong.append(f"{name} resolves to {got.get('origin')}, not the arm's {file}")
    return ImportCheck(modules, tuple(not_modules), tuple(wrong))
