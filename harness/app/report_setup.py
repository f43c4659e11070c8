"""What a pasted report says about the setup, and argv as a reader would re-run it: no local
absolute paths, no per-trial random port, secrets already masked by the record."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from harness.core.arms import switch_axes
from harness.core.matrix import Matrix
from harness.core.record import TrialResult
from harness.core.redact import redact_argv, redact_env

_PR = re.compile(r"#(\d+)$")


def _distinct(values: Sequence[object]) -> list[str]:
    return [str(v) for v in dict.fromkeys(v for v in values if v not in (None, ""))]


def _parallelism(results: Sequence[TrialResult], matrix: Matrix) -> str:
    shapes = dict.fromkeys((r.tp, r.dp, r.ep) for r in results) or {(matrix.target.tp, matrix.target.dp,
                                                                     matrix.target.ep): None}
    words = []
    for tp, dp, ep in shapes:
        words.append(" ".join([f"TP{tp}"] + [f"{k}{v}" for k, v in (("DP", dp), ("EP", ep)) if v != 1]))
    return " / ".join(words)


def setup_of(matrix: Matrix, results: Sequence[TrialResult]) -> tuple[tuple[str, str], ...]:
    """(what, value) pairs for the setup line: hardware, engine, model, parallelism, build, env, args."""
    t = matrix.target
    hosts = [r.host for r in results]
    hardware = _distinct([h.get("gpus") for h in hosts]) or [
        f"CPU only ({m})" for m in _distinct([h.get("machine") for h in hosts])]
    out = [("hardware", ", ".join(hardware) or "hardware not recorded"), ("engine", t.engine)]
    models = _distinct([r.model for r in results]) or _distinct([t.model])
    if models:
        out.append(("model", ", ".join(models)))
    out.append(("parallelism", _parallelism(results, matrix)))
    refs = _distinct([f"{r.source.ref} @ {r.source.base_sha[:12]}" if r.source.ref else r.source.base_sha[:12]
                      for r in results if r.source.base_sha])
    if refs:
        out.append(("build", ", ".join(refs)))
    # env and args as launched (the records), where every arm shares them; the matrix file only
    # for a record written before records carried their config.
    configs = [r.config for r in results if "env" in r.config]
    if configs:
        envs = [dict(c["env"]) for c in configs]
        env = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs)}
        args: list[str] = []
        for column in zip(*(c.get("args", []) for c in configs)):     # the prefix every arm shares
            if any(a != column[0] for a in column):
                break
            args.append(str(column[0]))
    else:
        env, args = redact_env(dict(t.env)), redact_argv(t.args, t.env)
    out.append(("env", " ".join(f"{k}={v}" for k, v in env.items()) or "none set"))
    if args:
        out.append(("args", " ".join(args)))
    return tuple(out)


def columns_of(matrix: Matrix) -> dict[str, str]:
    """Each axis's column name: "#32467" for a switch whose on level applies one pull request,
    else the axis's own name."""
    switches = switch_axes(matrix)
    out = {}
    for axis in matrix.axes:
        name = axis.name
        if axis.name in switches:
            on = next(lv for lv in axis.levels if lv.name == switches[axis.name][1])
            prs = [p.pr for p in on.patches if p.pr]
            if len(prs) == 1 and len(on.patches) == 1 and (m := _PR.search(prs[0])):
                name = f"#{m.group(1)}"
        out[axis.name] = name
    return out


def _shown_path(token: str, worktree: str | None, home: str, cwd: str) -> str:
    if not token.startswith("/"):
        return token
    for root, shown in ((worktree, "<worktree>"), (cwd, "."), (home, "~")):
        if root and (token == root or token.startswith(root.rstrip("/") + "/")):
            rest = token[len(root.rstrip("/")) + 1:]
            return f"{shown}/{rest}" if rest else shown
    return token


def shown_argv(result: TrialResult, free_port: bool, cwd: Path | None = None) -> tuple[str, ...]:
    """The recorded argv with absolute paths under the worktree, the working folder or HOME written
    relative to them, and (when the port was picked per trial) the port's value as {port}."""
    home, here = os.path.expanduser("~"), str((cwd or Path.cwd()).resolve())
    out: list[str] = []
    port_next = False
    # The launch's port where the record has it; else the value after a --*port flag.
    port = re.compile(rf"(?<![0-9]){result.port}(?![0-9])") if free_port and result.port else None
    for tok in result.argv:
        if port_next or (port is not None and port.search(tok)):
            out.append("{port}" if port_next or port is None else port.sub("{port}", tok))
            port_next = False
            continue
        name, eq, _ = tok.partition("=")
        if free_port and port is None and name.startswith("-") and name.lstrip("-").replace("_", "-").endswith("port"):
            if eq:
                out.append(f"{name}={{port}}")
            else:
                out.append(tok)
                port_next = True
            continue
        out.append(_shown_path(tok, result.source.worktree, home, here))
    return tuple(out)
