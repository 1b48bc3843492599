"""The run's step log (cartomap.runs.steps): the training loss every k steps, appended whole, read back
without a half-written line, trimmed to the completed epochs when a run resumes."""

from __future__ import annotations

import json

import pytest

from cartomap.runs import layout, steps


def test_every_keeps_an_epoch_under_its_points():
    assert steps.every(1) == 1 and steps.every(steps.POINTS_PER_EPOCH) == 1
    assert steps.every(steps.POINTS_PER_EPOCH + 1) == 2
    assert steps.every(17_000) == 34 and 17_000 / steps.every(17_000) <= steps.POINTS_PER_EPOCH


def test_a_line_every_k_steps_with_the_mean_loss_of_their_units(tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "POINTS_PER_EPOCH", 2)  # 5 steps an epoch: k = 3, lines after steps 3 and 5
    path = tmp_path / layout.STEPS
    log = steps.StepLog(path, steps_per_epoch=5, flush_s=3600)
    assert log.k == 3
    losses = [(2.0, 2), (4.0, 2), (3.0, 1), (1.0, 1), (0.5, 1)]  # (loss summed over units, units)
    for i, (loss, units) in enumerate(losses, start=1):
        log.add(1, i, i, loss, units)
    assert not path.exists()  # nothing flushed yet (flush_s)
    log.flush()
    records = steps.read(path)
    assert [(r["epoch"], r["step"], r["global_step"], r["n"]) for r in records] == [
        (1, 3, 3, 3),
        (1, 5, 5, 2),
    ]
    assert records[0]["loss"] == pytest.approx(9.0 / 5) and records[1]["loss"] == pytest.approx(1.5 / 2)
    assert all(r["steps_per_epoch"] == 5 for r in records)
    log.add(2, 1, 6, 0.3, 1)
    log.flush()  # the group is not complete: no line
    assert len(steps.read(path)) == 2


def test_a_half_written_line_and_a_line_that_is_no_record_are_left_out(tmp_path):
    path = tmp_path / layout.STEPS
    good = {"epoch": 1, "step": 1, "steps_per_epoch": 4, "global_step": 1, "loss": 0.9, "n": 1}
    path.write_text(
        json.dumps(good)
        + "\n"
        + "not json\n"
        + json.dumps({**good, "loss": "high"})
        + "\n"
        + json.dumps({**good, "step": 2, "global_step": 2})[:-5]  # killed mid-write: no newline
    )
    assert steps.read(path) == [good]
    assert steps.read(tmp_path / "none.jsonl") == []


def test_trim_keeps_the_completed_epochs(tmp_path):
    path = tmp_path / layout.STEPS
    log = steps.StepLog(path, steps_per_epoch=2)
    for g, (epoch, step) in enumerate([(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)], start=1):
        log.add(epoch, step, g, 1.0 / g, 1)
    log.flush()
    steps.trim(path, 2)
    assert [r["global_step"] for r in steps.read(path)] == [1, 2, 3, 4]
    steps.trim(path, 0)  # a restart from the beginning: nothing kept
    assert not path.exists()
    steps.trim(path, 1)  # no log: nothing to do
    assert not path.exists()
    steps.StepLog(None, 2).add(1, 1, 1, 1.0, 1)  # not the main process: writes nothing
    assert not path.exists()
