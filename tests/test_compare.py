"""cartomap.analysis.compare on finished runs: synthetic ones (logits written directly, no training) and two
really trained tiny ones; plus a curriculum experiment finalized over synthetic runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis import compare as cmp
from cartomap.analysis.evaluation import predictions_on_test, run_class_table, run_scores
from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError, RunError
from cartomap.experiments import registry
from cartomap.experiments.combination import CombinationParams, TrainingSet, create_combination
from cartomap.experiments.curriculum import (
    CurriculumParams,
    create_curriculum,
    datamap_config,
    method_config,
    significance_frame,
)
from cartomap.experiments.registry import kind_of
from cartomap.experiments.store import ExperimentStore, method_of
from cartomap.io import atomic_write_json, atomic_write_parquet
from cartomap.runs.store import Run, RunStore
from cartomap.scores.metrics import compute_metrics

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- synthetic finished runs
def _logits(rng, labels: np.ndarray, strength: float) -> np.ndarray:
    """Random logits whose gold class is pushed up by ``strength`` on average (accuracy grows with it)."""
    z = rng.normal(0, 1.0, size=(len(labels), 3)).astype(np.float32)
    z[np.arange(len(labels)), labels] += rng.normal(strength, 1.0, size=len(labels))
    return z


def finished_run(store: RunStore, config: RunConfig, train, dev, tests, seed: int, record_train=False) -> Run:
    """A done run of ``config`` with per-epoch dev / test logits (and train dynamics + metrics when
    ``record_train``) written as the trainer writes them; its history holds the same accuracies."""
    run = store.create(config, train, dev, tests)
    rng = np.random.default_rng(seed)
    epochs = config.train.epochs
    history, train_logits = [], []
    for e in range(epochs):
        strength = 0.3 + 0.6 * e + 0.2 * seed
        record = {"epoch": e + 1, "train_loss": 1.1 - 0.2 * e - 0.01 * seed, "train_seconds": 1.0}
        if dev is not None:
            z = _logits(rng, dev.labels, strength)
            run.write_epoch("dev", e, dev.ids, z)
            record["dev_accuracy"] = float((z.argmax(1) == dev.labels).mean())
        for k, test in enumerate(tests):
            z = _logits(rng, test.labels, strength)
            run.write_epoch(f"test_{k}", e, test.ids, z)
            record[f"test_{k}_accuracy"] = float((z.argmax(1) == test.labels).mean())
        if record_train:
            z = _logits(rng, train.labels, strength)
            run.write_epoch("train", e, train.ids, z)
            train_logits.append(z)
        history.append(record)
    atomic_write_json(run.path / "history.json", history)
    if record_train:
        metrics = compute_metrics(np.stack(train_logits), train.labels, train.ids)
        atomic_write_parquet(run.path / "metrics.parquet", metrics)
    run.set_status(state="done", progress=1.0)
    return run


@dataclasses.dataclass
class Data:
    train: object
    dev: object
    test: object
    other: object
    base: RunConfig
    configs: dict


def make_data(cache: Path) -> Data:
    """Train 96 / dev 40 / test 60 / other 30 pairs of the bundled demo dev set, saved as parquet."""
    demo = load_dataset(DataConfig(path="demo:dev"))
    parts = {
        "train": demo.subset(np.arange(0, 96)),
        "dev": demo.subset(np.arange(200, 240)),
        "test": demo.subset(np.arange(300, 360)),
        "other": demo.subset(np.arange(360, 390)),
    }
    configs = {name: derived.save_dataset(ds, cache, name=name) for name, ds in parts.items()}
    base = RunConfig(
        data=configs["train"],
        dev=configs["dev"],
        tests=(configs["test"],),
        model=ModelConfig("synthetic", max_length=48),
        train=TrainConfig(epochs=3, batch_size=16, record="train"),
    )
    return Data(parts["train"], parts["dev"], parts["test"], parts["other"], base, configs)


def make_runs(cache: Path) -> dict[str, Run]:
    """Runs "a" (seed 0) and "b" (seed 1) on test set "test", "c" on test sets "other" then "test",
    "d" on "other" only and with dynamics recorded (a data map)."""
    data = make_data(cache)
    store = RunStore(cache)
    base, test, other = data.base, data.configs["test"], data.configs["other"]

    def config(name, seed, tests, order="shuffled"):
        from cartomap.config import OrderConfig

        train = dataclasses.replace(base.train, seed=seed)
        return base.replace(name=name, train=train, tests=tests, order=OrderConfig(name=order))

    return {
        "a": finished_run(store, config("A", 0, (test,)), data.train, data.dev, (data.test,), 0),
        "b": finished_run(
            store, config("B", 1, (test,), "oversampled"), data.train, data.dev, (data.test,), 1
        ),
        "c": finished_run(
            store, config("C", 2, (other, test)), data.train, data.dev, (data.other, data.test), 2
        ),
        "d": finished_run(
            store, config("D", 3, (other,)), data.train, data.dev, (data.other,), 3, record_train=True
        ),
    }


def make_curriculum(cache: Path):
    """A finished curriculum experiment (oversampled, cart-stra++) x seeds (0, 1) over synthetic runs:
    the runs are written directly, then the experiment kind's own finalize computes the results."""
    data = make_data(cache)
    store = ExperimentStore(cache)
    base = data.base.replace(train=dataclasses.replace(data.base.train, epochs=2))
    params = CurriculumParams(base=base, methods=("oversampled", "cart-stra++"), seeds=(0, 1))
    exp = create_curriculum(params, store, name="tiny curricula")
    dm = finished_run(
        store.runs, datamap_config(params), data.train, data.dev, (data.test,), 0, record_train=True
    )
    exp.record_run("datamap", dm.id)
    scores = str(dm.path / "metrics.parquet")
    for i, method in enumerate(params.methods):
        for seed in params.seeds:
            config = method_config(params, method, seed, scores if method != "oversampled" else "")
            run = finished_run(store.runs, config, data.train, data.dev, (data.test,), 10 * i + seed)
            exp.record_run(f"{method}@seed{seed}", run.id)
    kind_of("curriculum").finalize(exp, store.runs)
    exp.set_status(state="done", phase="done", runs_planned=5, runs_done=5)
    return exp, store


def make_combination(cache: Path):
    """A finished combination experiment (training sets "A", "A + B"; test sets "test", "other")."""
    data = make_data(cache)
    store = ExperimentStore(cache)
    a, b = data.configs["train"], data.configs["dev"]
    params = CombinationParams(
        base=data.base.replace(train=dataclasses.replace(data.base.train, epochs=1)),
        training_sets=(TrainingSet("A", a), TrainingSet("A + B", a, b, "A+B")),
        tests=(data.configs["test"], data.configs["other"]),
        cache=str(cache),
    )
    exp = create_combination(params, store, name="tiny combination")
    for i, s in enumerate(params.training_sets):
        train = dataclasses.replace(params.base.train, seed=i)  # distinct runs (ids) for the two sets
        config = params.base.replace(data=s.a, train=train, tests=params.tests, name=f"{s.name} seed 0")
        run = finished_run(store.runs, config, data.train, data.dev, (data.test, data.other), 20 + i)
        exp.record_run(f"{s.name}@seed0", run.id)
    kind_of("combination").finalize(exp, store.runs)
    exp.set_status(state="done", phase="done")
    return exp, store


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    return make_runs(tmp_path_factory.mktemp("cmp") / "cache")


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory):
    return make_curriculum(tmp_path_factory.mktemp("cur") / "cache")


# --------------------------------------------------------------------------- the table
def test_table_equals_run_scores(runs):
    table = cmp.comparison_table({"A": runs["a"], "B": runs["b"], "C": runs["c"]}, "test").set_index("run")
    for label, run in (("A", runs["a"]), ("B", runs["b"]), ("C", runs["c"])):
        scores = run_scores(run, "test")
        row = table.loc[label]
        for key in ("accuracy", "micro_f1", "macro_f1", "dev_accuracy"):
            assert row[key] == pytest.approx(scores[key])
        assert row["best_epoch"] == scores["epoch"] == run.best_epoch() + 1
        assert row["test_set"] == "test" and row["id"] == run.id and row["train_size"] == 96
        assert row["epochs"] == 3
    assert table.loc["B", "order"] == "oversampled" and table.loc["B", "seed"] == 1
    # the two synthetic seeds really score differently, so the comparison can tell them apart
    assert table.loc["A", "accuracy"] != table.loc["B", "accuracy"]
    # the best epoch is the one best on dev, read from the history
    history = runs["a"].history()
    assert table.loc["A", "dev_accuracy"] == max(h["dev_accuracy"] for h in history)


def test_missing_test_set_is_nan(runs):
    table = cmp.comparison_table([runs["a"], runs["d"]], "test")
    assert table["accuracy"].isna().tolist() == [False, True]
    assert table["macro_f1"].isna().tolist() == [False, True]
    assert table.loc[0, "test_set"] == "test" and pd.isna(table.loc[1, "test_set"])
    assert table["dev_accuracy"].notna().all()  # the setup columns are still filled
    # by position: each run's own first test set
    by_position = cmp.comparison_table({"C": runs["c"], "A": runs["a"]}, 0)
    assert by_position["test_set"].tolist() == ["other", "test"]
    assert cmp.comparison_table({"A": runs["a"]}, 1)["accuracy"].isna().all()
    assert "accuracy" not in cmp.comparison_table({"A": runs["a"]}, None).columns
    assert cmp.test_names([runs["a"], runs["c"], runs["d"]]) == ["test", "other"]


def test_labels_and_best_marks(runs):
    label = cmp.run_label(runs["b"])
    assert label == f"B · oversampled · seed 1 · {runs['b'].id}"
    assert list(cmp.labelled([runs["a"], runs["b"]])) == [cmp.run_label(runs["a"]), label]
    table = cmp.comparison_table({"A": runs["a"], "B": runs["b"], "D": runs["d"]}, "test")
    marks = cmp.best_marks(table)
    # the score columns these runs have: no entity columns for runs without named entities
    assert list(marks.columns) == ["dev_accuracy", "accuracy", "micro_f1", "macro_f1"]
    assert not set(cmp.ENTITY_COLUMNS) & set(table.columns)
    best = table["accuracy"].idxmax()
    assert marks["accuracy"].tolist() == [i == best for i in range(3)]
    assert not marks.loc[2, "accuracy"]  # NaN is never best
    css = cmp.bold_css(table, cmp.SCORE_COLUMNS)
    assert (css != "").to_numpy().sum() >= 4  # at least one bold cell in each score column
    assert (css.loc[marks["accuracy"].to_numpy(), "accuracy"] == "font-weight: bold").all()
    assert (css[["run", "seed", "epochs", "train_size"]] == "").all().all()
    assert "font-weight: bold" in cmp.bold_best(table, cmp.SCORE_COLUMNS).to_html()


# --------------------------------------------------------------------------- class F1 and curves
def test_class_f1_frame(runs):
    frame = cmp.class_f1_frame({"A": runs["a"], "D": runs["d"]}, "test")
    assert set(frame["run"]) == {"A"}  # D has no test set "test"
    assert frame["class"].tolist() == ["entailment", "neutral", "contradiction"]
    expected = run_class_table(runs["a"], "test")
    assert np.allclose(frame["f1"], expected.loc[frame["class"], "f1"])
    assert frame["f1"].mean() == pytest.approx(run_scores(runs["a"], "test")["macro_f1"])
    fig = cmp.class_f1_figure(frame)
    assert [t.type for t in fig.data] == ["bar"] and fig.layout.barmode == "group"


def test_curves_frame(runs):
    chosen = {"A": runs["a"], "C": runs["c"], "D": runs["d"]}
    dev = cmp.curves_frame(chosen, "dev accuracy")
    assert dev.groupby("run").size().to_dict() == {"A": 3, "C": 3, "D": 3}
    assert dev[dev["run"] == "A"]["value"].tolist() == [h["dev_accuracy"] for h in runs["a"].history()]
    test = cmp.curves_frame(chosen, "test_accuracy", "test")
    assert set(test["run"]) == {"A", "C"}  # D lacks the test set
    # C has "test" at position 1: its curve reads test_1_accuracy
    assert test[test["run"] == "C"]["value"].tolist() == [h["test_1_accuracy"] for h in runs["c"].history()]
    loss = cmp.curves_frame(chosen, "train loss")
    assert loss["epoch"].tolist()[:3] == [1, 2, 3]
    fig = cmp.curves_figure(test, "test_accuracy")
    assert len(fig.data) == 2 and {t.name for t in fig.data} == {"A", "C"}


# --------------------------------------------------------------------------- example diffs
def test_example_diff_counts_match_a_hand_count(runs):
    diff = cmp.example_diff(runs["a"], runs["b"], "test")
    pa = predictions_on_test(runs["a"], "test").set_index("id")
    pb = predictions_on_test(runs["b"], "test").set_index("id")
    assert len(diff) == 60 and set(diff["id"]) == set(pa.index)
    right_a, right_b = pa["correct"], pb.loc[pa.index, "correct"]
    expected = {
        "both right": int((right_a & right_b).sum()),
        "only A right": int((right_a & ~right_b).sum()),
        "only B right": int((~right_a & right_b).sum()),
        "both wrong": int((~right_a & ~right_b).sum()),
    }
    assert cmp.outcome_counts(diff) == expected
    assert expected["only A right"] + expected["only B right"] > 0  # the runs disagree somewhere
    assert list(diff.columns) == ["id", "premise", "hypothesis", "gold", "pred_a", "pred_b", "outcome"]
    names = runs["a"].label_names
    row = diff.iloc[5]
    assert row["gold"] == names[pa.loc[row["id"], "gold"]]
    assert row["pred_b"] == names[pb.loc[row["id"], "pred"]]
    # the same test set at another position in the other run (C has it second)
    assert len(cmp.example_diff(runs["a"], runs["c"], "test")) == 60
    assert len(cmp.example_diff(runs["a"], runs["c"], 0)) == 60  # A's first test set, found by name in C


def test_example_diff_needs_a_shared_test_set(runs):
    with pytest.raises(DataError, match="'other' is not shared"):
        cmp.example_diff(runs["d"], runs["a"], "other")
    with pytest.raises(DataError, match="no test set 'other'"):
        cmp.example_diff(runs["a"], runs["d"], "other")


def test_dev_diff(runs):
    assert cmp.shares_dev(runs["a"], runs["b"])
    diff = cmp.dev_diff(runs["a"], runs["b"])
    assert len(diff) == 40 and sum(cmp.outcome_counts(diff).values()) == 40
    dev = runs["a"].dev_examples()
    best = runs["a"].best_epoch()
    logits = runs["a"].read_epoch("dev", best, dev["id"].astype(str).tolist())
    right = logits.argmax(1) == dev["label"].to_numpy()
    assert diff["outcome"].isin(["both right", "only A right"]).sum() == right.sum()


# --------------------------------------------------------------------------- experiments
def test_experiment_runs(curriculum):
    exp, store = curriculum
    everything = registry.experiment_runs(exp, store.runs)
    assert list(everything) == [
        "tiny curricula: datamap",
        "tiny curricula: oversampled@seed0",
        "tiny curricula: oversampled@seed1",
        "tiny curricula: cart-stra++@seed0",
        "tiny curricula: cart-stra++@seed1",
    ]
    best = registry.experiment_runs(exp, store.runs, best_only=True)
    chosen = exp.result("best")  # the experiment's own best-on-validation choice
    assert sorted(r.id for r in best.values()) == sorted(chosen["run_id"])
    assert all(method_of(label.split(": ")[1]) for label in best)
    assert method_of("datamap") is None and method_of("A + B@seed12") == "A + B"
    # the experiment's own scores are the table's
    table = cmp.comparison_table(best, "test").set_index("id")
    for _, row in chosen.iterrows():
        assert table.loc[row["run_id"], "macro_f1"] == pytest.approx(row["macro_f1"])


def test_significance_frame(curriculum):
    exp, _ = curriculum
    frame = significance_frame(exp.result("significance"))
    assert frame["test"].tolist() == ["Cochran's Q", "Cochran's Q (pair)", "Mann-Whitney U"]
    assert frame["p_value"].between(0, 1).all()
    assert frame.loc[2, "n"] == "2 + 2"
    assert significance_frame({}).empty


def test_combination_table3_marks(tmp_path):
    exp, store = make_combination(tmp_path / "cache")
    table = exp.result("table3").set_index("train_set")
    assert list(table.columns) == ["test", "other"]
    marks = cmp.best_marks(table, table.columns)
    for column in table.columns:
        assert marks[column].tolist() == (table[column] == table[column].max()).tolist()
    run = store.runs.get(exp.run_ids()["A + B@seed0"])
    assert table.loc["A + B", "other"] == pytest.approx(run_scores(run, "other")["accuracy"])


def test_unfinished_run_has_nan_scores(tmp_path, runs):
    data = make_data(tmp_path / "cache")
    run = RunStore(tmp_path / "cache").create(
        data.base.replace(name="new"), data.train, data.dev, (data.test,)
    )
    table = cmp.comparison_table({"new": run, "A": runs["a"]}, "test")
    assert table["accuracy"].isna().tolist() == [True, False]
    assert table.loc[0, "epochs"] == 0 and pd.isna(table.loc[0, "best_epoch"])
    assert cmp.class_f1_frame({"new": run}, "test").empty
    with pytest.raises(RunError):
        cmp.dev_diff(run, runs["a"])


# --------------------------------------------------------------------------- two really trained runs
@pytest.mark.slow  # ~10-20 s on 2 CPU cores; the synthetic runs above cover the logic
def test_two_trained_runs(tiny_model, tmp_path):
    """The trainer's own output (not synthetic files): 2 seeds, 1 epoch, a shared test set."""
    from cartomap.training.loop import train_or_load

    cache = tmp_path / "cache"
    demo = load_dataset(DataConfig(path="demo:dev"))
    train = derived.save_dataset(demo.subset(np.arange(0, 48)), cache, name="train")
    dev = derived.save_dataset(demo.subset(np.arange(200, 224)), cache, name="dev")
    test = derived.save_dataset(demo.subset(np.arange(300, 340)), cache, name="test")
    store = RunStore(cache)
    trained = {}
    for seed in (0, 1):
        config = RunConfig(
            data=train,
            dev=dev,
            tests=(test,),
            model=ModelConfig(tiny_model, max_length=32),
            train=TrainConfig(
                epochs=1, batch_size=16, learning_rate=1e-3, seed=seed, record="none", save_checkpoints=False
            ),
            name=f"seed {seed}",
        )
        trained[f"seed {seed}"] = train_or_load(config, store)
    table = cmp.comparison_table(trained, "test").set_index("run")
    for label, run in trained.items():
        assert table.loc[label, "macro_f1"] == pytest.approx(run_scores(run, "test")["macro_f1"])
    diff = cmp.example_diff(trained["seed 0"], trained["seed 1"], "test")
    pa = predictions_on_test(trained["seed 0"], "test")
    counts = cmp.outcome_counts(diff)
    assert counts["both right"] + counts["only A right"] == int(pa["correct"].sum())
    assert len(cmp.curves_frame(trained, "test accuracy", "test")) == 2
