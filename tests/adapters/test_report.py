import csv
import io

from harness.adapters.report import markdown, terminal_table, to_csv
from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult
from harness.core.summary import summarize


def results():
    mk = lambda k, o, sig=None: TrialResult(matrix="m", arm_id="a1", label="A", levels={"pr": "on"}, trial=k,
                                            outcome=o, signature=sig, ladder=Ladder(3, 8, 1.5, 16))
    return [mk(1, Outcome.READY), mk(2, Outcome.IMA, "IMA:x | y"), mk(3, Outcome.INFRA)]


def test_markdown_is_a_valid_table_with_escaped_pipes():
    md = markdown(summarize(results()), title="t")
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) == 3
    widths = {len([c for c in r.replace("\\|", "").split("|")]) for r in rows}
    assert len(widths) == 1, "every row has the same number of cells"
    assert "1/2 (+1 not counted)" in rows[2] and "IMA:x \\| y" in rows[2] and "a1" in md


def test_csv_has_numbers():
    rows = list(csv.DictReader(io.StringIO(to_csv(summarize(results())))))
    assert rows[0]["ready"] == "1" and rows[0]["n"] == "2" and rows[0]["pr"] == "on"
    assert 0 < float(rows[0]["ci_low"]) < 0.5 < float(rows[0]["ci_high"]) < 1


def test_terminal_table_columns():
    t = terminal_table(summarize(results()))
    assert [c.header for c in t.columns][:4] == ["Arm", "pr", "READY", "95% CI"]
