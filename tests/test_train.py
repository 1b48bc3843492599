"""The training loop, the run store and resume, on a tiny random BERT and real NLI pairs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import patience
import pytest

from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.errors import RunError
from cartomap.runs.store import RunStore
from cartomap.scores.metrics import compute_metrics
from cartomap.training.batching import EpochBatches
from cartomap.training.loop import early_stopping, train_or_load
from cartomap.training.prepare import prepare_run


def small_config(tiny_model, **train) -> RunConfig:
    defaults = dict(epochs=3, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0, record="train")
    defaults.update(train)
    return RunConfig(
        data=DataConfig(path="demo:dev"),
        dev=DataConfig(path="demo:dev"),
        model=ModelConfig(tiny_model, max_length=64),
        train=TrainConfig(**defaults),
    )


def test_epoch_batches_cover_every_row_once_and_reshuffle():
    lengths = np.arange(103) % 17
    batches = EpochBatches(lengths, 10, seed=1)
    first = list(batches)
    assert len(first) == len(batches) == 11
    assert sorted(i for b in first for i in b) == list(range(103))
    batches.set_epoch(1)
    assert list(batches) != first
    batches.set_epoch(0)
    assert list(batches) == first  # same (seed, epoch) -> same order


def test_length_grouped_batches_pad_less():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 120, size=2000)
    plain = EpochBatches(lengths, 32, seed=0)
    grouped = EpochBatches(lengths, 32, seed=0, group_by_length=True)

    def padded(batches):
        return sum(len(b) * lengths[b].max() for b in batches)

    assert sorted(i for b in grouped for i in b) == list(range(2000))
    assert padded(grouped) < 0.7 * padded(plain)


def test_early_stopping_counts_epochs_without_gain():
    t = {"best_dev_accuracy": None, "bad_epochs": 0, "stopped_early": False}
    for acc in (0.5, 0.6, 0.6, 0.55):
        t.update(early_stopping(t, acc, patience=2))
    assert t["best_dev_accuracy"] == 0.6 and t["bad_epochs"] == 2 and t["stopped_early"]
    assert early_stopping(t, None, 2) == {}


def test_train_records_dynamics_and_loads_instantly(tiny_model, cache, monkeypatch):
    config = small_config(tiny_model)
    store = RunStore(cache)
    run = train_or_load(config, store)
    assert run.state == "done"
    ids, logits = run.dynamics("train")
    examples = run.examples()
    assert logits.shape == (3, len(examples), 3)
    assert ids == examples["id"].tolist()
    assert np.isfinite(logits).all() and not np.allclose(logits[0], logits[2])
    metrics = run.metrics()
    expected = compute_metrics(logits, examples["label"].to_numpy(), ids)
    np.testing.assert_allclose(metrics["confidence"], expected["confidence"], rtol=1e-6)
    assert len(run.history()) == 3 and "dev_accuracy" in run.history()[0]
    # the loss of every step (400 examples, batch 16: 25 full steps an epoch, a line each), whose mean
    # over an epoch is the epoch's train loss
    logged = run.step_losses()
    assert [r["global_step"] for r in logged] == list(range(1, 76))
    assert [(r["epoch"], r["step"]) for r in logged[24:26]] == [(1, 25), (2, 1)]
    for epoch, record in enumerate(run.history(), start=1):
        mean = np.mean([r["loss"] for r in logged if r["epoch"] == epoch])
        assert mean == pytest.approx(record["train_loss"], abs=1e-5)
    assert (run.model_dir / "model.safetensors").exists()
    assert not (run.path / "state").exists()  # resume state is dropped once done
    before = (run.path / "metrics.parquet").stat().st_mtime_ns

    import cartomap.training.loop

    def no_training(*a, **kw):
        raise AssertionError("a finished run was trained again instead of loaded")

    monkeypatch.setattr(cartomap.training.loop, "train_run", no_training)
    again = train_or_load(config, store)  # loaded: nothing trained, nothing written
    assert again.id == run.id
    assert (run.path / "metrics.parquet").stat().st_mtime_ns == before
    # A different seed is a different run; the device and the name are not part of the identity.
    assert prepare_run(config.replace(name="x"), store).id == run.id
    other = small_config(tiny_model, seed=7)
    assert prepare_run(other, store).id != run.id
    assert len(store.list()) == 2


def test_eval_mode_recording_and_checkpoints(tiny_model, cache):
    run = train_or_load(
        small_config(tiny_model, epochs=2, record="both", save_checkpoints=True), RunStore(cache)
    )
    _, train_logits = run.dynamics("train")
    _, eval_logits = run.dynamics("eval")
    assert train_logits.shape == eval_logits.shape
    assert not np.allclose(train_logits, eval_logits)  # dropout and moving weights differ from eval mode
    assert len(run.metrics("eval")) == train_logits.shape[1]
    assert [p.name for p in run.checkpoint_dirs()] == ["epoch_1", "epoch_2"]
    assert (run.checkpoint_dirs()[0] / "model.safetensors").exists()


def test_cancel_then_resume(tiny_model, cache):
    store = RunStore(cache)
    config = small_config(tiny_model, epochs=2)
    run = prepare_run(config, store)
    run.request_cancel()
    # A job started in the background honours a cancel made while it was queued ...
    assert train_or_load(config, store, as_job=True).state == "cancelled"
    # ... and an explicit start clears it and runs to the end.
    assert train_or_load(config, store).state == "done"

    config = small_config(tiny_model, epochs=2, seed=3)
    run = prepare_run(config, store)
    calls = []

    def cancel_in_epoch_two(status):
        calls.append(status["epoch"])
        if status["epoch"] == 2 and status.get("step") == 2:
            run.request_cancel()

    train_or_load(config, store, on_step=cancel_in_epoch_two)
    assert run.state == "cancelled"
    assert run.dynamics_epochs("train") == [0]
    # the step log holds what was trained, epoch 2's first steps too (flushed at the cancel)
    assert [(r["epoch"], r["step"]) for r in run.step_losses()][-3:] == [(1, 25), (2, 1), (2, 2)]
    train_or_load(config, store)
    assert run.state == "done" and run.dynamics_epochs("train") == [0, 1]
    # resumed: epoch 2 was logged again from its start, every step once, in order
    assert [r["global_step"] for r in run.step_losses()] == list(range(1, 51))


def test_store_delete_and_lookup(tiny_model, cache):
    store = RunStore(cache)
    run = prepare_run(small_config(tiny_model).replace(name="mine"), store)
    assert store.get(run.id[:6]).id == run.id
    assert store.get("mine").id == run.id
    with pytest.raises(RunError, match="no run"):
        store.get("nonexistent")
    assert store.table()["state"].tolist() == ["queued"]
    store.delete(run.id)
    assert store.list() == [] and not any(cache.joinpath("runs").iterdir())


def _cli(cache, *args, **kwargs):
    """The command line in a process of its own; waits as long as it makes progress (tests/patience.py)."""
    cmd = [sys.executable, "-m", "cartomap.cli", "--cache", str(cache), *args]
    return patience.run(cmd, watch=[cache], **kwargs)


@pytest.fixture(scope="module")
def crash_args(tiny_model):
    return [
        "train",
        "--data",
        "demo:train",
        "--dev",
        "none",
        "--model",
        tiny_model,
        "--epochs",
        "3",
        "--batch-size",
        "8",
        "--lr",
        "1e-3",
        "--max-length",
        "64",
        "--record",
        "both",
        "--quiet",
    ]


@pytest.mark.slow  # three trainings in subprocesses, one SIGKILLed mid-epoch (test_cancel_then_resume stays default)
def test_killed_run_resumes_with_identical_dynamics(crash_args, tmp_path):
    """SIGKILL in the middle of epoch 2, start again: same dynamics as an uninterrupted run."""
    crashed, clean = tmp_path / "crashed", tmp_path / "clean"
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "wb") as err:  # a file, not a pipe: a full pipe would stop the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "cartomap.cli", "--cache", str(crashed), *crash_args],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )

    def in_epoch_2() -> Path | None:
        """The status file once it says epoch 2, step 20 or later."""
        for found in crashed.glob("runs/*/status.json"):
            try:
                status = json.loads(found.read_text())
            except (json.JSONDecodeError, FileNotFoundError):
                continue
            if status.get("epoch") == 2 and status.get("step", 0) >= 20:
                return found
        return None

    # however slow the machine: while the training makes progress (tests/patience.py)
    status_file = patience.wait_progressing(
        proc, [crashed], until=in_epoch_2, poll_s=0.02, what="the training"
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert status_file and proc.returncode == -signal.SIGKILL, stderr.read_text()[-2000:]
    run_dir = status_file.parent
    assert sorted(p.name for p in (run_dir / "dynamics" / "train").iterdir()) == ["epoch_0.parquet"]

    listed = _cli(crashed, "runs")
    assert "interrupted" in listed.stdout

    resumed = _cli(crashed, *crash_args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming after epoch 1" in (run_dir / "log.txt").read_text()
    uninterrupted = _cli(clean, *crash_args)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

    for source in ("train", "eval"):
        a_ids, a = RunStore(crashed).get(run_dir.name).dynamics(source)
        b_ids, b = RunStore(clean).get(run_dir.name).dynamics(source)
        assert a_ids == b_ids
        np.testing.assert_array_equal(a, b)
    # the step log of the killed and resumed run: the one of the run never stopped (no line twice)
    assert (
        RunStore(crashed).get(run_dir.name).step_losses() == RunStore(clean).get(run_dir.name).step_losses()
    )
    assert len(RunStore(clean).get(run_dir.name).step_losses()) > 0


@pytest.mark.skipif(os.environ.get("CARTOMAP_SKIP_REAL_MODEL") == "1", reason="real encoder disabled")
def test_default_encoder_end_to_end(tmp_path, cache):
    """The real bundled all-MiniLM-L6-v2 on 96 real SNLI/MNLI pairs, two epochs."""
    import pandas as pd

    from cartomap.data.loading import load_dataset

    frame = load_dataset(DataConfig(path="demo:train")).frame.head(96)
    frame.assign(label=[("entailment", "neutral", "contradiction")[i] for i in frame["label"]]).to_json(
        tmp_path / "small.jsonl", orient="records", lines=True
    )
    config = RunConfig(
        data=DataConfig(path=str(tmp_path / "small.jsonl")),
        dev=None,
        train=TrainConfig(epochs=2, batch_size=16),
    )
    run = train_or_load(config, RunStore(cache))
    metrics = run.metrics()
    assert len(metrics) == 96 and metrics["confidence"].between(0, 1).all()
    assert isinstance(metrics, pd.DataFrame) and run.info["versions"]["torch"]


def test_record_none_trains_without_dynamics(tiny_model, cache):
    run = train_or_load(
        small_config(tiny_model, epochs=1, record="none", save_checkpoints=False), RunStore(cache)
    )
    assert run.state == "done" and run.dynamics_epochs("train") == []
    assert run.status()["metrics_source"] is None


def test_a_started_job_reads_the_prepared_data_once(tiny_model, cache, monkeypatch):
    """start_training loads and fingerprints the datasets once; the job it spawns opens the run by
    id and trains from the run's own copy, loading nothing again."""
    import cartomap.data.loading
    import cartomap.runs.jobs
    import cartomap.training.prepare
    from cartomap.cli import main
    from cartomap.training.launch import start_training

    loads = []
    real = cartomap.data.loading.load_dataset
    for module in (cartomap.data.loading, cartomap.training.prepare):  # where it is defined and used
        monkeypatch.setattr(module, "load_dataset", lambda *a, **k: loads.append(a) or real(*a, **k))
    spawned = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None, env=None: spawned.append(args) or 0
    )
    run = start_training(small_config(tiny_model, epochs=1), RunStore(cache))
    assert len(loads) == 2  # the training and the dev set, once each
    assert spawned == [["train", "--run", run.id, "--quiet", "--job"]]
    assert json.loads(run.job_config_path.read_text())["train"]["epochs"] == 1  # saved before the job
    loads.clear()
    assert main(["--cache", str(cache), *spawned[0]]) == 0
    assert loads == [] and run.state == "done"


def test_eval_recordings_inside_an_epoch_leave_training_unchanged(tiny_model, cache):
    """Several eval-mode passes per epoch: record_points x epochs recordings, the last of each epoch the
    same as the one end-of-epoch pass, and the training pass (dropout masks, order) untouched."""
    store = RunStore(cache)
    once = train_or_load(small_config(tiny_model, epochs=2, record="both"), store)
    four = train_or_load(small_config(tiny_model, epochs=2, record="both", record_points=4), store)
    assert four.id != once.id
    _, train_once = once.dynamics("train")
    _, train_four = four.dynamics("train")
    np.testing.assert_array_equal(train_once, train_four)
    _, eval_once = once.dynamics("eval")
    _, eval_four = four.dynamics("eval")
    assert eval_four.shape == (8, *eval_once.shape[1:])
    np.testing.assert_allclose(eval_four[[3, 7]], eval_once, rtol=1e-5, atol=1e-5)
    assert not np.allclose(eval_four[0], eval_four[3])  # recorded while the weights moved
    examples = once.examples()
    expected = compute_metrics(eval_four, examples["label"].to_numpy(), examples["id"].tolist())
    np.testing.assert_allclose(four.metrics("eval")["variability"], expected["variability"], rtol=1e-6)
    assert four.history()[-1]["dev_accuracy"] == once.history()[-1]["dev_accuracy"]


def test_skip_epochs_leaves_the_first_recordings_out_of_the_map(tiny_model, cache):
    store = RunStore(cache)
    run = train_or_load(
        small_config(tiny_model, epochs=3, record="both", record_points=2, skip_epochs=1), store
    )
    examples = run.examples()
    labels, ids = examples["label"].to_numpy(), examples["id"].tolist()
    _, train = run.dynamics("train")
    _, evals = run.dynamics("eval")
    # the training pass is kept for every epoch (free); no eval-mode pass is made in the skipped epoch
    assert train.shape[0] == 3 and evals.shape[0] == 4 and run.dynamics_epochs("eval") == [2, 3, 4, 5]
    np.testing.assert_allclose(
        run.metrics()["confidence"], compute_metrics(train[1:], labels, ids)["confidence"], rtol=1e-6
    )
    np.testing.assert_allclose(
        run.metrics("eval")["variability"], compute_metrics(evals, labels, ids)["variability"], rtol=1e-6
    )
    assert "record_seconds" not in run.history()[0] and run.history()[1]["record_seconds"] > 0
    # the metrics rebuilt from the dynamics (a damaged metrics file) leave out the same recordings
    rebuilt = run.recompute_metrics("eval", write=False)
    np.testing.assert_allclose(rebuilt["variability"], run.metrics("eval")["variability"], rtol=1e-6)
    rebuilt = run.recompute_metrics("train", write=False)
    np.testing.assert_allclose(rebuilt["confidence"], run.metrics()["confidence"], rtol=1e-6)


def test_eval_marks_spread_the_recordings_over_the_epoch():
    from cartomap.training.loop import eval_marks

    assert eval_marks(100, 1) == {}
    assert eval_marks(100, 4) == {25: [0], 50: [1], 75: [2]}
    assert eval_marks(3, 3) == {1: [0], 2: [1]}
    assert eval_marks(2, 3) == {1: [0, 1]}  # fewer steps than recordings: two at one step
    assert eval_marks(1, 4) == {1: [0, 1, 2]}  # (the end-of-epoch pass comes after the same step)


def test_eval_batches_go_longest_first_and_cover_every_row_once():
    lengths = np.array([3, 9, 1, 9, 5, 7, 2])
    batches = list(EpochBatches(lengths, 3, seed=0, shuffle=False))
    assert batches == [[1, 3, 5], [4, 0, 6], [2]]  # ties by row; each batch pads to its own longest
    assert sorted(i for b in batches for i in b) == list(range(7))


def test_map_burn_in_counts_the_recordings_of_skipped_epochs():
    tc = TrainConfig(epochs=4, record="both", record_points=2, skip_epochs=1)
    assert tc.map_burn_in("train", 4) == 1
    assert tc.map_burn_in("eval", list(range(8))) == 2  # recorded in every epoch (a Trainer callback)
    assert tc.map_burn_in("eval", list(range(2, 8))) == 0  # cartomap's loop: none in the skipped epoch
    assert tc.map_burn_in("train", 1) == 0  # one epoch only (an early stop): it stays
    assert tc.map_burn_in("eval", []) == 0
    assert TrainConfig(epochs=4, skip_epochs=2).map_burn_in("train", 2) == 1  # the last epoch stays
