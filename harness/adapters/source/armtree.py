"""An arm's tree, whole: the patched worktree (with the base checkout's compiled artifacts) or the
patched overlay of an installed package, then the optional build. What app.trial calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from harness.adapters.source import prcache
from harness.adapters.source.artifacts import place_artifacts
from harness.adapters.source.build import BuildRecord, run_build
from harness.adapters.source.git import PatchSpec, PreparedSource, prepare
from harness.adapters.source.lock import locked
from harness.adapters.source.overlay import prepare_overlay
from harness.core.matrix import Package, PatchRef, Source

WORKTREES, OVERLAYS = ".worktrees", ".overlays"   # under runs_dir


def patch_specs(patches: Sequence[PatchRef], matrix_dir: Path, *, file: str | None = None,
                key_of: Callable[[int], str] | None = None) -> list[PatchSpec]:
    """The matrix's patch references as specs: diff files resolved beside the matrix, PRs as their
    cached diff (fetched now if absent; ConfigError saying where to put it if that fails)."""
    return [spec_of(p, matrix_dir, prcache.resolve(p.pr, file=file, key=f"{key_of(i)}.pr" if key_of else None)
                    if p.pr is not None else None) for i, p in enumerate(patches)]


def spec_of(p: PatchRef, matrix_dir: Path, pr_diff: Path | None = None) -> PatchSpec:
    """One patch reference as a spec; a PR needs its cached diff (pr_diff)."""
    if p.diff is not None:
        return PatchSpec(diff=(matrix_dir / p.diff).resolve())
    if p.pr is not None:
        if pr_diff is None:
            raise ValueError(f"the PR {p.pr} needs its cached diff")
        return PatchSpec(diff=pr_diff.resolve(), label=p.name)
    return PatchSpec(commit=p.commit, range=p.range)


@dataclass(frozen=True)
class TreeSpec:
    """What to prepare: the source, where it is (git top-level or package folder) and its base
    (commit SHA or package fingerprint), the patches, and the build."""

    source: Source | Package
    top: Path
    base: str
    patches: tuple[PatchSpec, ...]
    runs_dir: Path
    build: tuple[str, ...] = ()           # argv; {python} and {worktree} are substituted here
    python: str = "python"
    build_env: Mapping[str, str] = field(default_factory=dict)
    build_keyed_env: Mapping[str, str] = field(default_factory=dict)
    build_timeout_s: float = 3600.0


@dataclass(frozen=True)
class ArmTree:
    """A prepared tree: the tree, the artifacts placed in it by this call, the build."""

    prepared: PreparedSource
    artifacts: tuple[str, ...] = ()
    build: BuildRecord | None = None


def tree_dir(spec: TreeSpec) -> Path:
    """The cache folder the tree lives in."""
    return spec.runs_dir / (OVERLAYS if isinstance(spec.source, Package) else WORKTREES)


def prepare_tree(spec: TreeSpec) -> ArmTree:
    """Prepare (or reuse) the arm's tree. PatchFailed (BuildFailed for the build) when a patch does
    not apply or the build fails; SourceError when git or the cache misbehaves."""
    if isinstance(spec.source, Package):
        prepared = prepare_overlay(spec.top, spec.source.package, spec.base, spec.patches, tree_dir(spec),
                                   repo_dir=spec.source.repo_dir)
    else:
        prepared = prepare(spec.top, spec.source.ref, spec.base, spec.patches, tree_dir(spec))
    path = prepared.path
    # The same lock as the preparation: another trial of this tree waits for the build.
    with locked(path.with_name(f"{path.name}.lock"), spec.build_timeout_s + 900.0):
        # Links are refreshed on every call (the base checkout may have gained some); copies are made
        # only into a new tree, before its first build, which may then rewrite them.
        fresh_copy = bool(spec.build) and not prepared.reused
        placed = () if isinstance(spec.source, Package) or (spec.build and not fresh_copy) else tuple(
            place_artifacts(spec.top, path, copy=bool(spec.build)))
        argv = [a.replace("{python}", spec.python).replace("{worktree}", str(path)) for a in spec.build]
        build = run_build(path, argv, spec.build_env, spec.build_keyed_env, spec.build_timeout_s) \
            if argv else None
    return ArmTree(prepared, placed, build)
