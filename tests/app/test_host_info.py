"""The hardware a trial records: the GPUs its server could see, as nvidia-smi names them."""
from __future__ import annotations

import os
import stat

from harness.app import trial

SMI = """#!/bin/sh
# Answers the query the harness makes, in the format nvidia-smi 580 prints on an H200.
echo "0, GPU-1f0c6b3a-aaaa, NVIDIA H200"
echo "1, GPU-2e9d7c4b-bbbb, NVIDIA H200"
echo "2, GPU-3d8e8d5c-cccc, NVIDIA H100 80GB HBM3"
"""


def test_only_the_visible_gpus_are_recorded(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    trial.gpu_names.cache_clear()
    try:
        assert trial.host_info()["gpus"] == "2× NVIDIA H200, 1× NVIDIA H100 80GB HBM3"
        assert trial.host_info({"CUDA_VISIBLE_DEVICES": "1"})["gpus"] == "1× NVIDIA H200"
        assert trial.host_info({"CUDA_VISIBLE_DEVICES": "0,GPU-3d8e8d5c-cccc"})["gpus"] == \
            "1× NVIDIA H200, 1× NVIDIA H100 80GB HBM3"
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
        assert trial.host_info()["gpus"] == "1× NVIDIA H100 80GB HBM3"
    finally:
        trial.gpu_names.cache_clear()


def test_no_nvidia_smi_records_no_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    trial.gpu_names.cache_clear()
    try:
        info = trial.host_info()
        assert "gpus" not in info and info["machine"]
    finally:
        trial.gpu_names.cache_clear()
