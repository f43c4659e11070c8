"""What the checks before launch find, collected rather than raised at the first: a dry run shows
every one as a warning, a real run refuses every blocking one in a single error."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from harness.errors import ConfigError


@dataclass(frozen=True)
class Problem:
    """One finding: the matrix key it is about and what was expected. blocks=False marks what a real
    run gets past and records instead (a patch that does not apply: the arm's trials PATCH_FAILED)."""

    key: str | None
    message: str
    blocks: bool = True

    @classmethod
    def of(cls, err: ConfigError) -> "Problem":
        """The problem a check reported by raising."""
        return cls(err.key, err.message)

    def line(self, file: str | None) -> str:
        """file: key: message, as a single ConfigError reads."""
        return ": ".join(p for p in (file, self.key, self.message) if p)


def refusal(problems: Sequence[Problem], file: str | None) -> ConfigError | None:
    """One ConfigError for every blocking problem (each line naming file and key), None if none
    blocks. A single problem reads exactly as the check's own error."""
    blocking = [p for p in problems if p.blocks]
    if not blocking:
        return None
    if len(blocking) == 1:
        return ConfigError(blocking[0].message, file=file, key=blocking[0].key)
    lines = "\n".join(f"  {p.line(file)}" for p in blocking)
    return ConfigError(f"{len(blocking)} problems stop this run (nothing was launched):\n{lines}")
