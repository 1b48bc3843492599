"""The training loop's named steps, each on its own (cartomap.training.loop): set-up, a step, a recording
inside an epoch, an epoch, the checkpoint. The whole loop's oracles (learning rate 0, a resumed run equal to
an uninterrupted one) are in test_train.py; here each step is called by hand on a tiny pair run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.runs.store import RunStore
from cartomap.training import loop
from cartomap.training.prepare import prepare_run


@pytest.fixture()
def run(tmp_path, tiny_model):
    path = tmp_path / "pairs.jsonl"
    rows = [
        {
            "premise": f"a cat {i} sat",
            "hypothesis": f"the mat {i % 3}",
            "label": ["yes", "no", "maybe"][i % 3],
        }
        for i in range(8)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = RunConfig(
        data=DataConfig(path=str(path)),
        dev=None,
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(epochs=2, batch_size=4, learning_rate=1e-2, warmup_ratio=0.0, record="both"),
    )
    return prepare_run(config, RunStore(tmp_path / "cache"))


def accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True)


def test_set_up_restores_nothing_for_a_new_run_and_allocates_every_recording(run):
    t = loop.set_up(run, None, accelerator())
    assert t.start_epoch == 0 and t.trainer["global_step"] == 0 and t.history == []
    assert set(t.recorded) == {"train", "eval"} and t.recorded["train"].shape == (2, 8, 3)
    assert t.steps_per_epoch == 2 and t.dev is None and t.tests == []


def test_set_up_of_a_run_cancelled_while_queued_is_none_and_the_run_says_so(run):
    run.request_cancel()
    assert loop.set_up(run, None, accelerator()) is None
    assert run.state == "cancelled"


def test_a_train_step_moves_the_weights_records_its_units_once_and_counts_itself(run):
    t = loop.set_up(run, None, accelerator())
    loop.seed_everything(0)
    t.model.train()
    before = [p.detach().clone() for p in t.model.parameters()]
    recording = loop.EpochRecording(rows=np.zeros(len(t.ids), dtype=bool), eval_now=False)
    batch = next(iter(t.train_loader))
    loop.train_step(t, 0, 0, batch, recording)
    assert recording.rows.sum() == 4 and recording.seen == 4 and recording.loss_sum > 0
    assert t.trainer["global_step"] == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, t.model.parameters(), strict=True))
    recorded = t.recorded["train"][0][recording.rows]
    assert np.all(recorded != 0) and np.all(t.recorded["train"][0][~recording.rows] == 0)


def test_a_recording_inside_an_epoch_leaves_the_random_state_as_it_was(run):
    t = loop.set_up(run, None, accelerator())
    t.mid_points = {1: [0]}
    t.recorded["eval"] = np.zeros((4, len(t.ids), 3), dtype=np.float32)
    t.per_epoch = {**t.per_epoch, "eval": 2}
    state = torch.get_rng_state()
    recording = loop.EpochRecording(rows=np.zeros(len(t.ids), dtype=bool), eval_now=True)
    loop.record_inside_epoch(t, 0, 0, recording)
    assert torch.equal(state, torch.get_rng_state())
    assert np.all(t.recorded["eval"][0] != 0) and np.all(t.recorded["eval"][1] == 0)
    assert t.model.training  # back to training mode


def test_an_epoch_by_hand_is_the_loops_epoch(run, tmp_path, tiny_model):
    """train_epoch + record_epoch_end + end_epoch + checkpoint, called by hand for both epochs, then finish:
    the dynamics the whole loop writes for the same config (bit for bit)."""
    whole = loop.train_or_load(run.config, RunStore(tmp_path / "whole"))
    t = loop.set_up(run, None, accelerator())
    for epoch in range(2):
        record, recording = loop.train_epoch(t, epoch)
        loop.record_epoch_end(t, epoch, record, recording)
        dev_logits, test_logits = loop.evaluate(t, record)
        loop.end_epoch(t, epoch, record)
        loop.checkpoint(t, epoch, record, dev_logits, test_logits)
    loop.finish(t)
    for source in ("train", "eval"):
        ids, logits = RunStore(tmp_path / "cache").get(run.id).dynamics(source)
        ids_whole, logits_whole = whole.dynamics(source)
        assert ids == ids_whole and np.array_equal(logits, logits_whole)
