import pytest

from harness.core.matrix import Schedule
from harness.core.schema import parse_matrix
from harness.errors import ConfigError

T = {"engine": "command", "command": ["srv", "--port", "{port}"]}


def parse(data):
    return parse_matrix(data, name="m", file="matrices/m.yaml", engines=("command", "vllm"))


def err(data) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        parse(data)
    assert exc.value.file == "matrices/m.yaml"
    return exc.value


def test_full_matrix():
    m = parse({"description": "d", "target": {**T, "model": "x", "tp": 2, "env": {"A": 1, "B": True},
                                               "args": {"max-num-seqs": 8, "enforce-eager": True},
                                               "source": {"repo": "/src", "ref": "v1"}, "port": 8000,
                                               "ready": {"http_path": None, "log_marker": "ready"}},
               "axes": {"fix": {"off": None, "on": {"patches": ["a.diff", {"commit": "abc"}, {"range": "a..b"}]}}},
               "repeats": 3, "schedule": "random", "seed": 4, "baseline": {"fix": "off"}})
    assert m.target.env == {"A": "1", "B": "1"} and m.target.args == ("--max-num-seqs", "8", "--enforce-eager")
    assert m.target.ready.http_path is None and m.target.ready.log_marker == "ready"
    assert m.schedule is Schedule.RANDOM and m.repeats == 3 and m.baseline == {"fix": "off"}
    assert [p.name for p in m.axes[0].levels[1].patches] == ["a.diff", "commit:abc", "range:a..b"]


@pytest.mark.parametrize("data, key, words", [
    ({"target": T, "repets": 3}, "repets", "valid keys"),
    ({"target": {**T, "enigne": "x"}}, "target.enigne", "valid keys: engine"),
    ({"target": {**T, "engine": "trt"}}, "target.engine", "valid engines: command, vllm"),
    ({"target": {**T, "port": "abc"}}, "target.port", "expected an integer"),
    ({"target": {**T, "port": 70000}}, "target.port", "1-65535"),
    ({"target": T, "repeats": 0}, "repeats", ">= 1"),
    ({"target": T, "repeats": "3"}, "repeats", "expected an integer"),
    ({"target": T, "axes": {"fix": {"on": ["a.diff"]}}}, "axes.fix.on", "expected a mapping"),
    ({"target": T, "axes": {"fix": ["on", "off"]}}, "axes.fix", "expected a mapping"),
    ({"target": T, "axes": {"fix": {"on": {"patch": []}}}}, "axes.fix.on.patch", "valid keys: patches"),
    ({"target": T, "axes": {"fix": {"on": {}}}, "exclude": [{"fx": "on"}]}, "exclude[0].fx", "no axis 'fx'"),
    ({"target": T, "axes": {"fix": {"on": {}}}, "include": [{"fix": "of"}]}, "include[0].fix", "no level 'of'"),
    ({"target": T, "axes": {"fix": {"on": {}}}, "baseline": {"fix": "x"}}, "baseline.fix", "no level"),
    ({"target": T, "schedule": "abab"}, "schedule", "interleaved, blocked, random"),
    ({"target": {**T, "env": {"A": [1]}}}, "target.env.A", "expected a string"),
    ({"target": {**T, "tp": 0}}, "target.tp", ">= 1"),
    ({"target": {**T, "startup_timeout_s": -1}}, "target.startup_timeout_s", "positive number"),
    ({}, "target", "missing"),
])
def test_bad_input_names_the_key(data, key, words):
    e = err(data)
    assert e.key == key
    assert words in str(e)


def test_sources_patches_build_and_cache():
    from harness.core.matrix import CachePolicy, Package, Source
    m = parse({"target": {**T, "source": {"package": "vllm"}, "build": ["make", "-j", 8], "build_timeout_s": 60,
                          "cache": "per_trial"},
               "axes": {"fix": {"on": {"patches": [{"pr": "vllm-project/vllm#12345"}, "x.diff"]}}}})
    assert m.target.source == Package("vllm") and m.target.build == ("make", "-j", "8")
    assert m.target.build_timeout_s == 60 and m.target.cache is CachePolicy.PER_TRIAL
    assert [p.name for p in m.axes[0].levels[0].patches] == ["pr:vllm-project/vllm#12345", "x.diff"]
    assert m.axes[0].levels[0].patches[0].as_dict() == {"pr": "vllm-project/vllm#12345"}
    assert parse({"target": {**T, "source": {"package": "sglang", "repo_dir": "python/"}}}).target.source == \
        Package("sglang", "python")
    plain = parse({"target": {**T, "source": {"repo": "/src"}}}).target
    assert plain.source == Source("/src", "HEAD") and plain.cache is CachePolicy.PER_ARM and plain.build == ()


def test_with_known_keys_lets_overrides_set_the_new_keys():
    from harness.core.schema import with_known_keys
    out = with_known_keys({"target": {**T, "source": {"package": "vllm"}}})
    assert {"build", "build_timeout_s", "cache"} <= set(out["target"])
    assert out["target"]["source"] == {"repo": None, "ref": None, "package": "vllm", "repo_dir": None}
    assert parse(out).target.source.package == "vllm"


@pytest.mark.parametrize("data, key, words", [
    ({"target": {**T, "source": {"package": "vllm", "repo": "/src"}}}, "target.source", "either repo"),
    ({"target": {**T, "source": {"ref": "v1"}}}, "target.source", "either repo"),
    ({"target": {**T, "source": {"package": "vllm", "ref": "v1"}}}, "target.source.ref", "no ref"),
    ({"target": {**T, "source": {"repo": "/s", "repo_dir": "python"}}}, "target.source.repo_dir", "with package"),
    ({"target": {**T, "source": {"package": "vllm-x"}}}, "target.source.package", "import name"),
    ({"target": {**T, "source": {"package": "sglang", "repo_dir": "../x"}}}, "target.source.repo_dir", "relative"),
    ({"target": {**T, "source": {"repo": "/s", "branch": "x"}}}, "target.source.branch", "valid keys: repo, ref"),
    ({"target": {**T, "cache": "per_run"}}, "target.cache", "per_arm, per_trial, shared"),
    ({"target": {**T, "build": "make"}}, "target.build", "expected a list"),
    ({"target": {**T, "build": []}}, "target.build", "non-empty argv"),
    ({"target": {**T, "build_timeout_s": 0}}, "target.build_timeout_s", "positive number"),
    ({"target": T, "axes": {"f": {"on": {"patches": [{"pr": "vllm#1"}]}}}}, "axes.f.on.patches[0].pr", "owner/repo#N"),
    ({"target": T, "axes": {"f": {"on": {"patches": [{"pr": "a/b#0"}]}}}}, "axes.f.on.patches[0].pr", "owner/repo#N"),
    ({"target": T, "axes": {"f": {"on": {"patches": [{"pr": 5}]}}}}, "axes.f.on.patches[0].pr", "non-empty string"),
    ({"target": T, "axes": {"f": {"on": {"patches": [{"pull": "a/b#1"}]}}}}, "axes.f.on.patches[0].pull",
     "valid keys: diff, commit, range, pr"),
    ({"target": {**T, "source": {"package": "vllm"}}, "axes": {"f": {"on": {"patches": [{"commit": "abc"}]}}}},
     "axes.f.on.patches[0]", "need a git source"),
])
def test_bad_source_patch_build_cache_names_the_key(data, key, words):
    e = err(data)
    assert e.key == key
    assert words in str(e)
