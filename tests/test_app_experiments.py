"""The Experiments page (pages/experiments.py) under streamlit's AppTest.

One tiny curriculum experiment is trained for real (module fixture, tiny random BERT, 1 epoch);
running and combination experiments are made by writing their folders, and starting a job is
replaced by a recorder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
import torch
from streamlit.testing.v1 import AppTest

import cartomap.experiments.launch
from cartomap.config import DataConfig, ModelConfig, OrderConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.experiments.combination import CombinationParams, TrainingSet
from cartomap.experiments.curriculum import CurriculumParams, create_curriculum
from cartomap.experiments.runner import run_experiment
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore
from cartomap.training.curricula import training_plan

REPO = Path(__file__).resolve().parent.parent
NLI = "entailment, neutral, contradiction"


@pytest.fixture(scope="module")
def finished(tiny_model, tmp_path_factory):
    """A done curriculum experiment: oversampled vs cart-stra++, seeds 0 and 1, 1 epoch, 96 examples."""
    cache = tmp_path_factory.mktemp("xp") / "cache"
    demo = load_dataset(DataConfig(path="demo:dev"))
    train = derived.save_dataset(demo.subset(np.arange(0, 96)), cache, name="train")
    dev = derived.save_dataset(demo.subset(np.arange(200, 240)), cache, name="dev")
    test = derived.save_dataset(demo.subset(np.arange(300, 360)), cache, name="test")
    base = RunConfig(
        data=train,
        dev=dev,
        tests=(test,),
        model=ModelConfig(tiny_model, max_length=48),
        train=TrainConfig(epochs=1, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0),
    )
    store = ExperimentStore(cache)
    params = CurriculumParams(
        base=base, methods=("oversampled", "cart-stra++"), seeds=(0, 1), datamap_epochs=2
    )
    exp = create_curriculum(params, store, name="tiny curricula")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 32-wide model gains nothing from threads; on a busy CPU they cost ~10x
    try:
        run_experiment(exp, store)
    finally:
        torch.set_num_threads(threads)
    assert exp.state == "done"
    return cache, exp


@pytest.fixture()
def started(monkeypatch) -> list:
    """Replace the background start: record the experiments, start nothing."""
    calls = []
    monkeypatch.setattr(
        cartomap.experiments.launch,
        "start_experiment",
        lambda exp, store, executor=None, by=None: calls.append(exp) or exp,
    )
    return calls


def page() -> AppTest:
    return AppTest.from_file(str(REPO / "pages" / "experiments.py"), default_timeout=patience.WAIT_S)


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def texts(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown] + [c.value for c in at.caption]


def frames(at: AppTest) -> list[pd.DataFrame]:
    return [d.value for d in at.dataframe]


def frame_with(at: AppTest, *columns: str) -> pd.DataFrame:
    """The first table shown with all of ``columns``."""
    return next(f for f in frames(at) if set(columns) <= set(f.columns))


def use(at: AppTest, key: str, value) -> AppTest:
    """Set the kept widget of session key ``key`` (whatever its kind) and rerun."""
    for kind in ("text_input", "text_area", "number_input", "selectbox", "radio", "multiselect", "checkbox"):
        found = [w for w in getattr(at, kind) if w.key == f"_kept_{key}"]
        if found:
            found[0].set_value(value).run()
            return at
    raise KeyError(key)


# --------------------------------------------------------------------------- rendering and starting
def test_renders_on_an_empty_cache_also_from_the_app(root):
    at = page().run()
    assert not at.exception and not errors(at)
    assert at.multiselect(key="_kept_xp_methods").value == ["oversampled", "cart-stra++"]
    assert at.text_input(key="_kept_xp_seeds").value == "0-4"
    assert at.multiselect(key="_kept_xc_modes").value == ["A", "A+B", "A◇B"]
    assert {"xp_start", "xc_start"} <= {b.key for b in at.button}
    assert any("No curriculum experiments yet" in c for c in texts(at))
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=patience.WAIT_S).run()
    app.switch_page("pages/experiments.py").run()
    assert not app.exception
    assert app.title[0].value == "Curricula & combinations"


def test_no_test_set_is_an_error_and_creates_nothing(root, started):
    at = page().run()
    at.button(key="xp_start").click().run()
    assert not at.exception
    assert any("needs at least one test set" in e for e in errors(at)), errors(at)
    use(at, "xp_seeds", "0, x").button(key="xp_start").click().run()
    assert any("'x' is not a seed" in e for e in errors(at))
    assert ExperimentStore(root).list() == [] and started == []


def test_start_builds_the_params_and_starts_the_job(root, started):
    at = page().run()
    use(at, "xp_tests", "held-out = demo:dev")
    use(at, "xp_seeds", "0-1")
    use(at, "xp_epochs", 1)
    use(at, "xp_methods", ["oversampled", "cart++", "cart-stra++"])
    use(at, "xp_compare_b", "cart++")
    use(at, "xp_difficulty", "code")
    assert at.selectbox(key="_kept_xp_ambiguity").value == "variability"  # the papers' score by default
    use(at, "xp_ambiguity", "mean_entropy")
    at.button(key="xp_start").click().run()
    assert "at least 2 epochs" in " ".join(errors(at))  # a 1-epoch data map has no variability
    assert not started
    use(at, "xp_datamap_epochs", 2)
    at.button(key="xp_start").click().run()
    assert not at.exception and not errors(at)
    (exp,) = ExperimentStore(root).list()
    assert started == [exp]
    params = CurriculumParams.from_params(exp.params)
    assert params.methods == ("oversampled", "cart++", "cart-stra++") and params.seeds == (0, 1)
    assert params.compare == ("oversampled", "cart++") and params.difficulty == "code"
    assert params.ambiguity == "mean_entropy"
    assert params.base.data.path == "demo:train" and params.base.dev.path == "demo:dev"
    assert [(t.path, t.name) for t in params.base.tests] == [("demo:dev", "held-out")]
    assert params.base.train.epochs == 1 and params.datamap_epochs == 2
    assert at.session_state["xp_selected"] == exp.id
    assert any(exp.id in s.value for s in at.success)
    assert at.get("progress"), "the queued experiment is followed"


def test_combination_needs_b_for_a_plus_b_and_starts_with_three_sets(root, started):
    at = page().run()
    use(at, "xc_a", "demo:train")
    use(at, "xc_tests", "demo:dev")
    at.button(key="xc_start").click().run()
    assert any("need a dataset B" in e for e in errors(at))
    assert started == []
    use(at, "xc_b", "demo:dev")
    use(at, "xc_a_name", "MNLI")
    use(at, "xc_b_name", "WANLI")
    at.button(key="xc_start").click().run()
    assert not errors(at)
    (exp,) = ExperimentStore(root).list("combination")
    assert started == [exp]
    params = CombinationParams.from_params(exp.params)
    assert [s.name for s in params.training_sets] == ["MNLI", "MNLI + WANLI", "MNLI ◇ WANLI"]
    assert params.cache == str(root)


# --------------------------------------------------------------------------- a finished curriculum experiment
def test_finished_curriculum_experiment_shows_its_results(finished, monkeypatch):
    cache, exp = finished
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(REPO))
    at = page().run()
    assert not at.exception and not errors(at)
    tables = frames(at)
    best = next(t for t in tables if "micro_f1" in t.columns and "seed" in t.columns and len(t) == 2)
    assert best["method"].tolist() == ["oversampled", "cart-stra++"]
    assert best.equals(exp.result("best")[best.columns.tolist()])
    agg = next(t for t in tables if "macro_f1 (mean ± std)" in t.columns)
    assert agg["seeds"].tolist() == [2, 2] and all(" ± " in v for v in agg["micro_f1 (mean ± std)"])
    per_class = next(t for t in tables if "recall" in t.columns)
    assert set(per_class["class"]) == {"entailment", "neutral", "contradiction", "micro", "macro"}
    assert len(at.get("plotly_chart")) == 2  # F1 bars and learning curves
    words = " ".join(texts(at))
    assert "Cochran's Q over the 2 methods" in words and "Mann-Whitney U" in words
    assert at.get("download_button")


def test_stage_preview_uses_the_baseline_data_map(finished, monkeypatch):
    cache, exp = finished
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(REPO))
    params = CurriculumParams.from_params(exp.params)
    at = page().run()
    at.radio(key="_kept_xp_train_source").set_value("path").run()
    use(at, "xp_train_path", params.base.data.path)
    use(at, "xp_label_names", NLI)
    use(at, "xp_batch_size", 16)
    use(at, "xp_epochs", 2)
    use(at, "xp_preview", True)
    assert not at.exception and not errors(at)
    table = frame_with(at, "start_step", "pool_size")
    baseline = RunStore(cache).get(exp.run_ids()["datamap"])
    examples = baseline.examples()
    scores = baseline.metrics().set_index("id").loc[examples["id"]]
    order = OrderConfig(name="cart-stra++")
    plan = training_plan(order, examples["label"].to_numpy(), 16, 2, 0, table=scores.reset_index(drop=True))
    pd.testing.assert_frame_equal(table, plan.stage_table(baseline.label_names))
    assert table["name"].iloc[-1] == "all data"


# --------------------------------------------------------------------------- running, interrupted, combination results
def fake_experiment(root: Path, **status):
    """A curriculum experiment whose status is written by hand (no training)."""
    store = ExperimentStore(root)
    params = CurriculumParams(base=RunConfig(tests=(DataConfig(path="demo:dev"),)), seeds=(0,))
    exp = store.create("curriculum", params.to_params(), name="fake")
    exp.set_status(**status)
    return store, exp


def test_running_experiment_shows_role_epoch_step_and_cancels(root, started):
    run = RunStore(root).create(
        RunConfig(data=DataConfig(path="demo:dev"), dev=None), load_dataset(DataConfig(path="demo:dev"))
    )
    run.set_status(state="running", epoch=1, epochs=2, step=3, steps_per_epoch=13, loss=1.0986)
    store, exp = fake_experiment(
        root,
        state="running",
        role="oversampled@seed0",
        run_id=run.id,
        runs_done=1,
        runs_planned=3,
        phase="training",
    )
    with exp.acquire_lock():  # held as the experiment job holds it
        at = page().run()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Training"] == "oversampled@seed0"
        assert (metrics["Epoch"], metrics["Step"], metrics["Loss"]) == ("1/2", "3/13", "1.0986")
        assert "runs 1/3" in at.get("progress")[0].proto.text
        at.button(key=f"cancel_{exp.id}").click().run()
        assert exp.cancel_requested() and exp.status()["state"] == "running"
    at = page().run()  # the lock is gone: the job died
    assert any("stopped without finishing" in w.value for w in at.warning)
    at.button(key=f"resume_{exp.id}").click().run()
    assert started == [exp]


def test_finished_combination_shows_table_3_with_the_best_marked(root):
    store = ExperimentStore(root)
    a = DataConfig(path="demo:train")
    params = CombinationParams(
        base=RunConfig(), training_sets=(TrainingSet("A", a),), tests=(DataConfig(path="demo:dev"),)
    )
    exp = store.create("combination", params.to_params())
    exp.write_result(
        "table3", pd.DataFrame({"train_set": ["A", "A + B"], "T1": [0.5, 0.625], "T2": [0.75, 0.25]})
    )
    exp.write_result("runs", pd.DataFrame({"train_set": ["A"], "seed": [0], "accuracy": [0.5]}))
    exp.set_status(state="done")
    at = page().run()
    assert not at.exception and not errors(at)
    table = frame_with(at, "train_set", "T1")
    assert table["T1"].tolist() == ["0.500", "0.625 ★"] and table["T2"].tolist() == ["0.750 ★", "0.250"]
    assert at.get("download_button")
    assert os.environ["CARTOMAP_CACHE"] == str(root)


def test_one_seed_per_method_is_not_shown_as_a_mann_whitney_result(finished, monkeypatch):
    from cartomap.experiments.store import Experiment

    cache, exp = finished
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(REPO))
    result = Experiment.result

    def one_seed(self, name, *args, **kwargs):
        value = result(self, name, *args, **kwargs)
        if name == "significance" and value:
            value = {**value, "mann_whitney": {"u": 0.0, "p_value": 1.0, "n_a": 1, "n_b": 1}}
        return value

    monkeypatch.setattr(Experiment, "result", one_seed)
    at = page().run()
    assert not at.exception and not errors(at)
    words = " ".join(texts(at))
    assert "needs two or more seeds per method" in words
    assert "U = 0, p = 1" not in words


def test_a_folder_name_with_underscores_is_not_markdown(tmp_path, monkeypatch):
    cache = tmp_path / "my_cache_of_runs"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(REPO))
    at = page().run()
    assert not at.exception
    caption = next(c for c in texts(at) if "No curriculum experiments yet" in c)
    assert "my\\_cache\\_of\\_runs" in caption  # shown as written, not in italics
