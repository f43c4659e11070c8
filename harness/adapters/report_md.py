"""The report as GitHub markdown an engineer pastes unchanged into a pull request: a setup line,
one row per arm with the changes as ON/OFF columns and the launches told in one cell, one line
per verdict; outcomes, drift, full hashes and argv folded in a <details> block."""
from __future__ import annotations

from typing import Sequence

from harness.adapters.report import (
    axes_of, counts_text, gates_text, outcomes_text, p_text, setup_text, short, side_text,
)
from harness.core.arms import arm_name as core_arm_name, title_of
from harness.core.argv import shell_text
from harness.core.matrix import Compare
from harness.core.reportdata import ReportData
from harness.core.sequential import FixDecision
from harness.core.summary import ArmSummary
from harness.core.verdicts import Comparison
from harness.core.wording import result_cell


def cell(text: str) -> str:
    """A table cell: pipes escaped, one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub markdown table."""
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]


def arm_name(data: ReportData, label: str) -> str:
    """"B (fix=on)": the same name for an arm in every section."""
    s = next((s for s in data.summaries if s.label == label), None)
    return core_arm_name(label, title_of(s.levels)) if s is not None else label


def _level(data: ReportData, s: ArmSummary, axis: str) -> str:
    level = s.levels.get(axis)
    if level is None:
        return "-"
    if axis in data.binary_axes:
        return "ON" if level == data.binary_axes[axis][1] else "OFF"
    return level


def _interval(s: ArmSummary) -> str:
    return "-" if s.n == 0 else f"{s.ready / s.n:.2f} [{s.interval[0]:.2f}, {s.interval[1]:.2f}]"


def _setup(data: ReportData) -> list[str]:
    return [setup_text(data), ""] if data.setup else []


def _arms(data: ReportData) -> list[str]:
    axes = axes_of(data.summaries)
    gates = any(s.gates for s in data.summaries)
    header = ["Arm", *(data.columns.get(a, a) for a in axes), "Result", "READY rate [95% CI]"] + (["Gates"] if gates else [])
    rows = [[s.label, *(_level(data, s, a) for a in axes), result_cell(data.results_of(s.arm_id)), _interval(s)]
            + ([gates_text(s)] if gates else []) for s in data.summaries]
    return table(header, rows)


def _numbers(c: Comparison) -> str:
    """The numbers of the rule that decided: a fixed-sample test's p and interval, or the sequential
    statistic against its threshold (a fixed-sample p after optional stopping would overstate)."""
    digits = 3 if c.kind == "mean" else 2
    text = f"{side_text(c, True)} vs {side_text(c, False)}"
    if c.diff is not None:
        text += f", {c.diff:+.{digits}f}"
        if c.interval is not None:
            text += f" [{c.interval[0]:.{digits}f}, {c.interval[1]:.{digits}f}]"
    statistic, threshold = c.statistic, c.threshold
    rule = c.rule or c.test
    if statistic is not None and threshold is not None:
        text += f"; {rule} (log GLR {statistic:.2f}, threshold {threshold:.2f})"
    elif c.p_value is not None:
        held = f", adjusted {p_text(c.p_adjusted)}" if c.p_adjusted is not None and c.p_adjusted != c.p_value else ""
        text += f"; {rule}, p = {p_text(c.p_value)}{held}"
    else:
        text += f"; {rule}"
    return text + (f" ({c.note})" if c.note and c.note not in rule else "")


def _verdicts(data: ReportData) -> list[str]:
    if not data.comparisons:
        return []
    st = data.stats
    scope = "every pair of arms" if st.compare is Compare.ALL else f"each arm against {arm_name(data, data.baseline or '')}"
    out = ["", f"Verdicts ({scope}; α = {st.alpha:g}; SAME only when the 95% interval of the difference lies "
               f"inside ±{st.margin:g}; UNKNOWN when the launches cannot tell):", ""]
    for c in data.comparisons:
        out.append(f"- {arm_name(data, c.arm)} vs {arm_name(data, c.ref)}, {c.metric}: **{c.verdict.value}** — "
                   f"{_numbers(c)}")
    return out + (["", data.rule_note] if data.rule_note else [])


def _fix(data: ReportData) -> list[str]:
    if not data.fix:
        return []
    words = {FixDecision.HOLDS: "holds", FixDecision.FAILS: "fails", FixDecision.CONTINUE: "undecided",
             FixDecision.EXHAUSTED: "undecided (max reached)"}
    out = ["", f"Does the fix hold? (failure rate against the target {data.fix[0].target:.2f}; one-sided 95% exact "
               f"bounds; {data.fix[0].clean_needed} clean launches in a row bound it below the target):", ""]
    return out + [f"- {arm_name(data, f.label)}: **{words[f.decision]}** — {f.failures}/{f.n} failed, "
                  f"rate ≤ {f.upper:.2f} and ≥ {f.lower:.2f}" for f in data.fix]


def _outcomes(data: ReportData) -> list[str]:
    rows = [[arm_name(data, s.label), f"{s.ready}/{s.n}", outcomes_text(s), short(s.signatures[0][0], 120)
             if s.signatures else "-", s.shapes or "-"] for s in data.summaries]
    return ["", "**Outcomes**", ""] + table(["Arm", "READY", "Outcomes", "Top signature", "Ladder"], rows)


def _drift(data: ReportData) -> list[str]:
    arms = [d for d in data.drift.arms if d.failures]
    if not arms:
        return []
    rows = [[arm_name(data, d.label), str(d.failures), str(len(d.signatures)), counts_text(d.failing_bs),
             counts_text(d.failing_ranks), counts_text(d.sites), "yes" if d.drifting else "no"] for d in arms]
    out = ["", "**Signature drift** (failing launches: distinct signatures, and where they surfaced)", ""]
    out += table(["Arm", "Failures", "Signatures", "Failing bs", "Ranks", "Kernel / frame", "Drifting"], rows)
    sigs: list[str] = []
    for d in arms:
        sigs += [s for s, _ in d.signatures if s not in sigs]
    out += [""]
    for i, s in enumerate(sigs, 1):
        seen = ", ".join(f"{d.label}×{dict(d.signatures)[s]}" for d in arms if s in dict(d.signatures))
        shared = " — shared" if s in data.drift.shared else ""
        out.append(f"{i}. `{cell(short(s, 160))}`: {seen}{shared}")
    return out


def _legend(data: ReportData) -> list[str]:
    out = ["", "**Arms**", ""]
    for e in data.legend:
        patches = ", ".join(f"{n} (sha256:{h})" for n, h in e.patches) or "none"
        env = " ".join(f"{k}={v}" for k, v in e.env.items()) or "none"
        out.append(f"- **{e.label}** ({e.title}), id `{e.arm_id}`: patches {patches}; env {env}")
        if e.shown_argv or e.argv:
            out.append(f"  argv: `{shell_text(e.shown_argv or e.argv, ('{port}', '<worktree>'))}`")
    return out


def markdown(data: ReportData) -> str:
    """The whole report, ready to paste into a GitHub pull request or issue."""
    out = [f"**{data.title}**", ""]
    for note in data.notes:            # a paragraph each: GitHub joins consecutive lines
        out += [note, ""]
    out += _setup(data) + _arms(data)
    how = ("READY k/n counts launches that reached ready (PATCH_FAILED, INFRA and HARNESS_ERROR are not counted); "
           "95% CI: Wilson score interval.")
    st = data.stats
    if st.adaptive:
        how += (f" Launches stopped by a sequential rule: a look every {st.batch} launch(es) per arm, at most "
                f"{st.max_repeats} per arm, α = {st.alpha:g}.")
    out += ["", how]
    out += _verdicts(data) + _fix(data)
    out += ["", "<details><summary>Details: outcomes, signatures, patches, argv</summary>"]
    out += _outcomes(data) + _drift(data) + _legend(data)
    out += ["", "</details>"]
    return "\n".join(out) + "\n"
