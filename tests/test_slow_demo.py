"""The README's launch path on the real encoder: the bundled demo trains on CPU and then loads at once."""

import subprocess
import sys
import time

import pytest


@pytest.mark.slow
def test_demo_trains_then_loads(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "cartomap.cli",
        "--cache",
        str(tmp_path / "cache"),
        "demo",
        "--out-dir",
        str(tmp_path),
    ]
    start = time.perf_counter()
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    train_seconds = time.perf_counter() - start
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "demo_map.png").exists() and (tmp_path / "demo_map.html").exists()
    assert "dev accuracy" in first.stdout
    start = time.perf_counter()
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and "exists" in second.stdout
    print(f"demo: trained in {train_seconds:.0f}s, loaded in {time.perf_counter() - start:.1f}s")
    assert time.perf_counter() - start < 60
