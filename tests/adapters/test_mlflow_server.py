"""MlflowServer's failure paths (the happy path is in test_tracking.py, against real logging)."""
from __future__ import annotations

import socket
import time

import pytest

from harness.adapters.mlflow_server import MlflowServer, MlflowServerError, group_alive, server_command


def test_server_command():
    argv = server_command("sqlite:////x/mlflow.db", "/x/art", 5001)
    assert argv[1:] == ["-m", "mlflow", "server", "--backend-store-uri", "sqlite:////x/mlflow.db",
                        "--artifacts-destination", "/x/art", "--host", "127.0.0.1", "--port", "5001", "--workers", "1"]


def test_refuses_a_port_something_listens_on(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        srv = MlflowServer("sqlite:///x.db", tmp_path / "a", tmp_path / "log", port=s.getsockname()[1])
        with pytest.raises(MlflowServerError, match="already listens"):
            srv.start()
    assert srv.proc is None


def test_a_server_that_dies_during_start_is_reported_with_its_log(tmp_path):
    srv = MlflowServer("nosuchscheme://x", tmp_path / "a", tmp_path / "server.log", start_timeout_s=60)
    t = time.monotonic()
    with pytest.raises(MlflowServerError, match=r"exited with \d+ during start") as e:
        srv.start()
    assert time.monotonic() - t < 45 and "nosuchscheme" in e.value.log_tail
    assert srv.stopped is not None and group_alive(srv.proc.pid) == []
