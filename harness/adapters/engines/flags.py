"""How an engine spells its flags: the command line from the target, and args it cannot take.

Each engine module fills a `Spelling`: every spelling of the flags the harness writes itself
(model, host, port, tp, dp, ep), and the spellings of other engines that users carry over by
habit, each with what this engine calls it. Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

from harness.core.argv import is_flag, merge_args
from harness.core.arms import Arm, expand
from harness.core.matrix import Matrix
from harness.errors import ConfigError

OWNED_KEYS = ("model", "host", "port", "tp", "dp", "ep")


@dataclass(frozen=True)
class Spelling:
    """One engine's flag names. ``owned[key]``: every spelling of the flag the harness writes from
    the target's key, the one it writes first (empty for a positional model). ``foreign[flag]``:
    a flag this engine does not have, and either a target key ("tp"), this engine's spelling
    ("--max-num-seqs") or a sentence saying what to do instead."""

    engine: str
    owned: Mapping[str, tuple[str, ...]]
    foreign: Mapping[str, str] = field(default_factory=dict)
    positional_model: bool = False   # the model is an argument, not a flag (`vllm serve MODEL`)

    def written(self, key: str) -> str:
        """The spelling the harness writes for a target key."""
        return self.owned[key][0]


def norm(flag: str) -> str:
    """A flag as argparse compares it: without '=value'; '_' and '-' alike after the dashes
    (vLLM and ATOM accept both); '--no-x' is the switch '--x'."""
    name = flag.split("=", 1)[0]
    dashes = len(name) - len(name.lstrip("-"))
    body = name[dashes:].replace("_", "-")
    if dashes == 2 and body.startswith("no-"):
        body = body[3:]
    return "-" * dashes + body


def flags_in(tokens: Sequence[str]) -> Iterator[str]:
    """The flag tokens of an argv fragment (not values such as '-1')."""
    for tok in tokens:
        if is_flag(tok):
            yield tok.split("=", 1)[0]


def flag_value(tokens: Sequence[str], spellings: Sequence[str]) -> str | None:
    """The value of the last occurrence of a flag under any of its spellings ('--x v' or '--x=v')."""
    names = {norm(s) for s in spellings}
    value = None
    for i, tok in enumerate(tokens):
        if not tok.startswith("-") or norm(tok) not in names:
            continue
        if "=" in tok:
            value = tok.split("=", 1)[1]
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
    return value


def has_flag(tokens: Sequence[str], spellings: Sequence[str]) -> bool:
    """Whether a switch is on: present under any spelling, and its last mention not '--no-x'."""
    names = {norm(s) for s in spellings}
    on = False
    for tok in flags_in(tokens):
        if norm(tok) in names:
            on = not tok.startswith("--no-")
    return on


def int_value(tokens: Sequence[str], spellings: Sequence[str], default: int) -> int:
    """An integer flag's value, or default when absent or not a number (the engine will say so)."""
    value = flag_value(tokens, spellings)
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def assemble(head: Sequence[str], base: Sequence[str], args: Sequence[str],
             same: Sequence[Sequence[str]] = ()) -> list[str]:
    """head + base flags + the matrix's args. A flag in args replaces the base's (also when
    spelled another way listed together in ``same``) instead of being given twice."""
    # A base flag that args give under another spelling takes that spelling, so merge_args
    # replaces it in place.
    given = {norm(f): f for f in flags_in(args)}
    rename: dict[str, str] = {}
    for group in same:
        spelled = next((given[norm(s)] for s in group if norm(s) in given), None)
        if spelled is not None:
            rename.update({norm(s): spelled for s in group})
    renamed = [rename.get(norm(tok), tok) if is_flag(tok) else tok
               for tok in base]
    return [*head, *merge_args(renamed, args)]


def check_args(spelling: Spelling, matrix: Matrix) -> None:
    """ConfigError for the first arg the harness writes itself or the engine does not have."""
    for key, args in _arg_sources(matrix):
        for flag in flags_in(args):
            problem = _problem(spelling, flag)
            if problem:
                raise ConfigError(problem, file=matrix.file, key=key)


def _problem(sp: Spelling, flag: str) -> str | None:
    n = norm(flag)
    for key, spellings in sp.owned.items():
        if n in {norm(s) for s in spellings}:
            return (f"{flag} is written by the harness from {key} ({_as_written(sp, key)}); "
                    f"set {key} in the target or in an axis level instead, so each result records it")
    hint = next((v for f, v in sp.foreign.items() if norm(f) == n), None)
    if hint is None:
        return None
    if hint in OWNED_KEYS:
        return (f"{sp.engine} has no flag {flag}; it spells it {_as_written(sp, hint)}, which the harness "
                f"writes from {hint}: set {hint} in the target or in an axis level")
    if hint.startswith("-"):
        return f"{sp.engine} has no flag {flag}; {sp.engine} spells it {hint}"
    return f"{sp.engine} has no flag {flag}; {hint}"


def _as_written(sp: Spelling, key: str) -> str:
    if key == "model" and sp.positional_model:
        return "the positional MODEL argument"
    return " / ".join(sp.owned[key])


def setting_key(matrix: Matrix, arm: Arm, names: Sequence[str]) -> str:
    """Where an arm's setting comes from: the last axis level that sets one of names, else the
    target's key (the first of names the target sets away from its default, else names[0])."""
    for axis in reversed(matrix.axes):
        level = axis.level(arm.levels[axis.name])
        for name in names:
            if getattr(level, name) is not None:
                return f"axes.{axis.name}.{level.name}.{name}"
    t = matrix.target
    return "target." + next((n for n in names if getattr(t, n) not in (None, 1)), names[0])


def _arg_sources(matrix: Matrix) -> Iterator[tuple[str, tuple[str, ...]]]:
    yield "target.args", matrix.target.args
    for axis in matrix.axes:
        for level in axis.levels:
            yield f"axes.{axis.name}.{level.name}.args", level.args


def check_ep_switch(matrix: Matrix, engine: str) -> None:
    """For engines whose expert parallelism is the switch --enable-expert-parallel over tp × dp
    GPUs (vLLM, ATOM): ep must be 1 (off) or tp × dp (on)."""
    for arm in expand(matrix):
        if arm.ep > 1 and arm.ep != arm.tp * arm.dp:
            raise ConfigError(
                f"arm {arm.label} ({arm.title}): {engine}'s expert parallelism is the switch "
                f"--enable-expert-parallel over tp × dp = {arm.tp * arm.dp} GPUs; set ep to "
                f"{arm.tp * arm.dp} (on) or 1 (off), not {arm.ep}",
                file=matrix.file, key=setting_key(matrix, arm, ("ep",)))
