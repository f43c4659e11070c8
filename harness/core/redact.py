"""Secrets never reach logs, MLflow or reports."""
from __future__ import annotations

import re
from typing import Mapping, Sequence

REDACTED = "***"
_SECRET = re.compile(r"(^HF_TOKEN$|_KEY$|_SECRET$|_TOKEN$|PASSWORD|^TOKEN$|^API_KEY$)", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """Whether an environment variable's name marks its value as a secret."""
    return bool(_SECRET.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of env with every secret value replaced by REDACTED."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def redact_text(text: str, env: Mapping[str, str]) -> str:
    """Replace the values of env's secrets wherever they occur in text (argv, log lines)."""
    for k, v in env.items():
        if is_secret(k) and v and len(v) >= 4:
            text = text.replace(v, REDACTED)
    return text


def _secret_flag(token: str) -> bool:
    if not token.startswith("-"):
        return False
    name = token.split("=", 1)[0].lstrip("-").replace("-", "_").upper()
    return is_secret(name)


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """Values given to secret-looking flags (--api-key X, --hf-token=X)."""
    found = []
    for i, tok in enumerate(argv):
        if _secret_flag(tok):
            if "=" in tok:
                found.append(tok.split("=", 1)[1])
            elif i + 1 < len(argv):
                found.append(argv[i + 1])
    return [v for v in found if v]


def redact_argv(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """argv with the values of secret flags and of env's secrets replaced by REDACTED."""
    out = list(argv)
    for i, tok in enumerate(argv):
        if _secret_flag(tok):
            if "=" in tok:
                out[i] = tok.split("=", 1)[0] + "=" + REDACTED
            elif i + 1 < len(argv):
                out[i + 1] = REDACTED
    return [redact_text(t, env) for t in out] if env else out
