"""Run ids do not depend on where the store is: every experiment kind made in two stores gives the same
run ids (their runs read the store's own files: a run's copy of its data, a baseline run's metrics,
derived datasets), and runs made before keep their ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_damaged_runs import finished_run

from cartomap.config import DataConfig, ModelConfig, OrderConfig, RunConfig, TrainConfig, portable_path
from cartomap.data.loading import load_dataset
from cartomap.experiments import runner
from cartomap.experiments.combination import CombinationParams, TrainingSet, create_combination
from cartomap.experiments.correction import create_correction
from cartomap.experiments.curriculum import DATAMAP, CurriculumParams, create_curriculum
from cartomap.experiments.pruning import PruningParams, create_pruning
from cartomap.experiments.seeds import create_seeds
from cartomap.experiments.store import ExperimentStore
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import RunStore, run_id_for
from cartomap.scores.metrics import compute_metrics


class PlanOnly:
    """An executor that trains nothing and stops the experiment: the runner has made (and recorded)
    every run of its first plan by then, which is what the ids are compared on."""

    name = "local"

    def __init__(self, exp):
        self.exp = exp

    def train(self, batch, watch):
        self.exp.request_cancel()
        return {}

    def close(self):
        pass


def plan(exp, store, monkeypatch) -> dict[str, str]:
    monkeypatch.setattr(runner, "open_executor", lambda *a, **k: PlanOnly(exp))
    runner.run_experiment(exp, store, as_job=False)
    return exp.run_ids()


def finish(run) -> None:
    """Give a run synthetic dynamics and metrics and mark it done (no training)."""
    examples = run.examples(columns=["id", "label"])
    ids, labels = examples["id"].astype(str).to_numpy(), examples["label"].to_numpy()
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, len(ids), 3)).astype(np.float32)
    atomic_write_parquet(run.metrics_path(), compute_metrics(logits, labels, ids))
    run.set_status(state="done", epochs_done=2)


def base_with_dev(cache: Path):
    """The same finished run (demo:dev, dev and test = demo:dev) in any store: synthetic, no training."""
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(
        data=DataConfig(path="demo:dev"),
        dev=DataConfig(path="demo:dev"),
        tests=(DataConfig(path="demo:dev"),),
        train=TrainConfig(epochs=2, seed=1, record="train"),
    )
    run = RunStore(cache).create(config, data, data, (data,))
    finish(run)
    return run


def every_kind(cache: Path, tmp: Path, monkeypatch) -> dict[str, dict[str, str]]:
    """{kind: {role: run id}} of each experiment kind made in the store at ``cache``, on the store's own
    copies of a run's data (``run:RUN``)."""
    store = ExperimentStore(cache)
    base = base_with_dev(cache)
    own = base.own_config()
    out = {}
    out["seeds"] = plan(create_seeds(store, base, n_seeds=3), store, monkeypatch)

    decisions = tmp / "decisions.csv"
    first = base.examples(columns=["id"])["id"].astype(str).head(3).tolist()
    decisions.write_text("id,decision\n" + "".join(f"{i},remove\n" for i in first))
    out["correction"] = plan(create_correction(store, base, decisions, n_seeds=2), store, monkeypatch)

    pruning = PruningParams(base=own.replace(dev=None), folds=2)
    out["pruning"] = plan(create_pruning(pruning, store), store, monkeypatch)

    curriculum = CurriculumParams(base=own, methods=("cart",), seeds=(0,))
    exp = create_curriculum(curriculum, store)
    plan(exp, store, monkeypatch)
    finish(exp.run(DATAMAP, store.runs))  # the baseline's map: the cart order reads its metrics file
    out["curriculum"] = plan(exp, store, monkeypatch)

    other = DataConfig(path="demo:train")
    sets = (TrainingSet("A", own.data), TrainingSet("A + B", own.data, other, "A+B"))
    combination = CombinationParams(base=own, training_sets=sets, tests=own.tests, cache=str(cache))
    out["combination"] = plan(create_combination(combination, store), store, monkeypatch)
    return out


def test_every_experiment_kind_has_the_same_run_ids_in_two_stores(tmp_path, monkeypatch):
    here = every_kind(tmp_path / "one" / "cache", tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)  # a relative store elsewhere, as `--cache cache` in another folder
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "two")
    there = every_kind(Path("cache"), tmp_path, monkeypatch)
    assert here == there
    assert len(here["seeds"]) == 3 and len(here["correction"]) == 6 and len(here["pruning"]) == 3
    assert len(here["curriculum"]) == 2 and len(here["combination"]) == 2


def test_a_run_folders_files_are_named_by_their_place_in_the_store():
    assert (
        portable_path("/a/cache/runs/0123456789ab/examples.parquet") == "runs/0123456789ab/examples.parquet"
    )
    assert portable_path("cache/runs/0123456789ab/review/q/corrected.parquet") == (
        "runs/0123456789ab/review/q/corrected.parquet"
    )
    assert portable_path("/a/cache/datasets/0123456789abcdef.parquet") == "datasets/0123456789abcdef.parquet"
    for given in ("train.jsonl", "/data/runs/train.jsonl", "/x/runs/0123456789ab", "demo:dev", "default"):
        assert portable_path(given) == given
    assert portable_path("/a/cache/runs/0123456789ab/examples.parquet", runs=False).startswith("/a/")


def test_ordinary_runs_keep_their_ids():
    """The ids of configs without a path into a store are what they always were (hashes pinned)."""
    config = RunConfig(data=DataConfig(path="train.jsonl"), dev=DataConfig(path="dev.jsonl"))
    assert run_id_for(config, "a" * 64, "b" * 64) == run_id_for(config, "a" * 64, "b" * 64, portable=False)
    assert run_id_for(RunConfig(), "f" * 64, "e" * 64) == "09d9b5a25bec"
    other = RunConfig(
        data=DataConfig(path="/a/cache/datasets/0123456789abcdef.parquet"),
        model=ModelConfig(name_or_path="/m/bert"),
        order=OrderConfig(name="cart", scores="/x/metrics.parquet"),
    )
    assert run_id_for(other, "f" * 64, "e" * 64) == "be72b5cbbf76"


@pytest.fixture()
def legacy_store(tmp_path, monkeypatch):
    """A store with a run of ``run:RUN`` data made before ids were portable (its id hashes the path)."""
    cache = tmp_path / "cache"
    base = finished_run(cache, seed=1)
    config = RunConfig(data=base.data_config("train"), dev=None, train=TrainConfig(epochs=3, seed=9))
    data = load_dataset(config.data)
    import cartomap.runs.store as store_module

    real = store_module.run_id_for
    monkeypatch.setattr(store_module, "run_id_for", lambda *a, **k: real(*a, **{**k, "portable": False}))
    old = RunStore(cache).create(config, data)
    monkeypatch.setattr(store_module, "run_id_for", real)
    return cache, config, data, old


def test_a_run_made_before_keeps_its_id_and_is_found_again(legacy_store):
    cache, config, data, old = legacy_store
    assert old.id != RunStore._id(config, data)  # the id it would get today
    store = RunStore(cache)
    assert store.find(config, data) == old and store.create(config, data) == old
    assert len(store.list()) == 2  # the base and the old run: nothing made twice
