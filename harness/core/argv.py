"""Server flags: one function turns a base command line plus overrides into argv."""
from __future__ import annotations

import shlex
from typing import Any, Iterable, Mapping, Sequence


def flag_tokens(flags: Mapping[str, Any]) -> list[str]:
    """Mapping form to tokens: {"max-num-seqs": 128, "enforce-eager": True, "x": False, "y": None}
    → ["--max-num-seqs", "128", "--enforce-eager", "--no-x"]; None drops the flag; a list repeats values."""
    out: list[str] = []
    for name, value in flags.items():
        flag = name if name.startswith("-") else f"--{name}"
        if value is None:
            continue
        if value is True:
            out.append(flag)
        elif value is False:
            out.append(f"--no-{flag.lstrip('-')}")
        elif isinstance(value, (list, tuple)):
            out += [flag, *(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def _groups(tokens: Sequence[str]) -> list[tuple[str | None, list[str]]]:
    """Split tokens into (flag, [flag and its values]) groups; leading positionals get flag None."""
    groups: list[tuple[str | None, list[str]]] = []
    for tok in tokens:
        if is_flag(tok):
            name = tok.split("=", 1)[0]
            groups.append((_canonical(name), [tok]))
        elif groups:
            groups[-1][1].append(tok)
        else:
            groups.append((None, [tok]))
    return groups


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def is_flag(tok: str) -> bool:
    """Whether an argv token is a flag ("--x", "-x", "--x=v"), not a value such as "-1"."""
    return tok.startswith("--") or (tok.startswith("-") and len(tok) > 1 and not _is_number(tok))


def _canonical(flag: str) -> str:
    # --no-x and --x name the same switch; vLLM accepts both '-' and '_' inside a flag name.
    name = flag.lstrip("-").replace("_", "-")
    return name[3:] if name.startswith("no-") else name


def merge_args(base: Iterable[str], *overrides: Iterable[str]) -> list[str]:
    """Apply override token lists on top of base tokens. A flag given again replaces the earlier
    occurrence (with its values) in place instead of being duplicated; new flags are appended."""
    groups = _groups(list(base))
    for override in overrides:
        for flag, toks in _groups(list(override)):
            idx = next((i for i, (f, _) in enumerate(groups) if f is not None and f == flag), None)
            if idx is None:
                groups.append((flag, toks))
            else:
                groups[idx] = (flag, toks)
    return [tok for _, toks in groups for tok in toks]


def shell_text(argv: Sequence[str], placeholders: Sequence[str] = ()) -> str:
    """argv as a shell line to read and copy (the harness itself never runs one): each token quoted,
    a leading ~/ left bare so that a shell still expands it, and placeholders ({port},
    <worktree>) left readable inside a token."""
    out = []
    for tok in argv:
        home = tok.startswith("~/") and len(tok) > 2
        plain = tok[2:] if home else tok
        for i, ph in enumerate(placeholders):
            plain = plain.replace(ph, f"PLACEHOLDER{i}X")
        quoted = shlex.quote(plain)
        for i, ph in enumerate(placeholders):
            quoted = quoted.replace(f"PLACEHOLDER{i}X", ph)
        out.append(("~/" if home else "") + quoted)
    return " ".join(out)
