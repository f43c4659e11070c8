"""Where an installed package lives, as the engine's own interpreter sees it."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Mapping

from harness.errors import ConfigError

KEY = "target.source.package"
_TAG = "HARNESS_FIND_PACKAGE "
# find_spec of a top-level name does not import it (no __init__ runs, no GPU touched).
_SCRIPT = """import importlib.util, json, sys
s = importlib.util.find_spec(sys.argv[1])
print(%r + json.dumps({"found": s is not None, "origin": getattr(s, "origin", None),
      "locations": list(getattr(s, "submodule_search_locations", None) or [])}))
""" % _TAG


def find_package(python: str, name: str, env: Mapping[str, str], *, file: str | None = None,
                 timeout_s: float = 60.0) -> Path:
    """The folder of package `name` for `python` run with env; ConfigError naming target.source
    when it is not found, is a single module, or is a namespace spread over several folders."""
    try:
        proc = subprocess.run([python, "-c", _SCRIPT, name], capture_output=True, text=True, timeout=timeout_s,
                              env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"cannot ask {python} where {name!r} is installed: {e}", file=file, key=KEY) from e
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_TAG)]
    if proc.returncode != 0 or not lines:
        raise ConfigError(f"{python} could not look up {name!r} (exit {proc.returncode}): "
                          f"{proc.stderr.strip()[-500:]}", file=file, key=KEY)
    found = json.loads(lines[-1][len(_TAG):])
    if not found["found"]:
        raise ConfigError(f"{python} finds no package {name!r}; is it installed in that environment?",
                          file=file, key=KEY)
    locations = found["locations"]
    if not locations:
        raise ConfigError(f"{name!r} is a single module ({found['origin']}), not a package folder",
                          file=file, key=KEY)
    if len(locations) > 1:
        raise ConfigError(f"{name!r} is a namespace package spread over {', '.join(locations)}; "
                          "an overlay needs one folder", file=file, key=KEY)
    return Path(locations[0]).resolve()
