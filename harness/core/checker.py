"""Type checks for matrix validation that name the file and the dotted key they report against."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from harness.core.argv import flag_tokens
from harness.errors import ConfigError


class Checker:
    """Type checks that know the file they report against."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, key=key)

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...] | None = None) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {kind(value)}")
        if allowed is not None:
            for k in value:
                if k not in allowed:
                    where = f"{key}.{k}" if key else str(k)
                    raise self.fail(where, f"unknown key {k!r}; valid keys: {', '.join(allowed)}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"expected a non-empty string, got {kind(value)}")
        return value

    def integer(self, value: Any, key: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {kind(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"expected an integer >= {minimum}, got {value}")
        return value

    def number(self, value: Any, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.fail(key, f"expected a positive number of seconds, got {kind(value)}")
        return float(value)

    def fraction(self, value: Any, key: str, low: float, high: float, what: str) -> float:
        """A number strictly inside (low, high)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
            raise self.fail(key, f"expected {what}, a number in ({low:g}, {high:g}), got {kind(value)}")
        return float(value)

    def choice(self, value: Any, key: str, valid: tuple[str, ...]) -> str:
        """One of a fixed set of words."""
        text = self.string(value, key)
        if text not in valid:
            raise self.fail(key, f"unknown value {text!r}; valid: {', '.join(valid)}")
        return text

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {kind(value)}")
        return value

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise self.fail(key, f"expected a list, got {kind(value)}")
        for i, v in enumerate(value):
            if isinstance(v, (Mapping, list, tuple)) or v is None:
                raise self.fail(f"{key}[{i}]", f"expected a string or number, got {kind(v)}")
        return tuple(scalar_str(v) for v in value)

    def args(self, value: Any, key: str) -> tuple[str, ...]:
        if isinstance(value, Mapping):
            return tuple(flag_tokens({str(k): v for k, v in value.items()}))
        return self.strings(value, key)

    def env(self, value: Any, key: str) -> dict[str, str]:
        env = self.mapping(value, key)
        out: dict[str, str] = {}
        for k, v in env.items():
            if v is None or isinstance(v, (Mapping, list, tuple)):
                raise self.fail(f"{key}.{k}", f"expected a string or number, got {kind(v)}")
            out[str(k)] = scalar_str(v)
        return out


def kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def scalar_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def get(data: Mapping[str, Any], key: str, default: Any) -> Any:
    value = data.get(key)
    return default if value is None else value


def optional(data: Mapping[str, Any], key: str, conv: Callable[[Any, str], Any], where: str, default: Any) -> Any:
    value = data.get(key)
    return default if value is None else conv(value, f"{where}.{key}" if where else key)
