"""The CUDA-graph capture ladder as the log shows it: shapes n/N, batch size, seconds.

Formats followed (from the engines' sources):
- vLLM tqdm: ``Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 45%|...| 23/51 [...]``,
  end: ``Graph capturing finished in 12 secs, took 0.45 GiB``;
- sglang tqdm: ``Capturing batches (bs=448 avail_mem=87.41 GB):   8%|...| 4/51 [...]`` (largest
  bs first, so the bs in the last bar is the one being captured) and, piecewise,
  ``Capturing num tokens (num_tokens=8192 avail_mem=76.81 GB): ...``; begin (shapes listed):
  ``Capture target decode CUDA graph begin. …, bs=[1, 2, 4, …], …``; end:
  ``Capture cuda graph end. Time elapsed: 8.53 s`` or ``Capture target decode CUDA graph end.
  elapsed=18.62 s``;
- ATOM tqdm ``Capturing bs=16, max_q_len=1: 50%|...| 4/8``, end ``cudagraph capture[...] cost:
  12.34 seconds``;
- plain text: ``[capture] Capturing CUDA graphs (decode, FULL): 3/8 bs=16``.
"""
from __future__ import annotations

import re

_FRACTION = re.compile(r"(?<![\w/.:-])(\d+)/(\d+)(?![\w/])")
_BS = re.compile(r"\bbs=(\d+)|^Capturing num tokens \(num_tokens=(\d+)")
# sglang announces a phase's shapes before its first bar: "Capture target decode CUDA graph begin.
# backend=full, num_tokens_per_req=1, bs=[1, 2, 4, …], avail mem=…" (main @ 001067f), older
# releases "Capture cuda graph bs [1, 2, 4, …]". It captures the largest first.
_BS_LIST = re.compile(r"\bbs[= ]\[(\d+(?:, ?\d+)*)\]")
# An error that names the shape it was capturing: "failed while capturing bs=8".
_FAILING_BS = re.compile(r"(?:while|when) capturing (?:bs=|batch size )(\d+)")
_BAR_TAIL = re.compile(r"\s*(?::\s*)?\d+%\|.*$|:\s*\d+/\d+.*$")
_END = (  # (engine, pattern); a group named "phase" keys one of several capture phases
    ("vllm", re.compile(r"Graph capturing finished in (?P<s>\d+(?:\.\d+)?) secs?")),
    ("sglang", re.compile(r"Capture cuda graph end\. Time elapsed: (?P<s>\d+(?:\.\d+)?) ?s")),
    ("sglang", re.compile(
        r"Capture (?P<phase>\w+(?: \w+)?) CUDA graph end\. elapsed=(?P<s>\d+(?:\.\d+)?) ?s")),
    ("atom", re.compile(r"cudagraph capture(?:\[[^\]]*\])? cost: (?P<s>\d+(?:\.\d+)?) ?s")),
)


class LadderTracker:
    """Follows capture progress line by line; keeps only the latest state."""

    def __init__(self) -> None:
        self.open = False                 # a capture started and has not ended
        self.bs: int | None = None        # batch size (or piecewise num_tokens) being captured
        self.named_bs: int | None = None  # a bs an error line says it failed at; beats the bars
        self.captured: int | None = None  # n of the last n/N seen
        self.total: int | None = None     # N of the last n/N seen
        self.last_line: str | None = None  # the physical line of the last capture progress
        self.last_message: str | None = None
        self.last_rank: str | None = None
        self._phase_s: dict[str, float] = {}

    @property
    def capture_s(self) -> float | None:
        """Seconds the capture took: the sum over capture phases (one value per phase)."""
        return round(sum(self._phase_s.values()), 3) if self._phase_s else None

    def observe(self, message: str, raw_line: str, rank: str | None) -> bool:
        """Update from one cleaned message; True when it was a capture line."""
        if "aptur" not in message:
            return False
        for engine, pattern in _END:
            m = pattern.search(message)
            if m:
                phase = m.groupdict().get("phase") or engine
                if len(self._phase_s) < 64:  # bounded: phases are few; ranks repeat them
                    self._phase_s[phase] = float(m.group("s"))
                self.open = False
                return True
        if not message.startswith("Captur"):
            m = _FAILING_BS.search(message)
            if m:  # "failed while capturing bs=32": a capture is running, whatever the bars said
                self.open, self.named_bs = True, int(m.group(1))
            return m is not None
        self.open = True
        self.last_line, self.last_message, self.last_rank = raw_line, message, rank
        fractions = _FRACTION.findall(message)
        if fractions:
            n, total = fractions[-1]
            self.captured, self.total = int(n), int(total)
        m = _BS.search(message)
        if m:
            self.bs = int(m.group(1) or m.group(2))
        elif not fractions:
            listed = _BS_LIST.search(message)
            if listed:  # nothing captured yet in this phase: the first shape is the largest
                sizes = [int(x) for x in listed.group(1).split(",")]
                self.bs, self.captured, self.total = max(sizes), 0, len(sizes)
        return True

    @property
    def failing_bs(self) -> int | None:
        """The bs being captured: as an error line names it, else from the last bar."""
        return self.named_bs if self.named_bs is not None else self.bs

    def close(self) -> None:
        """The server is up: whatever capture was running has finished."""
        self.open = False


def describe(message: str) -> str:
    """The description of a capture line, without its progress bar or counter."""
    return _BAR_TAIL.sub("", message).strip()
