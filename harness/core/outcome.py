"""The outcome of a trial: one class per way a launch can end."""
from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
    """Class of a trial. Values are the names used in logs, MLflow and reports."""

    READY = "READY"
    IMA = "IMA"                      # illegal memory access / memory access fault
    CAPTURE_ERROR = "CAPTURE_ERROR"  # CUDA-graph capture itself failed (op not permitted while capturing)
    SEGFAULT = "SEGFAULT"
    OOM = "OOM"
    DEVICE_ASSERT = "DEVICE_ASSERT"  # device-side assert from a kernel
    NCCL = "NCCL"
    COMM_TIMEOUT = "COMM_TIMEOUT"    # collective / RPC timeout that is not an NCCL error
    LIBRARY_ERROR = "LIBRARY_ERROR"  # a vendor library failed to load or run (hipBLASLt, cuBLAS, ...)
    ASSERTION = "ASSERTION"          # Python-level assertion / unsupported configuration
    HANG = "HANG"                    # stopped printing (quiet timeout) or a watchdog fired
    TIMEOUT = "TIMEOUT"              # kept printing but was not ready by the startup deadline
    OTHER = "OTHER"                  # failed in a way none of the above names
    # Not the target's fault: never counted in arm statistics.
    PATCH_FAILED = "PATCH_FAILED"
    INFRA = "INFRA"
    HARNESS_ERROR = "HARNESS_ERROR"

    @property
    def counts(self) -> bool:
        """Whether a trial with this outcome counts in arm statistics."""
        return self not in _NOT_COUNTED

    @property
    def is_failure(self) -> bool:
        """A counted outcome other than READY."""
        return self.counts and self is not Outcome.READY


_NOT_COUNTED = frozenset({Outcome.PATCH_FAILED, Outcome.INFRA, Outcome.HARNESS_ERROR})
