"""The store: runs/<matrix>/<arm-id>/<k>/{server.log,result.json}, written first, read by everything else."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

from harness.adapters.files import atomic_write
from harness.core.arms import Arm
from harness.core.plan import TrialKey
from harness.core.record import TrialResult

RESULT = "result.json"
LOG = "server.log"
SUPERSEDED = ".superseded"


def _write_atomic(path: Path, data: Any) -> None:
    atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


class Store:
    """One campaign's folder. A trial is done when its result.json exists (written atomically)."""

    def __init__(self, runs_dir: Path, matrix: str):
        self.runs_dir = runs_dir
        self.root = runs_dir / matrix
        self.matrix = matrix

    def trial_dir(self, arm_id: str, k: int) -> Path:
        """runs/<matrix>/<arm-id>/<k>/"""
        return self.root / arm_id / str(k)

    def fresh_trial_dir(self, arm_id: str, k: int) -> Path:
        """The trial's folder, emptied of anything an interrupted or redone attempt left."""
        d = self.trial_dir(arm_id, k)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def supersede(self, arm_ids: Sequence[str]) -> tuple[int, Path | None]:
        """Move every trial folder of these arms out of the campaign, into
        runs/<matrix>/.superseded/<UTC time>/<arm-id>/<k>/ (kept as evidence, never counted).
        Returns (trials moved, the folder they went to)."""
        dest = self.root / SUPERSEDED / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        moved = 0
        for arm_id in arm_ids:
            arm_dir = self.root / arm_id
            if not arm_dir.is_dir():
                continue
            for trial in sorted(d for d in arm_dir.iterdir() if d.is_dir() and d.name.isdigit()):
                (dest / arm_id).mkdir(parents=True, exist_ok=True)
                trial.rename(dest / arm_id / trial.name)
                moved += 1
        return moved, dest if moved else None

    def write_result(self, result: TrialResult) -> Path:
        """Write result.json atomically; a reader never sees half a record."""
        path = self.trial_dir(result.arm_id, result.trial) / RESULT
        _write_atomic(path, result.to_dict())
        return path

    def write_arms(self, arms: Sequence[Arm], extra: dict[str, Any] | None = None, size: int | None = None) -> None:
        """arms.json: the legend (label, levels, id) of the arms last run, and the campaign's size
        (trials per arm counted; see core.campaign)."""
        _write_atomic(self.root / "arms.json", {
            "matrix": self.matrix, **(extra or {}), **({"repeats": size} if size is not None else {}),
            "arms": [{"arm_id": a.arm_id, "label": a.label, "levels": dict(a.levels), "title": a.title}
                     for a in arms]})

    def _arms_file(self) -> dict[str, Any]:
        path = self.root / "arms.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def read_arms(self) -> list[dict[str, Any]]:
        """The legend written by the last run (empty if none)."""
        return list(self._arms_file().get("arms", []))

    def read_run(self) -> dict[str, Any]:
        """What the last run recorded beside its legend (file, description, adaptive settings)."""
        return {k: v for k, v in self._arms_file().items() if k != "arms"}

    def size(self) -> int | None:
        """The campaign's size as the last run recorded it (None: a store from before sizes)."""
        value = self._arms_file().get("repeats")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def result_paths(self) -> Iterator[Path]:
        """Every result.json of the campaign (superseded launches are not part of it)."""
        if self.root.is_dir():
            yield from sorted(p for p in self.root.glob(f"*/*/{RESULT}")
                              if p.parent.name.isdigit() and not p.parent.parent.name.startswith("."))

    def done(self) -> set[TrialKey]:
        """Trials that have a result."""
        return {TrialKey(p.parent.parent.name, int(p.parent.name)) for p in self.result_paths()}

    def results(self) -> list[TrialResult]:
        """Every stored result (unreadable files are skipped by load_results' caller via errors)."""
        return [r for r, _ in self.results_with_errors() if r is not None]

    def results_with_errors(self) -> list[tuple[TrialResult | None, str | None]]:
        """Each result.json parsed, or the reason it could not be."""
        out: list[tuple[TrialResult | None, str | None]] = []
        for p in self.result_paths():
            try:
                out.append((TrialResult.from_dict(json.loads(p.read_text(encoding="utf-8"))), None))
            except (ValueError, KeyError, TypeError) as exc:
                out.append((None, f"{p}: {exc}"))
        return out
