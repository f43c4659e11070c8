"""Failure signatures: the same failure on another run, rank or worktree gives the same string.

``f"{outcome}:{normalised message}"`` plus ``"@{site}"`` when the surfacing kernel or frame is
known. The message is the first error line without its prefixes; paths keep only their last
component (worktrees and home directories differ between arms), hex addresses become
``<ADDR>`` and free-standing numbers ``<N>``.
"""
from __future__ import annotations

import re

from harness.core.outcome import Outcome

_MAX_CHARS = 240
_BAR = re.compile(r"\s*\d+%\|.*$")
_PATH = re.compile(r"(?<![\w/])(?:[\w.~+-]*/){2,}([\w.+-]+)")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)[0-9a-f]{12,}\b")
_NUMBER = re.compile(r"(?<!\w)\d+(?:\.\d+)*")
_SPACE = re.compile(r"\s+")
# A kernel named in a device-assert message: ".cu:1284: indexSelectLargeIndex: block: ...".
_MESSAGE_KERNEL = re.compile(r"\.(?:cu|cuh|hip|py):\d+: (\w+): block:")


def normalise(message: str) -> str:
    """Mask what differs between runs: paths, addresses, numbers; collapse whitespace."""
    text = _BAR.sub("", message)
    text = _PATH.sub(r"\1", text)
    text = _HEX.sub("<ADDR>", text)
    text = _NUMBER.sub("<N>", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:_MAX_CHARS]


def message_kernel(message: str) -> str | None:
    """A kernel named in the error message itself, if any."""
    m = _MESSAGE_KERNEL.search(message)
    return m.group(1) if m else None


def make_signature(outcome: Outcome, message: str, site: str | None) -> str:
    """The signature of a failure, from its outcome, message and surfacing site."""
    base = f"{outcome.value}:{normalise(message)}"
    return f"{base}@{site}" if site else base
