"""The markdown, CSV and JSON reports of a fixed campaign, compared with golden files.
Regenerate after an intended change: HARNESS_UPDATE_GOLDEN=1 pytest tests/adapters/test_report_golden.py"""
import json
import os
from pathlib import Path

import pytest

from harness.app.report import build_report, render
from tests.fixtures.campaign import campaign_matrix, write_campaign

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "report"


@pytest.fixture
def report(tmp_path):
    matrix = campaign_matrix(tmp_path)
    write_campaign(tmp_path / "runs", matrix)
    return build_report(matrix, tmp_path / "runs", ("md", "csv", "json"))


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HARNESS_UPDATE_GOLDEN"):
        path.write_bytes(text.encode("utf-8"))
    assert text == path.read_bytes().decode("utf-8"), f"{name} differs from the golden file"


def test_markdown_matches_golden(report):
    _check("four_arm.md", report.markdown)


def test_csv_matches_golden(report):
    _check("four_arm.csv", report.csv)


def test_files_are_written_and_json_is_plain_data(report, tmp_path):
    assert sorted(p.name for p in report.files) == ["report.csv", "report.json", "report.md"]
    data = json.loads((tmp_path / "runs" / "four_arm" / "report.json").read_text())
    ready = [c for c in data["comparisons"] if c["metric"] == "READY"]
    assert [(c["arm"], c["verdict"]) for c in ready] == [("B", "UNKNOWN"), ("C", "BETTER"), ("D", "BETTER")]
    assert len(data["results"]) == 24 and "hf_secret" not in json.dumps(data)
    assert render(report.data, "md") == report.markdown
