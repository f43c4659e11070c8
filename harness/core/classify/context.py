"""Traceback context: which rank a traceback belongs to, and where the failure surfaced.

Only the little the classifier needs is kept, per rank key (bounded): the innermost useful
frame of the current traceback, a Triton kernel launched from it (``_kernel[grid](...)`` on
a source line), and the first frame of a faulthandler "Current thread" dump. Source lines of a
traceback (the line after ``File "...", line N, in fn``) are recognised by position so that
``raise RuntimeError(f"NCCL error: ...")`` is not read as an error.
"""
from __future__ import annotations

import re

from harness.core.classify.rules import EXCEPTION_LINE

_FRAME = re.compile(r'^File "(?P<path>[^"]+)", line \d+(?P<comma>,)? in (?P<fn>[\w<>.]+)')
_KERNEL_LAUNCH = re.compile(r"^(?P<kernel>\w+)\[[^\]]*\]\(")
# Frames that say nothing about the failure: dispatch wrappers around the real call.
_GENERIC_FRAME = re.compile(
    r"torch/nn/modules/module\.py|torch/utils/_contextlib\.py|torch/_ops\.py|torch/_dynamo/"
    r"|triton/runtime/|triton/backends/|triton/compiler/|contextlib\.py|functools\.py|threading\.py"
)
_TRACEBACK = "most recent call last"
_CURRENT_THREAD = "Current thread"
_SCOPE_SEGMENTS = 200  # how far back a traceback header still lends its rank
_SITE_SEGMENTS = 20    # how far back a frame or kernel still names where an error surfaced
_MAX_KEYS = 256        # rank keys remembered; a real server has at most a few hundred ranks


class TracebackContext:
    """Tracks traceback structure across segments."""

    def __init__(self) -> None:
        self.expect_code = -1  # segment number of the next traceback source line
        self._rank: str | None = None
        self._rank_seg = -(10**9)
        self._site: dict[str | None, tuple[str, int]] = {}   # rank key -> (frame, segment)
        self._kernel: dict[str | None, tuple[str, int]] = {}
        self._in_current_thread = False
        self._faulthandler: tuple[str, int] | None = None  # "Current thread" top frame

    def observe(self, message: str, rank: str | None, prefixed: bool, seg: int) -> bool:
        """Take in one message; True when it is traceback structure, not a message to classify."""
        m = _FRAME.match(message)
        if m:
            path, fn = m.group("path"), m.group("fn")
            site = f"{path.rsplit('/', 1)[-1]}:{fn}"
            if m.group("comma"):
                self.expect_code = seg + 1
                if not _GENERIC_FRAME.search(path):
                    self._remember(self._site, rank, (site, seg))
                    self._kernel.pop(rank, None)
            elif self._in_current_thread:
                # Several processes may dump at once; the first dump of a burst is the one.
                if self._faulthandler is None or seg - self._faulthandler[1] > _SCOPE_SEGMENTS:
                    self._faulthandler = (site, seg)
                self._in_current_thread = False
            return True
        if seg == self.expect_code and not EXCEPTION_LINE.match(message):
            m = _KERNEL_LAUNCH.match(message)
            if m:
                self._remember(self._kernel, rank, (m.group("kernel"), seg))
            return True
        if _TRACEBACK in message:
            if prefixed or seg - self._rank_seg > _SCOPE_SEGMENTS:
                self._rank, self._rank_seg = rank, seg
            self._site.pop(rank, None)
            self._kernel.pop(rank, None)
            return message.startswith("Traceback")
        if message.startswith(_CURRENT_THREAD) and "most recent call first" in message:
            self._in_current_thread = True
            return True
        return False

    def faulthandler_site(self, after_seg: int) -> str | None:
        """The top frame of a faulthandler "Current thread" dump printed soon after ``after_seg``."""
        if self._faulthandler is None:
            return None
        site, seg = self._faulthandler
        return site if 0 < seg - after_seg <= _SCOPE_SEGMENTS else None

    def rank_for(self, seg: int) -> str | None:
        """The rank of the traceback an unprefixed line at ``seg`` belongs to, if any."""
        return self._rank if seg - self._rank_seg <= _SCOPE_SEGMENTS else None

    def site_for(self, rank: str | None, seg: int) -> str | None:
        """Where the traceback just before ``seg`` surfaced: a kernel, else the innermost frame."""
        for table in (self._kernel, self._site):
            entry = table.get(rank)
            if entry is not None and seg - entry[1] <= _SITE_SEGMENTS:
                return entry[0]
        return None

    @staticmethod
    def _remember(table: dict[str | None, tuple[str, int]], key: str | None, value: tuple[str, int]) -> None:
        if key not in table and len(table) >= _MAX_KEYS:
            table.pop(next(iter(table)))
        table[key] = value
