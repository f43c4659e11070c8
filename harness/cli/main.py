"""The `harness` command: one row per subcommand, each a thin call into harness.app."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console

from harness.cli.words import EPILOGS, normalize, parse_words
from harness.errors import ConfigError, NoCampaign

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: it takes Ctrl-C's path (the running server stopped, what
    finished kept, tracking flushed)."""


def _stderr() -> Console:
    # soft_wrap: a message is never broken across lines; a path or command must stay copyable.
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _print_markdown(console: Console, text: str) -> None:
    # Written raw: a wrapped markdown table no longer pastes into a pull request.
    console.file.flush()
    sys.stdout.write("\n" + text + "\n")
    sys.stdout.flush()


def _run(ns: argparse.Namespace, console: Console) -> int:
    from harness.app.config import load

    matrix, settings = load(ns.overrides)
    # Imported once the input is known to be good: a typo is answered before the run's machinery loads.
    from harness.app.report import build_report, terminal_table
    from harness.app.run import run_matrix

    outcome = run_matrix(matrix, settings, console)
    if settings.dry_run:
        return EXIT_OK
    report = build_report(matrix, settings.runs_dir)
    tracking_errors = list(outcome.tracking_errors)
    if settings.tracking_enabled and not tracking_errors:   # the writer has finished: one sqlite writer at a time
        from harness.app.dashboard import dashboard_url, publish
        tracking_errors += publish(report, settings)
    console.print(terminal_table(report.data, title=f"{matrix.name}: per-arm results"))
    _print_markdown(console, report.markdown)
    console.print(f"results: {outcome.store}", markup=False, soft_wrap=True)
    for f in report.files:
        console.print(f"report:  {f}", markup=False, soft_wrap=True)
    if settings.tracking_enabled:
        where = settings.tracking_uri or f"sqlite:///{(settings.runs_dir / 'mlflow.db').resolve()}"
        console.print(f"mlflow:  {where} (harness ui)", markup=False, soft_wrap=True)
        if not tracking_errors and (url := dashboard_url(settings, matrix.name)):
            console.print(f"arms:    {url}", markup=False, soft_wrap=True)
    for err in tracking_errors:
        console.print(f"tracking failed, results are in the store; re-feed with "
                      f"`harness sync matrix={matrix.name}`: {err}", style="yellow", markup=False, soft_wrap=True)
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
        _stderr().print(f"written: {f}", markup=False)
    return EXIT_OK


def _classify(ns: argparse.Namespace, console: Console) -> int:
    from harness.app.classify import classify_file

    status = EXIT_OK
    for name in ns.logs:
        path = Path(name)
        if not path.is_file():
            console.print(f"{name}: no such file", markup=False, style="red", soft_wrap=True)
            status = EXIT_USAGE
            continue
        info = classify_file(path, ns.ready_marker)
        if ns.json:
            sys.stdout.write(json.dumps(info) + "\n")
            continue
        console.print(f"{name}: {info['outcome'] or 'no verdict (no error, no ready marker)'}", markup=False,
                      soft_wrap=True)
        for key in ("ready_line", "first_error_line", "failing_rank", "failing_bs", "shapes_captured", "shapes_total",
                    "capture_s", "signature"):
            if info[key] is not None:
                console.print(f"  {key}: {info[key]}", markup=False, highlight=False, soft_wrap=True)
    return status


def _sync(ns: argparse.Namespace, console: Console) -> int:
    from harness.adapters.tracking import Tracker, TrackingConfig
    from harness.app.config import load

    matrix, settings = load(ns.overrides)
    tracker = Tracker(TrackingConfig(uri=settings.tracking_uri), settings.runs_dir)
    rep = tracker.sync(settings.runs_dir / matrix.name)
    console.print(f"logged {rep.logged}, already there {rep.skipped}, removed {rep.removed} (launches no longer "
                  f"stored), failed {len(rep.failed)}", markup=False, soft_wrap=True)
    for path, msg in rep.failed:
        console.print(f"  {path}: {msg}", markup=False, soft_wrap=True)
    from harness.app.dashboard import publish
    from harness.app.report import build_report

    errors = publish(build_report(matrix, settings.runs_dir, formats=()), settings)
    for err in errors:
        console.print(f"  report not published: {err}", markup=False, soft_wrap=True)
    return EXIT_OK if not rep.failed and not errors else EXIT_FAILED


def _ui(ns: argparse.Namespace, console: Console) -> int:
    from harness.app.ui import serve_ui

    words = parse_words(ns.overrides, {"port": "5000", "runs_dir": "runs"}, "ui")
    if not words["port"].isdigit() or not 0 < int(words["port"]) < 65536:
        raise ConfigError(f"expected a port number (1-65535), got {words['port']!r}", key="port")
    port = int(words["port"])
    console.print(f"MLflow UI on http://127.0.0.1:{port} (Ctrl-C stops it)", markup=False, soft_wrap=True)
    try:
        return serve_ui(Path(words["runs_dir"]), port)
    except Terminated:
        raise
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
        sp = sub.add_parser(name, help=help_text, description=help_text, epilog=EPILOGS.get(name),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        if name in ("run", "report", "sync"):
            sp.add_argument("overrides", nargs="*", metavar="key=value",
                            help="matrix=NAME (or --matrix NAME) and overrides; the keys are listed below")
        if name == "classify":
            sp.add_argument("logs", nargs="+", metavar="LOG")
            sp.add_argument("--json", action="store_true", help="one JSON object per file, one per line")
            sp.add_argument("--ready-marker", default=None, help="an extra regex that marks READY")
        if name == "ui":
            sp.add_argument("overrides", nargs="*", metavar="key=value", help="port=N, runs_dir=PATH")
    return p


_STOPPED = {
    "run": "the running server was stopped; finished trials are in the store. Run the same command again "
           "without rerun=true to resume: trials with a result are not launched again",
    "ui": "the MLflow UI was stopped",
}


def _raise_terminated(signum: int, frame: object) -> None:
    # Once: a second TERM must not cut the clean-up of the first short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point. Bad input (ConfigError) exits 2 with one message; Ctrl-C and SIGTERM stop what runs,
    keep what finished and exit 130 / 143."""
    words = list(sys.argv[1:] if argv is None else argv)
    # Not soft_wrap by default: the live view needs its lines cut to the terminal; messages ask for it.
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=160)
    in_main = threading.current_thread() is threading.main_thread()   # signals reach the main thread only
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main else None
    command = words[0] if words else ""
    try:
        ns = parser().parse_args(normalize(words))
        return COMMANDS[ns.command][1](ns, console)
    except ConfigError as exc:
        _stderr().print(f"error: {exc}", style="red", markup=False)
        return EXIT_USAGE
    except NoCampaign as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        _stderr().print(f"{how}; {_STOPPED.get(command, 'stopped')}", markup=False)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
