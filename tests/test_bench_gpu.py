"""bench/bench_gpu.py at its smoke size on the CPU: every measurement path runs (the GPU figures
need a GPU: docs/benchmarks.md); the MFU arithmetic and the peak table on known device names."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "bench" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_size_runs_every_model_and_the_knn_on_cpu(bench, tmp_path):
    out = tmp_path / "gpu.json"
    result = bench.main(["--smoke", "--device", "cpu", "--peak-tflops", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    rows = result["training"]
    assert [r["model"] for r in rows] == ["default", "roberta-base", "roberta-large"]
    for row in rows:
        assert row["examples_per_s"] > 0 and row["tokens_per_s"] == pytest.approx(16 * row["examples_per_s"])
        assert 0 < row["mfu"] < 1 and 0 < row["mfu_no_recording"] < 1  # fp32 on a CPU against 1 TFLOP/s
        assert row["recording_overhead"] > -1 and row["peak_memory_gib"] > 0
    assert rows[2]["params_non_embedding_m"] > rows[1]["params_non_embedding_m"]  # large is larger
    assert result["knn"]["knn_n"] == 3000 and result["knn"]["knn_seconds"] > 0


def test_mfu_and_the_peak_of_known_devices(bench):
    assert bench.mfu(10**9, 10**6, 1.0, 1000.0) == pytest.approx(6e15 / 1e15)
    assert bench.mfu(10**9, 10**6, 1.0, None) is None
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3", None) == 989.0
    assert bench.peak_tflops("NVIDIA H100 PCIe", None) == 756.0
    assert bench.peak_tflops("NVIDIA A100-SXM4-80GB", None) == 312.0
    assert bench.peak_tflops("NVIDIA L40S", None) == 362.0 and bench.peak_tflops("NVIDIA L4", None) == 121.0
    assert bench.peak_tflops("Some future GPU", None) is None and bench.peak_tflops("x", 500.0) == 500.0
