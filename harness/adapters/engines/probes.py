"""Readiness tests an engine runs after its health path answered: pure parsers of the answers,
and two small HTTP calls bounded by the time left. A refused connection, an error status, a
timeout or a body that does not parse all read as "not ready yet", never as an exception."""
from __future__ import annotations

import http.client
import json
import urllib.request
from typing import Any

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local probe, never proxied


def listed_models(body: bytes) -> list[str]:
    """The model ids of an OpenAI /v1/models answer ({"data": [{"id": ...}, ...]}); [] if none."""
    doc = _json(body)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return []
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]


def completion_answered(body: bytes) -> bool:
    """An OpenAI /v1/completions answer with at least one choice carrying text."""
    doc = _json(body)
    choices = doc.get("choices") if isinstance(doc, dict) else None
    return isinstance(choices, list) and any(isinstance(c, dict) and isinstance(c.get("text"), str)
                                             for c in choices)


def models_ready(base_url: str, timeout_s: float) -> bool:
    """vLLM: /v1/models lists at least one model (the API server is wired to a live engine)."""
    body = _request(base_url + "/v1/models", None, timeout_s)
    return body is not None and bool(listed_models(body))


def completion_ready(base_url: str, timeout_s: float) -> bool:
    """ATOM: the first listed model answers a one-token completion."""
    body = _request(base_url + "/v1/models", None, timeout_s)
    models = listed_models(body) if body is not None else []
    if not models:
        return False
    payload = {"model": models[0], "prompt": "1 + 1 =", "max_tokens": 1, "temperature": 0}
    answer = _request(base_url + "/v1/completions", payload, timeout_s)
    return answer is not None and completion_answered(answer)


def _request(url: str, payload: dict[str, Any] | None, timeout_s: float) -> bytes | None:
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with _NO_PROXY.open(req, timeout=max(timeout_s, 0.01)) as resp:
            return resp.read() if 200 <= resp.status < 300 else None
    except (OSError, http.client.HTTPException):   # refused, non-2xx (HTTPError), timeout, reset
        return None


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
