from hypothesis import given, strategies as st

from harness.core.argv import flag_tokens, merge_args


def test_flag_tokens_bool_none_list():
    assert flag_tokens({"enforce-eager": True, "x": False, "y": None, "max-num-seqs": 128,
                        "cuda-graph-sizes": [1, 2]}) == [
        "--enforce-eager", "--no-x", "--max-num-seqs", "128", "--cuda-graph-sizes", "1", "2"]


def test_flag_given_twice_is_replaced_in_place():
    base = ["--model", "m", "--max-num-seqs", "128", "--enforce-eager"]
    assert merge_args(base, ["--max-num-seqs", "64"]) == ["--model", "m", "--max-num-seqs", "64", "--enforce-eager"]


def test_no_flag_replaces_flag_and_underscores_match():
    assert merge_args(["--enforce-eager", "--a_b", "1"], ["--no-enforce-eager", "--a-b", "2"]) == [
        "--no-enforce-eager", "--a-b", "2"]


def test_equals_form_and_negative_numbers():
    assert merge_args(["--x=1", "--y", "-3"], ["--x=2"]) == ["--x=2", "--y", "-3"]


def test_leading_positionals_kept():
    assert merge_args(["serve", "model", "--tp", "1"], ["--tp", "8", "--new"]) == ["serve", "model", "--tp", "8", "--new"]


names = st.sampled_from(["a", "b", "c", "d"])


@given(st.lists(st.tuples(names, st.integers(0, 9)), max_size=6), st.lists(st.tuples(names, st.integers(0, 9)), max_size=6))
def test_merge_never_duplicates_a_flag(base, over):
    def toks(pairs):
        seen, out = set(), []
        for n, v in pairs:
            if n not in seen:
                seen.add(n)
                out += [f"--{n}", str(v)]
        return out
    merged = merge_args(toks(base), toks(over))
    flags = [t for t in merged if t.startswith("--")]
    assert len(flags) == len(set(flags))
    overridden = dict(zip(toks(over)[::2], toks(over)[1::2]))
    for flag, value in overridden.items():
        assert merged[merged.index(flag) + 1] == value


def test_shell_text_quotes_tokens_keeps_home_bare_and_placeholders_readable():
    from harness.core.argv import shell_text
    assert shell_text(["~/venvs/x/bin/python", "-m", "a b", "--port", "{port}", "<worktree>/t.jinja"],
                      ("{port}", "<worktree>")) == "~/venvs/x/bin/python -m 'a b' --port {port} <worktree>/t.jinja"
    assert shell_text(["--x", "<free port>"]) == "--x '<free port>'"
