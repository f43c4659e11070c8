"""PR diffs: fetched once from a (local) server, cached with their sha256; offline errors."""
from __future__ import annotations

import functools
import http.server
import json
import socket
import threading

import pytest

from harness.adapters.source import prcache
from harness.errors import ConfigError
from tests.adapters.source.conftest import FIX


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path, monkeypatch):
    root = tmp_path / "www"
    (root / "o" / "r" / "pull").mkdir(parents=True)
    (root / "o" / "r" / "pull" / "1.diff").write_text(FIX)
    (root / "o" / "r" / "pull" / "2.diff").write_text("<html>rate limited</html>")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv(prcache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(prcache.BASE_URL_ENV, f"http://127.0.0.1:{httpd.server_address[1]}")
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_fetched_once_then_served_from_the_cache(served, tmp_path):
    path = prcache.resolve("o/r#1")
    assert path == tmp_path / "cache" / "o_r_1.diff" and path.read_text() == FIX
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["pr"] == "o/r#1" and meta["url"].endswith("/o/r/pull/1.diff") and len(meta["sha256"]) == 64
    served.shutdown()
    assert prcache.resolve("o/r#1") == path


def test_offline_without_a_cached_diff_says_where_to_put_it(served, tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv(prcache.BASE_URL_ENV, f"http://127.0.0.1:{closed}")
    with pytest.raises(ConfigError) as e:
        prcache.resolve("o/r#1", file="m.yaml", key="axes.a.on.patches[0].pr")
    assert e.value.key == "axes.a.on.patches[0].pr" and e.value.file == "m.yaml"
    assert f"put the file at {tmp_path / 'cache' / 'o_r_1.diff'}" in str(e.value)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "o_r_1.diff").write_text(FIX)          # placed by hand
    assert prcache.resolve("o/r#1").read_text() == FIX
    assert json.loads((tmp_path / "cache" / "o_r_1.json").read_text())["url"] == "placed by hand"


def test_not_a_diff_and_a_changed_cache_are_errors(served, tmp_path):
    with pytest.raises(ConfigError, match="not a diff"):
        prcache.resolve("o/r#2")
    with pytest.raises(ConfigError, match="404"):
        prcache.resolve("o/r#3")
    path = prcache.resolve("o/r#1")
    path.write_text(FIX + "edited\n")
    with pytest.raises(ConfigError, match="has changed since it was fetched"):
        prcache.resolve("o/r#1")


def test_default_places(monkeypatch, tmp_path):
    monkeypatch.delenv(prcache.CACHE_ENV, raising=False)
    monkeypatch.delenv(prcache.BASE_URL_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert prcache.diff_path("vllm-project/vllm#123") == tmp_path / ".cache/harness/patches/vllm-project_vllm_123.diff"
    assert prcache.url_of("vllm-project/vllm#123") == \
        "https://patch-diff.githubusercontent.com/raw/vllm-project/vllm/pull/123.diff"


def test_a_cache_lookup_never_fetches_nor_writes(served, tmp_path):
    assert prcache.cached("o/r#1") is None and not (tmp_path / "cache").exists()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "o_r_1.diff").write_text(FIX)          # placed by hand
    assert prcache.cached("o/r#1") == tmp_path / "cache" / "o_r_1.diff"
    assert not (tmp_path / "cache" / "o_r_1.json").exists(), "a lookup records nothing"
    path = prcache.resolve("o/r#1")
    path.write_text(FIX + "edited\n")
    with pytest.raises(ConfigError, match="has changed since it was fetched") as e:
        prcache.cached("o/r#1", file="m.yaml", key="axes.a.on.patches[0].pr")
    assert e.value.key == "axes.a.on.patches[0].pr"


def test_the_offline_hint_gives_the_url_and_the_path(served, tmp_path):
    hint = prcache.offline_hint("o/r#1")
    assert f"`curl -fL {prcache.url_of('o/r#1')} -o {tmp_path / 'cache' / 'o_r_1.diff'}`" in hint
    assert f"put the file at {tmp_path / 'cache' / 'o_r_1.diff'}" in hint
