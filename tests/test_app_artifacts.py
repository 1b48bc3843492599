"""The Artifacts page under streamlit.testing (no browser), on a tiny run of the demo dev set."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import patience
import pytest

import cartomap.runs.jobs
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.runs.store import Run, RunStore
from cartomap.runs.tasks import task_status
from cartomap.training.similarity import save_similarity

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "artifacts.py"


def make_run(cache: Path) -> Run:
    """A finished run on the demo dev set (400 pairs): no training, the page reads only its examples."""
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=1), name="af")
    run = RunStore(cache).create(config, data, None)
    run.set_status(state="done", progress=1.0)
    return run


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    return tmp_path / "cache"


@pytest.fixture()
def spawned(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None: calls.append(args) or os.getpid()
    )
    return calls


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _frames(at, column: str):
    return [d.value for d in at.dataframe if column in d.value.columns]


def _charts(at) -> list[str]:
    return [c.proto.id for c in at.get("plotly_chart")]


def test_page_renders_lexical_plot_and_table(env, spawned):
    make_run(env)
    at = _app().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Artifacts"]
    assert at.radio(key="_kept_af_source").value == "run"
    assert len(at.get("plotly_chart")) == 1, "the lexical correlation plot"
    (top,) = _frames(at, "word")
    assert list(top.columns) == ["word", "label", "count", "p_label", "z", "p_value", "significant"]
    assert len(top) > 0 and top["z"].is_monotonic_decreasing
    assert _frames(at, "accuracy") == [], "baselines are computed on click only"
    assert spawned == []

    at.radio(key="_kept_af_field").set_value("premise").run()
    assert not at.exception
    at.number_input(key="_kept_af_min_count").set_value(100_000).run()
    assert any("No word occurs" in i.value for i in at.info)


def test_baselines_button_computes_the_table(env, spawned):
    make_run(env)
    at = _app().run()
    at.button(key="af_baselines").click().run()
    assert not at.exception, at.exception
    (table,) = _frames(at, "accuracy")
    assert table["input"].tolist() == ["hypothesis only", "premise only", "premise + hypothesis"]
    assert ((table["accuracy"] >= 0) & (table["accuracy"] <= 1)).all()
    at.run()  # shown again without a click (cached)
    assert len(_frames(at, "accuracy")) == 1


def test_transformer_baseline_starts_an_ordinary_training_job(env, spawned):
    run = make_run(env)
    at = _app().run()
    at.button(key="af_train_partial").click().run()
    assert not at.exception, at.exception
    assert spawned and spawned[0][:2] == ["train", "--run"]  # the job opens the prepared run by id
    started = [r for r in RunStore(env).list() if r.id != run.id]
    assert len(started) == 1
    config = started[0].config
    assert config.name == "hypothesis-only · af" and config.data.text_columns == ("text",)
    assert load_dataset(config.data).frame["text"].isin(run.examples()["hypothesis"]).all()
    assert not [b for b in at.button if b.key == "af_train_partial"], "found, not offered again"
    assert at.get("progress"), "the page follows the job"


def test_similarity_runs_as_a_task_and_is_drawn_per_label(env, spawned):
    run = make_run(env)
    at = _app().run()
    at.button(key="af_sim_start").click().run()
    assert not at.exception, at.exception
    assert spawned == [["similarity", run.id, "--quiet"]]
    assert task_status(run, "similarity")["state"] == "queued"

    examples = run.examples()
    sim = np.where(examples["label"] == 0, 0.8, 0.3) + np.random.default_rng(0).normal(0, 0.05, len(examples))
    save_similarity(run, examples["id"].tolist(), sim)
    cartomap.runs.tasks.task_update(run, "similarity", state="done")
    at = _app().run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 2, "lexical plot and similarity violins"
    (summary,) = _frames(at, "median")
    assert summary["label"].tolist() == list(run.label_names)
    assert summary["mean"].iloc[0] == pytest.approx(0.8, abs=0.02)
    assert summary["count"].sum() == len(examples)


def test_demo_source_without_runs(env, spawned):
    at = _app().run()
    assert not at.exception, at.exception
    assert at.radio(key="_kept_af_source").value == "demo"
    assert _frames(at, "word")
    assert [b for b in at.button if b.key == "af_sim_inline"], "3,198 pairs: computed in the page on click"


def test_registered_in_the_dashboard(env, spawned):
    from streamlit.testing.v1 import AppTest

    make_run(env)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=patience.WAIT_S).run()
    at.switch_page("pages/artifacts.py").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Artifacts"]
