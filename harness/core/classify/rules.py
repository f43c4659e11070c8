"""Which message names which outcome, and how strongly: the patterns and their precedence.

Every rule has a tier. Over a whole log the highest tier wins and, within a tier, the earliest
line: root causes (tier 3) beat specific errors (2), which beat generic errors and wrappers (1),
which beat consequences (0) such as "EngineCore failed to start". Within one line the first
matching rule wins, so the order below puts the more specific cause first: an illegal memory
access reported by the NCCL watchdog is IMA, an OOM inside "Capture cuda graph failed" is OOM.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from harness.core.outcome import Outcome

ROOT, SPECIFIC, GENERIC, CONSEQUENCE = 3, 2, 1, 0

_TIER_OF_OUTCOME = {
    Outcome.IMA: ROOT, Outcome.CAPTURE_ERROR: ROOT, Outcome.OOM: ROOT,
    Outcome.DEVICE_ASSERT: ROOT, Outcome.HANG: ROOT, Outcome.SEGFAULT: ROOT,
    Outcome.NCCL: SPECIFIC, Outcome.COMM_TIMEOUT: SPECIFIC,
    Outcome.LIBRARY_ERROR: SPECIFIC, Outcome.ASSERTION: SPECIFIC, Outcome.OTHER: GENERIC,
}


@dataclass(frozen=True)
class Rule:
    """A message pattern that names an outcome."""

    name: str
    outcome: Outcome
    tier: int
    pattern: re.Pattern[str]
    # A Python-level exception: once the server is READY such a line may be one failed
    # request, so it only counts when something fatal follows.
    python_level: bool = False


def _rule(name: str, outcome: Outcome, tier: int, regex: str, python_level: bool = False) -> Rule:
    return Rule(name, outcome, tier, re.compile(regex), python_level)


# A Python exception line: "RuntimeError: ...", "torch.AcceleratorError: ...", "ValueError(...)".
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b(?::|\(|$)")

RULES: tuple[Rule, ...] = (
    # The C++ runtime's "terminate called after throwing an instance of 'c10::DistBackendError'"
    # names only the exception type; the "what():" line after it names the cause (and the rank).
    _rule("terminate", Outcome.OTHER, CONSEQUENCE, r"^terminate called after throwing"),
    _rule("ima", Outcome.IMA, ROOT,
          r"(?i)illegal (?:memory )?access|illegal address|memory access fault|misaligned address"),
    _rule("capture-not-permitted", Outcome.CAPTURE_ERROR, ROOT,
          r"(?i)operation not permitted when stream is capturing|StreamCaptureUnsupported"
          r"|StreamCaptureImplicit|depend on a capturing blocking stream"
          r"|(?:not (?:allowed|permitted|supported)|cannot be called) (?:during|while) "
          r"(?:(?:cuda |hip )?graph|stream) captur"
          # ROCm names the code only: hipErrorStreamCaptureUnsupported = 900 (seed 000, ATOM on
          # HIP 7.2: "Hip error: '…'(900) at hipblaslt.cpp:147")
          r"|(?i:\bhip(?:blaslt)? error\b)[^\n]*?(?:\(900\)|\b900\b)"),
    _rule("oom", Outcome.OOM, ROOT,
          r"(?i)out of memory|OutOfMemoryError|ErrorMemoryAllocation"
          r"|No available memory for the cache blocks|not enough memory|insufficient memory"),
    _rule("device-assert", Outcome.DEVICE_ASSERT, ROOT,
          r"device-side assert(?:ion)? triggered|\.(?:cu|cuh|hip)(?::\d+)?:.*Assertion .* failed"
          r"|block: \[\d+, ?\d+, ?\d+\], thread: \[\d+, ?\d+, ?\d+\] Assertion|ErrorAssert\b"),
    # sglang's soft watchdog (soft=True) only dumps stacks and lets the server run on.
    _rule("hang", Outcome.HANG, ROOT, r"(?i)watchdog timeout(?!.*soft=True)|\bGPU hang\b"),
    _rule("segfault", Outcome.SEGFAULT, ROOT,
          r"Segmentation fault|SIGSEGV|(?i:segfault)|SIGBUS|\bBus error|exit ?code\s*:?\s*-11\b|[Ss]ignal 11\b"),
    _rule("nccl", Outcome.NCCL, SPECIFIC,
          r"(?i)nccl ?error|nccl(?:Unhandled(?:Cuda)?Error|SystemError|InternalError|InvalidArgument"
          r"|InvalidUsage|RemoteError)|Watchdog caught collective operation timeout"
          r"|NCCL communicator was aborted|Process group watchdog thread terminated|DistBackendError"),
    _rule("comm-timeout", Outcome.COMM_TIMEOUT, SPECIFIC,
          r"RPC call to \S+ timed out|[Tt]imed out waiting for|DistStoreError|Socket Timeout"
          r"|[Cc]onnect(?:ion)? timed out|did not respond within"
          # DeepEP (used by vLLM's deepep_high_throughput/low_latency and sglang's deepep a2a):
          # "RuntimeError: DeepEP error: CPU recv timeout" (seed 004, csrc/deep_ep.cpp)
          r"|DeepEP error: (?:CPU|GPU) (?:recv|send) timeout|DeepEP .*timeout"),
    # A bare TimeoutError (vLLM's shm_broadcast dequeue, torch.distributed stores, asyncio).
    _rule("timeout-exception", Outcome.COMM_TIMEOUT, SPECIFIC,
          r"^(?:[A-Za-z_]\w*\.)*TimeoutError\b(?::|$)", python_level=True),
    _rule("library", Outcome.LIBRARY_ERROR, SPECIFIC,
          r"(?i)\b(?:roc|hip)blas(?:lt)? error|cublas(?:lt)? error|cudnn error|miopen(?: error|Status)"
          r"|\b(?:CUBLAS|CUDNN|HIPBLAS|HIPBLASLT|ROCBLAS)_STATUS_(?!SUCCESS)\w+"
          r"|no kernel image is available|NoBinaryForGpu|NVCC compilation failed|nvcc fatal"
          r"|undefined symbol|cannot open shared object file|CUDA_ERROR_INVALID_IMAGE"
          r"|Could not load library|OutOfResources|out of resource:"),
    _rule("assertion", Outcome.ASSERTION, SPECIFIC,
          r"AssertionError|Assertion error|NotImplementedError|validation errors? for"
          r"|(?:Error|Exception)\b.*(?i:not supported|unsupported|not implemented|incompatible"
          r"|(?:not|must be|should be) divisible by|must be a multiple of)",
          python_level=True),
    _rule("compile-wrapper", Outcome.LIBRARY_ERROR, GENERIC, r"CompilationError", python_level=True),
    _rule("capture-wrapper", Outcome.CAPTURE_ERROR, GENERIC,
          r"(?i)previous error during capture|StreamCaptureInvalidated|capture sequence .*invalidated"
          r"|capture (?:\w+ )*cuda graph failed|cuda ?graph capture failed"),
    _rule("gpu-error", Outcome.OTHER, GENERIC,
          r"(?i:cuda|hip) error|Triton Error \[|CUDA driver error|\bcudaError\w+|\bhipError\w+"
          r"|HSA_STATUS_ERROR|Cuda failure|unspecified launch failure|HW Exception by GPU"),
    _rule("consequence", Outcome.OTHER, CONSEQUENCE,
          r"EngineDeadError|EngineCore failed to start|Engine core initialization failed"
          r"|EngineCore encountered|See (?:the )?(?:root cause|stack trace)"
          r"|initialization failed due to an exception|died unexpectedly|Worker proc \S+ died"
          r"|Received sigquit|Connection (?:closed|reset) by peer|SIGABRT|Fatal Python error: Aborted"
          r"|Aborted \(core dumped\)"
          # vLLM 0.32.0 v1/executor/multiproc_executor.py:445 (the API process repeats the cause)
          r"|please check the stack trace above for the root cause"
          # ATOM @ ffdf3bb engine_core_mgr.py:286,337 (seed 000: "proc died / Received unexpected
          # SHUTDOWN signal from DP rank N during initialization")
          r"|Received unexpected SHUTDOWN signal|Some processes failed to start"),
    _rule("fatal-python", Outcome.OTHER, GENERIC, r"^Fatal Python error"),
    Rule("python-exception", Outcome.OTHER, GENERIC, EXCEPTION_LINE, python_level=True),
)

# Hints printed around real errors that name other classes, and notices of errors the server
# handled (optional imports, Python warnings); matched at the message start.
BOILERPLATE = re.compile(
    r"(?:CUDA|HIP) kernel errors might be asynchronously reported|For debugging consider passing"
    r"|Compile with `TORCH_USE_|Search for `(?:cuda|hip)|Possible solutions|If reserved but unallocated"
    r"|If you are running out of memory|You can suppress this exception|Exception raised from"
    r"|frame #\d+:|Device-side assertion tracking was not enabled|Open an issue on GitHub"
    r"|Ignore import error|Failed to import|Failed to load legacy|(?:\S+:\d+: )?[A-Z]\w*Warning:"
)

# vLLM ≤ 0.1x "Starting vLLM API server", 0.32.0 "Starting vLLM server on" (launchers/api_server/
# entry.py:140); sglang http_server.py _wait_and_warmup; ATOM @ ffdf3bb api_server.py:1163; uvicorn.
READY = re.compile(
    r"Application startup complete|Starting vLLM API server|Starting vLLM server on "
    r"|The server is fired up and ready to roll"
    r"|Uvicorn running on|Server started successfully and ready to accept requests"
)

# vLLM prints this while workers are busy, also during long compilations: never fatal by
# itself, but it names the class when a stalled launch ends with nothing more decisive.
STALLED_BROADCAST = re.compile(r"No available shared memory broadcast block found in \d+ second")
STALLED_BROADCAST_RULE = Rule("stalled-broadcast", Outcome.COMM_TIMEOUT, SPECIFIC, STALLED_BROADCAST)

# Log levels whose lines never name a failure (the real error is logged at ERROR or bare).
QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN"})


def dialect_rules(fatal_patterns: Sequence[tuple[str, Outcome]]) -> tuple[Rule, ...]:
    """Turn a dialect's (regex, outcome) pairs into rules, tiered by their outcome."""
    rules = []
    for i, (regex, outcome) in enumerate(fatal_patterns):
        if outcome not in _TIER_OF_OUTCOME:
            raise ValueError(
                f"fatal pattern {regex!r} names {outcome}; a fatal pattern must name one of "
                f"{', '.join(o.value for o in _TIER_OF_OUTCOME)}"
            )
        rules.append(Rule(f"dialect-{i}", outcome, _TIER_OF_OUTCOME[outcome], re.compile(regex)))
    return tuple(rules)


def match(message: str, rules: Sequence[Rule] = RULES) -> Rule | None:
    """The first rule that matches the message, or None."""
    for rule in rules:
        if rule.pattern.search(message):
            return rule
    return None
