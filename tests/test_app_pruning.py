"""The Prune labels page (pages/pruning.py) under streamlit's AppTest: a finished experiment made
without training (tests/test_pruning.py's planted label errors), a running one made of status files."""

from __future__ import annotations

from pathlib import Path

import patience
import pytest
from streamlit.testing.v1 import AppTest
from test_pruning import make_finished_experiment

from cartomap.config import DataConfig, ExecutorConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.experiments.pruning import KIND, PruningParams, fold_role, load_results
from cartomap.experiments.pruning_analysis import MODEL0
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DataConfig(path="demo:dev"))


def page() -> AppTest:
    return AppTest.from_file(str(REPO / "pages" / "pruning.py"), default_timeout=patience.WAIT_S)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def frame_with(at: AppTest, column: str):
    return next((d.value for d in at.dataframe if column in d.value.columns), None)


# --------------------------------------------------------------------------- a finished experiment
def test_finished_experiment_shows_matrix_sweep_plots_and_suspects(root, demo):
    exp, truth = make_finished_experiment(root, demo)
    at = page().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Prune labels"]
    m = metrics(at)
    assert m["Training examples"] == "60" and m["Pruned"] == "8"
    assert m["Model 0 test accuracy"] == "60.00%" and m["Model 1 test accuracy"] == "60.00%"
    pruned = next(x for x in at.metric if x.label == "Pruned")
    assert not pruned.proto.delta  # a share of the training set is not a change: no delta arrow
    assert m["Would be pruned"] == "8"
    assert m["Type 1: only Model 0"] == "2" and m["Type 3: both"] == "1"  # chosen categories (P1G0)
    matrix = frame_with(at, "G0 entailment")
    assert (
        matrix.loc["P1 neutral", "G0 entailment"] == 12
        and matrix.loc["P0 entailment", "G2 contradiction"] == 5
    )
    sweep = frame_with(at, "chosen")
    assert {"threshold", "P1G0", "all", "chosen"} <= set(sweep.columns)
    suspects = at.dataframe(key="prune_suspects").value
    assert sorted(suspects["id"]) == sorted(truth["confident"])
    assert {"premise", "hypothesis", "gold", "predicted", "confidence"} <= set(suspects.columns)
    assert len(at.get("plotly_chart")) == 2  # confidence histogram and change scatter
    assert len(at.get("download_button")) == 2


def test_what_if_counts_and_starts_model1_with_the_same_folds(root, demo, spawned):
    exp, truth = make_finished_experiment(root, demo)
    at = page().run()
    at.slider(key=f"_kept_prune_whatif_threshold_{exp.id}").set_value(0.5).run()
    assert not at.exception, at.exception
    assert metrics(at)["Would be pruned"] == "12"
    assert len(at.dataframe(key="prune_suspects").value) == 12  # the weak ones too
    assert load_results(exp)["summary"]["n_pruned"] == 8  # the experiment itself is unchanged
    at.button(key="prune_whatif_start").click().run()
    assert not at.exception, at.exception
    store = ExperimentStore(root)
    (new,) = [e for e in store.list(KIND) if e.id != exp.id]
    params, old = PruningParams.from_dict(new.params), PruningParams.from_dict(exp.params)
    assert params.threshold == 0.5 and params.replace(threshold=2.0) == old  # same base, folds, seed
    assert spawned == [["experiment", "run", new.id, "--job"]]
    assert at.session_state["prune_exp_id"] == new.id


def test_suspects_go_to_the_data_map_of_model0(root, demo):
    exp, truth = make_finished_experiment(root, demo)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=patience.WAIT_S).run()
    at.switch_page("pages/pruning.py").run()
    assert not at.exception, at.exception
    first = at.dataframe(key="prune_suspects").value["id"].iloc[0]
    assert at.button(key="prune_focus_one").disabled  # no row selected yet
    at.session_state["prune_suspects"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    at.button(key="prune_focus_one").click().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Data map"]
    assert at.session_state["selected_ids"] == [first] and at.session_state["dm_focus"] == first
    assert any(t.value.startswith(f"id: {first}") for t in at.text)  # the focused example is shown

    at.switch_page("pages/pruning.py").run()
    at.button(key="prune_focus_all").click().run()
    assert not at.exception, at.exception
    model0 = exp.run_ids()[MODEL0]
    assert at.session_state["run_id"] == model0
    assert sorted(at.session_state["selected_ids"]) == sorted(truth["confident"])
    assert [t.value for t in at.title] == ["Data map"]
    table = next(d.value for d in at.dataframe if "premise" in d.value.columns)
    assert sorted(table["id"]) == sorted(truth["confident"])


def test_experiment_without_model1_renders(root, demo):
    make_finished_experiment(root, demo, with_model1=False)
    at = page().run()
    assert not at.exception, at.exception
    assert metrics(at)["Model 1 test accuracy"] == "–"
    assert any("Model 1 was not trained" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1


# --------------------------------------------------------------------------- a running experiment
def test_running_experiment_shows_progress_and_cancel(root, demo):
    data = demo.subset(list(range(30)))
    params = PruningParams(
        base=RunConfig(data=DataConfig(path="demo:dev"), dev=None, tests=(DataConfig(path="demo:dev"),)),
        folds=3,
        cache=str(root),
    )
    store = ExperimentStore(root)
    exp = store.create(KIND, params.to_dict(), name="busy")
    runs = RunStore(root)
    done = runs.create(RunConfig(data=DataConfig(path="demo:dev"), dev=None, name="m0"), data, None)
    done.set_status(state="done", epochs_done=4, epochs=4)
    busy = runs.create(
        RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(seed=7)), data, None
    )
    busy.set_status(
        state="running",
        epoch=2,
        epochs=4,
        step=3,
        steps_per_epoch=10,
        global_step=13,
        total_steps=40,
        loss=1.0912,
        eta_s=30,
    )
    exp.record_run(MODEL0, done.id)
    exp.record_run(fold_role(0), busy.id)
    exp.set_status(
        state="running", phase="training", role=fold_role(0), run_id=busy.id, runs_done=1, runs_planned=4
    )
    run_lock = busy.acquire_lock()
    with exp.acquire_lock():  # as the experiment job would hold it
        try:
            at = page().run()
            assert not at.exception, at.exception
            (bar,) = at.get("progress")
            assert "running" in bar.proto.text and "1/5 runs done" in bar.proto.text
            assert any("Training Model F0" in c.value for c in at.caption)
            table = frame_with(at, "time left")
            assert table["model"].tolist() == ["Model 0", "Model F0"]
            assert table["state"].tolist() == ["done", "running"]
            assert table["epoch"].tolist()[1] == "2/4" and table["step"].tolist()[1] == "3/10"
            assert not exp.cancel_requested()
            at.button(key=f"prune_cancel_{exp.id}").click().run()
            assert exp.cancel_requested() and exp.status()["state"] == "running"  # nothing killed
        finally:
            run_lock.close()
    at = page().run()  # the job is gone: interrupted, with a Resume button
    assert at.button(key=f"prune_resume_{exp.id}").label == "Resume"


# --------------------------------------------------------------------------- starting one
def test_new_experiment_form_starts_a_job(root, spawned):
    at = page().run()
    assert not at.exception, at.exception
    assert any("No pruning experiments yet" in c.value for c in at.caption)
    cats = at.multiselect(key="_kept_prune_categories")
    assert cats.value == ["P1G0"] and len(cats.options) == 6
    assert any("P:neutral G:entailment (P1G0)" in o for o in cats.options)
    at.number_input(key="_kept_prune_threshold").set_value(4.0).run()
    at.number_input(key="_kept_prune_folds").set_value(5).run()
    at.text_input(key="_kept_prune_test").set_value("").run()
    at.button(key="prune_start").click().run()
    assert any("test set" in e.value for e in at.error) and not spawned
    at.text_input(key="_kept_prune_test").set_value("demo:dev").run()
    at.button(key="prune_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (exp,) = ExperimentStore(root).list(KIND)
    params = PruningParams.from_dict(exp.params)
    assert params.threshold == 4.0 and params.folds == 5 and params.categories == ("P1G0",)
    assert params.base.data.path == "demo:train" and params.base.tests[0].path == "demo:dev"
    assert params.base.train.save_checkpoints is False and params.cache == str(root.resolve())
    assert spawned == [["experiment", "run", exp.id, "--job"]]


def test_the_runs_go_to_ray_or_slurm_from_the_form(root, spawned):
    at = page().run()
    at.radio(key="_kept_prune_executor").set_value("slurm").run()
    at.text_input(key="_kept_prune_sbatch").set_value("account=nlp, qos").run()
    at.button(key="prune_start").click().run()
    assert any("sbatch option as key=value" in e.value for e in at.error) and not spawned
    at.radio(key="_kept_prune_executor").set_value("ray").run()
    at.text_input(key="_kept_prune_ray_address").set_value("auto").run()
    at.number_input(key="_kept_prune_cpus").set_value(2).run()
    at.button(key="prune_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (exp,) = ExperimentStore(root).list(KIND)
    # saved before the job starts; the job (`experiment run ID --job`) reads it
    assert exp.executor() == ExecutorConfig(kind="ray", ray_address="auto", cpus_per_run=2)
    assert spawned == [["experiment", "run", exp.id, "--job"]]


def _setting_keys(at: AppTest) -> set[str]:
    return {w.key for kind in ("number_input", "text_input", "checkbox") for w in getattr(at, kind) if w.key}


def test_the_executor_form_offers_every_registered_executor_with_its_settings(root, monkeypatch):
    """The form reads the registry: every registered executor by its name and description (one
    registered by this test too), each with exactly the settings its entry declares, and its note."""
    from cartomap.executors import registry

    made_up = registry.ExecutorEntry(
        "elsewhere",
        "a made-up executor of this test",
        lambda config, root, log_dir: None,
        options=(
            registry.ExecutorOption("ray_address", "where", "Where it runs", str, "over there"),
            registry.ExecutorOption("cpus_per_run", "width", "How wide", int, 3, low=1, high=8),
        ),
        note="A made-up executor's note.",
    )
    monkeypatch.setitem(registry.REGISTRY, made_up.name, made_up)
    at = page().run()
    assert not at.exception, at.exception
    offered = at.radio(key="_kept_prune_executor").options
    assert offered == [f"{e.name}: {e.description}" for e in registry.REGISTRY.values()]
    at.radio(key="_kept_prune_executor").set_value("local").run()
    others = _setting_keys(at)  # the rest of the page's form
    for entry in registry.REGISTRY.values():
        at.radio(key="_kept_prune_executor").set_value(entry.name).run()
        assert not at.exception, (entry.name, at.exception)
        assert _setting_keys(at) - others == {f"_kept_prune_{o.key}" for o in entry.options}, entry.name
        assert entry.note in [c.value for c in at.caption], entry.name
    assert at.text_input(key="_kept_prune_where").value == "over there"
    assert at.number_input(key="_kept_prune_width").value == 3


def test_parallel_runs_show_their_workers(root, demo):
    data = demo.subset(list(range(30)))
    params = PruningParams(
        base=RunConfig(data=DataConfig(path="demo:dev"), dev=None, tests=(DataConfig(path="demo:dev"),)),
        folds=3,
        cache=str(root),
    )
    exp = ExperimentStore(root).create(KIND, params.to_dict())
    runs = RunStore(root)
    for f, host in enumerate(("node-a", "node-b")):
        run = runs.create(
            RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(seed=f)), data
        )
        run.set_status(state="queued", worker_host=host, worker_pid=100 + f)
        exp.record_run(fold_role(f), run.id)
    exp.set_status(state="failed", error="RayTaskError: worker died", runs_done=0, runs_planned=4)
    at = page().run()
    assert not at.exception, at.exception
    table = frame_with(at, "worker")
    assert table["worker"].tolist() == ["node-a:100", "node-b:101"]


def test_suspects_ranked_by_any_detector(root, demo):
    import numpy as np

    from cartomap.experiments.pruning_analysis import logits_of
    from cartomap.scores import detectors

    exp, _ = make_finished_experiment(root, demo)
    at = page().run()
    box = at.selectbox(key="_kept_prune_rank_by")
    assert box.value == "consensus rule"  # the default
    names = ("oof_margin", "cleanlab_self_confidence", "consensus_p1g0")
    assert {detectors.title(n) for n in names} <= set(box.options)  # shown by their titles
    n_rule = len(at.dataframe(key="prune_suspects").value)
    box.set_value("oof_margin").run()
    assert not at.exception, at.exception
    table = at.dataframe(key="prune_suspects").value
    oof = load_results(exp)["oof"]
    score = detectors.score(
        "oof_margin", detectors.DetectorInputs(labels=oof["gold"], oof_logits=logits_of(oof))
    )
    top = oof["id"].astype(str).to_numpy()[np.argsort(-score, kind="stable")[:n_rule]]
    assert sorted(table["id"]) == sorted(top) and "score" in table.columns
    assert list(table["score"]) == sorted(table["score"], reverse=True)
