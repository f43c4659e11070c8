"""Readiness per engine: the parsers on literal answers, the hooks against a real HTTP server."""
from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from harness.adapters.engines import LaunchContext, get_engine, probes
from harness.core.matrix import ReadyCheck

CTX = LaunchContext(python="py", host="127.0.0.1", port=1, model="m", tp=1, dp=1, ep=1, args=(), command=(),
                    worktree=None)


@pytest.mark.parametrize("body, ids", [
    (b'{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","max_model_len":4096}]}',
     ["Qwen/Qwen3-0.6B"]),
    (b'{"object":"list","data":[]}', []),
    (b'{"data":[{"object":"model"}]}', []),
    (b'{"data":{"id":"x"}}', []),
    (b"[]", []),
    (b"<html>502 Bad Gateway</html>", []),
    (b"\xff\xfe", []),
])
def test_listed_models(body, ids) -> None:
    assert probes.listed_models(body) == ids


@pytest.mark.parametrize("body, ok", [
    (b'{"id":"cmpl-1","choices":[{"index":0,"text":" 2","finish_reason":"length"}]}', True),
    (b'{"choices":[{"index":0,"text":""}]}', True),
    (b'{"choices":[]}', False),
    (b'{"object":"error","message":"model not ready"}', False),
    (b"not json", False),
])
def test_completion_answered(body, ok) -> None:
    assert probes.completion_answered(body) is ok


class FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """Serves /v1/models and /v1/completions from the class attributes a test sets."""

    models: list[str] = []
    completion_status = 200
    completions: list[dict] = []

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, {"object": "list", "data": [{"id": m} for m in self.models]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).completions.append(body)
        self._send(self.completion_status, {"choices": [{"index": 0, "text": " 2"}]})

    def _send(self, code: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    FakeOpenAI.models, FakeOpenAI.completion_status, FakeOpenAI.completions = [], 200, []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_vllm_is_ready_when_v1_models_lists_a_model(server) -> None:
    hook = get_engine("vllm").ready_hook(CTX)
    assert hook(server, 2.0) is False
    FakeOpenAI.models = ["m"]
    assert hook(server, 2.0) is True


def test_atom_is_ready_when_a_completion_is_answered(server) -> None:
    hook = get_engine("atom").ready_hook(CTX)
    assert hook(server, 2.0) is False and FakeOpenAI.completions == []
    FakeOpenAI.models, FakeOpenAI.completion_status = ["openai/gpt-oss-120b"], 503
    assert hook(server, 2.0) is False
    FakeOpenAI.completion_status = 200
    assert hook(server, 2.0) is True
    assert FakeOpenAI.completions[-1]["model"] == "openai/gpt-oss-120b"
    assert FakeOpenAI.completions[-1]["max_tokens"] == 1


def test_nothing_listening_is_not_ready() -> None:
    assert probes.models_ready("http://127.0.0.1:9", 0.5) is False
    assert probes.completion_ready("http://127.0.0.1:9", 0.5) is False


def test_sglang_waits_for_health_generate_and_its_ready_line() -> None:
    sglang = get_engine("sglang")
    ready = sglang.ready(ReadyCheck())
    assert (ready.http_path, ready.require_both) == ("/health_generate", True)
    assert "fired up and ready to roll" in ready.log_marker
    assert sglang.ready_hook(CTX) is None
    own = ReadyCheck(http_path="/v1/models")
    assert sglang.ready(own) is own


def test_vllm_and_atom_keep_the_configured_check() -> None:
    for name in ("vllm", "atom"):
        assert get_engine(name).ready(ReadyCheck()) == ReadyCheck()


def test_engine_caches_land_in_the_given_folder(tmp_path) -> None:
    from harness.adapters.source.caches import JIT_CACHES
    for name in ("vllm", "sglang", "atom", "command"):
        env = get_engine(name).cache_env(tmp_path)
        assert all(Path(v).is_relative_to(tmp_path) for v in env.values())
        assert not set(env) & set(JIT_CACHES)   # the generic JIT caches are set once, elsewhere
    assert get_engine("vllm").cache_env(tmp_path) == {"VLLM_CACHE_ROOT": str(tmp_path / "vllm")}
    assert get_engine("sglang").cache_env(tmp_path)["SGLANG_DG_CACHE_DIR"] == str(tmp_path / JIT_CACHES["DG_JIT_CACHE_DIR"])
