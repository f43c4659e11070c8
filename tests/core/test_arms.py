import itertools
import math

from hypothesis import given, settings, strategies as st

from harness.core.arms import assignments, expand, label_for
from harness.core.schema import parse_matrix

ENGINES = ("command",)
TARGET = {"engine": "command", "command": ["srv"], "args": ["--a", "1"], "env": {"BASE": "1"}}


def parse(data):
    return parse_matrix(data, name="m", file="m.yaml", engines=ENGINES)


def test_levels_apply_in_axis_order():
    m = parse({"target": TARGET, "axes": {
        "pr": {"off": {}, "on": {"patches": ["p.diff"], "env": {"X": 1}, "args": ["--a", "2"]}},
        "tp": {"one": {}, "eight": {"tp": 8, "model": "big"}}}})
    arms = expand(m)
    assert [a.label for a in arms] == ["A", "B", "C", "D"]
    d = arms[3]
    assert d.levels == {"pr": "on", "tp": "eight"}
    assert d.tp == 8 and d.model == "big" and d.env == {"BASE": "1", "X": "1"} and d.args == ("--a", "2")
    assert [p.diff for p in d.patches] == ["p.diff"]
    assert arms[0].args == ("--a", "1") and arms[0].patches == ()


def test_labels_beyond_z():
    assert [label_for(i) for i in (0, 25, 26, 27, 701, 702)] == ["A", "Z", "AA", "AB", "ZZ", "AAA"]


axis_names = st.lists(st.sampled_from(list("pqrst")), min_size=1, max_size=3, unique=True)


@st.composite
def matrices(draw):
    names = draw(axis_names)
    axes = {n: {f"{n}{j}": {"env": {f"E_{n}": str(j)}} for j in range(draw(st.integers(1, 3)))} for n in names}
    combos = [dict(zip(names, c)) for c in itertools.product(*[list(axes[n]) for n in names])]
    exclude = draw(st.lists(st.sampled_from(combos), max_size=3))
    # partial excludes too: one axis only
    if draw(st.booleans()):
        n = names[0]
        exclude.append({n: list(axes[n])[0]})
    include = draw(st.lists(st.sampled_from(combos), max_size=3))
    return {"target": TARGET, "axes": axes, "exclude": exclude, "include": include}, axes, names


@settings(max_examples=200)
@given(matrices())
def test_arm_count_is_product_minus_excludes_plus_includes(drawn):
    data, axes, names = drawn
    m = parse(data)
    combos = [dict(zip(names, c)) for c in itertools.product(*[list(axes[n]) for n in names])]
    excluded = [c for c in combos if any(all(c[k] == v for k, v in ex.items()) for ex in data["exclude"])]
    readded = {tuple(sorted(i.items())) for i in data["include"]
               if i in excluded}
    expected = math.prod(len(axes[n]) for n in names) - len(excluded) + len(readded)
    arms = expand(m)
    assert len(arms) == expected
    assert len({a.arm_id for a in arms}) == len(arms)
    assert [a.label for a in arms] == [label_for(i) for i in range(len(arms))]


@settings(max_examples=100)
@given(matrices(), st.randoms())
def test_ids_stable_under_key_order(drawn, rnd):
    data, axes, names = drawn
    shuffled_target = dict(reversed(list(TARGET.items())))
    env_items = list(TARGET["env"].items())
    rnd.shuffle(env_items)
    shuffled = {**data, "target": {**shuffled_target, "env": dict(env_items)}}
    shuffled["axes"] = {n: {lv: {"env": dict(reversed(list(v["env"].items())))} for lv, v in axes[n].items()}
                        for n in names}
    a = {tuple(sorted(x.levels.items())): x.arm_id for x in expand(parse(data))}
    b = {tuple(sorted(x.levels.items())): x.arm_id for x in expand(parse(shuffled))}
    assert a == b


def test_ids_change_with_what_is_launched_labels_stable():
    base = {"target": TARGET, "axes": {"fix": {"off": {}, "on": {"env": {"F": "1"}}}}}
    a = expand(parse(base))
    b = expand(parse({**base, "target": {**TARGET, "args": ["--a", "3"]}}))
    assert [x.label for x in a] == [x.label for x in b] == ["A", "B"]
    assert {x.arm_id for x in a}.isdisjoint({x.arm_id for x in b})
    # repeats and schedule do not define a launch
    c = expand(parse({**base, "repeats": 9, "schedule": "blocked"}))
    assert [x.arm_id for x in a] == [x.arm_id for x in c]


def test_include_already_present_is_not_duplicated():
    m = parse({"target": TARGET, "axes": {"a": {"x": {}, "y": {}}}, "include": [{"a": "x"}]})
    assert [lv["a"] for lv in assignments(m)] == ["x", "y"]


def test_no_axes_gives_one_arm():
    arms = expand(parse({"target": TARGET}))
    assert len(arms) == 1 and arms[0].title == "base"
