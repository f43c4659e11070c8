"""The streaming log classifier: feed lines as the server prints them, ask what they say.

Per line the cost is one chain of substring tests; only lines that contain a keyword of
interest (or that a dialect's own patterns match, or that follow a traceback frame) are
cleaned, stripped of prefixes and matched against the rules. Memory is bounded: the classifier
keeps the best failure seen so far, the ladder state and a little traceback context, never the
lines themselves.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.classify import rules as R
from harness.core.classify.context import TracebackContext
from harness.core.classify.ladder import LadderTracker, describe
from harness.core.classify.model import Classification, Dialect
from harness.core.classify.normalize import (
    Stripped, clean, compile_prefixes, message_rank, segments, strip_prefixes,
)
from harness.core.classify.signature import make_signature, message_kernel, normalise
from harness.core.outcome import Outcome


@dataclass(frozen=True)
class _Hit:
    """One line that names a failure."""

    tier: int
    seg: int
    outcome: Outcome
    line: str
    message: str
    rank: str | None
    site: str | None
    during_capture: bool


def _better(a: _Hit | None, b: _Hit | None) -> _Hit | None:
    """Higher tier wins; within a tier the earlier line."""
    if a is None or b is None:
        return a or b
    if a.tier != b.tier:
        return a if a.tier > b.tier else b
    return a if a.seg <= b.seg else b


def _raw(line: str) -> str:
    if line.endswith("\n"):
        return line[:-2] if line.endswith("\r\n") else line[:-1]
    return line


class LogClassifier:
    """Classifies a server log fed one physical line at a time."""

    def __init__(self, dialect: Dialect | None = None, ready_marker: str | None = None) -> None:
        """``ready_marker`` is an extra regex that marks READY (from the matrix target); like a
        dialect's patterns it is searched in each raw line."""
        dialect = dialect or Dialect()
        ready_extra = [*dialect.ready_patterns, *([ready_marker] if ready_marker else [])]
        self._ready_extra = re.compile("|".join(f"(?:{p})" for p in ready_extra)) if ready_extra else None
        self._dialect_rules = R.dialect_rules(dialect.fatal_patterns)
        triggers = [*ready_extra, *(p for p, _ in dialect.fatal_patterns)]
        self._trigger = re.compile("|".join(f"(?:{p})" for p in triggers)) if triggers else None
        self._prefixes = compile_prefixes(dialect.prefix_patterns)
        self._seg = 0
        self._expect_code = -1  # mirrors the context's, read on the fast path
        self._ctx = TracebackContext()
        self._ladder = LadderTracker()
        self._best: _Hit | None = None
        self._soft: _Hit | None = None  # Python-level errors after READY, pending a fatal line
        self._stalled_broadcast: _Hit | None = None
        self._ready_line: str | None = None
        self._fired = False

    def feed(self, line: str) -> Outcome | None:
        """Feed one physical line (may hold glued tqdm bars, ``\\r``, ANSI).

        Returns the outcome the first time a fatal line is seen (only once), so the caller can
        fail fast; Outcome.READY the first time the ready marker is seen; None otherwise.
        """
        self._seg += 1
        # Longer needles scan faster. Every line a rule is meant for contains one of these
        # (tested), except bare consequence lines ("EngineCore failed to start."), which can
        # never be the cause and always come with an error line that does.
        if (
            "rror" in line or "xception" in line or "fault" in line or "ssert" in line
            or "aptur" in line or "llegal" in line or "atchdog" in line or "SIGSEGV" in line
            or "code -11" in line
            or "most recent call" in line or 'File "' in line or "ompilation failed" in line
            or "broadcast block" in line or self._seg == self._expect_code
            or (self._ready_line is None and (
                "ready to" in line or "startup complete" in line or "Starting vLLM" in line
                or "Uvicorn running" in line))
            or (self._trigger is not None and self._trigger.search(line) is not None)
        ):
            return self._feed_slow(_raw(line))
        return None

    def result(self) -> Classification:
        """What the log so far says, with precedence applied over every line fed."""
        lad = self._ladder
        common = dict(shapes_captured=lad.captured, shapes_total=lad.total,
                      capture_s=lad.capture_s, ready_line=self._ready_line)
        best = self._best
        if best is not None:
            best = _better(best, self._soft)
            site = best.site
            if best.outcome is Outcome.SEGFAULT and site is None:
                site = self._ctx.faulthandler_site(best.seg)
            return Classification(
                outcome=best.outcome, first_error_line=best.line, failing_rank=best.rank,
                failing_bs=lad.failing_bs if best.during_capture else None,
                signature=make_signature(best.outcome, best.message, site), **common)
        if self._ready_line is not None:
            return Classification(outcome=Outcome.READY, first_error_line=self._ready_line, **common)
        if lad.open and lad.last_message is not None:
            # The log stops inside an unfinished capture: a stall, printed by no one.
            return Classification(
                outcome=Outcome.HANG, first_error_line=lad.last_line, failing_rank=lad.last_rank,
                failing_bs=lad.failing_bs,
                signature=f"HANG:stalled in capture: {normalise(describe(lad.last_message))}",
                **common)
        stalled = self._stalled_broadcast
        if stalled is not None:
            return Classification(
                outcome=stalled.outcome, first_error_line=stalled.line, failing_rank=stalled.rank,
                signature=make_signature(stalled.outcome, stalled.message, None), **common)
        return Classification(**common)

    def _feed_slow(self, raw: str) -> Outcome | None:
        answer = None
        for i, part in enumerate(segments(raw)):
            if i:
                self._seg += 1
            outcome = self._segment(part, raw)
            if answer is None:
                answer = outcome
        self._expect_code = self._ctx.expect_code
        return answer

    def _segment(self, part: str, raw: str) -> Outcome | None:
        stripped = strip_prefixes(clean(part), self._prefixes)
        msg = stripped.message
        if not msg:
            if self._seg == self._ctx.expect_code:  # a blank line pasted between frame and source
                self._ctx.expect_code += 1
            return None
        if self._ctx.observe(msg, stripped.rank, stripped.prefixed, self._seg):
            return None
        self._ladder.observe(msg, raw, stripped.rank)
        if self._ready_line is None and (
            R.READY.search(msg) or (self._ready_extra is not None and self._ready_extra.search(part))
        ):
            self._ready_line = raw
            self._ladder.close()
            return Outcome.READY
        if R.BOILERPLATE.match(msg):
            return None
        rule = self._match(msg, stripped.level)
        if rule is None:
            if self._stalled_broadcast is None and R.STALLED_BROADCAST.search(msg):
                self._stalled_broadcast = self._hit(R.STALLED_BROADCAST_RULE, msg, raw, stripped)
            return None
        hit = self._hit(rule, msg, raw, stripped)
        if rule.python_level and self._ready_line is not None:
            self._soft = _better(self._soft, hit)
            return None
        self._best = _better(self._best, hit)
        if self._fired:
            return None
        self._fired = True
        return hit.outcome

    def _match(self, msg: str, level: str | None) -> R.Rule | None:
        # A dialect's own patterns are explicit, so they count at any log level.
        rule = R.match(msg, self._dialect_rules) if self._dialect_rules else None
        if rule is None and level not in R.QUIET_LEVELS:
            rule = R.match(msg)
        return rule

    def _hit(self, rule: R.Rule, msg: str, raw: str, stripped: Stripped) -> _Hit:
        rank = stripped.rank or message_rank(msg)
        if rank is None and not stripped.prefixed:
            rank = self._ctx.rank_for(self._seg)
        site = message_kernel(msg) or self._ctx.site_for(stripped.rank, self._seg)
        return _Hit(rule.tier, self._seg, rule.outcome, raw, msg, rank, site, self._ladder.open)


def classify_text(text: str, dialect: Dialect | None = None, ready_marker: str | None = None) -> Classification:
    """Classify a whole log at once (same answer as feeding it line by line)."""
    classifier = LogClassifier(dialect, ready_marker)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        classifier.feed(line)
    return classifier.result()
