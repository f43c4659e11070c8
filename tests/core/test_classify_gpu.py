"""Real failures produced on an NVIDIA H200 with PyTorch (tests/gpu/make_real_logs.py): the exact
text torch and the CUDA runtime print, including their boilerplate hints and chained errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.classify import LogClassifier

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"
LABELS = [json.loads(x) for x in (GPU / "labels.jsonl").read_text().splitlines() if x.strip()]
FIELDS = ("outcome", "first_error_line", "failing_bs", "failing_rank", "shapes_captured")


@pytest.mark.parametrize("label", LABELS, ids=[x["file"] for x in LABELS])
def test_real_gpu_log(label):
    clf = LogClassifier()
    fatal = []
    for line in (GPU / label["file"]).read_bytes().decode("utf-8", errors="replace").splitlines():
        out = clf.feed(line)
        if out is not None:
            fatal.append(out.value)
    got = clf.result()
    assert {f: (got.outcome.value if f == "outcome" else getattr(got, f)) for f in FIELDS} == \
        {f: label[f] for f in FIELDS}
    if label["outcome"] != "READY":
        assert fatal == [label["outcome"]], "the first fatal line already names the class, once"
        assert got.signature and got.signature.startswith(label["outcome"] + ":")
