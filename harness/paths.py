"""Where the packaged configuration, matrices and examples live."""
from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """conf/, matrices/ or examples/: inside the wheel (harness/_data/NAME) or beside the package (editable)."""
    packaged = _PKG / "_data" / name
    return packaged if packaged.is_dir() else _PKG.parent / name


def matrix_dirs(cwd: Path | None = None) -> list[Path]:
    """Matrix folders in search order: ./matrices first, then the packaged one."""
    dirs = [(cwd or Path.cwd()) / "matrices", data_dir("matrices")]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out
