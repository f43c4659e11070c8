"""The `harness` command: one row per subcommand, each a thin call into harness.app."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console

from harness.errors import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _print_markdown(console: Console, text: str) -> None:
    # Written raw: a wrapped markdown table no longer pastes into a pull request.
    console.file.flush()
    sys.stdout.write("\n" + text + "\n")
    sys.stdout.flush()


def _run(ns: argparse.Namespace, console: Console) -> int:
    from harness.app.config import load
    from harness.app.report import build_report, terminal_table
    from harness.app.run import run_matrix

    matrix, settings = load(ns.overrides)
    outcome = run_matrix(matrix, settings, console)
    if settings.dry_run:
        return EXIT_OK
    report = build_report(matrix, settings.runs_dir)
    console.print(terminal_table(report.data, title=f"{matrix.name}: per-arm results"))
    _print_markdown(console, report.markdown)
    console.print(f"results: {outcome.store}", markup=False)
    for f in report.files:
        console.print(f"report:  {f}", markup=False)
    if settings.tracking_enabled:
        where = settings.tracking_uri or f"sqlite:///{(settings.runs_dir / 'mlflow.db').resolve()}"
        console.print(f"mlflow:  {where} (harness ui)", markup=False)
    for err in outcome.tracking_errors:
        console.print(f"[yellow]tracking failed, results are in the store; re-feed with "
                      f"`harness sync matrix={matrix.name}`:[/] {err}")
    return EXIT_OK


def _report(ns: argparse.Namespace, console: Console) -> int:
    from harness.app.config import load
    from harness.app.report import FORMATS, build_report, render, terminal_table

    formats = [o.split("=", 1)[1] for o in ns.overrides if o.startswith("format=")]
    fmt = formats[-1] if formats else "terminal"
    if fmt not in (*FORMATS, "terminal"):
        raise ConfigError(f"unknown report format {fmt!r}; valid: {', '.join(('terminal', *FORMATS))}",
                          key="format")
    matrix, settings = load([o for o in ns.overrides if not o.startswith("format=")])
    report = build_report(matrix, settings.runs_dir, ("md", "csv") if fmt == "terminal" else (fmt,))
    if fmt == "terminal":
        console.print(terminal_table(report.data, title=f"{matrix.name}: per-arm results"))
        _print_markdown(console, report.markdown)
    elif fmt != "html":
        sys.stdout.write(render(report.data, fmt, report.markdown, report.csv))
    for f in report.files:
        Console(stderr=True).print(f"written: {f}", markup=False, highlight=False)
    return EXIT_OK


def _classify(ns: argparse.Namespace, console: Console) -> int:
    from harness.app.classify import classify_file

    status = EXIT_OK
    for name in ns.logs:
        path = Path(name)
        if not path.is_file():
            console.print(f"{name}: no such file", markup=False, style="red")
            status = EXIT_USAGE
            continue
        info = classify_file(path, ns.ready_marker)
        if ns.json:
            sys.stdout.write(json.dumps(info) + "\n")
            continue
        console.print(f"[bold]{name}[/]: {info['outcome'] or 'no verdict (no error, no ready marker)'}")
        for key in ("first_error_line", "failing_rank", "failing_bs", "shapes_captured", "shapes_total",
                    "capture_s", "signature"):
            if info[key] is not None:
                console.print(f"  {key}: {info[key]}", markup=False, highlight=False)
    return status


def _sync(ns: argparse.Namespace, console: Console) -> int:
    from harness.adapters.tracking import Tracker, TrackingConfig
    from harness.app.config import load

    matrix, settings = load(ns.overrides)
    tracker = Tracker(TrackingConfig(uri=settings.tracking_uri), settings.runs_dir)
    rep = tracker.sync(settings.runs_dir / matrix.name)
    console.print(f"logged {rep.logged}, already there {rep.skipped}, failed {len(rep.failed)}", markup=False)
    for path, msg in rep.failed:
        console.print(f"  {path}: {msg}", markup=False)
    return EXIT_OK if not rep.failed else EXIT_FAILED


def _ui(ns: argparse.Namespace, console: Console) -> int:
    from harness.adapters.tracking import ui_command

    runs_dir = Path(ns.runs_dir)
    argv = ui_command(runs_dir, host="127.0.0.1", port=ns.port)
    console.print(f"MLflow UI on http://127.0.0.1:{ns.port} (Ctrl-C stops it)", markup=False)
    try:
        return subprocess.call(argv, env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    except KeyboardInterrupt:
        return EXIT_OK


COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace, Console], int]]] = {
    "run": ("run a matrix: harness run matrix=NAME [key=value ...]", _run),
    "report": ("the report of a matrix's stored results: harness report matrix=NAME "
               "[format=terminal|md|html|csv|json]", _report),
    "classify": ("classify existing server logs", _classify),
    "sync": ("feed a matrix's stored results to MLflow again", _sync),
    "ui": ("the MLflow UI over runs/mlflow.db on 127.0.0.1", _ui),
}


def parser() -> argparse.ArgumentParser:
    """The argument parser; overrides are Hydra's key=value syntax."""
    p = argparse.ArgumentParser(prog="harness", description="Declarative experiments for LLM inference servers.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, (help_text, _) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name in ("run", "report", "sync"):
            sp.add_argument("overrides", nargs="*", help="matrix=NAME and key=value overrides")
        if name == "classify":
            sp.add_argument("logs", nargs="+", metavar="LOG")
            sp.add_argument("--json", action="store_true", help="one JSON object per file, one per line")
            sp.add_argument("--ready-marker", default=None, help="an extra regex that marks READY")
        if name == "ui":
            sp.add_argument("--port", type=int, default=5000)
            sp.add_argument("--runs-dir", default="runs")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; ConfigError (bad input) exits 2 with one clear message."""
    ns = parser().parse_args(argv)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=160)
    try:
        return COMMANDS[ns.command][1](ns, console)
    except ConfigError as exc:
        Console(stderr=True).print(f"error: {exc}", style="red", markup=False, highlight=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted; finished trials are in the store, re-run to resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())
