"""The adaptive rule as a run records it beside its legend (arms.json) and as a later report reads it
back. Launches stopped by a sequential rule are judged by that rule: its error guarantee holds for
the rule it was calibrated for, not for whatever the matrix file or the command line says now."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from harness.core.matrix import Compare, Goal, Stats

# How each setting the rule or the verdicts use is written out and read back, and how a note names it.
_FIELDS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], str]]] = {
    "batch": (int, int, lambda v: f"batch {v}"),
    "max_repeats": (int, int, lambda v: f"max_repeats {v}"),
    "alpha": (float, float, lambda v: f"α = {v:g}"),
    "margin": (float, float, lambda v: f"margin ±{v:g}"),
    "compare": (lambda v: v.value, Compare, lambda v: f"compare {v.value}"),
    "goal": (lambda v: v.value, Goal, lambda v: f"goal {v.value}"),
    "max_fail_rate": (float, float, lambda v: f"max_fail_rate {v:.3g}"),
    "test": (str, str, lambda v: f"test {v}"),
    "margins": (lambda v: {str(k): float(x) for k, x in v.items()},
                lambda v: {str(k): float(x) for k, x in v.items()},
                lambda v: "margins " + (", ".join(f"{k} ±{x:g}" for k, x in sorted(v.items())) or "none")),
    "lower_is_better": (list, lambda v: tuple(str(x) for x in v),
                        lambda v: "lower_is_better " + (", ".join(v) or "none")),
}


def rule_settings(stats: Stats) -> dict[str, Any]:
    """Every setting of an adaptive rule and its verdicts, as plain JSON for arms.json."""
    return {key: write(getattr(stats, key)) for key, (write, _, _) in _FIELDS.items()}


def stored_stats(current: Stats, stored: Mapping[str, Any]) -> Stats:
    """The run's rule: its stored settings over the current ones (a run recorded by an older version
    stored fewer of them; for those the current value is all there is)."""
    return replace(current, adaptive=True, **{key: read(stored[key]) for key, (_, read, _) in _FIELDS.items()
                                               if key in stored})


def rule_note(rule: Stats, current: Stats, current_repeats: int) -> str:
    """Says that the report judges by the run's rule where the matrix (or the command line) now asks
    for another: "judged by the run's stored rule (α = 0.05); the matrix now says α = 0.01". Empty
    when they agree."""
    if not current.adaptive:
        was, now = ["repeats: auto"], [f"fixed repeats {current_repeats}"]
        keys = [k for k in ("alpha", "max_repeats") if getattr(rule, k) is not None]
        was += [_FIELDS[k][2](getattr(rule, k)) for k in keys]
    else:
        keys = [k for k in _FIELDS if getattr(rule, k) != getattr(current, k)]
        if not keys:
            return ""
        was = [_FIELDS[k][2](getattr(rule, k)) for k in keys]
        now = [_FIELDS[k][2](getattr(current, k)) for k in keys]
    return f"judged by the run's stored rule ({', '.join(was)}); the matrix now says {', '.join(now)}"
