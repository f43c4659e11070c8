"""YAML loading with YAML 1.2 booleans: `on`, `off`, `yes`, `no` stay strings (axis levels)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError


class _Loader(yaml.SafeLoader):
    pass


# Drop YAML 1.1's bool resolver (which turns `on`/`off` into booleans) and add 1.2's.
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def load_yaml(path: Path) -> Any:
    """Parse a YAML file; a syntax error becomes a ConfigError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None
