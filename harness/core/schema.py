"""Validate a matrix mapping (YAML after Hydra composition) into core.matrix objects.

Every error is a ConfigError naming the file and the dotted key, and for unknown keys the valid
ones. Pure: no file system access (patch files and repositories are checked in app.config).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from harness.core.checker import Checker, get, kind, optional, scalar_str
from harness.core.matrix import Axis, CachePolicy, Level, Matrix, Package, PatchRef, ReadyCheck, Schedule, Source, Target
from harness.core.schema_stats import STATS_KEYS, assignment, check_baseline, parse_baseline, parse_stats

MATRIX_KEYS = ("description", "target", "axes", "include", "exclude", "repeats", "schedule", "seed",
               "baseline", "gates", "stats")
TARGET_KEYS = ("engine", "command", "source", "pythonpath", "python", "model", "tp", "dp", "ep", "args",
                "env", "host", "port", "ready", "startup_timeout_s", "quiet_timeout_s", "fatal_grace_s",
                "stop_timeout_s", "build", "build_timeout_s", "cache")
LEVEL_KEYS = ("patches", "env", "args", "model", "tp", "dp", "ep")
READY_KEYS = ("http_path", "log_marker", "require_both", "interval_s")
SOURCE_KEYS = ("repo", "ref", "package", "repo_dir")
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


def parse_patch(c: Checker, value: Any, key: str) -> PatchRef:
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


def parse_source(c: Checker, value: Any) -> Source | Package:
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
    repo_dir = optional(s, "repo_dir", c.string, "target.source", None)
    if repo_dir is not None:
        repo_dir = repo_dir.strip("/")
        if repo_dir.startswith(".") or "\\" in repo_dir:
            raise c.fail("target.source.repo_dir", f"expected a relative folder like python, got {repo_dir!r}")
    return Package(package=name, repo_dir=repo_dir or None)


def parse_level(c: Checker, name: str, value: Any, key: str) -> Level:
    """One axis level."""
    if value is None:
        value = {}
    m = c.mapping(value, key, LEVEL_KEYS)
    patches = m.get("patches") or []
    if not isinstance(patches, (list, tuple)):
        raise c.fail(f"{key}.patches", f"expected a list, got {kind(patches)}")
    return Level(
        name=name,
        patches=tuple(parse_patch(c, p, f"{key}.patches[{i}]") for i, p in enumerate(patches)),
        env=optional(m, "env", c.env, key, {}),
        args=optional(m, "args", c.args, key, ()),
        model=optional(m, "model", c.string, key, None),
        tp=optional(m, "tp", lambda v, k: c.integer(v, k, 1), key, None),
        dp=optional(m, "dp", lambda v, k: c.integer(v, k, 1), key, None),
        ep=optional(m, "ep", lambda v, k: c.integer(v, k, 1), key, None),
    )


def parse_target(c: Checker, value: Any, engines: tuple[str, ...]) -> Target:
    """The target block."""
    m = c.mapping(value, "target", TARGET_KEYS)
    engine = c.string(get(m, "engine", "command"), "target.engine")
    if engine not in engines:
        raise c.fail("target.engine", f"unknown engine {engine!r}; valid engines: {', '.join(engines)}")
    source = parse_source(c, m["source"]) if m.get("source") is not None else None
    cache = c.string(get(m, "cache", CachePolicy.PER_ARM.value), "target.cache")
    if cache not in {p.value for p in CachePolicy}:
        raise c.fail("target.cache", f"unknown cache policy {cache!r}; valid: {', '.join(p.value for p in CachePolicy)}")
    build = optional(m, "build", c.strings, "target", ())
    if m.get("build") is not None and not build:
        raise c.fail("target.build", "expected a non-empty argv list (or leave build out)")
    ready = ReadyCheck()
    if m.get("ready") is not None:
        r = c.mapping(m["ready"], "target.ready", READY_KEYS)
        ready = ReadyCheck(
            http_path=optional(r, "http_path", c.string, "target.ready", None) if "http_path" in r else "/health",
            log_marker=optional(r, "log_marker", c.string, "target.ready", None),
            require_both=optional(r, "require_both", c.boolean, "target.ready", False),
            interval_s=optional(r, "interval_s", c.number, "target.ready", 0.25),
        )
        if ready.http_path is None and ready.log_marker is None and engine == "command":
            raise c.fail("target.ready", "the command engine needs ready.http_path or ready.log_marker")
    port = m.get("port")
    if port is not None:
        port = c.integer(port, "target.port")
        if not 0 < port < 65536:
            raise c.fail("target.port", f"expected a port number 1-65535, got {port}")
    tp = optional(m, "tp", lambda v, k: c.integer(v, k, 1), "target", 1)
    return Target(
        engine=engine,
        command=optional(m, "command", c.strings, "target", ()),
        source=source,
        pythonpath=optional(m, "pythonpath", c.strings, "target", ()),
        python=optional(m, "python", c.string, "target", None),
        model=optional(m, "model", c.string, "target", None),
        tp=tp,
        dp=optional(m, "dp", lambda v, k: c.integer(v, k, 1), "target", 1),
        ep=optional(m, "ep", lambda v, k: c.integer(v, k, 1), "target", 1),
        args=optional(m, "args", c.args, "target", ()),
        env=optional(m, "env", c.env, "target", {}),
        host=optional(m, "host", c.string, "target", "127.0.0.1"),
        port=port,
        ready=ready,
        startup_timeout_s=optional(m, "startup_timeout_s", c.number, "target", 600.0),
        quiet_timeout_s=optional(m, "quiet_timeout_s", c.number, "target", 300.0),
        fatal_grace_s=optional(m, "fatal_grace_s", c.number, "target", 3.0),
        stop_timeout_s=optional(m, "stop_timeout_s", c.number, "target", 10.0),
        build=build,
        build_timeout_s=optional(m, "build_timeout_s", c.number, "target", 3600.0),
        cache=CachePolicy(cache),
    )


def _assignments(c: Checker, value: Any, key: str, axes: tuple[Axis, ...], complete: bool) -> tuple[dict[str, str], ...]:
    """include / exclude / baseline entries: mappings axis -> level naming existing axes and levels."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise c.fail(key, f"expected a list of mappings axis: level, got {kind(value)}")
    names = {a.name: a for a in axes}
    out = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        m = c.mapping(entry, where)
        out.append(assignment(c, m, where, names, complete))
    return tuple(out)


def parse_matrix(data: Mapping[str, Any], *, name: str, file: str, engines: tuple[str, ...]) -> Matrix:
    """Validate a composed matrix mapping. Raises ConfigError naming file and key."""
    c = Checker(file)
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
            parse_level(c, scalar_str(lv), v, f"axes.{ax_name}.{lv}") for lv, v in lv_m.items())))
    axes_t = tuple(axes)
    if isinstance(target.source, Package):
        for a in axes_t:
            for lv in a.levels:
                for i, p in enumerate(lv.patches):
                    if p.commit is not None or p.range is not None:
                        raise c.fail(f"axes.{a.name}.{lv.name}.patches[{i}]",
                                     "commit and range patches need a git source (target.source.repo); "
                                     "an installed package takes diff files and pr references")
    schedule = c.string(get(data, "schedule", "interleaved"), "schedule")
    if schedule not in {s.value for s in Schedule}:
        raise c.fail("schedule", f"unknown schedule {schedule!r}; valid: {', '.join(s.value for s in Schedule)}")
    baseline = parse_baseline(c, data.get("baseline"), axes_t)
    repeats, stats = parse_stats(c, data.get("stats"), get(data, "repeats", 1))
    gates = data.get("gates") or []
    if not isinstance(gates, (list, tuple)):
        raise c.fail("gates", f"expected a list, got {kind(gates)}")
    matrix = Matrix(
        name=name, file=file, target=target, axes=axes_t,
        include=_assignments(c, data.get("include"), "include", axes_t, complete=True),
        exclude=_assignments(c, data.get("exclude"), "exclude", axes_t, complete=False),
        repeats=repeats,
        schedule=Schedule(schedule),
        seed=c.integer(get(data, "seed", 0), "seed"),
        baseline=baseline,
        gates=tuple(c.mapping(g, f"gates[{i}]") for i, g in enumerate(gates)),
        description=str(data.get("description") or ""),
        stats=stats,
    )
    check_baseline(c, matrix)
    return matrix
