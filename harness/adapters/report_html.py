"""The HTML report: one self-contained page (inline CSS, plots as PNG data URIs), no external requests.

Every piece of text from the store goes through ``escape``: labels, signatures and argv come from
logs and matrix files, not from us.
"""
from __future__ import annotations

import shlex
from html import escape
from typing import Iterable, Sequence

from harness.adapters.report import MAX_SIG, axes_of, counts_text, failing_bs, level_cell, setup_text, short
from harness.adapters.report_plots import (OUTCOME_COLOURS, Plot, arm_names, gates_plot, ladder_plot,
                                           ready_plot, timeline_plot)
from harness.core.arms import arm_name
from harness.core.outcome import Outcome
from harness.core.reportdata import ReportData
from harness.core.sequential import FixDecision
from harness.core.summary import ArmSummary
from harness.core.verdicts import Comparison, Verdict

_VERDICT_COLOURS = {Verdict.BETTER: "#c8e6c9", Verdict.WORSE: "#ffcdd2", Verdict.SAME: "#bbdefb",
                    Verdict.UNKNOWN: "#eeeeee"}
_DECISION_COLOURS = {FixDecision.HOLDS: "#c8e6c9", FixDecision.FAILS: "#ffcdd2", FixDecision.CONTINUE: "#eeeeee",
                     FixDecision.EXHAUSTED: "#fff9c4"}
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
       max-width: 1360px; padding: 0 16px; color: #212121; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
h3 { margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.88em; }
th, td { border: 1px solid #d0d0d0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; white-space: nowrap; } tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.c { text-align: center; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 0.92em; }
code.sig, code.sha { overflow-wrap: anywhere; } code.sha { font-size: 0.8em; color: #424242; }
td.cmd { min-width: 28em; } td.sig { min-width: 16em; } .nw { white-space: nowrap; }
.scroll { overflow-x: auto; } pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.chip { display: inline-block; border-radius: 3px; padding: 0 5px; margin: 1px 2px; color: #fff;
        font-size: 0.9em; white-space: nowrap; }
.chip.light { color: #212121; }
.verdict { font-weight: 600; } .muted { color: #757575; } .nodata { color: #757575; font-style: italic; }
.badge { border-radius: 3px; padding: 1px 6px; font-size: 0.8em; font-weight: 600; }
.drifting { background: #ffe0b2; color: #e65100; } .stable { background: #e8f5e9; color: #2e7d32; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
"""
_LIGHT = {Outcome.PATCH_FAILED, Outcome.INFRA, Outcome.HARNESS_ERROR, Outcome.TIMEOUT}


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Header cells are plain text (escaped here); row cells are HTML already built from escaped text."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _num(text: str) -> str:
    return f'<td class="num">{escape(text)}</td>'


def _sig(sig: str, limit: int | None = MAX_SIG) -> str:
    shown = sig if limit is None else short(sig, limit)
    return f'<code class="sig" title="{escape(sig)}">{escape(shown)}</code>'


def _chip(outcome: str, count: int) -> str:
    o = Outcome(outcome)
    light = " light" if o in _LIGHT else ""
    return f'<span class="chip{light}" style="background:{OUTCOME_COLOURS[o]}">{escape(outcome)} {count}</span>'


def _figure(plot: Plot | None, missing: str) -> str:
    if plot is None:
        return f'<p class="nodata">{escape(missing)}</p>'
    return (f'<figure><img src="{plot.uri}" width="{plot.width}" height="{plot.height}" '
            f'alt="{escape(plot.alt)}"></figure>')


def _name(name: str) -> str:
    """An arm's name as every section shows it: the label bold, then the title."""
    label, sep, title = name.partition(" (")
    return f"<b>{escape(label)}</b>{escape(sep)}{escape(title)}"


def _level(data: ReportData, s: ArmSummary, axis: str) -> str:
    level = s.levels.get(axis)
    if level is None:
        return '<td class="c muted">-</td>'
    text = escape(level_cell(s, axis, data.binary_axes))
    return f'<td class="c" title="{escape(level)}">{text}</td>' if axis in data.binary_axes else f"<td>{text}</td>"


def _gate_cell(s: ArmSummary, gate: str) -> str:
    found = [g for g in s.gates if g.name == gate]
    if not found:
        return '<span class="muted">-</span>'
    g = found[0]
    lines = [f"pass {g.passed}/{g.n}"] if g.n else []
    for metric, mean, se, n in g.metrics:
        lines.append(f"{metric} {mean:.4g}" + (f" ± {se:.2g}" if se is not None else "") + f" (n={n})")
    return "<br>".join(f'<span class="nw">{escape(x)}</span>' for x in lines)


def _arm_table(data: ReportData) -> str:
    summaries = data.summaries
    axes = axes_of(summaries)
    gates = list(dict.fromkeys(g.name for s in summaries for g in s.gates))
    header = ["Arm", *axes, "READY k/n", "Wilson 95 %", "Outcomes", *gates, "Ladder", "Failing bs",
              "Top signature"]
    rows, names = [], arm_names(data)
    for s in summaries:
        ref = ' <span class="muted">(ref)</span>' if s.label == data.baseline else ""
        ready = escape(f"{s.ready}/{s.n}") + (
            f'<br><span class="muted nw">+{s.not_counted} not counted</span>' if s.not_counted else "")
        ci = "-" if s.n == 0 else f"{s.interval[0]:.2f} – {s.interval[1]:.2f}"
        top = "-" if not s.signatures else f"{s.signatures[0][1]}× {_sig(s.signatures[0][0])}" + (
            f' <span class="muted">(+{len(s.signatures) - 1} more)</span>' if len(s.signatures) > 1 else "")
        rows.append([_name(names[s.label]) + ref, *(_level(data, s, a) for a in axes),
                     f'<td class="num">{ready}</td>', _num(ci),
                     " ".join(_chip(o, c) for o, c in s.outcomes.items()) or "-",
                     *(_gate_cell(s, g) for g in gates), _num(s.shapes or "-"),
                     escape(failing_bs(s)), f'<td class="sig">{top}</td>'])
    return _table(header, rows) + (
        '<p class="muted">READY k/n counts launches that reached ready; PATCH_FAILED, INFRA and HARNESS_ERROR '
        "are not counted. Interval: Wilson score, 95 %. Gate numbers: mean ± standard error.</p>")


def _value(c: Comparison, side: str) -> str:
    k, n, v = (c.k_arm, c.n_arm, c.value_arm) if side == "arm" else (c.k_ref, c.n_ref, c.value_ref)
    if c.kind == "rate":
        return f"{k}/{n}" + (f" ({v:.2f})" if v is not None else "")
    return "-" if v is None else f"{v:.4g} (n={n})"


def _diff(c: Comparison) -> str:
    if c.diff is None:
        return "-"
    fmt = "{:+.2f}" if c.kind == "rate" else "{:+.3g}"
    ci = f" [{fmt.format(c.interval[0])}, {fmt.format(c.interval[1])}]" if c.interval else ""
    return fmt.format(c.diff) + ci


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.0001" if p < 1e-4 else f"{p:.3g}"


def _verdicts(data: ReportData) -> str:
    if not data.comparisons:
        return '<p class="nodata">No comparisons: fewer than two arms to compare.</p>'
    names = arm_names(data)
    rows = [[escape(c.metric), f"{_name(names.get(c.arm, c.arm))} vs {_name(names.get(c.ref, c.ref))}",
             _num(_value(c, "arm")),
             _num(_value(c, "ref")), _num(_diff(c)), escape(c.rule or c.test), _num(_evidence(c)),
             f'<td class="verdict" style="background:{_VERDICT_COLOURS[c.verdict]}">{escape(c.verdict.value)}</td>',
             escape(c.note)] for c in data.comparisons]
    s = data.stats
    note = f'<p class="muted">{escape(data.rule_note)}</p>' if data.rule_note else ""
    return _table(["Metric", "Arm vs ref", "Arm", "Ref", "Diff [95 % CI]", "Rule", "Evidence", "Verdict",
                   "Note"], rows) + (
        f'<p class="muted">α = {s.alpha:g}; SAME only when the whole interval of the difference lies inside '
        f"±{s.margin:g} (gate metrics: their own margins). Holm-adjusted within each metric.</p>") + note


def _evidence(c: Comparison) -> str:
    """The numbers of the rule that decided: the sequential statistic against its threshold, or p."""
    if c.statistic is not None and c.threshold is not None:
        return f"log GLR {c.statistic:.2f} vs {c.threshold:.2f}"
    if c.p_value is None:
        return "-"
    held = f" (Holm {_p(c.p_adjusted)})" if c.p_adjusted is not None and c.p_adjusted != c.p_value else ""
    return f"p = {_p(c.p_value)}{held}"


def _fix(data: ReportData) -> str:
    if not data.fix:
        return ""
    names = arm_names(data)
    rows = [[_name(names.get(f.label, f.label)), _num(f"{f.failures}/{f.n}"), _num(f"{f.upper:.2f} vs {f.target:.2f}"),
             _num(f"{f.lower:.2f}"),
             f'<td class="verdict" style="background:{_DECISION_COLOURS[f.decision]}">{escape(f.decision.value)}</td>',
             _num(str(f.clean_needed))] for f in data.fix]
    return "<h3>Does this fix work?</h3>" + _table(
        ["Arm", "Failures/n", "Upper 95 % bound vs target", "Lower 95 % bound", "Decision",
         "Clean runs needed"], rows) + (
        '<p class="muted">The fix holds once the one-sided upper 95 % bound of its failure rate is below the '
        "target; clean runs needed: launches in a row without a failure that would get it there.</p>")


def _counts(values: Sequence[tuple[object, int]]) -> str:
    return escape(counts_text(values))


def _drift(data: ReportData) -> str:
    out, names = [], arm_names(data)
    for d in data.drift.arms:
        if not d.failures:
            launches = len(data.results_of(d.arm_id))
            out.append(f'<h3>{_name(names.get(d.label, d.label))} <span class="badge stable">no failures</span> '
                       f'<span class="muted">in {launches} launch{"es" * (launches != 1)}</span></h3>')
            continue
        badge = '<span class="badge drifting">drifting</span>' if d.drifting else \
            '<span class="badge stable">one failure mode</span>'
        out.append(f"<h3>{_name(names.get(d.label, d.label))}: {d.failures} failure{'s' * (d.failures != 1)} {badge}</h3>")
        out.append(_table(["Launches", "Signature"], [[_num(str(c)), _sig(s, None)] for s, c in d.signatures]))
        out.append(_table(["Failing bs", "Failing rank", "Surfacing kernel"],
                          [[_counts(d.failing_bs), _counts(d.failing_ranks), _counts(d.sites)]]))
        out.append("<p>In launch order:</p>" + _table(["Trial", "Signature"],
                                                       [[_num(f"#{t}"), _sig(s, None)] for t, s in d.trials]))
    if data.drift.shared:
        out.append("<h3>Signatures seen in several arms</h3>" + _table(
            ["Signature", "Arms"],
            [[_sig(s, None), "; ".join(_name(names.get(lbl, lbl)) for lbl in labels)]
             for s, labels in data.drift.shared.items()]))
    return "".join(out)


def _legend(data: ReportData) -> str:
    rows = []
    for e in data.legend:
        patches = "<br>".join(f'{escape(n)}<br><code class="sha">{escape(sha)}</code>' for n, sha in e.patches) or "-"
        env = "<br>".join(f"<code>{escape(k)}={escape(v)}</code>" for k, v in sorted(e.env.items())) or "-"
        argv = f'<td class="cmd"><pre>{escape(shlex.join(e.argv))}</pre></td>' if e.argv else "-"
        rows.append([_name(arm_name(e.label, e.title)),
                     f"<code>{escape(e.arm_id)}</code>", patches, env, argv])
    return _table(["Arm", "Id", "Patches (sha256)", "Env", "Command"], rows)


def html(data: ReportData) -> str:
    """The whole report as one self-contained HTML page."""
    notes = "".join(f"<p>{escape(n)}</p>" for n in (*data.notes, setup_text(data)) if n)
    body = [
        f"<h1>{escape(data.title)}</h1>", notes, "<h2>Arms</h2>", _arm_table(data),
        "<h2>READY rate</h2>", _figure(ready_plot(data), "No launches yet."),
        "<h2>Verdicts</h2>", _verdicts(data), _fix(data),
        "<h2>Capture ladder</h2>", _figure(ladder_plot(data), "No capture ladder seen in any log."),
        "<h2>Timeline</h2>", _figure(timeline_plot(data), "No launches yet."),
    ]
    gates = gates_plot(data)
    if gates is not None:
        body += ["<h2>Gate scores</h2>", _figure(gates, "")]
    body += ["<h2>Signature drift</h2>", _drift(data), "<h2>Legend</h2>", _legend(data)]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(data.title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")
