import csv
import io

from harness.adapters.report import terminal_table, to_csv
from harness.adapters.report_md import markdown
from harness.app.report import compute
from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult
from harness.core.schema import parse_matrix

MATRIX = parse_matrix({"target": {"command": ["x"]}, "axes": {"pr": {"off": {}, "on": {}}}},
                      name="m", file="m.yaml", engines=("command",))
LEGEND = [{"arm_id": "a0", "label": "A", "levels": {"pr": "off"}}, {"arm_id": "a1", "label": "B", "levels": {"pr": "on"}}]


def results():
    mk = lambda arm, k, o, sig=None: TrialResult(matrix="m", arm_id=f"a{arm}", label="AB"[arm],
                                                 levels={"pr": ("off", "on")[arm]}, trial=k, outcome=o,
                                                 signature=sig, ladder=Ladder(3, 8, 1.5, 16))
    return [mk(1, 1, Outcome.READY), mk(1, 2, Outcome.IMA, "IMA:x | y"), mk(1, 3, Outcome.INFRA),
            mk(0, 1, Outcome.IMA, "IMA:x | y"), mk(0, 2, Outcome.IMA, "IMA:x | y")]


def test_markdown_tables_are_valid_with_escaped_pipes_and_switch_marks():
    md = markdown(compute(MATRIX, LEGEND, results()))
    lines = md.splitlines()
    arm_rows = [ln for ln in lines if ln.startswith("| A ") or ln.startswith("| B ")]
    assert arm_rows[0].split(" | ")[1] == "OFF" and arm_rows[1].split(" | ")[1] == "ON"
    assert "1/2 READY, 3/8 shapes; 1/2 illegal memory access at bs=16 (+1 INFRA, not counted)" in arm_rows[1]
    assert "| B (pr=on) | 1/2 | READY 1, IMA 1, INFRA 1 | IMA:x \\| y |" in md      # a pipe stays inside its cell
    blocks, current = [], []
    for ln in lines + [""]:
        if ln.startswith("|"):
            current.append(ln)
        elif current:
            blocks.append(current)
            current = []
    for block in blocks:
        widths = {len(r.replace("\\|", "").split("|")) for r in block}
        assert len(widths) == 1, f"every row of a table has the same number of cells: {block}"
    assert "- B (pr=on) vs A (pr=off), READY: **UNKNOWN** — 1/2 vs 0/2" in md
    assert "`a1`" in md


def test_csv_has_numbers_and_the_verdict():
    rows = list(csv.DictReader(io.StringIO(to_csv(compute(MATRIX, LEGEND, results())))))
    b = rows[1]
    assert b["ready"] == "1" and b["n"] == "2" and b["pr"] == "on" and b["not_counted"] == "1"
    assert 0 < float(b["ci_low"]) < 0.5 < float(b["ci_high"]) < 1
    assert b["ready_verdict"] == "UNKNOWN vs A" and rows[0]["ready_verdict"] == "baseline"


def test_terminal_table_columns():
    t = terminal_table(compute(MATRIX, LEGEND, results()))
    assert [c.header for c in t.columns][:4] == ["Arm", "pr", "READY [95% CI]", "Verdict"]
