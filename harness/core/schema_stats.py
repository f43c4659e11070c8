"""The stats block (alpha, margin, compare, adaptive repeats) and the baseline arm, validated."""
from __future__ import annotations

from typing import Any, Mapping

from harness.core.arms import baseline_of, expand, title_of
from harness.core.checker import Checker, kind, optional, scalar_str
from harness.core.matrix import Axis, Compare, Goal, Matrix, Stats
from harness.core.stats import RATE_TESTS

STATS_KEYS = ("alpha", "margin", "compare", "test", "max_repeats", "batch", "goal", "max_fail_rate",
              "lower_is_better", "margins")


def parse_stats(c: Checker, value: Any, repeats: Any) -> tuple[int, Stats]:
    """The stats block and the repeats it goes with: an integer, or "auto" (adaptive, needs max_repeats)."""
    m = {k: v for k, v in c.mapping(value if value is not None else {}, "stats", STATS_KEYS).items()
         if v is not None}
    adaptive = repeats == "auto"
    max_repeats = optional(m, "max_repeats", lambda v, k: c.integer(v, k, 1), "stats", None)
    if adaptive and max_repeats is None:
        raise c.fail("stats.max_repeats", "repeats: auto needs stats.max_repeats, the most launches per arm "
                                          "(e.g. 24)")
    if not adaptive:
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise c.fail("repeats", f"expected an integer >= 1 or auto, got {kind(repeats)}")
    lower = optional(m, "lower_is_better", c.strings, "stats", ())
    margins = {str(k): c.fraction(v, f"stats.margins.{k}", 0, float("inf"), "a positive margin")
               for k, v in c.mapping(m.get("margins") or {}, "stats.margins").items()}
    stats = Stats(
        alpha=optional(m, "alpha", lambda v, k: c.fraction(v, k, 0, 0.5, "an error rate"), "stats", 0.05),
        margin=optional(m, "margin", lambda v, k: c.fraction(v, k, 0, 1.0 + 1e-9, "a margin on rates"),
                         "stats", 0.2),
        compare=Compare(optional(m, "compare", lambda v, k: c.choice(v, k, tuple(x.value for x in Compare)),
                                  "stats", Compare.BASELINE.value)),
        test=optional(m, "test", lambda v, k: c.choice(v, k, RATE_TESTS), "stats", "fisher"),
        adaptive=adaptive,
        max_repeats=max_repeats,
        batch=optional(m, "batch", lambda v, k: c.integer(v, k, 1), "stats", 1),
        goal=Goal(optional(m, "goal", lambda v, k: c.choice(v, k, tuple(x.value for x in Goal)),
                            "stats", Goal.COMPARE.value)),
        max_fail_rate=optional(m, "max_fail_rate", lambda v, k: c.fraction(v, k, 0, 1, "a failure rate"),
                                "stats", 1 / 3),
        lower_is_better=lower,
        margins=margins,
    )
    return (max_repeats if adaptive else repeats), stats  # type: ignore[return-value]


def parse_baseline(c: Checker, value: Any, axes: tuple[Axis, ...]) -> Mapping[str, str] | str | None:
    """baseline: levels for every axis, or an arm's label (A, B…) or title ("fix=off")."""
    if value is None:
        return None
    if isinstance(value, str):
        return c.string(value, "baseline")
    return assignment(c, c.mapping(value, "baseline"), "baseline", {a.name: a for a in axes}, complete=True)


def check_baseline(c: Checker, matrix: Matrix) -> None:
    """The baseline must be one of the matrix's arms (after include / exclude)."""
    if matrix.baseline is None:
        return
    arms = expand(matrix)
    if baseline_of(matrix, arms) is not None:
        return
    if isinstance(matrix.baseline, str):
        raise c.fail("baseline", f"no arm {matrix.baseline!r}; arms: "
                                 + "; ".join(f"{a.label} ({a.title})" for a in arms))
    raise c.fail("baseline", "names an arm that include/exclude leave out: " + title_of(matrix.baseline))


def assignment(c: Checker, m: Mapping[str, Any], where: str, names: Mapping[str, Axis], complete: bool) -> dict[str, str]:
    result = {}
    for ax, lv in m.items():
        if ax not in names:
            raise c.fail(f"{where}.{ax}", f"no axis {ax!r}; axes: {', '.join(names) or '(none)'}")
        lv = scalar_str(lv) if not isinstance(lv, (Mapping, list)) else lv
        valid = [x.name for x in names[ax].levels]
        if lv not in valid:
            raise c.fail(f"{where}.{ax}", f"axis {ax!r} has no level {lv!r}; levels: {', '.join(valid)}")
        result[str(ax)] = lv
    if complete and set(result) != set(names):
        missing = sorted(set(names) - set(result))
        raise c.fail(where, f"must name a level for every axis; missing: {', '.join(missing)}")
    return result
