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
_SCOPE_SEGMENTS = 500  # how far back a traceback header still lends its rank
_MAX_KEYS = 256        # rank keys remembered; a real server has at most a few hundred ranks


class TracebackContext:
    """Tracks traceback structure across segments."""

    def __init__(self) -> None:
        self.expect_code = -1  # segment number of the next traceback source line
        self._rank: str | None = None
        self._rank_seg = -(10**9)
        self._site: dict[str | None, str] = {}
        self._kernel: dict[str | None, str] = {}
        self._in_current_thread = False
        self.faulthandler_site: str | None = None

    def observe(self, message: str, rank: str | None, prefixed: bool, seg: int) -> bool:
        """Take in one message; True when it is traceback structure, not a message to classify."""
        if seg == self.expect_code and not EXCEPTION_LINE.match(message):
            m = _KERNEL_LAUNCH.match(message)
            if m:
                self._remember(self._kernel, rank, m.group("kernel"))
            return True
        m = _FRAME.match(message)
        if m:
            path, fn = m.group("path"), m.group("fn")
            site = f"{path.rsplit('/', 1)[-1]}:{fn}"
            if m.group("comma"):
                self.expect_code = seg + 1
                if not _GENERIC_FRAME.search(path):
                    self._remember(self._site, rank, site)
                    self._kernel.pop(rank, None)
            elif self._in_current_thread:
                self.faulthandler_site = self.faulthandler_site or site
                self._in_current_thread = False
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

    def rank_for(self, seg: int) -> str | None:
        """The rank of the traceback an unprefixed line at ``seg`` belongs to, if any."""
        return self._rank if seg - self._rank_seg <= _SCOPE_SEGMENTS else None

    def site_for(self, rank: str | None) -> str | None:
        """Where the current traceback of this rank surfaced: a kernel, else the innermost frame."""
        return self._kernel.get(rank) or self._site.get(rank)

    @staticmethod
    def _remember(table: dict[str | None, str], key: str | None, value: str) -> None:
        if key not in table and len(table) >= _MAX_KEYS:
            table.pop(next(iter(table)))
        table[key] = value
