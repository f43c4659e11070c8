"""The dry run's output: every arm with the exact argv and env, the trial count, and what would stop
a real run, all at once. Works on any machine (a laptop preparing a cluster run): nothing here
needs the engine, the checkout or the network."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from rich.console import Console

from harness.adapters.engines import context_for, get_engine
from harness.adapters.source import prcache
from harness.app.validate import Checked
from harness.core.argv import shell_text
from harness.core.arms import Arm
from harness.core.matrix import Goal, Matrix, Package
from harness.core.redact import redact_argv, redact_env


def _say(console: Console, text: str, style: str | None = None) -> None:
    # Never wrapped: a path or a `curl ... -o PATH` must survive copy and paste whole.
    console.print(text, soft_wrap=True, markup=False, highlight=False, style=style)


def _source_line(matrix: Matrix, checked: Checked) -> str | None:
    source = matrix.target.source
    if source is None:
        return None
    if isinstance(source, Package):
        python = _shown(matrix, matrix.target.python or sys.executable)
        what = f"the installed package {source.package} (as {python} finds it)"
        found = f"at {checked.top}, fingerprint {checked.base[:12]}" if checked.base else "not found here"
    else:
        top = f" ({checked.top})" if checked.top and str(checked.top) != source.repo else ""
        what = f"{source.repo}{top} at {source.ref}"
        found = f"base {checked.base[:12]}" if checked.base else "not found here"
    provisional = "" if checked.base else "; arm ids below are provisional (the base is part of them)"
    return f"source: {what}: {found}{provisional}"


def _shown(matrix: Matrix, token: str) -> str:
    return matrix.given_paths.get(token, token)


def _pr_line(arms: list[Arm]) -> str | None:
    prs = list(dict.fromkeys(p.pr for a in arms for p in a.patches if p.pr is not None))
    if not prs:
        return None
    state = ", ".join(f"{pr} {'cached' if prcache.diff_path(pr).is_file() else 'NOT cached'}" for pr in prs)
    return f"PR diffs in the patch cache {prcache.cache_dir()}: {state}"


def describe(matrix: Matrix, arms: list[Arm], console: Console, checked: Checked) -> None:
    """The dry run: arms, the exact argv and env of each (paths as the matrix wrote them, no port
    chosen yet), the trial count, and every problem a real run would meet, as warnings."""
    engine = get_engine(matrix.target.engine)
    t = matrix.target
    st = matrix.stats
    upto = "up to " if st.adaptive else ""
    # markup off: a path or title with [brackets] is printed as it is.
    console.print(f"matrix {matrix.name} ({matrix.file}): {len(arms)} arms × {upto}{matrix.repeats} repeats "
                  f"= {upto}{len(arms) * matrix.repeats} trials, schedule {matrix.schedule.value}", soft_wrap=True,
                  markup=False, style="bold")
    if st.adaptive:
        _say(console, f"repeats: auto — a look every {st.batch} launch(es) per arm; each arm stops once "
             + (f"its failure rate is bounded against {st.max_fail_rate:.2f}" if st.goal is Goal.FIX
                else f"its comparisons are decided (α = {st.alpha:g}, margin ±{st.margin:g})"))
    relative = sorted({g for g in matrix.given_paths.values() if g.startswith(("./", "../"))})
    paths = (f"paths as the matrix wrote them; {', '.join(relative)} relative to {Path(matrix.file).parent}"
             if relative else None)
    for line in (_source_line(matrix, checked), _pr_line(arms), paths):
        if line:
            _say(console, line)
    for arm in arms:
        ctx = context_for(matrix, arm, t.python or sys.executable, t.port or "<free port>",
                          Path("<worktree>") if t.source else None)
        argv = [_shown(matrix, a) for a in redact_argv(engine.argv(ctx), dict(arm.env))]
        provisional = "" if checked.base or t.source is None else " (provisional)"
        console.print(f"\n{arm.label} {arm.title}  id {arm.arm_id}{provisional}", soft_wrap=True, markup=False)
        # Shown quoted for reading and copying; the harness itself never runs a shell.
        _say(console, f"  argv: {shell_text(argv)}")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in redact_env(dict(arm.env)).items())
        _say(console, f"  env:  {env or '(none added)'}")
        if t.pythonpath:
            _say(console, f"  PYTHONPATH: {', '.join(t.pythonpath)} (inside the arm's worktree)")
        if arm.patches:
            _say(console, f"  patches: {', '.join(p.name for p in arm.patches)}")
    _warnings(matrix, console, checked)
    console.print(f"\n{upto}{len(arms) * matrix.repeats} trials; nothing launched (dry run).")


def _warnings(matrix: Matrix, console: Console, checked: Checked) -> None:
    blocking = [p for p in checked.problems if p.blocks]
    recorded = [p for p in checked.problems if not p.blocks]
    if blocking:
        n = len(blocking)
        _say(console, f"\nwarning: {n} problem{'s' if n > 1 else ''} would stop a real run here "
                      "(it refuses them all at once, before anything launches):", style="yellow")
        for p in blocking:
            _say(console, f"  {p.line(matrix.file)}", style="yellow")
    if recorded:
        _say(console, "\nwarning: a real run would launch despite these:", style="yellow")
        for p in recorded:
            _say(console, f"  {p.line(matrix.file)}", style="yellow")
