"""Pull-request patches (`pr: owner/repo#N`): fetched once as a diff, kept with their sha256 in a
patch cache, read from there ever after (offline included).

    $HARNESS_PATCH_CACHE (default ~/.cache/harness/patches)/<owner>_<repo>_<N>.diff
                                                          /<owner>_<repo>_<N>.json  {pr, url, sha256, fetched_at}

A PR moves while it is reviewed; the cache pins the first fetch (its sha256 is in every trial's
record). Delete both files to fetch again. A diff placed there by hand (a machine without network)
is used as is; its .json is written on first use."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from harness.adapters.files import atomic_write
from harness.core.schema import PR_RE
from harness.errors import ConfigError

CACHE_ENV = "HARNESS_PATCH_CACHE"
BASE_URL_ENV = "HARNESS_PR_BASE_URL"   # for tests and mirrors
DEFAULT_BASE_URL = "https://patch-diff.githubusercontent.com/raw"
TIMEOUT_S = 30.0
MAX_BYTES = 64 * 1024 * 1024


def cache_dir() -> Path:
    """Where PR diffs are kept."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "harness" / "patches").expanduser()


def _parts(pr: str) -> tuple[str, str, str]:
    m = PR_RE.match(pr)
    if m is None:
        raise ConfigError(f"expected owner/repo#N, got {pr!r}")
    return m.group(1), m.group(2), m.group(3)


def diff_path(pr: str) -> Path:
    """The cached diff's path for owner/repo#N (whether or not it exists yet)."""
    owner, repo, n = _parts(pr)
    return cache_dir() / f"{owner}_{repo}_{n}.diff"


def url_of(pr: str) -> str:
    """Where the diff is fetched from."""
    owner, repo, n = _parts(pr)
    base = os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    return f"{base.rstrip('/')}/{owner}/{repo}/pull/{n}.diff"


def cached(pr: str, *, file: str | None = None, key: str | None = None) -> Path | None:
    """The cached diff of pr, or None when it is not in the cache; never touches the network nor
    writes. ConfigError when a cached diff no longer has the sha256 recorded at its fetch."""
    path = diff_path(pr)
    if not path.is_file():
        return None
    meta = path.with_suffix(".json")
    if meta.is_file():
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        recorded = json.loads(meta.read_text()).get("sha256")
        if recorded != sha:
            raise ConfigError(f"the cached diff {path} of {pr} has changed since it was fetched (sha256 {sha}, "
                              f"recorded {recorded}); delete {meta} to accept it, or both files to fetch again",
                              file=file, key=key)
    return path


def offline_hint(pr: str) -> str:
    """How to give a machine without network the diff of pr: the URL and where to put the file."""
    url, path = url_of(pr), diff_path(pr)
    return (f"with network run `curl -fL {url} -o {shlex.quote(str(path))}`; without, fetch it elsewhere and "
            f"put the file at {path} (or set {CACHE_ENV} to its folder)")


def resolve(pr: str, *, file: str | None = None, key: str | None = None, timeout_s: float = TIMEOUT_S) -> Path:
    """The cached diff of pr, fetched first if absent. ConfigError (naming file and key) when it can
    be neither read nor fetched, saying where to put the diff by hand; or when a cached diff no
    longer has the sha256 recorded at its fetch."""
    path = cached(pr, file=file, key=key)
    if path is not None:
        meta = path.with_suffix(".json")
        if not meta.is_file():
            _write_meta(meta, pr, "placed by hand", hashlib.sha256(path.read_bytes()).hexdigest())
        return path
    path, url = diff_path(pr), url_of(pr)
    try:
        data = _fetch(url, timeout_s)
    except (OSError, ValueError) as e:   # URLError, HTTPError, timeouts are OSErrors
        why = f"HTTP {e.code} {e.reason}" if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", None) or e
        raise ConfigError(f"cannot fetch {pr} from {url} ({why}); {offline_hint(pr)}", file=file, key=key) from None
    atomic_write(path, data)
    _write_meta(path.with_suffix(".json"), pr, url, hashlib.sha256(data).hexdigest())
    return path


def _fetch(url: str, timeout_s: float) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "harness", "Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - https (or a test's http) URL
        data = resp.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES // 2**20} MiB")
    text = data[:4096].decode("utf-8", "replace")
    if "diff --git " not in text and "\n+++ " not in text and not text.startswith("--- "):
        raise ValueError("the answer is not a diff (a login or rate-limit page?)")
    return data


def _write_meta(meta: Path, pr: str, url: str, sha: str) -> None:
    atomic_write(meta, json.dumps({"pr": pr, "url": url, "sha256": sha,
                                   "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds")},
                                  indent=1).encode())
