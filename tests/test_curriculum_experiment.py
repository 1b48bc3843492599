"""Curriculum and dataset-combination experiments end to end on a tiny random BERT."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cartomap.analysis.evaluation import predictions_on_test, run_scores
from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.experiments.combination import CombinationParams, TrainingSet, create_combination
from cartomap.experiments.curriculum import CurriculumParams, create_curriculum
from cartomap.experiments.runner import run_experiment
from cartomap.experiments.store import ExperimentStore


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DataConfig(path="demo:dev"))


def base_config(tiny_model, demo, cache) -> RunConfig:
    train = derived.save_dataset(demo.subset(np.arange(0, 96)), cache, name="train")
    dev = derived.save_dataset(demo.subset(np.arange(200, 240)), cache, name="dev")
    test = derived.save_dataset(demo.subset(np.arange(300, 360)), cache, name="test")
    return RunConfig(
        data=train,
        dev=dev,
        tests=(test,),
        model=ModelConfig(tiny_model, max_length=48),
        train=TrainConfig(epochs=2, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0),
    )


def test_two_orders_compared_end_to_end(tiny_model, cache, demo):
    store = ExperimentStore(cache)
    params = CurriculumParams(
        base=base_config(tiny_model, demo, cache), methods=("oversampled", "cart-stra++"), seeds=(0, 1)
    )
    exp = create_curriculum(params, store, name="tiny curricula")
    run_experiment(exp, store)
    assert exp.state == "done"
    assert set(exp.run_ids()) == {
        "datamap",
        "oversampled@seed0",
        "oversampled@seed1",
        "cart-stra++@seed0",
        "cart-stra++@seed1",
    }
    runs = exp.result("runs")
    assert len(runs) == 4 and set(runs["method"]) == {"oversampled", "cart-stra++"}
    # every reported score is the one of the epoch best on validation, recomputed from the stored logits
    for _, row in runs.iterrows():
        run = store.runs.get(row["run_id"])
        assert row["epoch"] == run.best_epoch() + 1
        pred = predictions_on_test(run, 0)
        assert row["accuracy"] == pytest.approx(pred["correct"].mean())
        assert row["micro_f1"] == pytest.approx(row["accuracy"])
    best = exp.result("best")
    for method, group in runs.groupby("method"):
        top = best[best["method"] == method].iloc[0]
        assert top["dev_accuracy"] == group["dev_accuracy"].max()
    per_class = exp.result("per_class")
    assert set(per_class["class"]) == {"entailment", "neutral", "contradiction", "micro", "macro"}
    sig = exp.result("significance")
    assert sig["a"] == "oversampled" and sig["b"] == "cart-stra++"
    assert 0.0 <= sig["cochran"]["p_value"] <= 1.0
    assert sig["mann_whitney"]["n_a"] == 2
    # cartography runs used the data map of the baseline run
    cart = store.runs.get(exp.run_ids()["cart-stra++@seed0"])
    assert cart.config.order.scores.endswith(f"{exp.run_ids()['datamap']}/metrics.parquet")
    assert len(exp.result("curves")) == 4 * 2


def test_curriculum_params_are_checked(tiny_model, cache, demo):
    base = base_config(tiny_model, demo, cache)
    with pytest.raises(DataError, match="unknown method"):
        CurriculumParams(base=base, methods=("nope",)).validate()
    with pytest.raises(DataError, match="validation set"):
        CurriculumParams(base=base.replace(dev=None)).validate()
    with pytest.raises(DataError, match="test set"):
        CurriculumParams(base=base.replace(tests=())).validate()


def test_combinations_make_a_table3(tiny_model, cache, demo):
    store = ExperimentStore(cache)
    base = base_config(tiny_model, demo, cache)
    a = derived.save_dataset(demo.subset(np.arange(0, 80)), cache)
    b = derived.save_dataset(demo.subset(np.arange(100, 120)), cache)
    t1 = dataclasses.replace(derived.save_dataset(demo.subset(np.arange(300, 340)), cache), name="T1")
    t2 = dataclasses.replace(derived.save_dataset(demo.subset(np.arange(340, 400)), cache), name="T2")
    params = CombinationParams(
        base=base.replace(train=dataclasses.replace(base.train, epochs=1)),
        training_sets=(
            TrainingSet("A", a),
            TrainingSet("A + B", a, b, "A+B"),
            TrainingSet("A ◇ B", a, b, "A◇B"),
        ),
        tests=(t1, t2),
        cache=str(cache),
    )
    exp = create_combination(params, store)
    run_experiment(exp, store)
    table = exp.result("table3").set_index("train_set")
    assert list(table.index) == ["A", "A + B", "A ◇ B"]
    assert list(table.columns) == ["T1", "T2"]
    sizes = [store.runs.get(exp.run_ids()[f"{n}@seed0"]).info["n_train"] for n in table.index]
    assert sizes == [80, 100, 80]
    run = store.runs.get(exp.run_ids()["A + B@seed0"])
    assert table.loc["A + B", "T2"] == pytest.approx(run_scores(run, "T2")["accuracy"])


def test_datamap_baseline_can_train_longer_than_the_grid(tiny_model, cache, demo):
    from cartomap.experiments.curriculum import datamap_config, method_config

    base = base_config(tiny_model, demo, cache)
    one = base.replace(train=dataclasses.replace(base.train, epochs=1))
    with pytest.raises(DataError, match="at least 2 epochs"):
        CurriculumParams(base=one).validate()
    params = CurriculumParams(base=one, datamap_epochs=3)
    params.validate()
    assert datamap_config(params).train.epochs == 3
    assert method_config(params, "oversampled", 0, "").train.epochs == 1
    assert CurriculumParams.from_params(params.to_params()) == params
    assert "datamap_epochs" not in CurriculumParams(base=base).to_params()
