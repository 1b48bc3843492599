"""The README's launch path on the real encoder: the bundled demo trains on CPU, its map looks like a data
map (the arc with its three regions), and it then loads at once."""

import sys
import time

import numpy as np
import patience
import pytest

from cartomap.runs.store import RunStore
from cartomap.scores.metrics import REGIONS


@pytest.mark.slow
@pytest.mark.timeout(3600)  # ~3.5 minutes on an idle 2-core CPU; far more on a busy one
def test_demo_trains_then_loads(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "cartomap.cli",
        "--cache",
        str(tmp_path / "cache"),
        "demo",
        "--train",  # live, not the recorded run shipped with cartomap
        "--out-dir",
        str(tmp_path),
    ]
    start = time.perf_counter()
    first = patience.run(cmd, watch=[tmp_path / "cache"])  # as long as it makes progress
    train_seconds = time.perf_counter() - start
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "demo_map.png").exists() and (tmp_path / "demo_map.html").exists()
    assert "dev accuracy" in first.stdout

    (run,) = RunStore(tmp_path / "cache").list()
    assert run.status()["dev_accuracy"] >= 0.75  # the model learned the task: not a flat cloud near chance
    metrics = run.metrics()
    confidence = metrics["confidence"].to_numpy()
    assert np.mean(confidence >= 0.75) >= 0.15  # the easy-to-learn top of the arc is there
    counts = metrics["region"].value_counts()
    assert all(counts.get(region, 0) > 0 for region in REGIONS), counts.to_dict()

    trained = {p: p.stat().st_mtime_ns for p in (run.metrics_path(), run.model_dir / "model.safetensors")}
    start = time.perf_counter()
    second = patience.run([*cmd, "--force"], watch=[tmp_path / "cache"])  # the map files exist
    assert second.returncode == 0 and "exists" in second.stdout
    assert {p: p.stat().st_mtime_ns for p in trained} == trained  # loaded, not trained again
    print(
        f"demo: trained in {train_seconds:.0f}s, dev accuracy {run.status()['dev_accuracy']:.3f}, "
        f"confidence >= 0.75: {np.mean(confidence >= 0.75):.1%}, regions {counts.to_dict()}, "
        f"loaded in {time.perf_counter() - start:.1f}s"
    )
