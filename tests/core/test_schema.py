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
