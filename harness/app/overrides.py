"""Command-line overrides checked against the keys a matrix and the settings know, before Hydra sees
them: Hydra's own answer to a typo is "use +repeat=3", which adds a key the matrix then rejects."""
from __future__ import annotations

import difflib
from typing import Any, Mapping, Sequence

from harness.errors import ConfigError

# Maps whose keys are the user's own: anything may be added below them.
OPEN_MAPS = ("env",)


def closest(word: str, known: Sequence[str]) -> str | None:
    """The known word closest to word ("repeats" for "repeat"), or None when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_key(key: str, known: Sequence[str], *, file: str | None, where: str = "") -> ConfigError:
    """The error for an unknown key: the closest known key first, then every valid one."""
    parent, _, last = key.rpartition(".")
    near = closest(last, known)
    hint = f" did you mean {parent + '.' if parent else ''}{near}?" if near else ""
    under = f" under {parent}" if parent else ""
    return ConfigError(f"unknown key {last!r}{where};{hint} valid keys{under}: {', '.join(known)}",
                       file=file, key=key)


def check_overrides(overrides: Sequence[str], tree: Mapping[str, Any], file: str | None) -> None:
    """Every `key=value` must name a key of tree at every level (tree: the settings and the matrix
    with every known key present). Keys prefixed with + or ~ are the user's explicit Hydra syntax and
    are left to Hydra and the matrix's own validation; so is anything below a value that is not a
    mapping (a list, or a key the file leaves unset)."""
    for arg in overrides:
        key, sep, _ = arg.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected key=value, got {arg!r} (for example repeats=3)", file=file, key=key or arg)
        if key[:1] in "+~":
            continue
        node: Any = tree
        parts = key.split(".")
        for i, part in enumerate(parts):
            if not isinstance(node, Mapping) or (i and parts[i - 1] in OPEN_MAPS):
                break
            if part not in node:
                raise unknown_key(".".join(parts[:i + 1]), [str(k) for k in node], file=file,
                                  where=f" (in the override {arg})")
            node = node[part]
