"""What a trial or an arm looks like in MLflow: params, metrics, tags and the redacted record.

Pure functions (no MLflow import): tracking.py writes what these compute. Every string that
reaches MLflow passes through `Secrets.scrub`, and every key through `safe_key`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from harness.core.outcome import Outcome
from harness.core.record import TrialResult
from harness.core.redact import REDACTED, is_secret

TAG_LIMIT = 5000        # below MLflow's 8000 for tags; what the UI shows comfortably
PARAM_LIMIT = 6000      # MLflow 3's MAX_PARAM_VAL_LENGTH
KEY_LIMIT = 250         # MLflow's MAX_ENTITY_KEY_LENGTH
TRUNCATED = " …[truncated]"

# Tags the harness owns on a trial run; one that is absent from a re-log is deleted (it went stale).
TRIAL_TAG_KEYS = ("outcome", "signature", "failing_bs", "failing_rank", "label", "first_error_line", "detail",
                  "harness.counts")


@dataclass(frozen=True)
class RunFields:
    """The params, metrics and tags of one MLflow run, as strings and floats."""

    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


class Secrets:
    """The secret values one trial could leak, and the rules that keep them out of MLflow."""

    def __init__(self, values: Iterable[str] = ()):
        # Longest first so that a secret containing another is replaced whole.
        self.values = tuple(sorted({v for v in values if v and v != REDACTED and len(v) >= 4}, key=len, reverse=True))

    @classmethod
    def of(cls, result: TrialResult) -> "Secrets":
        """Every value the result holds under a secret-looking key (env, config, host) or after a
        secret-looking flag in argv. The store writer redacts already; this is the second lock."""
        found: list[str] = []
        _collect(result.env, found)
        _collect(result.config, found)
        _collect(result.host, found)
        found += _argv_secrets(result.argv)
        return cls(found)

    def scrub(self, text: str) -> str:
        """text with every known secret value replaced by REDACTED."""
        for v in self.values:
            text = text.replace(v, REDACTED)
        return text

    def value(self, key: str, value: str) -> str:
        """What may be logged under key: REDACTED when the key names a secret, else the scrubbed value."""
        last = re.split(r"[./]", key)[-1]
        return REDACTED if is_secret(last) else self.scrub(value)


def _collect(obj: Any, out: list[str]) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if is_secret(str(k)) and isinstance(v, str):
                out.append(v)
            else:
                _collect(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _collect(v, out)


def _flag_is_secret(flag: str) -> bool:
    return flag.startswith("-") and is_secret(flag.lstrip("-").replace("-", "_"))


def _argv_secrets(argv: Sequence[str]) -> list[str]:
    """Values of secret flags: `--api-key X` and `--api-key=X`."""
    out = []
    for i, tok in enumerate(argv):
        name, eq, val = tok.partition("=")
        if _flag_is_secret(name):
            if eq:
                out.append(val)
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out.append(argv[i + 1])
    return out


def _redact(obj: Any, secrets: Secrets) -> Any:
    if isinstance(obj, Mapping):
        return {k: (REDACTED if is_secret(str(k)) and v is not None else _redact(v, secrets)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redact(v, secrets) for v in obj]
    if isinstance(obj, str):
        return secrets.scrub(obj)
    return obj


def redacted_record(result: TrialResult, secrets: Secrets) -> bytes:
    """result.json as it goes to MLflow: secret keys redacted, secret values scrubbed everywhere.
    Canonical (sorted keys), so its sha256 identifies the logged content."""
    d = _redact(result.to_dict(), secrets)
    return (json.dumps(d, indent=2, sort_keys=True) + "\n").encode()


def safe_key(key: str) -> str:
    """An MLflow param/metric/tag key: only [A-Za-z0-9_.-], at most KEY_LIMIT characters."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", key)[:KEY_LIMIT]


def clip(text: str, limit: int) -> str:
    """text cut to limit characters, visibly: the cut ends with TRUNCATED."""
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED if limit > len(TRUNCATED) else text[:limit]


def _guard(d: Mapping[str, str], secrets: Secrets, limit: int) -> dict[str, str]:
    return {safe_key(k): clip(secrets.value(k, v), limit) for k, v in d.items()}


def level_params(levels: Mapping[str, str], secrets: Secrets = Secrets()) -> dict[str, str]:
    """One param per axis: level.<axis> → level name."""
    return _guard({f"level.{axis}": str(level) for axis, level in levels.items()}, secrets, PARAM_LIMIT)


def trial_fields(result: TrialResult, secrets: Secrets) -> RunFields:
    """Params, metrics and tags of a trial's run (identity tags excepted: tracking.py sets those)."""
    params: dict[str, str] = {"engine": result.engine, "tp": str(result.tp), "dp": str(result.dp), "ep": str(result.ep)}
    if result.model is not None:
        params["model"] = result.model
    if result.source.base_sha is not None:
        params["base_sha"] = result.source.base_sha
    for i, p in enumerate(result.source.patches):
        params[f"patch.{i}.{p.name}"] = p.sha256
    lad = result.ladder
    metrics = {"ready": 1.0 if result.outcome is Outcome.READY else 0.0}
    for name, v in (("startup_s", result.startup_s), ("capture_s", lad.capture_s),
                    ("shapes_captured", lad.shapes_captured), ("shapes_total", lad.shapes_total),
                    ("duration_s", result.duration_s), ("verdict_s", result.verdict_s)):
        if v is not None:
            metrics[name] = float(v)
    tags = {"outcome": result.outcome.value, "label": result.label,
            "harness.counts": "true" if result.outcome.counts else "false"}
    for name, v in (("signature", result.signature), ("failing_bs", lad.failing_bs),
                    ("failing_rank", result.failing_rank), ("first_error_line", result.first_error_line),
                    ("detail", result.detail)):
        if v is not None:
            tags[name] = str(v)
    return RunFields(params={**level_params(result.levels, secrets), **_guard(params, secrets, PARAM_LIMIT)},
                     metrics=metrics, tags=_guard(tags, secrets, TAG_LIMIT))


def run_times_ms(result: TrialResult) -> tuple[int | None, int | None]:
    """(start, end) in epoch milliseconds from started_at (ISO-8601, UTC if naive) and duration_s;
    None where the record does not say (MLflow then uses the current time)."""
    if not result.started_at:
        return None, None
    try:
        t0 = datetime.fromisoformat(result.started_at.replace("Z", "+00:00"))
    except ValueError:
        return None, None
    if t0.tzinfo is None:
        t0 = t0.replace(tzinfo=timezone.utc)
    start = round(t0.timestamp() * 1000)
    if result.duration_s is None:
        return start, None
    # The end from the start plus the duration, both in whole ms: MLflow's Duration is the launch's own.
    return start, start + round(result.duration_s * 1000)
