"""The polling policy of a page following a job (cartomap.runs.polling): pure, hand-checked."""

from __future__ import annotations

import os

from cartomap.runs import polling
from cartomap.runs.polling import (
    CURVES_MIN_S,
    POLL_MAX_S,
    POLL_MIN_S,
    curves_due,
    curves_key,
    file_signature,
    marks,
    next_interval,
)


def test_the_interval_grows_by_half_up_to_the_most_and_a_change_resets_it():
    seen, interval = [], None
    for _ in range(7):
        interval = next_interval(interval, changed=False)
        seen.append(interval)
    assert seen == [2.0, 3.0, 4.5, 6.75, 10.0, 10.0, 10.0]
    assert next_interval(10.0, changed=True) == POLL_MIN_S
    assert next_interval(None, changed=False) == POLL_MIN_S  # the first poll
    assert next_interval(0.5, changed=False) == POLL_MIN_S  # never below the least
    assert next_interval(60.0, changed=False) == POLL_MAX_S  # nor above the most


def test_marks_are_state_phase_and_epoch_not_steps():
    running = {"state": "running", "phase": "train", "epoch": 1, "step": 3, "loss": 1.1}
    assert marks(running) == marks({**running, "step": 4, "loss": 0.9, "updated_at": 5.0})
    assert marks(running) != marks({**running, "phase": "eval-pass"})
    assert marks(running) != marks({**running, "epoch": 2})
    assert marks(running) != marks({**running, "state": "done"})
    assert marks(None) == marks({}) == (None, None, None)


def test_the_curves_key_moves_by_a_quarter_epoch_of_steps():
    status = {"steps_per_epoch": 40, "global_step": 0}
    keys = [curves_key((1, 2), {**status, "global_step": g}) for g in range(0, 41)]
    assert polling.CURVE_REDRAWS_PER_EPOCH == 4
    assert [k[1] for k in keys[::10]] == [0, 1, 2, 3, 4]
    assert len(set(keys)) == 5  # steps 0-9, 10-19, 20-29, 30-39, 40
    assert curves_key((1, 2), status) != curves_key((1, 3), status)  # the history rewritten
    assert curves_key(None, {"steps_per_epoch": 2, "global_step": 7}) == (None, 7)  # k at least one step
    assert curves_key(None, None) == (None, 0)


def test_a_file_signature_changes_when_it_is_rewritten(tmp_path):
    path = tmp_path / "history.json"
    assert file_signature(path) is None
    path.write_text("[]")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    first = file_signature(path)
    assert first == (1_000_000_000, 2)
    path.write_text('[{"epoch": 1}]')
    assert file_signature(path) != first


def test_curves_are_due_at_once_for_an_epoch_and_for_steps_after_the_least_time():
    drawn = ((1, 2), 3)
    assert not curves_due(drawn, drawn, 1e6)  # nothing new, however long ago
    assert curves_due(drawn, ((1, 9), 3), 0.0)  # the history rewritten: a new epoch
    assert not curves_due(drawn, ((1, 2), 4), CURVES_MIN_S - 0.1)  # steps alone, too soon
    assert curves_due(drawn, ((1, 2), 4), CURVES_MIN_S)
