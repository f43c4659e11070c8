"""The generic engine: any server given as argv, with its probe and markers."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from harness.adapters.engines.base import LaunchContext, ReadyHook, register, substitute
from harness.core.classify import Dialect
from harness.core.matrix import Matrix, ReadyCheck


@register("command")
class CommandEngine:
    """target.command (with {python} {host} {port} {model} {tp} {dp} {ep} {worktree}) + target.args."""

    name = "command"

    def argv(self, ctx: LaunchContext) -> list[str]:
        return [substitute(t, ctx) for t in (*ctx.command, *ctx.args)]

    def gpus(self, ctx: LaunchContext) -> int:
        # What the target declares: the harness cannot see inside an arbitrary command.
        return ctx.tp * ctx.dp

    def check(self, matrix: Matrix) -> None:
        return None   # any flag may be right for an arbitrary command

    def dialect(self) -> Dialect:
        return Dialect()

    def ready(self, configured: ReadyCheck) -> ReadyCheck:
        return configured

    def ready_hook(self, ctx: LaunchContext) -> ReadyHook | None:
        return None

    def cache_env(self, cache_dir: Path) -> Mapping[str, str]:
        return {}
