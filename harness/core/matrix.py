"""The matrix model: frozen, typed objects built from a validated YAML mapping (see core.schema)."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping


class Schedule(str, Enum):
    """Order of trials. Interleaved (ABAB…) spreads machine drift over every arm alike."""

    INTERLEAVED = "interleaved"
    BLOCKED = "blocked"
    RANDOM = "random"


@dataclass(frozen=True)
class PatchRef:
    """A patch as the matrix names it: a diff file (relative to the matrix file), a commit or a range
    of the target repository, or a pull request "owner/repo#N" (fetched once as a diff, cached)."""

    diff: str | None = None
    commit: str | None = None
    range: str | None = None
    pr: str | None = None

    @property
    def name(self) -> str:
        """Short human name, also the key in records."""
        if self.diff is not None:
            return self.diff.rsplit("/", 1)[-1]
        if self.pr is not None:
            return f"pr:{self.pr}"
        return f"commit:{self.commit}" if self.commit is not None else f"range:{self.range}"

    def as_dict(self) -> dict[str, str]:
        """The one key that is set."""
        pairs = (("diff", self.diff), ("commit", self.commit), ("range", self.range), ("pr", self.pr))
        return {k: v for k, v in pairs if v is not None}


class CachePolicy(str, Enum):
    """Where the JIT/compile caches of a trial live: a folder per arm (warm after the first trial of
    the arm, never shared with another arm), a fresh folder per trial (always cold), or the user's
    own (no override: what the engines do by default)."""

    PER_ARM = "per_arm"
    PER_TRIAL = "per_trial"
    SHARED = "shared"


@dataclass(frozen=True)
class Source:
    """A git repository at a base ref; arms run in worktrees of it."""

    repo: str
    ref: str = "HEAD"


@dataclass(frozen=True)
class Package:
    """An installed package without git (a container image, a wheel): each arm runs an overlay, a
    copy of the package with the arm's patches applied, first on PYTHONPATH."""

    package: str                   # the import name, e.g. vllm
    repo_dir: str | None = None    # the package's parent folder in its repository as patch paths name it
                                   # ("python" for sglang); None = guessed from the patches


@dataclass(frozen=True)
class ReadyCheck:
    """How readiness is decided: an HTTP probe and/or a log marker."""

    http_path: str | None = "/health"
    log_marker: str | None = None     # a regex; None = the engine's own ready markers (if http_path is None)
    require_both: bool = False
    interval_s: float = 0.25


@dataclass(frozen=True)
class Target:
    """What is under test: engine, source, model, parallelism, base args and env, how to wait for it."""

    engine: str = "command"
    command: tuple[str, ...] = ()     # the command engine's argv, with {python} {port} {host} {model} {tp} {dp} {ep}
    source: Source | Package | None = None
    pythonpath: tuple[str, ...] = ()  # resolved inside the arm's worktree (beside the matrix for a package)
    python: str | None = None         # the engine's interpreter; None = the harness's own
    model: str | None = None
    tp: int = 1
    dp: int = 1
    ep: int = 1
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None           # None = a free port per trial
    ready: ReadyCheck = ReadyCheck()
    startup_timeout_s: float = 600.0
    quiet_timeout_s: float = 300.0
    fatal_grace_s: float = 3.0
    stop_timeout_s: float = 10.0
    build: tuple[str, ...] = ()       # argv run in the arm's tree once per patch set ({python} {worktree})
    build_timeout_s: float = 3600.0
    cache: CachePolicy = CachePolicy.PER_ARM


@dataclass(frozen=True)
class Level:
    """One value of an axis: what it adds (patches, env, args) or overrides (model, tp, dp, ep)."""

    name: str
    patches: tuple[PatchRef, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    model: str | None = None
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None


@dataclass(frozen=True)
class Axis:
    """A named dimension with its levels, in declaration order."""

    name: str
    levels: tuple[Level, ...]

    def level(self, name: str) -> Level:
        """The level called name (KeyError if absent)."""
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(name)


class Compare(str, Enum):
    """Which pairs of arms get a verdict: each arm against the baseline, or every pair."""

    BASELINE = "baseline"
    ALL = "all"


class Goal(str, Enum):
    """What adaptive repeats stop on: every comparison decided, or each arm's failure rate bounded."""

    COMPARE = "compare"
    FIX = "fix"


@dataclass(frozen=True)
class Stats:
    """How arms are compared and, with ``repeats: auto``, when launching stops."""

    alpha: float = 0.05            # overall chance of a false "different" (Holm, or split over sequential pairs)
    margin: float = 0.2            # SAME only when the difference's 95 % interval lies inside ±margin
    compare: Compare = Compare.BASELINE
    test: str = "fisher"           # fisher | barnard, for READY and gate pass rates
    adaptive: bool = False         # repeats: auto
    max_repeats: int | None = None  # the most launches per arm (required with repeats: auto)
    batch: int = 1                 # launches per arm between two looks
    goal: Goal = Goal.COMPARE
    max_fail_rate: float = 1 / 3   # goal fix: stop once the failure rate's upper 95 % bound is below this
    lower_is_better: tuple[str, ...] = ()   # gate metrics where smaller is better (tpot_ms, ttft_ms)
    margins: Mapping[str, float] = field(default_factory=dict)  # SAME margins for gate metrics, in their units


@dataclass(frozen=True)
class Matrix:
    """A whole matrix file after validation and command-line overrides."""

    name: str
    file: str
    target: Target
    axes: tuple[Axis, ...] = ()
    include: tuple[Mapping[str, str], ...] = ()
    exclude: tuple[Mapping[str, str], ...] = ()
    repeats: int = 1                  # launches per arm; with stats.adaptive, the most (max_repeats)
    schedule: Schedule = Schedule.INTERLEAVED
    seed: int = 0
    baseline: Mapping[str, str] | str | None = None   # levels, or an arm's label / title
    gates: tuple[Mapping[str, object], ...] = ()
    description: str = ""
    stats: Stats = Stats()
    # Local paths as the matrix wrote them ("~/venvs/x/bin/python"), by their resolved form: what a
    # dry run shows, so that it reads the same on a laptop and on the cluster. Display only.
    given_paths: Mapping[str, str] = field(default_factory=dict, compare=False)
