"""Checks that need the file system, git, the engine's interpreter or the network (a PR's diff,
once), run before anything launches. Every check reports all it finds (core.problems): a dry run
shows them as warnings, a real run refuses them together."""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.adapters.engines.preflight import matrix_problems
from harness.adapters.source import prcache
from harness.adapters.source.applycheck import first_not_applying
from harness.adapters.source.armtree import spec_of
from harness.adapters.source.git import PatchSpec, check_patches, resolve_repo
from harness.adapters.source.installed import find_package
from harness.adapters.source.overlay import fingerprint
from harness.core.arms import Arm, expand
from harness.core.matrix import Matrix, Package, PatchRef, Source
from harness.core.problems import Problem, refusal
from harness.errors import ConfigError, SourceError


@dataclass(frozen=True)
class Checked:
    """What the checks found: the source's place and base (None where they could not be resolved:
    the arms' ids are then provisional) and every problem."""

    top: Path | None
    base: str | None
    problems: tuple[Problem, ...]


def check_matrix_for_run(matrix: Matrix, *, dry_run: bool, visible_gpus: int | None) -> Checked:
    """Every check, all problems collected. A dry run never touches the network (a PR's diff is
    looked up in the patch cache only) and also checks that each arm's patches apply."""
    problems = program_problems(matrix) + matrix_problems(matrix, visible_gpus)
    python_missing = matrix.target.python is not None and not _program_exists(matrix.target.python)
    top, base, found = source_problems(matrix, fetch=not dry_run, python_missing=python_missing)
    return Checked(top, base, tuple(problems + found))


def raise_problems(matrix: Matrix, problems: Sequence[Problem]) -> None:
    """One ConfigError listing every blocking problem, if there is any."""
    err = refusal(problems, matrix.file)
    if err is not None:
        raise err


def _program_exists(program: str) -> bool:
    path = Path(program).expanduser()
    return bool(shutil.which(str(path)) or (path.is_file() and os.access(path, os.X_OK)))


def program_problems(matrix: Matrix) -> list[Problem]:
    """The interpreter, the command's program and the build's must exist before anything launches."""
    t = matrix.target
    out = []
    if t.python is not None and not _program_exists(t.python):
        given = matrix.given_paths.get(t.python)
        shown = f"{given!r} ({t.python})" if given else repr(t.python)
        out.append(Problem("target.python", f"no executable {shown}: expected the engine's interpreter"))
    if t.command and "{" not in t.command[0] and not shutil.which(t.command[0]):
        out.append(Problem("target.command[0]", f"no executable {t.command[0]!r} (on PATH or as a path)"))
    if t.build:
        if t.source is None:
            out.append(Problem("target.build", "a build needs target.source (it runs in the arm's tree)"))
        # A relative program (./build.sh) is looked up in the arm's tree when the build runs.
        if "{" not in t.build[0] and "/" not in t.build[0] and not shutil.which(t.build[0]):
            out.append(Problem("target.build[0]", f"no executable {t.build[0]!r} on PATH"))
    return out


def _resolve_source(matrix: Matrix, python_missing: bool) -> tuple[Path | None, str | None, list[Problem]]:
    source = matrix.target.source
    assert source is not None
    try:
        if isinstance(source, Package):
            if python_missing:   # said once, under target.python; the package is looked up by it
                return None, None, []
            top = find_package(matrix.target.python or sys.executable, source.package,
                               {**os.environ, **matrix.target.env}, file=matrix.file)
            return top, fingerprint(top), []
        repo = Path(source.repo).expanduser()
        repo = repo if repo.is_absolute() else (Path(matrix.file).parent / repo)
        top, sha = resolve_repo(repo, source.ref, file=matrix.file)
        return top, sha, []
    except ConfigError as e:
        return None, None, [Problem.of(e)]


def source_problems(matrix: Matrix, *, fetch: bool = True, python_missing: bool = False
                    ) -> tuple[Path | None, str | None, list[Problem]]:
    """Resolve the target's source and check every patch of every axis level. fetch: a PR's diff
    not in the patch cache is fetched now (a real run), else reported with where to put it (a dry
    run, which also checks that each arm's patch set applies to the base).
    Returns (git top-level, base SHA) for a git source, (package folder, package fingerprint)
    for an installed package, (None, None) for a target without a source or one not found."""
    patched = [(f"axes.{a.name}.{lv.name}.patches", lv.patches) for a in matrix.axes for lv in a.levels if lv.patches]
    if matrix.target.source is None:
        if patched:
            return None, None, [Problem(patched[0][0], "patches need target.source (a git repository and ref, "
                                                       "or an installed package)")]
        return None, None, []
    top, base, problems = _resolve_source(matrix, python_missing)
    specs: dict[PatchRef, PatchSpec | None] = {}
    for key, patches in patched:
        for i, ref in enumerate(patches):
            spec, problem = _patch(matrix, ref, f"{key}[{i}]", top, fetch)
            specs[ref] = spec
            problems += [problem] if problem else []
    source = matrix.target.source
    if not fetch and top is not None and base is not None and isinstance(source, Source):
        problems += _apply_problems(matrix, source.ref, top, base, specs)
    return top, base, problems


def _patch(matrix: Matrix, ref: PatchRef, key: str, top: Path | None, fetch: bool
           ) -> tuple[PatchSpec | None, Problem | None]:
    """The spec of one patch (None where it cannot be had here) and what is wrong with it."""
    matrix_dir = Path(matrix.file).parent
    try:
        if ref.pr is not None:
            path = (prcache.resolve if fetch else prcache.cached)(ref.pr, file=matrix.file, key=f"{key}.pr")
            if path is None:
                return None, Problem(f"{key}.pr", f"{ref.pr} is not in the patch cache; a real run fetches "
                                                  f"{prcache.url_of(ref.pr)}; {prcache.offline_hint(ref.pr)}")
            return spec_of(ref, matrix_dir, path), None
        spec = spec_of(ref, matrix_dir)
        if spec.diff is None and top is None:
            return None, None    # a commit or range of a repository not found: said under target.source
        check_patches(top or matrix_dir, [spec], file=matrix.file, key_of=lambda _: key)
        return spec, None
    except ConfigError as e:
        return None, Problem.of(e)


def _arm_patches(matrix: Matrix, arm: Arm) -> tuple[tuple[str, PatchRef], ...]:
    """The arm's patches in the order they are applied, each with the key it comes from."""
    out = []
    for axis in matrix.axes:
        lv = axis.level(arm.levels[axis.name])
        out += [(f"axes.{axis.name}.{lv.name}.patches[{i}]", ref) for i, ref in enumerate(lv.patches)]
    return tuple(out)


def _apply_problems(matrix: Matrix, ref_name: str, top: Path, base: str,
                    specs: dict[PatchRef, PatchSpec | None]) -> list[Problem]:
    """Each distinct patch set of the arms applied on the base in a scratch index; the first patch
    that does not apply is a problem of the arms with that set (their trials would be PATCH_FAILED)."""
    by_set: dict[tuple[tuple[str, PatchRef], ...], list[Arm]] = {}
    for arm in expand(matrix, base):
        by_set.setdefault(_arm_patches(matrix, arm), []).append(arm)
    out = []
    for patches, arms in by_set.items():
        usable = []
        for _, ref in patches:   # up to the first patch not available here: later ones may build on it
            spec = specs[ref]
            if spec is None:
                break
            usable.append(spec)
        try:
            failed = first_not_applying(top, base, usable)
        except (SourceError, ConfigError) as e:   # git itself failed: say so, a real run will meet it too
            out.append(Problem("target.source", f"could not check that the patches apply: {e}", blocks=False))
            break
        if failed is None:
            continue
        key, ref = patches[failed.index]
        names = ", ".join(f"{a.label} ({a.title})" for a in arms)
        after = f" after {', '.join(r.name for _, r in patches[:failed.index])}" if failed.index else ""
        out.append(Problem(key, f"{ref.name} does not apply to {ref_name} ({base[:12]}){after}: {failed.message}; "
                                f"a real run records the trials of arm{'s' if len(arms) > 1 else ''} {names} "
                                "as PATCH_FAILED", blocks=False))
    return out


def check_sources(matrix: Matrix) -> tuple[Path | None, str | None]:
    """source_problems as one error (a PR's diff is fetched now); (top, base) otherwise."""
    top, base, problems = source_problems(matrix)
    raise_problems(matrix, problems)
    return top, base
