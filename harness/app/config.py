"""Compose conf/ + matrices/NAME.yaml + command-line overrides with Hydra, then validate."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.adapters.engines import engine_names
from harness.core.matrix import Matrix
from harness.core.schema import MATRIX_KEYS, parse_matrix, with_known_keys
from harness.errors import ConfigError
from harness.paths import data_dir, matrix_dirs
from harness.app.overrides import check_overrides, closest, unknown_key
from harness.app.yaml_loader import load_yaml

SETTINGS_KEYS = ("runs_dir", "executor", "tracking", "dry_run", "rerun", "progress")
EXECUTORS = ("local",)


@dataclass(frozen=True)
class Settings:
    """The harness's own settings (not part of the matrix)."""

    runs_dir: Path
    executor: str = "local"
    tracking_uri: str | None = None
    tracking_enabled: bool = True
    dry_run: bool = False
    rerun: bool = False
    progress: bool | None = None   # None = only on a terminal


def available_matrices(cwd: Path | None = None) -> dict[str, Path]:
    """Matrix name -> file; ./matrices wins over the packaged folder."""
    found: dict[str, Path] = {}
    for d in matrix_dirs(cwd):
        for f in sorted(d.glob("*.yaml")):
            found.setdefault(f.stem, f)
    return found


def find_matrix(name: str, cwd: Path | None = None) -> Path:
    """The file for matrix=NAME (or a path to a YAML file)."""
    as_path = Path(name)
    if name.endswith((".yaml", ".yml")) and as_path.is_file():
        return as_path.resolve()
    found = available_matrices(cwd)
    if name not in found:
        raise ConfigError(f"unknown matrix {name!r}; available: {', '.join(found) or '(none)'}",
                          key="matrix")
    return found[name]


def split_overrides(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """Take matrix=NAME out of the override list."""
    name, rest = None, []
    for arg in argv:
        if arg.startswith("matrix="):
            name = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return name, rest


def _hydra_override(arg: str) -> str:
    # Env maps are open: target.env.FOO=1 adds FOO. Everything else must name a known key.
    key = arg.split("=", 1)[0]
    if key[:1] not in "+~" and "env" in key.split(".")[:-1]:
        return "++" + arg
    return arg


def compose_config(matrix_file: Path, overrides: Sequence[str]) -> dict[str, Any]:
    """Hydra composition: conf/config.yaml, then the matrix at the root, then the overrides."""
    data = load_yaml(matrix_file)
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top of the matrix file", file=str(matrix_file))
    for k in data:
        if k not in MATRIX_KEYS:
            raise unknown_key(str(k), MATRIX_KEYS, file=str(matrix_file))
    known = with_known_keys(data)
    check_overrides(overrides, {**load_yaml(data_dir("conf") / "config.yaml"), **known}, str(matrix_file))
    ConfigStore.instance().store(group="matrix", name="selected", node=OmegaConf.create(known),
                                 package="_global_")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(data_dir("conf")), version_base="1.3", job_name="harness"):
            cfg = compose(config_name="config",
                          overrides=["+matrix=selected", *(_hydra_override(o) for o in overrides)])
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except (HydraException, OmegaConfBaseException) as exc:
        message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
        # Hydra's advice to add the key with '+' adds a key the matrix then rejects.
        message = re.sub(r"\s*To append to your config use \+\S+", "", message)
        valid = ", ".join((*SETTINGS_KEYS, *MATRIX_KEYS))
        raise ConfigError(f"command-line override rejected: {message} (top-level keys: {valid})",
                          file=str(matrix_file)) from None
    finally:
        GlobalHydra.instance().clear()


def parse_settings(cfg: dict[str, Any], file: str) -> Settings:
    """The settings part of the composed config."""
    tracking = cfg.get("tracking") or {}
    if not isinstance(tracking, dict) or set(tracking) - {"enabled", "uri"}:
        raise ConfigError("expected a mapping with keys enabled, uri", file=file, key="tracking")
    executor = cfg.get("executor", "local")
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; valid: {', '.join(EXECUTORS)}", file=file, key="executor")
    progress = cfg.get("progress", "auto")
    if progress not in ("auto", True, False):
        raise ConfigError(f"expected auto, true or false, got {progress!r}", file=file, key="progress")
    for key in ("dry_run", "rerun"):
        if not isinstance(cfg.get(key, False), bool):
            raise ConfigError(f"expected true or false, got {cfg.get(key)!r}", file=file, key=key)
    return Settings(runs_dir=Path(str(cfg.get("runs_dir") or "runs")), executor=executor,
                    tracking_uri=tracking.get("uri"), tracking_enabled=bool(tracking.get("enabled", True)),
                    dry_run=cfg.get("dry_run", False), rerun=cfg.get("rerun", False),
                    progress=None if progress == "auto" else progress)


def _local(value: str | None, base: Path) -> str | None:
    """A path written relative to the matrix file ("./x", "../x", "~/x") made absolute; other
    values (a hub model id "org/name", a program on PATH "python3") are left as they are."""
    if value is None:
        return None
    if value.startswith("~"):
        return str(Path(value).expanduser())
    if value.startswith(("./", "../")):
        # abspath, not resolve(): a venv's bin/python is a symlink that must stay a venv's python.
        return os.path.abspath(base / value)
    return value


def resolve_paths(matrix: Matrix) -> Matrix:
    """Interpreter and local model paths are relative to the matrix file, not to the working
    directory (the server runs in a worktree or overlay, where a relative path means nothing)."""
    base = Path(matrix.file).parent
    t = matrix.target
    target = replace(t, python=_local(t.python, base), model=_local(t.model, base))
    axes = tuple(replace(a, levels=tuple(replace(lv, model=_local(lv.model, base)) for lv in a.levels))
                 for a in matrix.axes)
    given = [t.python, t.model, *(lv.model for a in matrix.axes for lv in a.levels)]
    shown = {_local(v, base): v for v in given if v is not None and _local(v, base) != v}
    return replace(matrix, target=target, axes=axes, given_paths={**matrix.given_paths, **shown})


def load(argv: Sequence[str], cwd: Path | None = None) -> tuple[Matrix, Settings]:
    """From `matrix=NAME k=v ...` to a validated Matrix and Settings (ConfigError on bad input)."""
    name, overrides = split_overrides(argv)
    if not name:
        found = available_matrices(cwd)
        typo = next((k for k in (o.partition("=")[0] for o in overrides) if closest(k, ["matrix"])), None)
        hint = f" ({typo!r}: did you mean matrix?)" if typo else ""
        raise ConfigError(f"say which matrix: matrix=NAME{hint}; available: {', '.join(found) or '(none)'}",
                          key="matrix")
    file = find_matrix(name, cwd)
    cfg = compose_config(file, overrides)
    settings = parse_settings(cfg, str(file))
    matrix_data = {k: v for k, v in cfg.items() if k not in SETTINGS_KEYS}
    matrix = parse_matrix(matrix_data, name=file.stem, file=str(file), engines=engine_names())
    matrix = resolve_paths(matrix)
    if matrix.target.engine == "command" and not matrix.target.command:
        raise ConfigError("the command engine needs target.command (an argv list)", file=str(file),
                          key="target.command")
    return matrix, settings
