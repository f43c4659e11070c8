"""Secrets never reach logs, MLflow or reports."""
from __future__ import annotations

import re
from typing import Mapping

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
