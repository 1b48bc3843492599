"""DataMapCallback in a real transformers Trainer, and score-checkpoints on the Trainer's output folder.

The tiny random BERT trains for 2 epochs on 40 demo pairs (gradient accumulation 2, batches grouped
by length, remove_unused_columns on: the Trainer drops the id and text columns before collation).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest

from cartomap.errors import CartomapError, DataError, RunError
from cartomap.integrations.checkpoints import (
    find_checkpoints,
    label_columns,
    prepare_scoring,
    score_run,
    trainer_checkpoints,
)
from cartomap.integrations.trainer import DataMapCallback, ReusedRunWarning
from cartomap.integrations.trainer_recording import first_occurrences
from cartomap.runs.store import RunStore
from cartomap.scores.metrics import compute_metrics

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "trainer_run.py"
sys.path.insert(0, str(SCRIPT.parent))
import trainer_run  # noqa: E402


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fresh_logits(checkpoint: Path, frame: pd.DataFrame) -> np.ndarray:
    """A plain forward pass of a saved checkpoint over the examples (eval mode, one padded batch)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint)).eval()
    enc = tokenizer(
        frame["premise"].tolist(),
        frame["hypothesis"].tolist(),
        truncation=True,
        max_length=64,
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        return model(**enc).logits.numpy()


def assert_metrics_of(run, source: str) -> None:
    ids, logits = run.dynamics(source)
    expected = compute_metrics(logits, run.examples()["label"].to_numpy(), ids)
    saved = run.metrics("train" if source == run.status()["metrics_source"] else source)
    pd.testing.assert_frame_equal(saved.reset_index(drop=True), expected, check_dtype=False, atol=1e-9)


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    """A Trainer run with DataMapCallback(mode="both"); its output folder has 2 checkpoints."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("trained")
    train = trainer_run.dataset(AutoTokenizer.from_pretrained(tiny_model), 40)
    callback = DataMapCallback(train, mode="both", store=folder / "cache", name="callback test")
    trainer = trainer_run.trainer(
        tiny_model, str(folder / "out"), train, [callback], accumulation=2, group_by_length=True
    )
    trainer.train()
    return {"run": callback.run, "out": folder / "out", "cache": folder / "cache", "train": train}


# --------------------------------------------------------------------------- the callback
def test_callback_run_has_every_example_once_per_epoch_and_its_metrics(trained):
    run = trained["run"]
    assert run.state == "done" and run.status()["metrics_source"] == "train"
    examples = run.examples()
    assert len(examples) == 40 and examples["id"].tolist() == list(trained["train"]["id"])
    assert {"premise", "hypothesis"} <= set(examples.columns)
    for source in ("train", "eval"):
        assert run.dynamics_epochs(source) == [0, 1]
        for epoch in (0, 1):
            ids = pd.read_parquet(run.epoch_path(source, epoch))["id"]
            assert ids.is_unique and sorted(ids) == sorted(examples["id"])
        assert_metrics_of(run, source)
    assert run.metrics()["region"].notna().all()
    history = run.history()
    assert [h["epoch"] for h in history] == [1, 2] and all(0 <= h["train_accuracy"] <= 1 for h in history)
    origin = run.config.origin
    assert origin.kind == "trainer" and json.loads(origin.settings)["gradient_accumulation_steps"] == 2
    assert run.config.train.record == "both" and run.config.train.group_by_length
    assert (run.model_dir / "config.json").exists()  # the final model: embeddings and neighbours read it


def test_eval_pass_logits_are_a_fresh_forward_pass_of_each_epochs_checkpoint(trained):
    run = trained["run"]
    checkpoints = trainer_checkpoints(trained["out"])
    assert len(checkpoints) == 2
    ids, logits = run.dynamics("eval")
    examples = run.examples().set_index("id").loc[ids].reset_index()
    for epoch, checkpoint in enumerate(checkpoints):
        np.testing.assert_allclose(logits[epoch], fresh_logits(checkpoint, examples), atol=1e-5, rtol=0)
    assert not np.allclose(logits[0], logits[1])  # it trained


def test_data_map_page_renders_the_callback_run(trained, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CARTOMAP_CACHE", str(trained["cache"]))
    monkeypatch.syspath_prepend(str(ROOT))
    at = AppTest.from_file(str(ROOT / "pages" / "data_map.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = trained["run"].id
    at.run()
    assert not at.exception, at.exception
    assert at.get("plotly_chart"), "no map drawn"


def test_training_pass_logits_belong_to_their_rows_and_the_same_training_is_the_same_run(
    tiny_model, tmp_path
):
    """With a learning rate of 0 and no dropout, the training forward pass of an example equals its
    eval-mode pass: any row put in the wrong place would differ."""
    from transformers import AutoTokenizer

    train = trainer_run.dataset(AutoTokenizer.from_pretrained(tiny_model), 30)
    runs = []
    for attempt in range(2):
        callback = DataMapCallback(train, mode="both", store=tmp_path / "cache")
        trainer = trainer_run.trainer(
            tiny_model,
            str(tmp_path / f"out{attempt}"),
            train,
            [callback],
            lr=0.0,
            batch=4,
            accumulation=2,
            group_by_length=True,
            dataloader_num_workers=attempt,  # the second time in a worker process
        )
        if attempt:
            with pytest.warns(ReusedRunWarning, match="NOT recorded"):
                trainer.train()
        else:
            trainer.train()
        runs.append((callback.run, callback.active))
    run = runs[0][0]
    _, train_logits = run.dynamics("train")
    _, eval_logits = run.dynamics("eval")
    np.testing.assert_allclose(train_logits, eval_logits, atol=1e-5, rtol=0)
    # dataloader_num_workers is not part of the identity: the second training finds the done run
    assert runs[1][0].id == run.id and runs[1][0].state == "done"


def test_training_pass_through_a_collator_that_allows_no_extra_keys(tiny_model, tmp_path):
    """The row indices never reach the user's collator (nor the model): a strict collator still works."""
    from transformers import AutoTokenizer, DataCollatorWithPadding

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    pad = DataCollatorWithPadding(tokenizer)
    allowed = {"input_ids", "token_type_ids", "attention_mask", "label"}

    def strict(features):
        extra = set(features[0]) - allowed
        if extra:
            raise ValueError(f"unexpected keys {extra}")
        return pad(features)

    train = trainer_run.dataset(tokenizer, 12)
    callback = DataMapCallback(train, mode="train", store=tmp_path / "cache")
    trainer = trainer_run.trainer(tiny_model, str(tmp_path / "out"), train, [callback], epochs=1)
    trainer.data_collator = strict
    trainer.train()
    assert callback.run.state == "done" and callback.run.dynamics()[1].shape == (1, 12, 3)

    # the callback's dataset must be the Trainer's, row for row: other labels stop it before training
    shifted = train.map(lambda row: {"label": (row["label"] + 1) % 3})
    callback = DataMapCallback(shifted, mode="train", store=tmp_path / "other")
    trainer = trainer_run.trainer(tiny_model, str(tmp_path / "out2"), train, [callback], epochs=1)
    with pytest.raises(DataError, match="12 rows of the Trainer's training set have other labels"):
        trainer.train()
    assert RunStore(tmp_path / "other").list() == []


def test_row_index_ids_when_the_dataset_has_none(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    train = trainer_run.dataset(AutoTokenizer.from_pretrained(tiny_model), 12, ids=False)
    callback = DataMapCallback(train, mode="eval", store=tmp_path / "cache")
    trainer_run.trainer(tiny_model, str(tmp_path / "out"), train, [callback], epochs=1).train()
    run = callback.run
    assert run.examples()["id"].tolist() == [str(i) for i in range(12)]
    assert run.dynamics("eval")[1].shape == (1, 12, 3)
    assert "ids from row index" in run.log_path.read_text()


def test_clear_errors_for_datasets_it_cannot_map(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    train = trainer_run.dataset(AutoTokenizer.from_pretrained(tiny_model), 12)
    with pytest.raises(DataError, match="no label column: looked for label, labels"):
        DataMapCallback(train.remove_columns("label"))
    with pytest.raises(DataError, match="no label column 'gold'"):
        DataMapCallback(train, label_column="gold")
    with pytest.raises(DataError, match="DatasetDict"):
        import datasets

        DataMapCallback(datasets.DatasetDict({"train": train}))
    with pytest.raises(DataError, match="unknown mode"):
        DataMapCallback(train, mode="forward")
    # a dataset that is not the one the Trainer trains on: stopped before the first step
    callback = DataMapCallback(train.select(range(10)), store=tmp_path / "cache")
    trainer = trainer_run.trainer(tiny_model, str(tmp_path / "out"), train, [callback], epochs=1)
    with pytest.raises(DataError, match="trains on 12 rows, the callback's dataset has 10"):
        trainer.train()
    # the training pass never sees examples a dropped last batch holds
    callback = DataMapCallback(train, mode="train", store=tmp_path / "cache")
    trainer = trainer_run.trainer(
        tiny_model, str(tmp_path / "out2"), train, [callback], epochs=1, batch=5, dataloader_drop_last=True
    )
    with pytest.raises(DataError, match="drops 2 of 12 examples every epoch"):
        trainer.train()
    assert RunStore(tmp_path / "cache").list() == []  # nothing half-made


def test_a_resumed_trainer_continues_the_run(tiny_model, tmp_path):
    from transformers import AutoTokenizer, TrainerCallback

    class Crash(TrainerCallback):
        def on_epoch_begin(self, args, state, control, **kwargs):
            if state.epoch >= 1:
                raise RuntimeError("killed")

    train = trainer_run.dataset(AutoTokenizer.from_pretrained(tiny_model), 16)
    first = DataMapCallback(train, mode="train", store=tmp_path / "cache")
    with pytest.raises(RuntimeError, match="killed"):
        trainer_run.trainer(tiny_model, str(tmp_path / "out"), train, [first, Crash()]).train()
    run = first.run
    first._release()  # what the death of the training process does
    assert run.state == "interrupted" and run.dynamics_epochs("train") == [0]
    epoch0 = run.epoch_path("train", 0).stat().st_mtime_ns
    (checkpoint,) = trainer_checkpoints(tmp_path / "out")

    second = DataMapCallback(train, mode="train", store=tmp_path / "cache")
    trainer = trainer_run.trainer(tiny_model, str(tmp_path / "out"), train, [second])
    trainer.train(resume_from_checkpoint=str(checkpoint))
    assert second.run.id == run.id and run.state == "done"
    assert run.dynamics_epochs("train") == [0, 1] and len(run.history()) == 2
    assert run.epoch_path("train", 0).stat().st_mtime_ns == epoch0  # kept, not recorded again
    assert "resumed after epoch 1" in run.log_path.read_text()


def test_first_occurrences_keeps_each_row_once_and_allows_repeats_only_in_last_batches():
    z = np.arange(14, dtype=np.float32).reshape(7, 2)
    # rank 0 trains rows 0, 1 then 4; rank 1 trains 2, 3 then (even-batch padding) 0
    parts = [
        {"rows": np.array([0, 1, 4]), "logits": z[[0, 1, 2]], "step": np.array([0, 0, 1]), "last": 1},
        {"rows": np.array([2, 3, 0]), "logits": z[[3, 4, 5]], "step": np.array([0, 0, 1]), "last": 1},
    ]
    rows, logits, bad, dropped = first_occurrences(parts)
    assert rows.tolist() == [0, 1, 2, 3, 4] and dropped == 1 and len(bad) == 0
    np.testing.assert_array_equal(logits[0], z[0])  # the first pass of row 0, not the padding
    # a repeat before a process's last batch is no padding: reported
    parts[1] = {"rows": np.array([2, 0, 3]), "logits": z[[3, 4, 5]], "step": np.array([0, 1, 2]), "last": 2}
    assert first_occurrences(parts)[2].tolist() == [0]


@pytest.mark.slow  # two processes under accelerate: with -m slow
def test_two_processes_record_every_example_exactly_once(tiny_model, tmp_path):
    """torchrun with 2 CPU processes (gloo): 37 rows in batches of 4 leave the second process's last
    batch short, so the sampler repeats rows there; each example must be kept once, at its own row."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        str(SCRIPT),
        tiny_model,
        str(tmp_path / "cache"),
        str(tmp_path / "out"),
        "both",
        "--rows",
        "37",
        "--lr",
        "0",
        "--accumulation",
        "2",
        "--group-by-length",
    ]
    done = patience.run(command, watch=[tmp_path], env=env)  # as long as it makes progress
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = RunStore(tmp_path / "cache").list()
    assert f"RUN {run.id}" in done.stdout and run.state == "done"
    assert json.loads(run.config.origin.settings)["world_size"] == 2
    for source in ("train", "eval"):
        for epoch in (0, 1):
            ids = pd.read_parquet(run.epoch_path(source, epoch))["id"]
            assert len(ids) == 37 and ids.is_unique
    _, train_logits = run.dynamics("train")
    _, eval_logits = run.dynamics("eval")
    np.testing.assert_allclose(train_logits, eval_logits, atol=1e-5, rtol=0)  # each row's own logits
    assert "repeated row(s) of the last batches" in run.log_path.read_text()


# --------------------------------------------------------------------------- score-checkpoints
def test_score_checkpoints_of_a_trainer_output_folder(trained, tmp_path):
    from cartomap.cli import main

    run_cb = trained["run"]
    data = tmp_path / "train.jsonl"
    examples = run_cb.examples()
    names = list(run_cb.label_names)
    examples.assign(label=[names[k] for k in examples["label"]])[
        ["id", "premise", "hypothesis", "label"]
    ].to_json(data, orient="records", lines=True)
    argv = ["--cache", str(tmp_path / "cache"), "score-checkpoints", str(trained["out"]), "--data", str(data)]
    argv += ["--max-length", "64", "--quiet"]
    assert main(argv) == 0
    (run,) = RunStore(tmp_path / "cache").list()
    assert run.state == "done" and run.config.origin.kind == "checkpoints"
    assert list(run.config.origin.checkpoints) == [str(p) for p in trainer_checkpoints(trained["out"])]
    ids, logits = run.dynamics("eval")
    cb_ids, cb_logits = run_cb.dynamics("eval")
    assert ids == cb_ids
    np.testing.assert_allclose(logits, cb_logits, atol=1e-5, rtol=0)  # the same checkpoints, the same pass
    assert_metrics_of(run, "eval")
    assert [h["epoch"] for h in run.history()] == [1, 2]
    assert (run.model_dir / "config.json").exists()
    assert main(argv) == 0 and len(RunStore(tmp_path / "cache").list()) == 1  # the same run again


def test_scoring_stops_on_cancel_and_goes_on_with_the_next_checkpoint(trained, tmp_path):
    from cartomap.config import DataConfig

    store = RunStore(tmp_path / "cache")
    run = prepare_scoring(
        [str(p) for p in trainer_checkpoints(trained["out"])],
        DataConfig(path="demo:dev"),
        store,
        max_length=64,
        batch_size=128,
        save_model=False,
    )
    assert run.config.data.label_names == ("entailment", "neutral", "contradiction")

    def cancel_at_second(status):
        if status["epoch"] == 2:
            run.request_cancel()

    score_run(run, cancel_at_second)
    assert run.state == "cancelled" and run.dynamics_epochs("eval") == [0]
    first = run.epoch_path("eval", 0).stat().st_mtime_ns
    run.clear_cancel()
    score_run(run)
    assert run.state == "done" and run.dynamics_epochs("eval") == [0, 1]
    assert run.epoch_path("eval", 0).stat().st_mtime_ns == first
    assert not run.model_dir.exists()


def test_find_checkpoints_orders_a_trainer_folder_by_step(tmp_path):
    out = tmp_path / "out"
    for step in (100, 5, 20):
        (out / f"checkpoint-{step}").mkdir(parents=True)
        (out / f"checkpoint-{step}" / "config.json").write_text("{}")
    (out / "runs").mkdir()
    assert [Path(p).name for p in find_checkpoints([str(out)])] == [
        "checkpoint-5",
        "checkpoint-20",
        "checkpoint-100",
    ]
    # folders and hub ids given one per epoch keep their order
    given = [str(out / "checkpoint-100"), "org/model-epoch-2"]
    assert find_checkpoints(given) == [str((out / "checkpoint-100").resolve()), "org/model-epoch-2"]
    with pytest.raises(DataError, match="neither config.json"):
        find_checkpoints([str(out / "runs")])
    with pytest.raises(DataError, match="not a folder"):
        find_checkpoints([str(tmp_path / "missing")])
    with pytest.raises(DataError, match="no checkpoints"):
        find_checkpoints([])


def test_label_columns_match_classes_by_name():
    data = ("entailment", "neutral", "contradiction")
    mnli = ("CONTRADICTION", "ENTAILMENT", "NEUTRAL")
    assert label_columns(mnli, data, "m").tolist() == [1, 2, 0]
    assert label_columns(("LABEL_0", "LABEL_1", "LABEL_2"), data, "m").tolist() == [0, 1, 2]
    with pytest.raises(RunError, match="2 outputs"):
        label_columns(("a", "b"), data, "m")
    with pytest.raises(RunError, match="name the data's classes like the model's"):
        label_columns(("pos", "neg", "mixed"), data, "m")


def test_score_checkpoints_command_errors(tmp_path, capsys):
    from cartomap.cli import main

    assert main(["--cache", str(tmp_path / "c"), "score-checkpoints", "--data", "demo:dev"]) == 2
    assert "give a Trainer output_dir" in capsys.readouterr().err
    assert main(["--cache", str(tmp_path / "c"), "score-checkpoints", str(tmp_path)]) == 2
    assert "--data" in capsys.readouterr().err
    with pytest.raises(CartomapError):
        prepare_scoring([str(tmp_path)], None)


def test_callback_records_several_eval_passes_an_epoch_and_skips_epochs(trained, tiny_model, tmp_path):
    """record_points=3: three eval-mode recordings an epoch, the last equal to the end-of-epoch pass of the
    same training with one recording; the training itself (train-pass logits) unchanged; skip_epochs=1
    leaves the first epoch's recordings out of the map."""
    from transformers import AutoTokenizer

    train = trainer_run.dataset(AutoTokenizer.from_pretrained(tiny_model), 40)
    callback = DataMapCallback(
        train, mode="both", store=tmp_path / "cache", record_points=3, skip_epochs=1, name="points"
    )
    trainer = trainer_run.trainer(
        tiny_model, str(tmp_path / "out"), train, [callback], accumulation=2, group_by_length=True
    )
    trainer.train()
    run, once = callback.run, trained["run"]
    assert run.id != once.id and run.config.train.record_points == 3
    np.testing.assert_array_equal(run.dynamics("train")[1], once.dynamics("train")[1])
    _, evals = run.dynamics("eval")
    _, evals_once = once.dynamics("eval")
    assert evals.shape[0] == 6
    np.testing.assert_allclose(evals[[2, 5]], evals_once, rtol=1e-5, atol=1e-5)
    assert not np.allclose(evals[0], evals[2])
    labels = run.examples()["label"].to_numpy()
    expected = compute_metrics(evals[3:], labels, run.dynamics("eval")[0])
    np.testing.assert_allclose(run.metrics("eval")["variability"], expected["variability"], atol=1e-9)


def test_callback_refuses_points_without_an_eval_pass(trained):
    with pytest.raises(DataError, match="record_points"):
        DataMapCallback(trained["train"], mode="train", record_points=2)
    with pytest.raises(DataError, match="record_points"):
        DataMapCallback(trained["train"], mode="eval", record_points=0)
