"""The three scripts of examples/ run as written (slow: each fine-tunes the default encoder for minutes)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import patience
import pytest

from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # minutes on an idle 2-core CPU; far more on a busy one
@pytest.mark.parametrize(
    "script, origin, source",
    [
        ("trainer_callback.py", "trainer", "train"),
        ("pytorch_loop.py", "recorder", "train"),
        ("score_checkpoints.py", "checkpoints", "eval"),
    ],
)
def test_example_runs_as_written(script, origin, source, tmp_path):
    env = dict(os.environ, CARTOMAP_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    done = patience.run(  # as long as it makes progress
        [sys.executable, str(ROOT / "examples" / script)],
        watch=[tmp_path],
        cwd=tmp_path,  # as a user runs it: outputs next to them
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = RunStore(tmp_path / "cache").list()
    assert run.state == "done" and run.config.origin.kind == origin
    assert len(run.dynamics_epochs(source)) == 4
    assert f"run {run.id} (done)" in done.stdout
    assert run.metrics()["region"].nunique() >= 2  # it learned something: not one region for all
