"""The HTML report of the fixed campaign, parsed back with the stdlib parser."""
from __future__ import annotations

import base64
import dataclasses
from html.parser import HTMLParser

import pytest

from harness.adapters.report_html import html
from harness.adapters.report_plots import (_CAPTURED, _FAILED, _NO_LADDER, _NOT_REACHED, _ladder_row, arm_names,
                                           ladder_plot)
from harness.adapters.store import Store
from harness.app.report import report_data
from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult
from tests.fixtures.campaign import campaign_matrix, write_campaign

PNG = "data:image/png;base64,"


class Page(HTMLParser):
    """Tags with their attributes, the text, and every table as rows of cell texts."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "br" and self._cell is not None:
            self._cell.append(" ")
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def images(self) -> list[str]:
        return [a["src"] or "" for t, a in self.tags if t == "img"] + ["svg" for t, _ in self.tags if t == "svg"]

    def table_with(self, first_header: str, second_header: str) -> list[list[str]]:
        return next(t for t in self.tables if t and t[0][:2] == [first_header, second_header])


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("campaign")
    matrix = campaign_matrix(tmp)
    store = write_campaign(tmp / "runs", matrix)
    data = report_data(matrix, store)
    return matrix, store, data, html(data)


def test_self_contained_with_four_png_plots(campaign):
    *_, page = campaign
    parsed = Page(page)
    for tag, attrs in parsed.tags:
        for name in ("src", "href"):
            assert not (attrs.get(name) or "").startswith(("http", "//")), (tag, attrs.get(name))
    assert 'src="http' not in page and 'href="http' not in page
    images = parsed.images()
    assert len(images) == 4
    for src in images:
        assert src.startswith(PNG)
        assert base64.b64decode(src[len(PNG):])[:8] == b"\x89PNG\r\n\x1a\n"


def test_sections_in_order(campaign):
    *_, page = campaign
    headings = ["Arms", "READY rate", "Verdicts", "Capture ladder", "Timeline", "Gate scores", "Signature drift",
                "Legend"]
    positions = [page.index(f"<h2>{h}</h2>") for h in headings]
    assert positions == sorted(positions)


def test_arm_table_lists_every_arm_with_switches_and_ready(campaign):
    _, _, data, page = campaign
    table = Page(page).table_with("Arm", "pr32467")
    assert table[0][:3] == ["Arm", "pr32467", "pr33795"]
    rows = {r[0].split()[0]: r for r in table[1:]}
    assert list(rows) == [s.label for s in data.summaries] == ["A", "B", "C", "D"]
    assert rows["A"][0] == "A (pr32467=off, pr33795=off) (ref)"
    assert rows["B"][1:3] == ["✗", "✓"] and rows["D"][1:3] == ["✓", "✓"]
    assert rows["A"][3] == "1/6" and rows["B"][3] == "1/5 +1 not counted" and rows["C"][3] == "6/6"
    assert "exact_match 0.9522 ± 0.00095 (n=6)" in rows["C"][table[0].index("gsm8k")]


def test_verdicts_table_matches_the_comparisons(campaign):
    _, _, data, page = campaign
    table = Page(page).table_with("Metric", "Arm vs ref")
    verdict = table[0].index("Verdict")
    got = [(r[0], r[1], r[verdict]) for r in table[1:]]
    names = arm_names(data)
    assert got == [(c.metric, f"{names[c.arm]} vs {names[c.ref]}", c.verdict.value) for c in data.comparisons]
    assert ("READY", "C (pr32467=on, pr33795=off) vs A (pr32467=off, pr33795=off)", "BETTER") in got


def test_no_secret_and_every_patch_hash(campaign):
    _, _, data, page = campaign
    assert "hf_secret" not in page
    assert "HF_TOKEN=***" in "".join(Page(page).text)
    shas = {sha for e in data.legend for _, sha in e.patches}
    assert len(shas) == 2
    for sha in shas:
        assert sha in page


def test_drift_lists_signatures_in_launch_order(campaign):
    *_, page = campaign
    text = " ".join("".join(Page(page).text).split())
    assert "A (pr32467=off, pr33795=off): 5 failures drifting" in text
    launch_tables = [t for t in Page(page).tables if t and t[0] == ["Trial", "Signature"]]
    assert [r[0] for r in launch_tables[0][1:]] == ["#1", "#2", "#3", "#4", "#5"]
    assert launch_tables[0][1][1].startswith("LIBRARY_ERROR:")


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("empty")
    matrix = campaign_matrix(tmp)
    return report_data(matrix, Store(tmp / "runs", matrix.name))


def test_empty_store_renders_without_plots(empty):
    parsed = Page(html(empty))
    assert parsed.images() == []
    assert "No launches yet." in parsed.text
    assert [r[0].split()[0] for r in parsed.table_with("Arm", "pr32467")[1:]] == ["A", "B", "C", "D"]


def test_text_is_escaped(empty):
    page = html(dataclasses.replace(empty, notes=("<script>alert(1)</script>",), title="a <b>c</b>"))
    tags = {t for t, _ in Page(page).tags}
    assert "script" not in tags and "b" in tags          # <b> is ours (arm labels), never the title's
    assert "&lt;script&gt;" in page and "<title>a &lt;b&gt;c&lt;/b&gt;</title>" in page


def test_campaign_without_gates_has_three_plots(tmp_path):
    matrix = campaign_matrix(tmp_path)
    store = write_campaign(tmp_path / "runs", matrix)
    for r in store.results():
        store.write_result(dataclasses.replace(r, gates={}))     # the same result.json, without gates
    page = html(report_data(matrix, store))
    assert len(Page(page).images()) == 3
    assert "<h2>Gate scores</h2>" not in page


@pytest.mark.parametrize(("outcome", "ladder", "cells"), [
    (Outcome.IMA, Ladder(2, 5, None, 60), [_CAPTURED, _CAPTURED, _FAILED, _NOT_REACHED, _NOT_REACHED]),
    (Outcome.READY, Ladder(5, 5), [_CAPTURED] * 5),
    (Outcome.IMA, Ladder(5, 5), [_CAPTURED] * 5),                       # failed after the ladder
    (Outcome.PATCH_FAILED, Ladder(0, 5), [_NOT_REACHED] * 5),           # never launched: not a capture failure
    (Outcome.IMA, Ladder(), [_NO_LADDER] * 5),
    (Outcome.IMA, Ladder(1, 3), [_CAPTURED, _FAILED, _NOT_REACHED, _NO_LADDER, _NO_LADDER]),
])
def test_ladder_cells(outcome, ladder, cells):
    r = TrialResult(matrix="m", arm_id="a", label="A", levels={}, trial=1, outcome=outcome, ladder=ladder)
    assert _ladder_row(r, 5) == cells


def test_every_section_names_an_arm_alike(campaign):
    _, _, data, page = campaign
    parsed = Page(page)
    text = " ".join("".join(parsed.text).split())
    alts = [a["alt"] or "" for t, a in parsed.tags if t == "img"]
    legend = parsed.table_with("Arm", "Id")
    arm_cells = [r[0] for r in parsed.table_with("Arm", "pr32467")[1:]]
    for s in data.summaries:
        name = f"{s.label} (" + ", ".join(f"{k}={v}" for k, v in s.levels.items()) + ")"
        assert any(c.startswith(name) for c in arm_cells)
        assert [name] == [r[0] for r in legend[1:] if r[0].split()[0] == s.label]
        assert f"<h3><b>{s.label}</b> (" in page and name in text     # drift heading
        assert all(name in alt for alt in alts), alts                 # every plot's arms, as drawn


def test_ladder_caption_names_the_campaigns_engine(campaign):
    _, _, data, _ = campaign
    command = dataclasses.replace(data, results=tuple(dataclasses.replace(r, engine="command") for r in data.results))
    alt = ladder_plot(command).alt
    assert "(command logs)" in alt and "sglang" not in alt
    assert "(sglang logs)" in ladder_plot(data).alt


def test_the_page_opens_with_the_setup_line(tmp_path):
    matrix = campaign_matrix(tmp_path)
    write_campaign(tmp_path / "runs", matrix)
    page = html(report_data(matrix, Store(tmp_path / "runs", matrix.name)))
    assert ("<p>Setup: hardware not recorded · sglang · deepseek-ai/DeepSeek-V4-Pro-DSpark · TP8 · "
            "build v0.5.16 @ f01f70600000 · env SGLANG_RAGGED_VERIFY_MODE=compact") in page


def test_verdicts_show_the_numbers_of_the_rule_that_decided(tmp_path):
    matrix = campaign_matrix(tmp_path)
    store = write_campaign(tmp_path / "runs", matrix)
    fixed = html(report_data(matrix, store))
    assert "p = 0.0152 (Holm 0.0455)" in fixed and "Fisher exact, Holm-adjusted over 3 pairs" in fixed
    auto = dataclasses.replace(matrix, stats=dataclasses.replace(matrix.stats, adaptive=True, max_repeats=6))
    from harness.app.report import compute
    page = html(compute(auto, store.read_arms(), store.results()))
    ready = [c for c in compute(auto, store.read_arms(), store.results()).comparisons if c.metric == "READY"]
    assert all(c.p_value is None for c in ready)
    assert f"log GLR {ready[0].statistic:.2f} vs {ready[0].threshold:.2f}" in page and "sequential GLR" in page
