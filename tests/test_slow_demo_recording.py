"""The recorded demo run shipped with cartomap equals a fresh training bit for bit: the demo trained here
(`cartomap demo --train`, the same config, data, seed and version; training on a CPU is deterministic)
records exactly the shipped dynamics, so the recording cannot drift from the code. When it fails, record
the demo again: `python scripts/record_demo.py`."""

import sys

import numpy as np
import patience
import pytest

from cartomap.runs import shipped
from cartomap.runs.store import Run, RunStore


@pytest.mark.slow
@pytest.mark.timeout(3600)  # ~4-6 minutes on an idle 2-core CPU; far more on a busy one
def test_a_fresh_training_equals_the_shipped_recording(tmp_path):
    recording = Run(shipped.recorded_folder("pair"))
    cache = tmp_path / "cache"
    cmd = [
        sys.executable,
        "-m",
        "cartomap.cli",
        "--cache",
        str(cache),
        "demo",
        "--train",
        "--out-dir",
        str(tmp_path),
    ]
    done = patience.run(cmd, watch=[cache])  # as long as it makes progress
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = RunStore(cache).list()
    assert run.id == recording.id and not shipped.is_recording(run)
    sources = sorted(p.name for p in recording.dynamics_dir("train").parent.iterdir())
    assert sources == sorted(p.name for p in run.dynamics_dir("train").parent.iterdir())
    for source in sources:
        assert run.dynamics_epochs(source) == recording.dynamics_epochs(source)
        ids, fresh = run.dynamics(source)
        shipped_ids, recorded = recording.dynamics(source)
        assert ids == shipped_ids
        assert np.array_equal(fresh, recorded), f"{source}: the dynamics differ from the recording"
    assert run.metrics().equals(recording.metrics())
