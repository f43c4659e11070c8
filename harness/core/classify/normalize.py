"""Turn one physical log line into clean logical segments: noise, wrappers and prefixes off.

A physical line may hold several logical lines: tqdm redraws separated by ``\\r``, or a
progress bar with the next log line glued after it. Each segment is cleaned of terminal and
copy-paste noise (ANSI colours, also with the escape byte lost; HTML colour tags; NULs;
markdown bold) and then of its prefixes (container and CI wrappers, timestamps, process and
rank tags, logger headers), keeping the rank as printed and the log level if one is shown.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Sequence

# A tqdm bar ends with its rate in brackets: "... 4/51 [00:20<03:35,  4.59s/it]".
_BAR_END = re.compile(r"(?<=/s\])|(?<=/it\])")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b")
# GitHub and some CI viewers drop the ESC byte and leave " [36m ... [0m".
_ANSI_NO_ESC = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
_HTML = re.compile(r"</?(?:font|b|i|u|span|strong|em|code|pre|br|div|p|a)\b[^<>]*>", re.IGNORECASE)
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#39;", "'"), ("&amp;", "&"))

_PREFIX = re.compile(
    "|".join(
        (
            # A Python-logging relay around the server's output (a pipeline, a worker manager):
            # "2025-03-03 17:23:05,701 - __main__ - INFO - ", "2023-12-12 19:38:39 | ERROR | stderr | ".
            # The level is the relay's, not the server's, so it is not kept.
            r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+[-|]\s+"
            r"(?:[\w.<>-]+\s+[-|]\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+[-|](?:\s+[\w.<>-]+\s+\|)?\s?",
            # Kubernetes / CRI and `docker logs --timestamps`: "2025-01-01T00:00:00.000Z stderr F "
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+(?:(?:stdout|stderr)\s+[FP]\s+)?",
            # Buildkite and other CI timestamps: "[2025-01-01T00:00:00Z] "
            r"\[\d{4}-\d\d-\d\dT[\d:.,]+Z?\]\s*",
            # docker compose "vllm-1  | ", "[sglang]     | ", and a bare CI gutter "| "
            r"[\w.-]{1,40}\s+\|\s?",
            r"\[[\w.-]{1,40}\]\s+\|\s?",
            r"\|\s",
            # Ray / vLLM process tags: "(Worker_PP0_TP1_EP1 pid=1)", "(VllmWorker rank=5 pid=1)"
            r"(?P<proc>\((?P<pname>[A-Za-z][\w-]*)?(?: ?rank=(?P<prank>\d+))? ?pid=\d+(?:, ip=[\d.]+)?\))\s*",
            # torchrun: "[rank0]:"
            r"\[(?P<trank>rank ?\d+)\]:\s*",
            # sglang: "[2025-06-22 16:13:55 DP3 TP3]", "[15:57:49 TP0]", "[2025-06-22 16:14:00]"
            r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?(?P<sranks>(?: [A-Z]{2,4}\d+)*)\]\s*",
            # a logger-name header, e.g. ATOM's "[atom 12:34:56] "
            r"\[[A-Za-z][\w.-]* \d\d:\d\d:\d\d(?:[.,]\d+)?\]\s*",
            # vLLM logger header: "ERROR 07-15 21:01:01 [multiproc_executor.py:1007] "
            r"(?P<vlvl>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
            r"(?:\[[^\]]*\]|[\w./-]+:\d+\])\s?",
            # uvicorn: "INFO:     "
            r"(?P<ulvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+",
            # glog / c10: "[E ProcessGroupNCCL.cpp:475] ", "[W1015 10:00:00.1 12 CUDAGraph.cpp:145] "
            r"\[(?P<glvl>[EWIF])(?:\d{3,4} [\d:.]+(?: \d+)?)? ?[\w./-]+\.(?:cpp|cc|cu|h|hpp|py):\d+\]\s*",
        )
    )
)
_GLOG_LEVEL = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "CRITICAL"}
# The rank part of a Ray/vLLM actor name: "Worker_PP0_TP1_EP1" -> "PP0_TP1_EP1". vLLM 0.32.0
# (v1/executor/multiproc_executor.py:1088) names Worker_DP<r>_PP<r>_PCP<r>_TP<r>_DCP<r>_EP<r>.
_NAME_RANK = re.compile(r"_((?:[A-Z]{2,3}\d+)(?:_[A-Z]{2,3}\d+)*)$")
# A rank named inside the message: "[Rank 4]", "[PG ID 0 PG GUID 0(default_pg) Rank 2]".
_MESSAGE_RANK = re.compile(r"\[(?:PG [^\]]*?)?(Rank \d+)\]")


class Stripped(NamedTuple):
    """A segment without its prefixes."""

    message: str
    rank: str | None      # as printed: "TP1", "DP3 TP3", "rank=5", "rank0", "PP0_TP1_EP1"
    level: str | None     # "ERROR", "WARNING", ... when a logger header shows one
    prefixed: bool        # a process or rank tag was present (even one without a rank)


def segments(line: str) -> list[str]:
    """Split a physical line into logical segments (``\\r`` redraws, glued tqdm bars)."""
    parts = line.split("\r") if "\r" in line else [line]
    out: list[str] = []
    for part in parts:
        if "/s]" in part or "/it]" in part:
            pieces = _BAR_END.split(part)
            if len(pieces) > 1 and not pieces[-1]:
                pieces.pop()
            out.extend(pieces)
        else:
            out.append(part)
    return out


def clean(text: str) -> str:
    """Remove terminal and copy-paste noise, keeping the words."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "m" in text and "[" in text:
        text = _ANSI_NO_ESC.sub("", text)
    if "<" in text:
        text = _HTML.sub("", text)
    if "&" in text:
        for entity, char in _ENTITIES:
            text = text.replace(entity, char)
    return text.replace("\x00", "").replace("^@", "").replace("**", "")


def compile_prefixes(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """Compile a dialect's extra prefix regexes (each may name a group ``rank``)."""
    return tuple(re.compile(p) for p in patterns)


def strip_prefixes(text: str, extra: Sequence[re.Pattern[str]] = ()) -> Stripped:
    """Strip wrappers, timestamps, process/rank tags and logger headers from the front."""
    rank: str | None = None
    level: str | None = None
    prefixed = False
    pos, end = 0, len(text)
    for _ in range(12):  # a real line has at most a handful of nested prefixes
        while pos < end and text[pos] in " \t":
            pos += 1
        found = _match_prefix(text, pos, extra)
        if found is None:
            break
        new_pos, is_tag, tag_rank, tag_level = found
        prefixed = prefixed or is_tag
        rank = rank or tag_rank
        level = level or tag_level
        pos = new_pos
    return Stripped(text[pos:].strip(), rank, level, prefixed)


def _match_prefix(
    text: str, pos: int, extra: Sequence[re.Pattern[str]]
) -> tuple[int, bool, str | None, str | None] | None:
    """The prefix at ``pos``: (its end, whether it is a process/rank tag, rank, level)."""
    for pattern in extra:
        m = pattern.match(text, pos)
        if m and m.end() > pos:
            rank = m.group("rank") if "rank" in pattern.groupindex else None
            return m.end(), True, rank or None, None
    m = _PREFIX.match(text, pos)
    if m is None or m.end() == pos:
        return None
    g = m.groupdict()
    if g["proc"] is not None:
        rank = f"rank={g['prank']}" if g["prank"] else None
        if rank is None and g["pname"]:
            named = _NAME_RANK.search(g["pname"])
            rank = named.group(1) if named else None
        return m.end(), True, rank, None
    if g["trank"] is not None:
        return m.end(), True, g["trank"], None
    if g["sranks"] is not None:
        return m.end(), True, g["sranks"].strip() or None, None
    level = g["vlvl"] or g["ulvl"] or (_GLOG_LEVEL[g["glvl"]] if g["glvl"] else None)
    return m.end(), False, None, level


def message_rank(message: str) -> str | None:
    """A rank named inside the message ("[Rank 4] Watchdog caught ..."), if any."""
    m = _MESSAGE_RANK.search(message)
    return m.group(1) if m else None
