"""Validate a matrix mapping (YAML after Hydra composition) into core.matrix objects.

Every error is a ConfigError naming the file and the dotted key, and for unknown keys the valid
ones. Pure: no file system access (patch files and repositories are checked in app.config).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from harness.core.argv import flag_tokens
from harness.core.matrix import (
    Axis, CachePolicy, Compare, Goal, Level, Matrix, Package, PatchRef, ReadyCheck, Schedule, Source, Stats,
    Target,
)
from harness.core.stats import RATE_TESTS
from harness.errors import ConfigError

MATRIX_KEYS = ("description", "target", "axes", "include", "exclude", "repeats", "schedule", "seed",
               "baseline", "gates", "stats")
TARGET_KEYS = ("engine", "command", "source", "pythonpath", "python", "model", "tp", "dp", "ep", "args",
                "env", "host", "port", "ready", "startup_timeout_s", "quiet_timeout_s", "fatal_grace_s",
                "stop_timeout_s", "build", "build_timeout_s", "cache")
LEVEL_KEYS = ("patches", "env", "args", "model", "tp", "dp", "ep")
READY_KEYS = ("http_path", "log_marker", "require_both", "interval_s")
SOURCE_KEYS = ("repo", "ref", "package", "repo_dir")
STATS_KEYS = ("alpha", "margin", "compare", "test", "max_repeats", "batch", "goal", "max_fail_rate",
              "lower_is_better", "margins")
PATCH_KINDS = ("diff", "commit", "range", "pr")
# owner/repo#N as GitHub spells them (owner: letters, digits, hyphens; repo: also . and _).
PR_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+)#([1-9][0-9]*)$")
_PACKAGE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _level_with_keys(value: Any) -> Any:
    if value is None:
        return {k: None for k in LEVEL_KEYS}
    return {k: None for k in LEVEL_KEYS} | dict(value) if isinstance(value, Mapping) else value


def with_known_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with every known key present (None where unset), so a command-line override may set
    any valid key, as the file could have. Unknown keys are kept for parse_matrix to reject."""
    out = {k: data.get(k) for k in MATRIX_KEYS} | dict(data)
    if isinstance(out.get("target"), Mapping):
        target = {k: None for k in TARGET_KEYS} | dict(out["target"])
        ready = target.get("ready")
        if ready is None:
            target["ready"] = {"http_path": "/health", "log_marker": None, "require_both": None, "interval_s": None}
        elif isinstance(ready, Mapping):
            target["ready"] = {"http_path": "/health", "log_marker": None, "require_both": None,
                               "interval_s": None} | dict(ready)
        if isinstance(target.get("source"), Mapping):
            target["source"] = {k: None for k in SOURCE_KEYS} | dict(target["source"])
        out["target"] = target
    if out.get("stats") is None or isinstance(out.get("stats"), Mapping):
        out["stats"] = {k: None for k in STATS_KEYS} | dict(out.get("stats") or {})
    if isinstance(out.get("axes"), Mapping):
        out["axes"] = {ax: ({lv: _level_with_keys(v) for lv, v in levels.items()} if isinstance(levels, Mapping)
                            else levels) for ax, levels in out["axes"].items()}
    return out


class _Checker:
    """Type checks that know the file they report against."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, key=key)

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...] | None = None) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {_kind(value)}")
        if allowed is not None:
            for k in value:
                if k not in allowed:
                    where = f"{key}.{k}" if key else str(k)
                    raise self.fail(where, f"unknown key {k!r}; valid keys: {', '.join(allowed)}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"expected a non-empty string, got {_kind(value)}")
        return value

    def integer(self, value: Any, key: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_kind(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"expected an integer >= {minimum}, got {value}")
        return value

    def number(self, value: Any, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.fail(key, f"expected a positive number of seconds, got {_kind(value)}")
        return float(value)

    def fraction(self, value: Any, key: str, low: float, high: float, what: str) -> float:
        """A number strictly inside (low, high)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
            raise self.fail(key, f"expected {what}, a number in ({low:g}, {high:g}), got {_kind(value)}")
        return float(value)

    def choice(self, value: Any, key: str, valid: tuple[str, ...]) -> str:
        """One of a fixed set of words."""
        text = self.string(value, key)
        if text not in valid:
            raise self.fail(key, f"unknown value {text!r}; valid: {', '.join(valid)}")
        return text

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise self.fail(key, f"expected a list, got {_kind(value)}")
        for i, v in enumerate(value):
            if isinstance(v, (Mapping, list, tuple)) or v is None:
                raise self.fail(f"{key}[{i}]", f"expected a string or number, got {_kind(v)}")
        return tuple(_scalar_str(v) for v in value)

    def args(self, value: Any, key: str) -> tuple[str, ...]:
        if isinstance(value, Mapping):
            return tuple(flag_tokens({str(k): v for k, v in value.items()}))
        return self.strings(value, key)

    def env(self, value: Any, key: str) -> dict[str, str]:
        env = self.mapping(value, key)
        out: dict[str, str] = {}
        for k, v in env.items():
            if v is None or isinstance(v, (Mapping, list, tuple)):
                raise self.fail(f"{key}.{k}", f"expected a string or number, got {_kind(v)}")
            out[str(k)] = _scalar_str(v)
        return out


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _scalar_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _get(data: Mapping[str, Any], key: str, default: Any) -> Any:
    value = data.get(key)
    return default if value is None else value


def _optional(data: Mapping[str, Any], key: str, conv: Callable[[Any, str], Any], where: str, default: Any) -> Any:
    value = data.get(key)
    return default if value is None else conv(value, f"{where}.{key}" if where else key)


def parse_patch(c: _Checker, value: Any, key: str) -> PatchRef:
    """A patch: a string (a diff file) or a mapping with exactly one of diff / commit / range / pr."""
    if isinstance(value, str) and value:
        return PatchRef(diff=value)
    m = c.mapping(value, key, PATCH_KINDS)
    if len(m) != 1:
        raise c.fail(key, "expected exactly one of diff, commit, range, pr")
    (kind, v), = m.items()
    text = c.string(v, f"{key}.{kind}")
    if kind == "pr" and not PR_RE.match(text):
        raise c.fail(f"{key}.pr", f"expected owner/repo#N (e.g. vllm-project/vllm#12345), got {text!r}")
    return PatchRef(**{kind: text})


def parse_source(c: _Checker, value: Any) -> Source | Package:
    """target.source: {repo, ref} (a git checkout) or {package, repo_dir} (an installed package)."""
    s = {k: v for k, v in c.mapping(value, "target.source", SOURCE_KEYS).items() if v is not None}
    if ("repo" in s) == ("package" in s):
        raise c.fail("target.source", "expected either repo (a git checkout, with ref) or package (an installed "
                                      "package, e.g. {package: vllm})")
    if "repo" in s:
        if "repo_dir" in s:
            raise c.fail("target.source.repo_dir", "repo_dir goes with package, not with repo")
        return Source(repo=c.string(s["repo"], "target.source.repo"), ref=c.string(s.get("ref", "HEAD"),
                                                                                  "target.source.ref"))
    if "ref" in s:
        raise c.fail("target.source.ref", "an installed package has no ref; use repo for a git checkout")
    name = c.string(s["package"], "target.source.package")
    if not _PACKAGE_RE.match(name):
        raise c.fail("target.source.package", f"expected a top-level import name (vllm, sglang), got {name!r}")
    repo_dir = _optional(s, "repo_dir", c.string, "target.source", None)
    if repo_dir is not None:
        repo_dir = repo_dir.strip("/")
        if repo_dir.startswith(".") or "\\" in repo_dir:
            raise c.fail("target.source.repo_dir", f"expected a relative folder like python, got {repo_dir!r}")
    return Package(package=name, repo_dir=repo_dir or None)


def parse_level(c: _Checker, name: str, value: Any, key: str) -> Level:
    """One axis level."""
    if value is None:
        value = {}
    m = c.mapping(value, key, LEVEL_KEYS)
    patches = m.get("patches") or []
    if not isinstance(patches, (list, tuple)):
        raise c.fail(f"{key}.patches", f"expected a list, got {_kind(patches)}")
    return Level(
        name=name,
        patches=tuple(parse_patch(c, p, f"{key}.patches[{i}]") for i, p in enumerate(patches)),
        env=_optional(m, "env", c.env, key, {}),
        args=_optional(m, "args", c.args, key, ()),
        model=_optional(m, "model", c.string, key, None),
        tp=_optional(m, "tp", lambda v, k: c.integer(v, k, 1), key, None),
        dp=_optional(m, "dp", lambda v, k: c.integer(v, k, 1), key, None),
        ep=_optional(m, "ep", lambda v, k: c.integer(v, k, 1), key, None),
    )


def parse_target(c: _Checker, value: Any, engines: tuple[str, ...]) -> Target:
    """The target block."""
    m = c.mapping(value, "target", TARGET_KEYS)
    engine = c.string(_get(m, "engine", "command"), "target.engine")
    if engine not in engines:
        raise c.fail("target.engine", f"unknown engine {engine!r}; valid engines: {', '.join(engines)}")
    source = parse_source(c, m["source"]) if m.get("source") is not None else None
    cache = c.string(_get(m, "cache", CachePolicy.PER_ARM.value), "target.cache")
    if cache not in {p.value for p in CachePolicy}:
        raise c.fail("target.cache", f"unknown cache policy {cache!r}; valid: {', '.join(p.value for p in CachePolicy)}")
    build = _optional(m, "build", c.strings, "target", ())
    if m.get("build") is not None and not build:
        raise c.fail("target.build", "expected a non-empty argv list (or leave build out)")
    ready = ReadyCheck()
    if m.get("ready") is not None:
        r = c.mapping(m["ready"], "target.ready", READY_KEYS)
        ready = ReadyCheck(
            http_path=_optional(r, "http_path", c.string, "target.ready", None) if "http_path" in r else "/health",
            log_marker=_optional(r, "log_marker", c.string, "target.ready", None),
            require_both=_optional(r, "require_both", c.boolean, "target.ready", False),
            interval_s=_optional(r, "interval_s", c.number, "target.ready", 0.25),
        )
        if ready.http_path is None and ready.log_marker is None and engine == "command":
            raise c.fail("target.ready", "the command engine needs ready.http_path or ready.log_marker")
    port = m.get("port")
    if port is not None:
        port = c.integer(port, "target.port")
        if not 0 < port < 65536:
            raise c.fail("target.port", f"expected a port number 1-65535, got {port}")
    tp = _optional(m, "tp", lambda v, k: c.integer(v, k, 1), "target", 1)
    return Target(
        engine=engine,
        command=_optional(m, "command", c.strings, "target", ()),
        source=source,
        pythonpath=_optional(m, "pythonpath", c.strings, "target", ()),
        python=_optional(m, "python", c.string, "target", None),
        model=_optional(m, "model", c.string, "target", None),
        tp=tp,
        dp=_optional(m, "dp", lambda v, k: c.integer(v, k, 1), "target", 1),
        ep=_optional(m, "ep", lambda v, k: c.integer(v, k, 1), "target", 1),
        args=_optional(m, "args", c.args, "target", ()),
        env=_optional(m, "env", c.env, "target", {}),
        host=_optional(m, "host", c.string, "target", "127.0.0.1"),
        port=port,
        ready=ready,
        startup_timeout_s=_optional(m, "startup_timeout_s", c.number, "target", 600.0),
        quiet_timeout_s=_optional(m, "quiet_timeout_s", c.number, "target", 300.0),
        fatal_grace_s=_optional(m, "fatal_grace_s", c.number, "target", 3.0),
        stop_timeout_s=_optional(m, "stop_timeout_s", c.number, "target", 10.0),
        build=build,
        build_timeout_s=_optional(m, "build_timeout_s", c.number, "target", 3600.0),
        cache=CachePolicy(cache),
    )


def _assignments(c: _Checker, value: Any, key: str, axes: tuple[Axis, ...], complete: bool) -> tuple[dict[str, str], ...]:
    """include / exclude / baseline entries: mappings axis -> level naming existing axes and levels."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise c.fail(key, f"expected a list of mappings axis: level, got {_kind(value)}")
    names = {a.name: a for a in axes}
    out = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        m = c.mapping(entry, where)
        out.append(_assignment(c, m, where, names, complete))
    return tuple(out)


def _assignment(c: _Checker, m: Mapping[str, Any], where: str, names: Mapping[str, Axis], complete: bool) -> dict[str, str]:
    result = {}
    for ax, lv in m.items():
        if ax not in names:
            raise c.fail(f"{where}.{ax}", f"no axis {ax!r}; axes: {', '.join(names) or '(none)'}")
        lv = _scalar_str(lv) if not isinstance(lv, (Mapping, list)) else lv
        valid = [x.name for x in names[ax].levels]
        if lv not in valid:
            raise c.fail(f"{where}.{ax}", f"axis {ax!r} has no level {lv!r}; levels: {', '.join(valid)}")
        result[str(ax)] = lv
    if complete and set(result) != set(names):
        missing = sorted(set(names) - set(result))
        raise c.fail(where, f"must name a level for every axis; missing: {', '.join(missing)}")
    return result


def parse_stats(c: _Checker, value: Any, repeats: Any) -> tuple[int, Stats]:
    """The stats block and the repeats it goes with: an integer, or "auto" (adaptive, needs max_repeats)."""
    m = {k: v for k, v in c.mapping(value if value is not None else {}, "stats", STATS_KEYS).items()
         if v is not None}
    adaptive = repeats == "auto"
    max_repeats = _optional(m, "max_repeats", lambda v, k: c.integer(v, k, 1), "stats", None)
    if adaptive and max_repeats is None:
        raise c.fail("stats.max_repeats", "repeats: auto needs stats.max_repeats, the most launches per arm "
                                          "(e.g. 24)")
    if not adaptive:
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise c.fail("repeats", f"expected an integer >= 1 or auto, got {_kind(repeats)}")
    lower = _optional(m, "lower_is_better", c.strings, "stats", ())
    margins = {str(k): c.fraction(v, f"stats.margins.{k}", 0, float("inf"), "a positive margin")
               for k, v in c.mapping(m.get("margins") or {}, "stats.margins").items()}
    stats = Stats(
        alpha=_optional(m, "alpha", lambda v, k: c.fraction(v, k, 0, 0.5, "an error rate"), "stats", 0.05),
        margin=_optional(m, "margin", lambda v, k: c.fraction(v, k, 0, 1.0 + 1e-9, "a margin on rates"),
                         "stats", 0.2),
        compare=Compare(_optional(m, "compare", lambda v, k: c.choice(v, k, tuple(x.value for x in Compare)),
                                  "stats", Compare.BASELINE.value)),
        test=_optional(m, "test", lambda v, k: c.choice(v, k, RATE_TESTS), "stats", "fisher"),
        adaptive=adaptive,
        max_repeats=max_repeats,
        batch=_optional(m, "batch", lambda v, k: c.integer(v, k, 1), "stats", 1),
        goal=Goal(_optional(m, "goal", lambda v, k: c.choice(v, k, tuple(x.value for x in Goal)),
                            "stats", Goal.COMPARE.value)),
        max_fail_rate=_optional(m, "max_fail_rate", lambda v, k: c.fraction(v, k, 0, 1, "a failure rate"),
                                "stats", 1 / 3),
        lower_is_better=lower,
        margins=margins,
    )
    return (max_repeats if adaptive else repeats), stats  # type: ignore[return-value]


def _baseline(c: _Checker, value: Any, axes: tuple[Axis, ...]) -> Mapping[str, str] | str | None:
    """baseline: levels for every axis, or an arm's label (A, B…) or title ("fix=off")."""
    if value is None:
        return None
    if isinstance(value, str):
        return c.string(value, "baseline")
    return _assignment(c, c.mapping(value, "baseline"), "baseline", {a.name: a for a in axes}, complete=True)


def check_baseline(c: _Checker, matrix: Matrix) -> None:
    """The baseline must be one of the matrix's arms (after include / exclude)."""
    if matrix.baseline is None:
        return
    from harness.core.arms import assignments, label_for   # arms imports this module's products only
    arms = assignments(matrix)
    titles = [", ".join(f"{k}={v}" for k, v in lv.items()) or "base" for lv in arms]
    labels = [label_for(i) for i in range(len(arms))]
    if isinstance(matrix.baseline, str):
        if matrix.baseline not in titles and matrix.baseline not in labels:
            raise c.fail("baseline", f"no arm {matrix.baseline!r}; arms: "
                                     + "; ".join(f"{lb} ({t})" for lb, t in zip(labels, titles, strict=True)))
    elif dict(matrix.baseline) not in arms:
        raise c.fail("baseline", "names an arm that include/exclude leave out: "
                                 + ", ".join(f"{k}={v}" for k, v in matrix.baseline.items()))


def parse_matrix(data: Mapping[str, Any], *, name: str, file: str, engines: tuple[str, ...]) -> Matrix:
    """Validate a composed matrix mapping. Raises ConfigError naming file and key."""
    c = _Checker(file)
    c.mapping(data, "", MATRIX_KEYS)
    if data.get("target") is None:
        raise c.fail("target", "missing: the matrix must name a target")
    target = parse_target(c, data["target"], engines)
    axes_m = c.mapping(data.get("axes") or {}, "axes")
    axes = []
    for ax_name, levels in axes_m.items():
        lv_m = c.mapping(levels, f"axes.{ax_name}")
        if not lv_m:
            raise c.fail(f"axes.{ax_name}", "an axis needs at least one level")
        axes.append(Axis(str(ax_name), tuple(
            parse_level(c, _scalar_str(lv), v, f"axes.{ax_name}.{lv}") for lv, v in lv_m.items())))
    axes_t = tuple(axes)
    if isinstance(target.source, Package):
        for a in axes_t:
            for lv in a.levels:
                for i, p in enumerate(lv.patches):
                    if p.commit is not None or p.range is not None:
                        raise c.fail(f"axes.{a.name}.{lv.name}.patches[{i}]",
                                     "commit and range patches need a git source (target.source.repo); "
                                     "an installed package takes diff files and pr references")
    schedule = c.string(_get(data, "schedule", "interleaved"), "schedule")
    if schedule not in {s.value for s in Schedule}:
        raise c.fail("schedule", f"unknown schedule {schedule!r}; valid: {', '.join(s.value for s in Schedule)}")
    baseline = _baseline(c, data.get("baseline"), axes_t)
    repeats, stats = parse_stats(c, data.get("stats"), _get(data, "repeats", 1))
    gates = data.get("gates") or []
    if not isinstance(gates, (list, tuple)):
        raise c.fail("gates", f"expected a list, got {_kind(gates)}")
    matrix = Matrix(
        name=name, file=file, target=target, axes=axes_t,
        include=_assignments(c, data.get("include"), "include", axes_t, complete=True),
        exclude=_assignments(c, data.get("exclude"), "exclude", axes_t, complete=False),
        repeats=repeats,
        schedule=Schedule(schedule),
        seed=c.integer(_get(data, "seed", 0), "seed"),
        baseline=baseline,
        gates=tuple(c.mapping(g, f"gates[{i}]") for i, g in enumerate(gates)),
        description=str(data.get("description") or ""),
        stats=stats,
    )
    check_baseline(c, matrix)
    return matrix
