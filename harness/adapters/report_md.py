"""The report as GitHub markdown, in the shape of the tables people paste into pull requests:
arms with their levels (✓ / ✗ for switches), then the verdicts, the drift of failures, the legend."""
from __future__ import annotations

import shlex
from typing import Sequence

from harness.adapters.report import (
    axes_of, counts_text, diff_text, gates_text, level_cell, outcomes_text, p_text, ready_cell, short, side_text, top_signature,
)
from harness.core.matrix import Compare
from harness.core.reportdata import ReportData
from harness.core.sequential import FixDecision


def cell(text: str) -> str:
    """A table cell: pipes escaped, one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]


def _arms(data: ReportData) -> list[str]:
    axes = axes_of(data.summaries)
    rows = [[s.label, *(level_cell(s, a, data.binary_axes) for a in axes), ready_cell(s), outcomes_text(s),
             gates_text(s), top_signature(s), s.shapes or "-"] for s in data.summaries]
    out = table(["Arm", *axes, "READY k/n [95% CI]", "Outcomes", "Gates", "Top signature", "Ladder"], rows)
    st = data.stats
    how = "READY k/n counts launches that reached ready (PATCH_FAILED, INFRA and HARNESS_ERROR are not counted); " \
          "95% CI: Wilson score interval."
    if st.adaptive:
        how += (f" Launches stopped by the sequential rule: a look every {st.batch} launch(es) per arm, at most "
                f"{st.max_repeats} per arm, α = {st.alpha:g}.")
    return out + ["", how]


def _verdicts(data: ReportData) -> list[str]:
    if not data.comparisons:
        return []
    st = data.stats
    scope = "every pair of arms" if st.compare is Compare.ALL else f"each arm against {data.baseline}"
    rows = [[c.metric, f"{c.arm} vs {c.ref}", side_text(c, True), side_text(c, False), diff_text(c, 3 if
             c.kind == "mean" else 2), c.test, p_text(c.p_value), p_text(c.p_adjusted), f"**{c.verdict.value}**",
             c.note or "-"] for c in data.comparisons]
    out = ["", f"**Verdicts** ({scope}; α = {st.alpha:g}; p-values Holm-adjusted within each metric; SAME only "
               f"when the 95% interval of the difference lies inside ±{st.margin:g})", ""]
    return out + table(["Metric", "Arms", "Arm", "Ref", "Diff [95% CI]", "Test", "p", "p (Holm)", "Verdict",
                        "Note"], rows)


def _fix(data: ReportData) -> list[str]:
    if not data.fix:
        return []
    words = {FixDecision.HOLDS: "holds", FixDecision.FAILS: "fails", FixDecision.CONTINUE: "undecided",
             FixDecision.EXHAUSTED: "undecided (max reached)"}
    rows = [[f.label, f"{f.failures}/{f.n}", f"{f.upper:.2f}", f"{f.lower:.2f}", f"< {f.target:.2f}",
             f"**{words[f.decision]}**"] for f in data.fix]
    need = data.fix[0].clean_needed
    return ["", f"**Does the fix hold?** The failure rate's one-sided 95% exact bounds against the target; "
                f"{need} launches in a row without a failure bound it below {data.fix[0].target:.2f}. Past those, "
                f"holds needs a stricter bound (the arm is looked at after every launch), so a bound just "
                f"below the target may still read undecided.", ""] + \
        table(["Arm", "Failures", "Upper 95%", "Lower 95%", "Target", "Fix"], rows)


def _drift(data: ReportData) -> list[str]:
    arms = [d for d in data.drift.arms if d.failures]
    if not arms:
        return []
    rows = [[d.label, str(d.failures), str(len(d.signatures)), counts_text(d.failing_bs), counts_text(d.failing_ranks),
             counts_text(d.sites), "yes" if d.drifting else "no"] for d in arms]
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
        out.append(f"- **{e.label}** `{e.arm_id}` ({e.title}): patches {patches}; env {env}")
        if e.argv:
            out.append(f"  argv: `{shlex.join(e.argv)}`")
    return out


def markdown(data: ReportData) -> str:
    """The whole report, ready to paste into a GitHub pull request or issue."""
    out = [f"**{data.title}**", ""] + [f"{n}" for n in data.notes] + ([""] if data.notes else [])
    out += _arms(data) + _verdicts(data) + _fix(data) + _drift(data) + _legend(data)
    return "\n".join(out) + "\n"
