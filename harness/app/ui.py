"""Use case: the MLflow UI over a store's tracking database, for as long as the harness runs.

`mlflow ui` forks a uvicorn server; a plain child would keep the port when the harness is stopped
by a signal. It runs under the reaper instead (adapters.process): its whole tree is stopped when
the harness is interrupted or terminated, and killed should the harness itself be killed."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO

from harness.adapters.mlflow_server import SERVER_ENV
from harness.adapters.process import ProcessTree
from harness.adapters.tracking import ui_command

STOP_TIMEOUT_S = 15.0   # uvicorn's graceful shutdown, on a loaded host


def serve_ui(runs_dir: Path, port: int, host: str = "127.0.0.1", out: BinaryIO | None = None) -> int:
    """Run the UI until it ends or the harness is interrupted (KeyboardInterrupt propagates, after the
    UI's whole process tree is stopped). Its output is copied to out (default: stdout). Returns the
    UI's exit code."""
    sink = out or sys.stdout.buffer
    tree = ProcessTree(ui_command(runs_dir, host=host, port=port), {**os.environ, **SERVER_ENV}, Path.cwd())
    try:
        # The tree's output closes when its last process is gone: copying it is waiting for it.
        while chunk := os.read(tree.stdout_fd, 65536):
            sink.write(chunk)
            sink.flush()
        tree.exited.wait(STOP_TIMEOUT_S)
        return tree.returncode if tree.returncode is not None else 1
    finally:
        tree.stop(timeout_s=STOP_TIMEOUT_S)
        tree.close()
