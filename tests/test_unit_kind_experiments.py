"""The experiments that start from a finished run or from data files, on runs whose units are not examples:
``cartomap seeds`` maps a token run (a word a row) and a multi-label run (an (example, label) a row) with
other seeds; ``cartomap combine`` and ``cartomap retrain`` (their tables and decisions are per example, one
label each) refuse them in one line naming the kind, before anything is trained."""

from __future__ import annotations

import json

import pytest
from token_fixture import CONLL

from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.runs.store import RunStore
from cartomap.tasks import support
from cartomap.training.loop import train_or_load

ML_TRAIN = [
    {"text": "the match ended in a draw", "labels": ["sports"]},
    {"text": "parliament votes on the new football stadium", "labels": ["politics", "sports"]},
    {"text": "a quiet day with nothing in the news", "labels": []},
    {"text": "the minister resigned after the vote", "labels": ["politics"]},
]
ML_DEV = [{"id": "d0", "text": "the striker scored twice", "labels": ["sports"]}]


@pytest.fixture()
def files(tmp_path):
    paths = {
        "conll": tmp_path / "train.conll",
        "conll_dev": tmp_path / "dev.conll",
        "jsonl": tmp_path / "train.jsonl",
        "jsonl_dev": tmp_path / "dev.jsonl",
    }
    paths["conll"].write_text(CONLL, encoding="utf-8")
    paths["conll_dev"].write_text("Paris B-LOC\nis O\nbig O\n", encoding="utf-8")
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in ML_TRAIN), encoding="utf-8")
    paths["jsonl_dev"].write_text("".join(json.dumps(r) + "\n" for r in ML_DEV), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}


def trained(tiny_model, cache, train: DataConfig, dev: DataConfig):
    config = RunConfig(
        data=train,
        dev=dev,
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(epochs=2, batch_size=2, warmup_ratio=0.0, record="eval"),
    )
    return train_or_load(config, RunStore(cache))


def ml_data(path: str) -> DataConfig:
    return DataConfig(path=path, task="multilabel", text_columns=("text",), label_column="labels")


@pytest.fixture()
def unit_runs(tiny_model, files, cache):
    token = trained(tiny_model, cache, DataConfig(path=files["conll"]), DataConfig(path=files["conll_dev"]))
    multilabel = trained(tiny_model, cache, ml_data(files["jsonl"]), ml_data(files["jsonl_dev"]))
    return {"token": token, "multilabel": multilabel}


def test_seeds_maps_a_token_run_by_word_and_a_multilabel_run_by_example_and_label(unit_runs, cache, capsys):
    from cartomap.cli import main
    from cartomap.experiments.seeds import PER_EXAMPLE
    from cartomap.experiments.store import ExperimentStore

    for kind, units, noun in (("token", 11, "words"), ("multilabel", 8, "(example, label) units")):
        run = unit_runs[kind]
        assert main(["--cache", str(cache), "seeds", run.id, "--seeds", "2"]) == 0
        out = capsys.readouterr().out
        assert f"Stability of the map over 2 seeds (42, 43), {units} {noun}" in out
        (exp,) = [e for e in ExperimentStore(cache).list() if e.params.get("base_run") == run.id]
        table = exp.result(PER_EXAMPLE)
        assert table["id"].tolist() == run.metrics()["id"].tolist()  # the run's units, in order
        other = exp.run("seed43", RunStore(cache))
        assert other.task_kind is run.task_kind and other.config.train.seed == 43


@pytest.mark.parametrize("kind", ["token", "multilabel"])
def test_retrain_after_review_refuses_a_run_whose_units_are_not_examples(
    unit_runs, cache, tmp_path, capsys, kind
):
    from cartomap.cli import main
    from cartomap.experiments.store import ExperimentStore

    run = unit_runs[kind]
    decisions = tmp_path / "decisions.csv"
    first = run.examples()["id"].iloc[0]
    decisions.write_text(f"id,decision,label\n{first},remove,\n", encoding="utf-8")
    for given in (["--decisions", str(decisions)], ["--queue", "suspects"]):
        assert main(["--cache", str(cache), "retrain", run.id, *given, "--seeds", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(support.CORRECTION.refusal(run.task_kind)) and f"run {run.id}" in err
        assert "\n" not in err
    assert ExperimentStore(cache).list() == []


@pytest.mark.parametrize(
    "kind,a,b,task",
    [("token", "conll", "conll_dev", []), ("multilabel", "jsonl", "jsonl_dev", ["--task", "multilabel"])],
)
def test_combine_refuses_data_whose_units_are_not_examples(
    tiny_model, files, tmp_path, capsys, kind, a, b, task
):
    from cartomap.cli import main
    from cartomap.experiments.store import ExperimentStore

    cache = tmp_path / "c"
    argv = ["--cache", str(cache), "combine", *task, "--a", files[a], "--b", files[b], "--test", files[b]]
    assert main([*argv, "--model", tiny_model, "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "a dataset combination (its table: the accuracy on each test set) works on examples with one label each"
        in err
    )
    assert f"this is {kind} data" in err and "\n" not in err
    assert ExperimentStore(cache).list() == [] and not RunStore(cache).list()
