"""TrialResult: the complete record of one trial, as stored in result.json."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from harness.core.outcome import Outcome

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Ladder:
    """The CUDA-graph capture ladder as seen in the log."""

    shapes_captured: int | None = None
    shapes_total: int | None = None
    capture_s: float | None = None
    failing_bs: int | None = None


@dataclass(frozen=True)
class PatchRecord:
    """One applied patch: its name as the matrix gives it and the sha256 of its diff text."""

    name: str
    sha256: str


@dataclass(frozen=True)
class SourceRecord:
    """Where the arm's code came from."""

    repo: str | None = None
    ref: str | None = None
    base_sha: str | None = None
    worktree: str | None = None
    patches: tuple[PatchRecord, ...] = ()
    # path -> [sha256 before, sha256 after]; None where the file did not exist.
    touched: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class StopRecord:
    """How the server was stopped."""

    exit_code: int | None = None
    signal: str | None = None        # the signal that ended it, if any ("SIGSEGV", "SIGKILL", ...)
    reaped: bool = True              # ended after SIGTERM (or by itself)
    force_killed: bool = False       # needed SIGKILL
    survivors: tuple[int, ...] = ()  # pids of the group still alive after the stop


@dataclass(frozen=True)
class TrialResult:
    """One trial. Everything needed to read it, re-run it, or count it."""

    matrix: str
    arm_id: str
    label: str
    levels: Mapping[str, str]
    trial: int
    outcome: Outcome
    launch_id: str | None = None       # unique per launch: a re-launch of trial k is another launch
    first_error_line: str | None = None
    failing_rank: str | None = None
    signature: str | None = None
    ready_line: str | None = None
    ladder: Ladder = Ladder()
    detail: str | None = None          # harness's own words (PATCH_FAILED git message, INFRA reason...)
    engine: str = "command"
    model: str | None = None
    tp: int = 1
    dp: int = 1
    ep: int = 1
    argv: tuple[str, ...] = ()
    port: int | None = None            # the server's port for this launch
    env: Mapping[str, str] = field(default_factory=dict)   # redacted, harness-set keys only
    config: Mapping[str, Any] = field(default_factory=dict)  # resolved arm config
    source: SourceRecord = SourceRecord()
    started_at: str | None = None      # ISO-8601 UTC, milliseconds
    startup_s: float | None = None     # launch -> ready (None unless READY)
    duration_s: float | None = None    # launch -> stopped
    verdict_s: float | None = None     # launch -> outcome known
    stop: StopRecord = StopRecord()
    host: Mapping[str, Any] = field(default_factory=dict)      # hostname, platform, python, harness version
    # gate name -> {"passed": bool | None, "metrics": {name: number}} (gates run after READY)
    gates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (enums as their names, tuples as lists)."""
        d = asdict(self)
        d["outcome"] = self.outcome.value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrialResult":
        """Inverse of to_dict; ignores keys it does not know (newer writers)."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["outcome"] = Outcome(d["outcome"])
        kw["levels"] = dict(d.get("levels", {}))
        kw["ladder"] = Ladder(**d.get("ladder", {}))
        src = dict(d.get("source", {}))
        src["patches"] = tuple(PatchRecord(**p) for p in src.get("patches", ()))
        src["touched"] = {k: tuple(v) for k, v in src.get("touched", {}).items()}
        kw["source"] = SourceRecord(**src)
        st = dict(d.get("stop", {}))
        st["survivors"] = tuple(st.get("survivors", ()))
        kw["stop"] = StopRecord(**st)
        kw["argv"] = tuple(d.get("argv", ()))
        return cls(**kw)
