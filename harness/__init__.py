"""harness: declarative experiments and bisection for LLM inference servers."""
from __future__ import annotations

__version__ = "0.1.0"


def load(matrix: str, runs_dir: str = "runs"):
    """The campaign's trials of a matrix as a pandas DataFrame, one row per trial: exactly the
    trials its report counts (see harness.core.campaign). Raises harness.errors.NoCampaign when
    runs_dir holds nothing of the matrix."""
    from harness.app.results import load_frame

    return load_frame(matrix, runs_dir)


__all__ = ["__version__", "load"]
