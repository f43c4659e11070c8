"""Arms: the matrix's axes expanded (product, minus exclude, plus include), with stable ids and labels."""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.core.argv import merge_args
from harness.core.matrix import CachePolicy, Matrix, Package, PatchRef, Source, Target


@dataclass(frozen=True)
class Arm:
    """One level per axis, resolved into what is launched."""

    arm_id: str
    label: str
    levels: Mapping[str, str]
    model: str | None
    tp: int
    dp: int
    ep: int
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    patches: tuple[PatchRef, ...] = ()

    @property
    def title(self) -> str:
        """"fix=on, sync=off" (or "base" for a matrix without axes)."""
        return title_of(self.levels)

    def launch_key(self) -> dict[str, Any]:
        """Everything that defines the launch of this arm, as plain data (what arm_id hashes)."""
        return {"levels": dict(self.levels), "model": self.model, "tp": self.tp, "dp": self.dp, "ep": self.ep,
                "args": list(self.args), "env": dict(self.env), "patches": [p.as_dict() for p in self.patches]}


def title_of(levels: Mapping[str, str]) -> str:
    """An arm's levels as people write them: "fix=on, sync=off" ("base" without axes)."""
    return ", ".join(f"{k}={v}" for k, v in levels.items()) or "base"


def arm_name(label: str, title: str) -> str:
    """How every report section names an arm: "B (fix=on)"."""
    return f"{label} ({title})"


def label_for(index: int) -> str:
    """A, B, … Z, AA, AB, … — spreadsheet-style labels for 0-based indices."""
    label = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        label = chr(ord("A") + rem) + label
    return label


def _hash(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _matches(assignment: Mapping[str, str], partial: Mapping[str, str]) -> bool:
    return all(assignment.get(k) == v for k, v in partial.items())


def assignments(matrix: Matrix) -> list[dict[str, str]]:
    """Level assignments in order: the product of axes (declaration order, last axis fastest),
    without those an exclude entry matches, then include entries not already present."""
    names = [a.name for a in matrix.axes]
    product = [dict(zip(names, combo, strict=True))
               for combo in itertools.product(*[[lv.name for lv in a.levels] for a in matrix.axes])]
    kept = [a for a in product if not any(_matches(a, ex) for ex in matrix.exclude)]
    for inc in matrix.include:
        ordered = {n: inc[n] for n in names}
        if ordered not in kept:
            kept.append(ordered)
    return kept


def resolve_arm(matrix: Matrix, levels: Mapping[str, str], label: str, base_sha: str | None = None) -> Arm:
    """Apply the levels, in axis order, on top of the target. base_sha (the resolved source ref)
    is part of the id: the same matrix on other code is another arm."""
    t = matrix.target
    model, tp, dp, ep = t.model, t.tp, t.dp, t.ep
    env = dict(t.env)
    arg_layers = []
    patches: list[PatchRef] = []
    for axis in matrix.axes:
        lv = axis.level(levels[axis.name])
        model = lv.model if lv.model is not None else model
        tp = lv.tp if lv.tp is not None else tp
        dp = lv.dp if lv.dp is not None else dp
        ep = lv.ep if lv.ep is not None else ep
        env.update(lv.env)
        arg_layers.append(lv.args)
        patches.extend(lv.patches)
    args = tuple(merge_args(t.args, *arg_layers))
    draft = Arm("", label, dict(levels), model, tp, dp, ep, args, env, tuple(patches))
    key = {**draft.launch_key(), "engine": t.engine, "command": list(t.command), "source": _source_key(t.source),
           "pythonpath": list(t.pythonpath), "python": t.python, "base_sha": base_sha, **_tree_key(t)}
    return Arm(_hash(key), label, dict(levels), model, tp, dp, ep, args, env, tuple(patches))


def _source_key(source: Source | Package | None) -> dict[str, Any] | None:
    if isinstance(source, Package):
        return {"package": source.package, "repo_dir": source.repo_dir}
    return None if source is None else {"repo": source.repo, "ref": source.ref}


def _tree_key(t: Target) -> dict[str, Any]:
    """The build command and a cache policy other than per_arm change what runs (a cold cache is
    another condition); present only when set, so ids of matrices without them stay as they were."""
    out: dict[str, Any] = {}
    if t.build:
        out["build"] = list(t.build)
    if t.cache is not CachePolicy.PER_ARM:
        out["cache"] = t.cache.value
    return out


def expand(matrix: Matrix, base_sha: str | None = None) -> list[Arm]:
    """All arms of the matrix, labelled A, B, C… in expansion order."""
    return [resolve_arm(matrix, lv, label_for(i), base_sha) for i, lv in enumerate(assignments(matrix))]


def baseline_of(matrix: Matrix, arms: Sequence[Arm]) -> Arm | None:
    """The arm the matrix names as baseline (levels, label or title); None when it names none."""
    b = matrix.baseline
    if b is None:
        return None
    for arm in arms:
        if (isinstance(b, str) and b in (arm.label, arm.title)) or (not isinstance(b, str) and dict(b) == dict(arm.levels)):
            return arm
    return None


_SWITCHES = ({"off", "on"}, {"false", "true"}, {"no", "yes"}, {"disabled", "enabled"}, {"0", "1"})


def switch_axes(matrix: Matrix) -> dict[str, tuple[str, str]]:
    """Axes that are on/off switches, as (off level, on level): shown as ✗ / ✓ in reports."""
    out = {}
    for axis in matrix.axes:
        names = [lv.name for lv in axis.levels]
        if len(names) == 2 and {n.lower() for n in names} in _SWITCHES:
            off, on = sorted(names, key=lambda n: n.lower() in {"on", "true", "yes", "enabled", "1"})
            out[axis.name] = (off, on)
    return out
