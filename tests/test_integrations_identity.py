"""What a DataMapCallback run is identified by: everything that changes the dynamics makes another run,
the same training finds the finished run and says so, and the run's data is named after the dataset.

Each training is one epoch of a tiny random BERT on 12 demo pairs (about a second each)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from cartomap.integrations.trainer import DataMapCallback, ReusedRunWarning
from cartomap.integrations.trainer_config import qualified_name
from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "scripts"))
import trainer_run  # noqa: E402


@pytest.fixture(scope="module")
def setup(tiny_model, tmp_path_factory):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    return {
        "model": tiny_model,
        "tokenizer": tokenizer,
        "train": trainer_run.dataset(tokenizer, 12),
        "cache": tmp_path_factory.mktemp("identity") / "cache",
        "folder": tmp_path_factory.mktemp("outs"),
    }


def record(setup, *, change=None, train=None, tag="", **args):
    """Train one epoch with a DataMapCallback; ``change(trainer)`` edits the Trainer before training."""
    train = setup["train"] if train is None else train
    callback = DataMapCallback(train, mode="eval", store=setup["cache"], tag=tag, save_model=False)
    trainer = trainer_run.trainer(
        setup["model"], str(setup["folder"] / "out"), train, [callback], epochs=1, **args
    )
    if change is not None:
        change(trainer)
    trainer.train()
    return callback


def test_what_changes_the_dynamics_makes_another_run_and_a_reused_run_is_announced(setup):
    from transformers import Trainer

    base = record(setup)
    assert base.run.state == "done"
    settings = json.loads(base.run.config.origin.settings)
    assert settings["trainer_class"] == "transformers.trainer.Trainer"
    assert settings["compute_loss"] == "transformers.trainer.Trainer.compute_loss"
    assert settings["data_collator"] == "transformers.data.data_collator.DataCollatorWithPadding"
    assert settings["remove_unused_columns"] is True
    assert settings["model_config"]["hidden_dropout_prob"] == 0.0
    assert "_name_or_path" not in settings["model_config"]
    assert "transformers_version" not in settings["model_config"]

    # the same training again: the finished run, and a warning the user sees naming it and the way out
    with pytest.warns(ReusedRunWarning, match=f"NOT recorded: run {base.run.id}.*tag="):
        same = record(setup)
    assert same.run.id == base.run.id

    class SmoothTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def more_dropout(trainer):
        trainer.model.config.hidden_dropout_prob = 0.3

    def other_collator(trainer):
        pad = trainer.data_collator

        def padded(features):
            return pad(features)

        trainer.data_collator = padded

    others = {
        "dropout": record(setup, change=more_dropout),
        "trainer subclass": record(setup, trainer_class=SmoothTrainer),
        "collator": record(setup, change=other_collator),
        "label smoothing": record(setup, label_smoothing_factor=0.1),
        "tag": record(setup, tag="second attempt"),
    }
    ids = {name: cb.run.id for name, cb in others.items()}
    assert all(cb.run.state == "done" for cb in others.values()), ids
    assert len(set(ids.values()) | {base.run.id}) == len(ids) + 1, ids
    subclass = json.loads(others["trainer subclass"].run.config.origin.settings)
    assert subclass["trainer_class"].endswith("SmoothTrainer")
    assert subclass["compute_loss"].endswith("SmoothTrainer.compute_loss")
    collator = json.loads(others["collator"].run.config.origin.settings)["data_collator"]
    assert collator.endswith("other_collator.<locals>.padded")


def test_qualified_names_of_functions_methods_instances_and_partials():
    import functools

    from transformers import Trainer

    assert qualified_name(None) is None
    assert qualified_name(Trainer) == "transformers.trainer.Trainer"
    assert qualified_name(json.dumps) == "json.dumps"
    assert qualified_name(functools.partial(json.dumps, indent=2)) == "partial(json.dumps)"
    assert qualified_name(Path("x")).endswith("Path")


def test_the_data_is_named_after_the_dataset_its_size_and_content(setup):
    run = record(setup, tag="names").run
    path = run.config.data.path
    assert path == f"trainer:dataset 12 rows #{run.info['train_fingerprint'][:8]}", path
    smaller = setup["train"].select(range(10))
    other = record(setup, train=smaller, tag="names").run
    assert other.config.data.path.startswith("trainer:dataset 10 rows #")
    assert other.config.data.path != path


# --------------------------------------------------------------------------- texts decoded from input_ids
def test_decoded_pairs_are_split_at_the_separator_without_special_tokens_or_padding(setup):
    from cartomap.integrations.examples import decoded_texts

    tokenizer = setup["tokenizer"]
    pairs = tokenizer(
        ["a dog runs", "the sky"], ["an animal moves", "it is blue"], padding="max_length", max_length=16
    )
    frame = decoded_texts(pairs["input_ids"], tokenizer)
    assert frame.to_dict("list") == {
        "premise": ["a dog runs", "the sky"],
        "hypothesis": ["an animal moves", "it is blue"],
    }
    single = tokenizer(["a dog runs", "the sky"], padding="max_length", max_length=12)
    assert decoded_texts(single["input_ids"], tokenizer).to_dict("list") == {
        "text": ["a dog runs", "the sky"]
    }
    # pairs and single texts mixed: one text column, the parts of a pair kept apart by a visible [SEP]
    mixed = [pairs["input_ids"][0], single["input_ids"][1]]
    assert decoded_texts(mixed, tokenizer)["text"].tolist() == ["a dog runs [SEP] an animal moves", "the sky"]


def test_a_callback_run_of_tokens_only_shows_premise_and_hypothesis(setup):
    train = setup["train"].remove_columns(["premise", "hypothesis"])
    run = record(setup, train=train, tag="tokens only").run
    examples = run.examples()
    assert {"premise", "hypothesis"} <= set(examples.columns)
    first = setup["train"][0]
    assert examples["premise"].iloc[0] == first["premise"].lower().strip()
    assert "[SEP]" not in examples["hypothesis"].iloc[0] and "[PAD]" not in examples["premise"].iloc[0]


# --------------------------------------------------------------------------- `cartomap show`: the real settings
@pytest.fixture(scope="module")
def scored(setup, tmp_path_factory):
    """A Trainer output folder (1 epoch, batch 4 x 2 accumulation, lr 5e-4, seed 0) scored by score-checkpoints,
    and a copy of its checkpoint without training_args.bin."""
    import shutil

    from cartomap.cli import main

    folder = tmp_path_factory.mktemp("scored")
    trainer_run.trainer(setup["model"], str(folder / "out"), setup["train"], epochs=1, accumulation=2).train()
    (checkpoint,) = (folder / "out").glob("checkpoint-*")
    bare = folder / "bare" / checkpoint.name
    shutil.copytree(checkpoint, bare)
    (bare / "training_args.bin").unlink()
    data = folder / "train.jsonl"
    setup["train"].select_columns(["id", "premise", "hypothesis", "label"]).to_json(str(data))
    cache = folder / "cache"
    for path in (folder / "out", bare):
        argv = ["--cache", str(cache), "score-checkpoints", str(path), "--data", str(data), "--quiet"]
        assert main([*argv, "--max-length", "64", "--label-names", "entailment,neutral,contradiction"]) == 0
    runs = {Path(r.config.origin.checkpoints[0]).parent.name: r for r in RunStore(cache).list()}
    return {"cache": cache, "full": runs["out"], "bare": runs["bare"]}


def show(cache, run, capsys) -> str:
    from cartomap.cli import main

    capsys.readouterr()
    assert main(["--cache", str(cache), "show", run.id]) == 0
    return capsys.readouterr().out


def settings_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith("model "))


def test_show_of_scored_checkpoints_prints_the_trainings_settings_not_defaults(scored, capsys):
    line = settings_line(show(scored["cache"], scored["full"], capsys))
    assert "epochs 1 " in line and "batch 4 per device x 2 accumulation" in line, line
    assert "lr 0.0005 " in line and "seed 0 " in line, line
    out = show(scored["cache"], scored["bare"], capsys)
    line = settings_line(out)
    # trainer_state.json alone: the batch per device and the largest logged learning rate; the rest unknown
    assert "batch 4 per device (accumulation unknown)" in line and "seed unknown" in line, line
    assert "(largest logged)" in line and "lr 5e-05" not in line and "seed 42" not in line, line
    assert re.search(r"origin checkpoints \(settings from checkpoint-\d+/trainer_state.json\)", out), out


def test_training_args_that_need_more_than_weights_only_are_not_unpickled(tmp_path):
    import torch

    from cartomap.integrations.checkpoints import training_args

    marker = tmp_path / "executed"
    torch.save(Evil(str(marker)), tmp_path / "training_args.bin")
    assert training_args(tmp_path / "training_args.bin") is None
    assert not marker.exists()


class Evil:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_show_of_callback_and_recorder_runs_prints_what_the_user_set(setup, tmp_path, capsys):
    import numpy as np

    from cartomap.integrations.recorder import DynamicsRecorder

    run = record(setup, tag="show", lr=3e-4, batch=6).run
    line = settings_line(show(setup["cache"], run, capsys))
    assert "epochs 1 " in line and "batch 6 " in line and "lr 0.0003 " in line and "seed 0 " in line, line

    recorder = DynamicsRecorder(
        ["a", "b"], [0, 1], store=tmp_path / "cache", settings={"lr": 0.01, "batch_size": 8}
    )
    for epoch in range(2):
        recorder(epoch, ["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    line = settings_line(show(tmp_path / "cache", recorder.close(), capsys))
    assert "epochs 2 " in line and "batch 8 " in line and "lr 0.01 " in line, line
    assert "seed not recorded" in line, line


# --------------------------------------------------------------------------- embeddings of runs without weights
def test_embed_a_callback_run_without_weights_with_a_given_model(setup, capsys):

    from cartomap.cli import main
    from cartomap.training.embeddings import embedding_problem, load_embeddings

    run = record(setup, tag="embed").run  # save_model=False
    assert not run.model_dir.exists()
    problem = embedding_problem(run)
    assert (
        "DataMapCallback(save_model=False)" in problem and f"cartomap embed {run.id} --model PATH" in problem
    )
    assert main(["--cache", str(setup["cache"]), "embed", run.id, "--quiet"]) == 2
    assert main(["--cache", str(setup["cache"]), "embed", run.id, "--quiet", "--model", setup["model"]]) == 0
    ids, array = load_embeddings(run)
    assert ids == run.examples()["id"].tolist() and array.shape == (12, 32)
    assert setup["model"] in run.log_path.read_text()


def test_a_scored_run_without_its_model_embeds_with_its_last_checkpoint(scored):
    import shutil

    from cartomap.training.embeddings import embedding_model

    run = scored["full"]
    shutil.rmtree(run.model_dir)
    assert str(embedding_model(run)) == run.config.origin.checkpoints[-1]


def test_stable_settings_never_hold_an_objects_address():
    import enum

    from cartomap.integrations.trainer_config import stable

    class Kind(enum.Enum):
        LINEAR = "linear"

    value = {"a": (1, 2.5, None), "b": Kind.LINEAR, "c": object(), 3: [True, "x"]}
    assert stable(value) == {"a": [1, 2.5, None], "b": "linear", "c": "builtins.object", "3": [True, "x"]}


def test_without_the_trainer_the_collator_is_found_inside_its_wrappers(setup):
    import numpy as np
    from transformers import DataCollatorWithPadding
    from transformers.trainer_utils import RemoveColumnsCollator

    from cartomap.integrations.trainer_config import trainer_settings
    from cartomap.integrations.trainer_recording import IndexCollator

    pad = DataCollatorWithPadding(setup["tokenizer"])
    wrapped = IndexCollator(RemoveColumnsCollator(pad, ["input_ids"], model_name="m"), np.zeros(3, int))
    settings = trainer_settings(None, None, wrapped)
    assert settings["trainer_class"] is None
    assert settings["data_collator"] == "transformers.data.data_collator.DataCollatorWithPadding"


def test_shown_settings_never_fill_in_train_config_defaults():
    from cartomap.config import OriginConfig, RunConfig, TrainConfig
    from cartomap.integrations.origin import shown_settings

    own = RunConfig(train=TrainConfig(epochs=3, batch_size=32, learning_rate=1e-4, seed=7))
    assert shown_settings(own) == {"epochs": "3", "batch": "32", "lr": "0.0001", "seed": "7"}
    imported = RunConfig(train=TrainConfig(epochs=4), origin=OriginConfig(kind="reference"))
    assert shown_settings(imported) == {"epochs": "4", "batch": "unknown", "lr": "unknown", "seed": "unknown"}
    # a score-checkpoints run of before: nothing known, whatever its TrainConfig holds
    old = RunConfig(train=TrainConfig(epochs=2), origin=OriginConfig(kind="checkpoints", settings="{}"))
    assert set(shown_settings(old).values()) == {"unknown"}
    # origin.training is a description: not part of the run's identity
    described = RunConfig(origin=OriginConfig(kind="checkpoints", settings="{}", training='{"seed": 1}'))
    assert (
        described.identity() == RunConfig(origin=OriginConfig(kind="checkpoints", settings="{}")).identity()
    )
    assert RunConfig(origin=OriginConfig(training='{"seed": 1}')).identity() == RunConfig().identity()
