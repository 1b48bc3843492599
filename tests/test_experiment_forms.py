"""The pure helpers behind the Experiments page (cartomap.experiments.forms), on hand-checked inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.config import ORDERS, DataConfig, OrderConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, DataError
from cartomap.experiments import forms
from cartomap.runs.store import RunStore
from cartomap.training.curricula import training_plan


# --------------------------------------------------------------------------- form text
def test_parse_seeds_reads_lists_and_ranges():
    assert forms.parse_seeds("0-4") == (0, 1, 2, 3, 4)
    assert forms.parse_seeds("0, 2 5-6") == (0, 2, 5, 6)
    assert forms.parse_seeds("3,3, 2-3") == (3, 2)
    for bad, match in [("", "at least one"), ("a", "not a seed"), ("-1", "not a seed"), ("4-2", "backwards")]:
        with pytest.raises(DataError, match=match):
            forms.parse_seeds(bad)
    with pytest.raises(DataError, match="at most 200"):
        forms.parse_seeds("0-1000")


def test_parse_test_sets_with_and_without_names():
    text = "snli = /d/snli/test.jsonl\n\n# a comment\n demo:dev \nhf:x=y = /d/z.csv"
    assert forms.parse_test_sets(text) == [
        ("snli", "/d/snli/test.jsonl"),
        ("", "demo:dev"),
        ("hf:x", "y = /d/z.csv"),
    ]
    with pytest.raises(DataError, match="no path"):
        forms.parse_test_sets("name =")
    assert forms.parse_test_sets("  ") == []


def test_data_config_keeps_the_demo_columns_and_maps_files():
    assert forms.data_config("demo:dev", text_columns=("text",), name="d") == DataConfig(
        path="demo:dev", name="d"
    )
    config = forms.data_config(
        " /d/t.csv ", text_columns=("text",), label_column="y", id_column="", format="csv"
    )
    assert (config.path, config.text_columns, config.label_column, config.id_column) == (
        "/d/t.csv",
        ("text",),
        "y",
        "",
    )
    assert config.format == "csv" and config.label_names is None
    with pytest.raises(DataError, match="empty"):
        forms.data_config(" ")
    with pytest.raises(DataError, match="label column"):
        forms.data_config("/d/t.csv", text_columns=("text",), label_column="text")
    with pytest.raises(DataError, match="two different"):
        forms.data_config("/d/t.csv", text_columns=("a", "a"))


def test_order_descriptions_cover_every_order():
    assert tuple(forms.ORDER_DESCRIPTIONS) == ORDERS
    assert set(forms.DEFAULT_METHODS) <= set(ORDERS)


# --------------------------------------------------------------------------- params
DEMO_TEST = DataConfig(path="demo:dev", name="held-out")


def curriculum(**changes):
    values = dict(
        train=DataConfig(path="demo:train"),
        dev=DataConfig(path="demo:dev"),
        tests=(DEMO_TEST,),
        methods=["oversampled", "cart++", "cart-stra++"],
        seeds=(0, 1),
        epochs=1,
        datamap_epochs=2,
        batch_size=16,
    )
    return forms.build_curriculum_params(**{**values, **changes})


def test_build_curriculum_params():
    params = curriculum(compare=("cart-stra++", "oversampled"), difficulty="code")
    assert params.methods == ("oversampled", "cart++", "cart-stra++") and params.seeds == (0, 1)
    assert params.compare == ("cart-stra++", "oversampled") and params.difficulty == "code"
    assert params.base.tests == (DEMO_TEST,) and params.base.train.epochs == 1
    assert params.base.train.batch_size == 16 and params.base.model.name_or_path == "default"
    assert curriculum(methods=["oversampled"], compare=("oversampled", "cart++")).compare is None
    assert params.ambiguity == "variability"  # the papers' score unless asked
    assert curriculum(ambiguity="mean_entropy").ambiguity == "mean_entropy"
    for bad, match in [
        (dict(ambiguity="nope"), "unknown ambiguity score"),
        (dict(tests=()), "test set"),
        (dict(dev=None), "validation set"),
        (dict(methods=[]), "at least one method"),
        (dict(datamap_epochs=None), "at least 2 epochs"),
        (dict(methods=["nope"]), "unknown method"),
        (dict(compare=("cart++", "cart++")), "two different"),
        (dict(compare=("cart++", "shuffled")), "must name two of the methods"),
        (dict(epochs=0), "epochs"),
        (dict(learning_rate=0.0), "learning rate"),
        (dict(model="./no/such/model"), "not found"),
    ]:
        with pytest.raises(CartomapError, match=match):
            curriculum(**bad)


def test_build_combination_params_names_rows_as_table_3():
    a, b = DataConfig(path="demo:train"), DataConfig(path="demo:dev")
    params = forms.build_combination_params(
        a=a,
        b=b,
        modes=["A◇B", "A"],
        tests=(DEMO_TEST,),
        seeds=(0,),
        cache="/c",
        a_name="MNLI",
        b_name="WANLI",
    )
    assert [(s.name, s.mode, s.b) for s in params.training_sets] == [
        ("MNLI", "A", None),
        ("MNLI ◇ WANLI", "A◇B", b),
    ]
    assert params.cache == "/c" and params.tests == (DEMO_TEST,) and params.base.dev is None
    ok = dict(a=a, b=b, modes=["A", "A+B"], tests=(DEMO_TEST,), seeds=(0,), cache="/c")
    for bad, match in [
        (dict(b=None), "need a dataset B"),
        (dict(modes=[]), "at least one training set"),
        (dict(tests=()), "test set"),
        (dict(a_name="X", b_name="X"), "same name"),
        (dict(a_name=" "), "name"),
    ]:
        with pytest.raises(DataError, match=match):
            forms.build_combination_params(**{**ok, **bad})


# --------------------------------------------------------------------------- stage preview
def test_plan_preview_of_length_order_is_hand_checked():
    """10 rows, classes 0 x5 then 1 x5, lengths 1..10, batch 5, 2 epochs: 4 steps, 2 for the curriculum
    split 100:200:350 -> [0, 1, 1]; stages take 6, 8, 10 rows of the shortest-first list."""
    examples = pd.DataFrame({"id": [f"r{i}" for i in range(10)], "label": [0] * 5 + [1] * 5})
    table = forms.plan_preview(
        OrderConfig(name="length"),
        examples,
        batch_size=5,
        epochs=2,
        seed=0,
        label_names=("a", "b"),
        lengths=np.arange(1, 11),
    )
    assert table["name"].tolist() == ["60%", "80%", "100%", "all data"]
    assert table["start_step"].tolist() == [0, 0, 1, 2]
    assert table["n_steps"].tolist() == [0, 1, 1, 2]
    assert table["pool_size"].tolist() == [10, 8, 10, 10]  # stage 1: 5 of a, 1 of b repeated 5 times
    assert table["unique_rows"].tolist() == [6, 8, 10, 10]
    assert table["a"].tolist() == [5, 5, 5, 5] and table["b"].tolist() == [5, 3, 5, 5]


def test_plan_preview_aligns_the_data_map_by_id():
    rng = np.random.default_rng(0)
    n = 30
    examples = pd.DataFrame({"id": [f"e{i}" for i in range(n)], "label": np.arange(n) % 3})
    metrics = pd.DataFrame(
        {
            "id": examples["id"],
            "confidence": rng.uniform(size=n),
            "variability": rng.uniform(0, 0.5, size=n),
            "correctness": rng.uniform(size=n),
        }
    )
    order = OrderConfig(name="cart-stra++")
    shuffled = metrics.sample(frac=1.0, random_state=1)  # another row order: joined on id
    table = forms.plan_preview(order, examples, batch_size=4, epochs=3, seed=2, metrics=shuffled)
    expected = training_plan(order, examples["label"].to_numpy(), 4, 3, 2, table=metrics.drop(columns="id"))
    pd.testing.assert_frame_equal(table, expected.stage_table())
    with pytest.raises(DataError, match="confidence"):
        forms.plan_preview(order, examples, batch_size=4, epochs=3, seed=2)
    with pytest.raises(DataError, match="no row for 1 training example"):
        forms.plan_preview(order, examples, batch_size=4, epochs=3, seed=2, metrics=metrics.iloc[1:])


def test_find_baseline_prefers_a_finished_plain_run_with_a_data_map(tmp_path):
    data = load_dataset(DataConfig(path="demo:dev"))
    small, other = data.subset(np.arange(20)), data.subset(np.arange(20, 40))
    store = RunStore(tmp_path)

    def run(dataset, seed, state="done", order="shuffled", metrics=True):
        config = RunConfig(
            data=DataConfig(path="demo:dev"),
            dev=None,
            train=TrainConfig(seed=seed),
            order=OrderConfig(name=order),
        )
        r = store.create(config, dataset)
        r.set_status(state=state)
        if metrics:
            (r.path / "metrics.parquet").write_bytes(b"")
        return r

    assert forms.find_baseline(store, small.fingerprint()) is None
    run(small, 1, state="running")
    run(small, 2, metrics=False)
    run(other, 3)
    curriculum = run(small, 4, order="oversampled")
    assert forms.find_baseline(store, small.fingerprint()).id == curriculum.id
    plain = run(small, 5)
    assert forms.find_baseline(store, small.fingerprint()).id == plain.id


# --------------------------------------------------------------------------- display values
def test_experiment_progress_reads_the_experiment_and_its_run():
    status = {"state": "running", "runs_done": 2, "runs_planned": 5, "role": "cart++@seed1", "run_id": "abc"}
    run = {"state": "running", "epoch": 1, "epochs": 3, "step": 4, "steps_per_epoch": 10, "loss": 0.5}
    view = forms.experiment_progress(status, run)
    assert (view["runs"], view["fraction"], view["role"], view["run_id"]) == (
        "2/5",
        0.4,
        "cart++@seed1",
        "abc",
    )
    assert (view["epoch"], view["step"], view["loss"]) == ("1/3", "4/10", "0.5000")
    empty = forms.experiment_progress({"state": "queued"})
    assert (empty["runs"], empty["fraction"], empty["epoch"], empty["role"]) == ("0/?", 0.0, "–", "–")
    assert forms.experiment_progress({"state": "done", "runs_done": 1, "runs_planned": 1})["fraction"] == 1.0


def test_mean_std_table():
    aggregate = pd.DataFrame(
        {
            "method": ["a", "b"],
            "micro_f1_mean": [0.5, 0.25],
            "micro_f1_std": [0.1, np.nan],
            "macro_f1_mean": [0.4, np.nan],
            "macro_f1_std": [0.0123, np.nan],
            "n": [5, 1],
        }
    )
    table = forms.mean_std_table(aggregate)
    assert table.to_dict("records") == [
        {
            "method": "a",
            "micro_f1 (mean ± std)": "0.500 ± 0.100",
            "macro_f1 (mean ± std)": "0.400 ± 0.012",
            "seeds": 5,
        },
        {"method": "b", "micro_f1 (mean ± std)": "0.250 ± –", "macro_f1 (mean ± std)": "–", "seeds": 1},
    ]


def test_significance_sentences():
    sig = {
        "methods": ["oversampled", "cart++", "cart-stra++"],
        "a": "oversampled",
        "b": "cart-stra++",
        "n_examples": 60,
        "cochran": {"q": 7.25, "df": 2, "p_value": 0.0267, "n_discordant": 12},
        "cochran_pair": {"q": 0.5, "df": 1, "p_value": 0.48},
        "mann_whitney": {"u": 3.0, "p_value": None, "n_a": 2, "n_b": 2},
        "mean_score_a": 0.41,
        "mean_score_b": 0.43,
    }
    cochran, pair, mw = forms.significance_sentences(sig)
    assert "Q = 7.250, df = 2, p = 0.0267" in cochran and "significant at α = 0.05" in cochran
    assert "not significant" not in cochran and "12 examples" in cochran
    assert "p = 0.48" in pair and "not significant" in pair
    assert "U = 3, p = undefined" in mw and "cannot be judged" in mw and "n = 2" in mw
    two = dict(sig, methods=["oversampled", "cart-stra++"])
    assert len(forms.significance_sentences(two)) == 2  # the pair test is the overall test
    assert forms.significance_sentences({}) == []


def test_marked_matrix_marks_the_best_of_every_column():
    table = pd.DataFrame(
        {"train_set": ["A", "A + B", "A ◇ B"], "T1": [0.5, 0.75, 0.75], "T2": [0.9, np.nan, 0.1]}
    )
    text = forms.marked_matrix(table)
    assert text["train_set"].tolist() == ["A", "A + B", "A ◇ B"]
    assert text["T1"].tolist() == ["0.500", "0.750 ★", "0.750 ★"]
    assert text["T2"].tolist() == ["0.900 ★", "–", "0.100"]


def test_mann_whitney_with_one_seed_says_it_needs_more_seeds():
    sig = {
        "methods": ["oversampled", "cart-stra++"],
        "a": "oversampled",
        "b": "cart-stra++",
        "n_examples": 60,
        "cochran": {"q": 1.0, "df": 1, "p_value": 0.32, "n_discordant": 4},
        "mann_whitney": {"u": 0.0, "p_value": 1.0, "n_a": 1, "n_b": 1},
        "mean_score_a": 0.41,
        "mean_score_b": 0.43,
    }
    mw = forms.significance_sentences(sig)[-1]
    assert "needs two or more seeds per method" in mw and "n = 1 and 1" in mw
    assert "U = 0" not in mw and "p = 1" not in mw
    from cartomap.experiments.curriculum import significance_frame

    assert "Mann-Whitney U" not in significance_frame(sig)["test"].tolist()
