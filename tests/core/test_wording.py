"""An arm's launches in one cell, in the seeds' words."""
from __future__ import annotations

from harness.core.outcome import Outcome
from harness.core.record import Ladder, TrialResult
from harness.core.wording import result_cell


def launch(outcome: Outcome, k: int = 1, bs: int | None = None, rank: str | None = None, line: str | None = None,
           shapes: tuple[int, int] | None = None) -> TrialResult:
    lad = Ladder(shapes[0], shapes[1], None, bs) if shapes else Ladder(failing_bs=bs)
    return TrialResult(matrix="m", arm_id="a", label="A", levels={}, trial=k, outcome=outcome, failing_rank=rank,
                       first_error_line=line, ladder=lad)


def test_all_ready_with_a_full_ladder_reads_like_the_seed():
    rs = [launch(Outcome.READY, k, shapes=(35, 35)) for k in (1, 2, 3)]
    assert result_cell(rs) == "3/3 READY, 35/35 shapes each"
    assert result_cell(rs[:1]) == "1/1 READY, 35/35 shapes"


def test_a_single_failure_names_bs_rank_and_error_code():
    rs = [launch(Outcome.LIBRARY_ERROR, bs=104, rank="TP7",
                 line="RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx")]
    assert result_cell(rs) == "1/1 library error at bs=104, TP7 (CUBLAS_STATUS_EXECUTION_FAILED)"


def test_mixed_launches_count_each_class_and_name_what_did_not_count():
    rs = [launch(Outcome.READY, 1), launch(Outcome.IMA, 2, bs=8), launch(Outcome.IMA, 3, bs=32),
          launch(Outcome.CAPTURE_ERROR, 4, bs=60), launch(Outcome.PATCH_FAILED, 5)]
    assert result_cell(rs) == ("1/4 READY; 2/4 illegal memory access at bs=8/32; 1/4 capture failure at bs=60 "
                               "(+1 PATCH_FAILED, not counted)")
    assert result_cell([launch(Outcome.INFRA)]) == "no launch counted (+1 INFRA, not counted)"
