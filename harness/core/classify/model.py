"""The classifier's public value types: what a log says, and how an engine's log differs."""
from __future__ import annotations

from dataclasses import dataclass

from harness.core.outcome import Outcome


@dataclass(frozen=True)
class Classification:
    """What a server log says about how the launch went.

    ``outcome`` is None while nothing decisive has been seen (no error, no ready marker).
    ``first_error_line`` is the physical input line, unmodified, that best names the
    failure; for READY the ready-marker line; for HANG the watchdog line, or the last
    capture line when the log stops inside an unfinished capture.
    """

    outcome: Outcome | None = None
    first_error_line: str | None = None
    failing_rank: str | None = None
    failing_bs: int | None = None
    shapes_captured: int | None = None
    shapes_total: int | None = None
    capture_s: float | None = None
    signature: str | None = None
    ready_line: str | None = None


@dataclass(frozen=True)
class Dialect:
    """Engine-specific additions to the generic rules.

    ``ready_patterns`` and the patterns of ``fatal_patterns`` are regexes searched in each
    raw line; a fatal pattern is checked before the generic rules, so it wins within a line.
    ``prefix_patterns`` are extra regexes for a line prefix to strip, matched at the start of
    the line; a named group ``rank`` gives the failing rank as printed.
    """

    name: str = "generic"
    ready_patterns: tuple[str, ...] = ()
    fatal_patterns: tuple[tuple[str, Outcome], ...] = ()
    prefix_patterns: tuple[str, ...] = ()
