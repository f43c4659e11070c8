"""The engine interface and its registry: the only place that knows which engines exist."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Protocol

from harness.core.arms import Arm
from harness.core.classify import Dialect
from harness.core.matrix import Matrix, ReadyCheck

# An engine's own readiness test, run after its HTTP path answered 2xx: (base URL, seconds left)
# -> ready yet? False while not ready; never raises for what the server answers.
ReadyHook = Callable[[str, float], bool]


@dataclass(frozen=True)
class LaunchContext:
    """What an engine needs to build its command line for one trial."""

    python: str
    host: str
    port: int | str   # a str only in a dry run ("<free port>")
    model: str | None
    tp: int
    dp: int
    ep: int
    args: tuple[str, ...]
    command: tuple[str, ...]
    worktree: Path | None


def context_for(matrix: Matrix, arm: Arm, python: str, port: int | str,
                worktree: Path | None = None) -> LaunchContext:
    """The launch context of one arm of a matrix."""
    t = matrix.target
    return LaunchContext(python=python, host=t.host, port=port, model=arm.model, tp=arm.tp, dp=arm.dp,
                         ep=arm.ep, args=arm.args, command=t.command, worktree=worktree)


class Engine(Protocol):
    """An inference server kind: how to start it, how many GPUs it takes, how its log reads, how
    to tell it is ready, where its caches live, and which of a matrix's flags it cannot take."""

    name: str

    def argv(self, ctx: LaunchContext) -> list[str]:
        """The server's command line as an argv list."""
        ...

    def gpus(self, ctx: LaunchContext) -> int:
        """How many GPUs one launch occupies on this host (as the engine really counts them)."""
        ...

    def check(self, matrix: Matrix) -> None:
        """Raise ConfigError (file and key) for args this engine is known not to take."""
        ...

    def dialect(self) -> Dialect:
        """Engine-specific log rules for the classifier."""
        ...

    def ready(self, configured: ReadyCheck) -> ReadyCheck:
        """The readiness check to use, given what the matrix configured."""
        ...

    def ready_hook(self, ctx: LaunchContext) -> ReadyHook | None:
        """A test run after the HTTP path answered 2xx (None: the 2xx is enough)."""
        ...

    def cache_env(self, cache_dir: Path) -> Mapping[str, str]:
        """Env vars that point the engine's JIT/compile caches into cache_dir (per arm)."""
        ...


_REGISTRY: dict[str, Callable[[], Engine]] = {}


def register(name: str) -> Callable[[Callable[[], Engine]], Callable[[], Engine]]:
    """Class decorator: make an engine available under name."""
    def deco(factory: Callable[[], Engine]) -> Callable[[], Engine]:
        _REGISTRY[name] = factory
        return factory
    return deco


def get_engine(name: str) -> Engine:
    """The engine called name (KeyError if none)."""
    return _REGISTRY[name]()


def engine_names() -> tuple[str, ...]:
    """Names of every registered engine."""
    return tuple(sorted(_REGISTRY))


_PLACEHOLDER = re.compile(r"\{(python|host|port|model|tp|dp|ep|worktree)\}")


def substitute(token: str, ctx: LaunchContext) -> str:
    """Replace the known {placeholders} in one argv token; other braces (JSON) are left alone."""
    values = {"python": ctx.python, "host": ctx.host, "port": str(ctx.port), "model": ctx.model or "",
              "tp": str(ctx.tp), "dp": str(ctx.dp), "ep": str(ctx.ep),
              "worktree": str(ctx.worktree) if ctx.worktree else ""}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], token)
