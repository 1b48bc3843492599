"""The retrain after review on the dashboard under streamlit's AppTest: the Experiments page's form (the
selected run as base, a decisions file by path, seeds; a bad file is an error and creates nothing), a
finished retrain's results there, and its tables on the Compare page (dataframes, never HTML)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from streamlit.testing.v1 import AppTest

import cartomap.experiments.launch
from cartomap import cli
from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.experiments.correction import DECISIONS_FILE, KIND
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore
from cartomap.training.loop import train_or_load

REPO = Path(__file__).resolve().parent.parent
MARKUP = "<b>**bold**</b>"  # a premise that must stay text


@pytest.fixture(scope="module")
def finished(tiny_model, tmp_path_factory):
    """A base run (60 pairs, one premise with markup) and its finished retrain with 1 seed."""
    folder = tmp_path_factory.mktemp("xr")
    cache = folder / "cache"
    demo = load_dataset(DataConfig(path="demo:dev"))
    frame = demo.frame.copy()
    frame.loc[200, "premise"] = MARKUP  # the first dev example
    demo = type(demo)(frame=frame, label_names=demo.label_names, source=demo.source)
    config = RunConfig(
        data=derived.save_dataset(demo.subset(np.arange(0, 60)), cache, name="train"),
        dev=derived.save_dataset(demo.subset(np.arange(200, 230)), cache, name="dev"),
        tests=(derived.save_dataset(demo.subset(np.arange(300, 330)), cache, name="test"),),
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(epochs=2, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0, record="none"),
        name="base",
    )
    run = train_or_load(config, RunStore(cache))
    examples = run.examples()
    names = run.label_names
    rows = [
        {"id": str(examples["id"][k]), "decision": decision, "label": names[(examples["label"][k] + 1) % 3]}
        for k, decision in enumerate(["relabel", "relabel", "remove", "keep"])
    ]
    decisions = folder / "decisions.parquet"
    pd.DataFrame(rows).to_parquet(decisions)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(
            ["--cache", str(cache), "retrain", run.id, "--decisions", str(decisions), "--seeds", "1"]
        )
    assert code == 0, out.getvalue()
    (exp,) = ExperimentStore(cache).list(KIND)
    dev = exp.result("changed")
    first = run.dev_examples().iloc[0]  # the premise with markup, shown as a changed prediction
    row = {"set": "dev", "seed": 0, "id": str(first["id"]), "premise": first["premise"]}
    row |= {"hypothesis": first["hypothesis"], "gold": "neutral", "before": "entailment", "after": "neutral"}
    exp.write_result(
        "changed", pd.concat([pd.DataFrame([row | {"change": "fixed"}]), dev], ignore_index=True)
    )
    return {"cache": cache, "run": run, "exp": exp, "decisions": decisions, "folder": folder}


@pytest.fixture()
def at_cache(finished, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(finished["cache"]))
    monkeypatch.syspath_prepend(str(REPO))
    return finished


@pytest.fixture()
def started(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(
        cartomap.experiments.launch,
        "start_experiment",
        lambda exp, store, executor=None, by=None: calls.append(exp) or exp,
    )
    return calls


def page(name: str) -> AppTest:
    return AppTest.from_file(str(REPO / "pages" / name), default_timeout=patience.WAIT_S)


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def selected(at: AppTest, run_id: str) -> AppTest:
    from pages.common import RUN_KEY

    at.session_state[RUN_KEY] = run_id
    return at


def test_without_a_selected_run_the_tab_asks_for_one(root):
    at = page("experiments.py").run()
    assert not at.exception and not errors(at)
    assert any("Select a finished run" in i.value for i in at.info)
    assert "xr_start" not in {b.key for b in at.button}


def test_a_bad_decisions_file_is_an_error_and_creates_nothing(at_cache, started, tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame([{"id": "no-such-id", "decision": "keep"}]).to_csv(bad, index=False)
    at = selected(page("experiments.py"), at_cache["run"].id).run()
    at.radio(key="_kept_xr_source").set_value("path").run()
    at.text_input(key="_kept_xr_path").set_value(str(bad)).run()
    before = len(ExperimentStore(at_cache["cache"]).list())
    at.button(key="xr_start").click().run()
    assert not at.exception
    assert any("line 2: field 'id': unknown id 'no-such-id'" in e for e in errors(at)), errors(at)
    assert len(ExperimentStore(at_cache["cache"]).list()) == before and started == []


def test_start_makes_the_experiment_with_the_run_the_file_and_the_seeds(at_cache, started):
    at = selected(page("experiments.py"), at_cache["run"].id).run()
    at.radio(key="_kept_xr_source").set_value("path").run()
    at.text_input(key="_kept_xr_path").set_value(str(at_cache["decisions"])).run()
    at.text_input(key="_kept_xr_seeds").set_value("5, 9").run()
    at.button(key="xr_start").click().run()
    assert not at.exception and not errors(at), errors(at)
    (exp,) = started
    assert exp.kind == KIND and exp.params["base_run"] == at_cache["run"].id
    assert exp.params["seeds"] == [at_cache["run"].config.train.seed, 5, 9]
    assert (exp.path / DECISIONS_FILE).exists()
    assert at.session_state["xr_selected"] == exp.id
    ExperimentStore(at_cache["cache"]).delete(exp.id)


def test_finished_retrain_shows_its_tables(at_cache):
    exp = at_cache["exp"]
    at = page("experiments.py")
    at.session_state["xr_selected"] = exp.id
    at.run()
    assert not at.exception and not errors(at)
    frames = [d.value for d in at.dataframe]
    means = next(f for f in frames if "training set" in f.columns and "dev" in f.columns)
    assert list(means["training set"]) == ["original", "pruned (queue dropped)", "corrected (review applied)"]
    assert at.get("download_button")
    shown = next(f for f in frames if "change" in f.columns and "before" in f.columns)
    assert len(shown) == len(exp.result("changed")) and shown["premise"].iloc[0] == MARKUP
    assert not any(MARKUP in (m.value or "") for m in at.markdown)


def test_compare_page_shows_the_retrain_side_by_side(at_cache):
    exp = at_cache["exp"]
    at = page("compare.py")
    at.session_state["cmp_exps"] = [exp.id]
    at.run()
    assert not at.exception, at.exception
    frames = [d.value for d in at.dataframe]
    means = next(f for f in frames if "training set" in f.columns and "dev" in f.columns)
    assert len(means) == 3
    assert next(f for f in frames if "still wrong" in f.columns)["set"].tolist() == ["dev", "test: test"]
    shown = next(f for f in frames if "change" in f.columns and "before" in f.columns)
    assert shown["premise"].iloc[0] == MARKUP  # dataset text in a dataframe, never as markdown
    assert not any(MARKUP in (m.value or "") for m in at.markdown)
