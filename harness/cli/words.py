"""The command line's words: every command takes key=value; a few keys are also accepted in the
--key VALUE form people type first. The keys each command knows, with one line each, for --help."""
from __future__ import annotations

from typing import Mapping, Sequence

from harness.app.overrides import closest
from harness.errors import ConfigError

# Keys also accepted as --key VALUE / --key=VALUE (dashes read as underscores).
OPTION_KEYS: Mapping[str, tuple[str, ...]] = {
    "run": ("matrix",), "report": ("matrix", "format"), "sync": ("matrix",), "ui": ("port", "runs_dir"),
}

SETTINGS_HELP = {
    "matrix": "NAME of matrices/NAME.yaml (./matrices first, then the packaged ones) or a path to a .yaml file",
    "runs_dir": "the store: runs_dir/<matrix>/<arm-id>/<trial>/ (default: runs)",
    "executor": "local: one trial at a time on this machine",
    "tracking": "MLflow: tracking.enabled=false turns it off; tracking.uri=URL (default: sqlite runs_dir/mlflow.db)",
    "dry_run": "true: print the arms, each one's argv and env and the trial count; launch nothing",
    "rerun": "true: move the arms' earlier launches to runs/<matrix>/.superseded/ and launch 1..repeats afresh",
    "progress": "auto | true | false: the live view (auto: only on a terminal)",
}
MATRIX_HELP = {
    "description": "one line shown at the top of the report",
    "target": "what runs: engine, command, source, model, tp/dp/ep, args, env, ready, *_timeout_s, build, cache "
              "(target.env.FOO=1 adds a variable)",
    "axes": "the dimensions and their levels (axes.AXIS.LEVEL.env.X=1)",
    "include": "extra arms, as lists of levels",
    "exclude": "arms to leave out, as lists of levels",
    "repeats": "launches per arm: N, or auto (each arm stops once its comparisons are decided, at most "
               "stats.max_repeats)",
    "schedule": "interleaved | blocked | random: the order of the launches",
    "seed": "the seed of schedule=random",
    "baseline": "the arm the others are compared with (its levels, label or title)",
    "gates": "checks run against a READY server, with pass/fail and metrics",
    "stats": "alpha, margin, compare (baseline | all), test, max_repeats, batch, goal (fix), max_fail_rate, ...",
}


def _keys_text(helps: Mapping[str, str]) -> str:
    width = max(len(k) for k in helps) + 2
    return "\n".join(f"  {k.ljust(width)}{v}" for k, v in helps.items())


RUN_EPILOG = f"""settings (key=value):
{_keys_text(SETTINGS_HELP)}

matrix keys, overriding the file's (dotted keys reach any level):
{_keys_text(MATRIX_HELP)}

examples:
  harness run matrix=demo
  harness run --matrix demo repeats=3 dry_run=true
  harness run matrix=demo target.env.FOO=1 tracking.enabled=false"""

REPORT_HELP = {
    "format": "terminal | md | html | csv | json (default: terminal, which also writes report.md and report.csv)",
    "matrix": SETTINGS_HELP["matrix"], "runs_dir": SETTINGS_HELP["runs_dir"],
}
REPORT_EPILOG = f"""keys (key=value):
{_keys_text(REPORT_HELP)}
  (and any matrix key of harness run, as an override)

examples:
  harness report matrix=demo
  harness report --matrix demo format=html"""

SYNC_EPILOG = """examples:
  harness sync matrix=demo"""

UI_EPILOG = """keys (key=value, or --port / --runs-dir):
  port        the port on 127.0.0.1 (default: 5000)
  runs_dir    the store whose mlflow.db is shown (default: runs)

examples:
  harness ui
  harness ui port=5001 runs_dir=runs"""

EPILOGS = {"run": RUN_EPILOG, "report": REPORT_EPILOG, "sync": SYNC_EPILOG, "ui": UI_EPILOG}


def normalize(argv: Sequence[str]) -> list[str]:
    """`--matrix demo` and `--matrix=demo` become `matrix=demo` for the keys in OPTION_KEYS; any other
    --option is a ConfigError that spells the key=value form to write instead. -h/--help pass."""
    if not argv or argv[0] not in OPTION_KEYS:
        return list(argv)
    command, out, i = argv[0], [argv[0]], 1
    while i < len(argv):
        word = argv[i]
        i += 1
        if word in ("-h", "--help") or not word.startswith("-"):
            out.append(word)
            continue
        name, sep, value = word.lstrip("-").partition("=")
        key = name.replace("-", "_")
        if not sep and i < len(argv) and not argv[i].startswith("-") and "=" not in argv[i]:
            sep, value = "=", argv[i]
            i += 1
        if key in OPTION_KEYS[command] and sep:
            out.append(f"{key}={value}")
            continue
        spelled = f"{key}={value}" if sep else (f"{key}=VALUE" if key in OPTION_KEYS[command] else f"{key}=true")
        raise ConfigError(f"harness {command} takes key=value words: write {spelled} instead "
                          f"(harness {command} --help lists the keys)", key=word)
    return out


def parse_words(words: Sequence[str], defaults: Mapping[str, str], command: str) -> dict[str, str]:
    """key=value words of a command with a fixed set of keys (defaults), as a dict."""
    out = dict(defaults)
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise ConfigError(f"expected key=value, got {word!r}; harness {command} knows: {', '.join(defaults)}",
                              key=word)
        if key not in defaults:
            near = closest(key, list(defaults))
            raise ConfigError(f"unknown key {key!r};{f' did you mean {near}?' if near else ''} harness {command} "
                              f"knows: {', '.join(defaults)}", key=key)
        out[key] = value
    return out
