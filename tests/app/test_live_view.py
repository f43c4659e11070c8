"""The live table during a run shows READY k/n, its interval and the running verdict."""
from rich.console import Console
from rich.progress import Progress

from harness.app.run import _view
from harness.core.arms import expand
from tests.fixtures.campaign import campaign_matrix, write_campaign


def test_live_view_shows_interval_and_running_verdict(tmp_path):
    matrix = campaign_matrix(tmp_path)
    store = write_campaign(tmp_path / "runs", matrix)
    arms = expand(matrix, "f01f706" + "0" * 33)
    half = [r for r in store.results() if r.trial <= 3]
    console = Console(width=250, record=True)
    console.print(_view(Progress(), "now: D", matrix, arms, half))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│ ")}
    assert "3/3 [0.44, 1.00]" in rows["C"] and "UNKNOWN vs A" in rows["C"]   # 0/3 vs 3/3 is not decided yet
    assert "baseline" in rows["A"] and "0/3 [0.00, 0.56]" in rows["A"]
    console = Console(width=250, record=True)
    console.print(_view(Progress(), "", matrix, arms, store.results()))
    assert "BETTER vs A" in console.export_text()
