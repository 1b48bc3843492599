"""The Data map page under streamlit.testing (no browser), on a synthetic finished run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest

from cartomap.analysis import datamap as dm
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.io import atomic_write_parquet
from cartomap.runs.groups import list_groups
from cartomap.runs.store import Run, RunStore
from cartomap.scores.metrics import RegionRule, compute_metrics

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "data_map.py"


def make_run(cache: Path, epochs: int = 3, seed: int = 0, dev: bool = False) -> Run:
    """A finished run on the bundled demo dev set (400 pairs) with synthetic logits: no training. With
    ``dev``, the same pairs are its dev set, every one predicted right but the first 10 (the next class)."""
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(
        data=DataConfig(path="demo:dev"),
        dev=DataConfig(path="demo:dev") if dev else None,
        train=TrainConfig(epochs=epochs, record="train"),
        name="synthetic",
    )
    run = RunStore(cache).create(config, data, data if dev else None)
    if dev:
        from cartomap.io import atomic_write_json

        right = np.eye(data.num_labels, dtype=np.float32)[data.labels]
        right[:10] = np.eye(data.num_labels, dtype=np.float32)[(data.labels[:10] + 1) % data.num_labels]
        for e in range(epochs):
            run.write_epoch("dev", e, data.ids, right)
        history = [
            {"epoch": e + 1, "train_loss": 1.0 / (e + 1), "dev_accuracy": 0.975} for e in range(epochs)
        ]
        atomic_write_json(run.history_path, history)
    ids = data.ids
    labels = data.labels
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.8, 1.6, size=len(ids))  # how learnable each example is
    logits = []
    for e in range(epochs):
        z = rng.normal(0, 1.0, size=(len(ids), data.num_labels)).astype(np.float32)
        z[np.arange(len(ids)), labels] += skill * (e + 1) / epochs * 2.5
        run.write_epoch("train", e, ids, z)
        logits.append(z)
    metrics = compute_metrics(np.stack(logits), labels, ids)
    atomic_write_parquet(run.path / "metrics.parquet", metrics)
    run.set_status(state="done", progress=1.0)
    return run


@pytest.fixture()
def run(tmp_path, monkeypatch) -> Run:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    return make_run(cache)


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _table(at):
    """The selection table (the one with a 'premise' column)."""
    tables = [d.value for d in at.dataframe if "premise" in d.value.columns]
    return tables[0] if tables else None


def _selected_caption(at) -> str:
    return next(m.value for m in at.markdown if "selected**" in m.value)


def test_library_on_a_run(run):
    frame = dm.map_frame(run)
    assert len(frame) == 400 and {"premise", "hypothesis", "gold", "genre"} <= set(frame.columns)
    assert frame.attrs["n_epochs"] == 3 and set(frame["bucket"]) <= {"0/3", "1/3", "2/3", "3/3"}
    example = frame["id"].iloc[7]
    traj = dm.gold_trajectory(run, example)
    assert traj["epoch"].tolist() == [1, 2, 3]
    assert list(traj.columns) == [
        "epoch",
        "gold_prob",
        "prob_entailment",
        "prob_neutral",
        "prob_contradiction",
    ]
    # the same numbers as the full dynamics tensor
    ids, logits = run.dynamics()
    i = ids.index(example)
    from cartomap.scores.metrics import softmax

    probs = softmax(logits[:, i, :].astype(np.float64))
    gold = int(run.examples()["label"].iloc[i])
    assert np.allclose(traj["gold_prob"], probs[:, gold])
    assert traj["gold_prob"].mean() == pytest.approx(frame.set_index("id").loc[example, "confidence"])
    assert np.allclose(traj.iloc[:, 2:].sum(axis=1), 1.0)
    from cartomap.errors import RunError

    with pytest.raises(RunError):
        dm.gold_trajectory(run, "no-such-id")


def test_the_map_after_k_recordings_from_texts_already_read_is_the_same_map(run):
    """The epoch slider's maps take the texts of the run's whole map instead of reading them again."""
    whole = dm.map_frame(run)
    read = dm.map_frame(run, burn_out=2)
    reused = dm.map_frame(run, burn_out=2, dynamics=None, examples=whole)
    pd.testing.assert_frame_equal(reused, read)
    assert reused["confidence"].tolist() != whole["confidence"].tolist()  # the map of 2 of 3 recordings


def test_page_renders(run):
    at = _app().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Data map"]
    assert at.get("plotly_chart"), "no map drawn"
    assert _selected_caption(at).startswith("**0 selected**")
    assert _table(at) is None  # nothing selected yet
    assert at.session_state["selected_ids"] == []


def laid_out(at) -> list[str]:
    """The types of the main area's elements in the order the page lays them out (its containers walked
    depth first, the containers themselves left out; the map's picture, a Markdown image, as "picture")."""
    found = []

    def walk(node) -> None:
        for child in (getattr(node, "children", None) or {}).values():
            if getattr(child, "children", None):
                walk(child)
            elif child.type == "markdown" and str(child.value).startswith("![picture of the data map]"):
                found.append("picture")
            else:
                found.append(child.type)

    walk(at.main)
    return found


def assert_map_first(at, chart: str = "plotly_chart") -> None:
    """The page's title, then the map (after its picture on a session's first map, the picture's empty slot
    later): every control, caption and warning of the page comes after it."""
    order = laid_out(at)
    assert order[0] == "title", order
    after = [t for t in order[1:] if t not in ("picture", "empty")]
    assert after[0] == chart, order[:8]
    assert {"caption", "slider", "text_input"} & set(after[1:]), order  # the page's controls: under the map


def test_the_map_comes_first_under_the_title(run):
    """The map is the first thing under the title (a laptop's screen shows it whole,
    tests/test_browser_map_first.py): the slider over the recordings, the text search, the captions and the
    run summary are under it, also after an interaction and with the map split by gold label."""
    at = _app().run()
    assert not at.exception, at.exception
    assert_map_first(at)
    order = laid_out(at)
    assert order.index("slider") < order.index("text_input")  # the map's controls, in their order under it
    at.text_input(key="dm_search_query").set_value("the")
    at.button(key="dm_search_go").click().run()
    assert not at.exception and at.session_state["selected_ids"], at.exception
    assert_map_first(at)
    at.checkbox(key="_kept_dm_facet").check().run()
    assert not at.exception, at.exception
    assert_map_first(at)


def test_the_pages_regions_are_the_runs_regions(run):
    """By default the page draws the regions the run's metrics file (and the Neighbours page, and
    `cartomap map`) has: a third of the 400 examples ambiguous (133), not round(0.33 * 400) = 132."""
    at = _app().run()
    at.selectbox(key="_kept_dm_color").set_value("region").run()
    assert not at.exception, at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    shown = {
        t["name"].rsplit(" (", 1)[0]: int(t["name"].rsplit(" (", 1)[1].rstrip(")").replace(",", ""))
        for t in spec["data"]
        if t.get("type") == "scattergl" and t.get("customdata") is not None and " (" in t.get("name", "")
    }
    saved = run.metrics()["region"].value_counts().to_dict()
    assert shown == saved and shown["ambiguous"] == 133
    assert at.select_slider(key="_kept_dm_ambiguous_fraction").value == pytest.approx(1 / 3, abs=1e-15)


def test_region_rule_and_burn_out_are_shown_and_applied(run):
    at = _app().run()
    captions = " ".join(c.value for c in at.caption)
    default = RegionRule()  # the page opens on the default axis
    assert f"Regions: ambiguous = the 33% of examples with the highest {default.axis_label}" in captions
    assert "Metrics over 3 epochs" in captions
    frame = dm.map_frame(run)
    assert (frame["region"] == "ambiguous").sum() == 133  # round(400 / 3)
    at.radio(key="_kept_dm_region_rule_pair").set_value("threshold").run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    by_threshold = RegionRule(method="threshold")  # the default axis's own cut
    assert f"Regions: ambiguous = {by_threshold.axis_label} ≥ {by_threshold.ambiguous_var:g}" in captions
    at.selectbox(key="_kept_dm_axis").set_value("variability").run()  # Cartography's map
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "Regions: ambiguous = variability ≥ 0.2" in captions
    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(2).run()
    assert not at.exception
    assert "Metrics over the first 2 of 3 epochs" in " ".join(c.value for c in at.caption)
    import json

    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t["name"].split(" (")[0] for t in spec["data"] if t.get("type") == "scattergl"]
    assert names and set(names) <= {"0/2", "1/2", "2/2"}  # the legend counts the 2 epochs used


def test_injected_selection_fills_table_and_filters_change_it(run):
    frame = dm.map_frame(run)
    picked = frame["id"].iloc[:40].tolist()
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    assert not at.exception, at.exception
    table = _table(at)
    assert table is not None and sorted(table["id"]) == sorted(picked)
    axis = RegionRule().axis  # the map's default axis leads, before variability when it is another score
    leading = [
        "gold",
        "predicted",
        "confidence",
        *([axis] if axis != "variability" else []),
        "variability",
        "region",
        "premise",
        "hypothesis",
        "id",
    ]
    assert list(table.columns[: len(leading)]) == leading
    assert _selected_caption(at).startswith("**40 selected**")

    # a label filter shrinks the table; the selection itself is kept
    labels = at.multiselect(key="_kept_dm_labels")
    labels.set_value(["neutral"]).run()
    assert not at.exception, at.exception
    table = _table(at)
    expected = frame[frame["id"].isin(picked) & (frame["gold"] == "neutral")]
    assert 0 < len(expected) < 40
    assert sorted(table["id"]) == sorted(expected["id"])
    assert at.session_state["selected_ids"] == picked

    # a confidence range narrows it further
    at.slider(key="_kept_dm_conf").set_value((0.5, 1.0)).run()
    table = _table(at)
    expected = expected[expected["confidence"] >= 0.5]
    got = [] if table is None else sorted(table["id"])
    assert got == sorted(expected["id"])

    # reset brings the whole selection back
    at.button(key="dm_reset").click().run()
    assert sorted(_table(at)["id"]) == sorted(picked)

    # a single row focuses that example: its trajectory is drawn
    at.session_state["selected_ids"] = picked[:1]
    at.run()
    assert not at.exception, at.exception
    assert any(picked[0] in t.value for t in at.text)
    assert len(at.get("plotly_chart")) == 2, "no trajectory chart"


def _spec(at, k: int = 0) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[k].proto.spec)


def _numbers(v) -> list:
    """A trace's array from the figure's JSON (plotly writes numeric arrays as base64 ``bdata``)."""
    import base64

    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def _marginals(at) -> dict[str, list[int]]:
    """{trace name: count of each bar} of the map's marginal histograms (from the hover texts)."""
    return {
        t["name"]: [int(h.split(" ")[0].replace(",", "")) for h in t["hovertext"]]
        for t in _spec(at)["data"]
        if t.get("type") == "bar"
    }


def test_the_histograms_show_the_selection_from_session_state(run):
    frame = dm.map_frame(run)
    x = RegionRule().axis_label  # the top histogram: the map's default axis
    at = _app().run()
    assert set(_marginals(at)) == {f"{x}: all examples", "confidence: all examples"}
    # a selection made elsewhere (a lasso, a group, the Neighbours page's 2-D view): the shared state
    picked = frame.sort_values("confidence")["id"].iloc[:40].tolist()  # the 40 least confident
    at.session_state["selected_ids"] = picked
    at.run()
    assert not at.exception, at.exception
    hists = _marginals(at)
    assert sum(hists[f"{x}: all examples"]) == 400
    conf = hists["confidence: selected (40)"]
    assert sum(conf) == 40 and sum(hists[f"{x}: selected (40)"]) == 40
    # the 40 least confident sit in the lowest confidence bins: the first bins of the selection's histogram
    low = frame["confidence"].nsmallest(40).max()
    edges = np.histogram_bin_edges(frame["confidence"], bins=40)
    assert sum(conf[: int(np.searchsorted(edges, low, side="right"))]) == 40
    # under a label filter the histograms count the filtered examples, the selection's part of them
    at.multiselect(key="_kept_dm_labels").set_value(["neutral"]).run()
    hists = _marginals(at)
    neutral = frame[frame["gold"] == "neutral"]
    n_sel = int(neutral["id"].isin(picked).sum())
    assert sum(hists["confidence: all examples"]) == len(neutral)
    assert sum(hists[f"confidence: selected ({n_sel})"]) == n_sel
    # cleared: the whole distribution only
    at.button(key="dm_clear").click().run()
    assert set(_marginals(at)) == {f"{x}: all examples", "confidence: all examples"}


def test_ids_of_another_run_are_counted_with_and_without_filters(run):
    frame = dm.map_frame(run)
    picked = frame["id"].iloc[:5].tolist() + ["elsewhere-1", "elsewhere-2"]
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    assert _selected_caption(at).startswith("**7 selected** · 5 shown")
    assert any("2 selected ids are not examples of this run" in c.value for c in at.caption)
    neutral = int((frame["gold"].iloc[:5] == "neutral").sum())
    at.multiselect(key="_kept_dm_labels").set_value(["neutral"]).run()
    assert _selected_caption(at).startswith(f"**7 selected** · {neutral} shown")
    assert any("2 selected ids are not examples of this run" in c.value for c in at.caption)


def test_every_colouring_renders_and_a_run_without_votes_offers_no_human_agreement(run):
    at = _app().run()
    colour = at.selectbox(key="_kept_dm_color")
    options = list(colour.options)
    assert options[:3] == ["correctness", "label", "region"]
    assert {"AUM", "EL2N", "forgetfulness", "detector: forgetting events"} <= set(options)
    assert not {"human entropy", "gold vs majority", "seed spread", "region agreement"} & set(options)
    for name in options:
        at.selectbox(key="_kept_dm_color").set_value(name).run()
        assert not at.exception, (name, at.exception)
        spec = _spec(at)
        assert spec["layout"]["meta"]["color_by"] == name
        scales = [t for t in spec["data"] if t.get("type") == "scattergl" and t["marker"].get("showscale")]
        assert bool(scales) == (name not in ("correctness", "label", "region", "genre")), name


def test_split_by_gold_label(run):
    at = _app().run()
    at.checkbox(key="_kept_dm_facet").check().run()
    assert not at.exception, at.exception
    spec = _spec(at)
    assert spec["layout"]["meta"]["facets"] == ["entailment", "neutral", "contradiction"]
    frame = dm.map_frame(run)
    drawn = {t["xaxis"]: set(t["customdata"]) for t in spec["data"] if t.get("type") == "scattergl"}
    assert drawn["x2"] <= set(frame.loc[frame["gold"] == "neutral", "id"])
    # a box on the neutral panel selects neutral examples only
    at.session_state["datamap_facets"] = {
        "selection": {
            "points": [],
            "box": [{"xref": "x2", "yref": "y2", "x": [0, 1], "y": [0, 1]}],
            "lasso": [],
        }
    }
    at.run()
    assert not at.exception, at.exception
    chosen = set(at.session_state["selected_ids"])
    assert chosen and chosen <= set(frame.loc[frame["gold"] == "neutral", "id"])


def test_run_summary_with_the_dev_confusion_matrix(tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT))
    run = make_run(tmp_path / "cache", dev=True)
    at = _app().run()
    assert not at.exception, at.exception
    facts = dict(next(d.value for d in at.dataframe if list(d.value.columns) == ["what", "value"]).to_numpy())
    assert facts["epochs"] == "3 of 3" and facts["seeds"] == "1" and facts["recording"] == "train"
    assert facts["dev accuracy, last epoch"] == "97.5%" and facts["dev accuracy, best epoch (1)"] == "97.5%"
    assert facts["regions"].startswith("ambiguous = the 33% of examples")
    line = "Run: 3/3 epochs · dev accuracy 97.5% last, 97.5% best (epoch 1) · 1 seed · recorded: train."
    assert line in [c.value for c in at.caption]
    confusion = next(d.value for d in at.dataframe if "predicted neutral" in d.value.columns)
    labels = np.asarray(run.dev_examples()["label"])
    assert int(np.trace(confusion.to_numpy())) == len(labels) - 10
    assert int(confusion.to_numpy().sum()) == len(labels)


def test_training_curves_close_the_page_and_the_map_stays_its_first_chart(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    make_run(cache, dev=True)  # a history: train loss 1, 1/2, 1/3 and dev accuracy 0.975 by epoch
    at = _app().run()
    assert not at.exception, at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert "n_total" in charts[0]["layout"]["meta"]  # the data map
    curves = charts[-1]
    assert [a["text"] for a in curves["layout"]["annotations"]] == ["loss", "accuracy"]
    loss = next(t for t in curves["data"] if t["name"] == "train loss")
    assert _numbers(loss["y"]) == pytest.approx([1.0, 0.5, 1 / 3])
    assert at.main.expander[-1].label == "Training curves"  # the sidebar has its own


def test_a_run_without_a_history_has_no_training_curves(run):
    at = _app().run()
    assert "Training curves" not in [e.label for e in at.expander]
    assert len(at.get("plotly_chart")) == 1


def test_run_summary_without_a_dev_set(run):
    at = _app().run()
    assert not at.exception, at.exception
    assert "No dev set: no confusion matrix." in " ".join(c.value for c in at.caption)


def test_a_row_click_opens_that_example(run):
    frame = dm.map_frame(run)
    picked = frame["id"].iloc[:12].tolist()
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    assert not at.exception, at.exception
    assert any("Click a row" in c.value for c in at.caption)
    table = _table(at)
    import hashlib

    key = "dm_table_" + hashlib.sha1("\n".join(table["id"]).encode("utf-8")).hexdigest()[:10]  # the page's
    at.session_state[key] = {"selection": {"rows": [3], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    chosen = table["id"].iloc[3]
    assert at.session_state["dm_focus"] == chosen
    panel = [t.value for t in at.text]
    assert any(v.startswith(f"id: {chosen}\n") for v in panel)
    row = frame.set_index("id").loc[chosen]
    assert f"premise: {row['premise']}" in panel  # the whole text, as text
    assert len(at.get("plotly_chart")) == 2, "no probability-by-epoch chart"


def test_the_focused_example_shows_its_neighbours_when_embeddings_exist(run):
    from cartomap.training.embeddings import save_embeddings

    frame = dm.map_frame(run)
    at = _app()
    at.session_state["selected_ids"] = frame["id"].iloc[:1].tolist()
    at.run()
    assert not [d for d in at.dataframe if "similarity" in d.value.columns]  # none computed
    ids = run.examples(columns=["id"])["id"].astype(str).tolist()
    vectors = np.random.default_rng(0).normal(size=(len(ids), 8))
    save_embeddings(run, ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    at.run()
    assert not at.exception, at.exception
    assert any("Nearest neighbours" in m.value for m in at.markdown)
    group = next(d.value for d in at.dataframe if "similarity" in d.value.columns)
    assert group["id"].iloc[-1] == frame["id"].iloc[0] and len(group) == 5
    assert set(group["label"]) == {frame["gold"].iloc[0]}  # labelled by name


def test_save_group(run):
    frame = dm.map_frame(run)
    picked = frame["id"].iloc[10:25].tolist()
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    at.text_input(key="dm_group_name").input("odd ones")
    at.button[[b.label for b in at.button].index("Save 15 examples")].click().run()
    assert not at.exception, at.exception
    groups = list_groups(run)
    assert [g["name"] for g in groups] == ["odd ones"] and sorted(groups[0]["ids"]) == sorted(picked)
    assert any("Saved group" in s.value for s in at.success)

    # the same name again is an error unless "replace" is ticked
    at.session_state["selected_ids"] = picked[:5]
    at.run()
    at.text_input(key="dm_group_name").input("odd ones")
    at.button[[b.label for b in at.button].index("Save 5 examples")].click().run()
    assert any("exists already" in e.value for e in at.error)
    assert len(list_groups(run)[0]["ids"]) == 15
    at.checkbox(key="dm_group_replace").check()
    at.button[[b.label for b in at.button].index("Save 5 examples")].click().run()
    assert not at.exception, at.exception
    assert sorted(list_groups(run)[0]["ids"]) == sorted(picked[:5])

    # a saved group can be shown on the map again
    at.session_state["selected_ids"] = []
    at.run()
    at.button(key="dm_group_show").click().run()
    assert sorted(at.session_state["selected_ids"]) == sorted(picked[:5])


def test_no_run_offers_demo(tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "empty"))
    monkeypatch.syspath_prepend(str(ROOT))
    at = _app().run()
    assert not at.exception, at.exception
    assert any(b.label == "Train the demo" for b in at.button)
    assert not at.get("plotly_chart")


# --------------------------------------------------------------------------- maps over seeds


def make_seed_runs(cache: Path, seeds=(42, 43, 44), epochs: int = 3) -> dict[int, Run]:
    """Finished synthetic runs of one config that differ only in the seed: a shared per-example skill
    plus noise of each seed's own (no training)."""
    data = load_dataset(DataConfig(path="demo:dev"))
    skill = np.random.default_rng(0).normal(0.8, 1.6, size=len(data.ids))
    runs = {}
    for seed in seeds:
        config = RunConfig(
            data=DataConfig(path="demo:dev"),
            dev=None,
            train=TrainConfig(epochs=epochs, seed=seed, record="train"),
            name="base",
        )
        run = RunStore(cache).create(config, data, None)
        rng = np.random.default_rng(seed)
        logits = []
        for e in range(epochs):
            z = rng.normal(0, 1.0, size=(len(data.ids), data.num_labels)).astype(np.float32)
            z[np.arange(len(data.ids)), data.labels] += skill * (e + 1) / epochs * 2.5
            run.write_epoch("train", e, data.ids, z)
            logits.append(z)
        atomic_write_parquet(
            run.path / "metrics.parquet", compute_metrics(np.stack(logits), data.labels, data.ids)
        )
        run.set_status(state="done", progress=1.0)
        runs[seed] = run
    return runs


def finish_seeds(cache: Path, runs: dict[int, Run]):
    """A done seeds experiment of the first run over the others (their runs recorded by hand)."""
    from cartomap.experiments.registry import kind_of
    from cartomap.experiments.seeds import create_seeds, role
    from cartomap.experiments.store import ExperimentStore

    estore = ExperimentStore(cache)
    seeds = list(runs)
    exp = create_seeds(estore, runs[seeds[0]], seeds=seeds[1:])
    for seed in seeds[1:]:
        exp.record_run(role(seed), runs[seed].id)
    kind_of("seeds").finalize(exp, estore.runs)
    exp.set_status(state="done")
    return exp


@pytest.fixture()
def seeded(root) -> tuple[dict[int, Run], object]:
    runs = make_seed_runs(root)
    return runs, finish_seeds(root, runs)


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def _count(at) -> int:
    text = next(c.value for c in at.caption if "match the filters" in c.value)
    return int(text.split(" · ")[1].split(" ")[0].replace(",", ""))


def test_a_run_with_seeds_shows_the_mean_map(seeded):
    runs, exp = seeded
    table = exp.result("per_example")
    from pages.common import RUN_KEY

    at = _app()
    at.session_state[RUN_KEY] = runs[42].id  # the base run (the others are newer)
    at.session_state["selected_ids"] = [table["id"].iloc[5]]
    at.run()
    assert not at.exception, at.exception
    toggle = at.toggle(key=f"_kept_dm_seeds_mean_{runs[42].id}")
    assert toggle.label == "Map of 3 seeds (means)" and toggle.value is True
    captions = _captions(at)
    assert "Over 3 seeds: variability Spearman between seeds" in captions
    assert "the mean of 3 seeds" in captions
    assert "Add seeds" not in [b.label for b in at.button]
    assert _count(at) == 400
    # the focused example: one probability line per seed and their mean
    import json

    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    names = {t.get("name") for spec in charts for t in spec["data"]}
    assert {"seed 42", "seed 43", "seed 44"} <= names
    # stable only: the examples in the same region in every seed
    at.checkbox(key="_kept_dm_stable_only").check().run()
    assert not at.exception, at.exception
    stable = int(table["stable"].sum())
    assert 0 < stable < 400 and _count(at) == stable
    # colour by region agreement
    at.selectbox(key="_kept_dm_color").set_value("region agreement").run()
    assert not at.exception, at.exception
    for name in ("seed agreement", "seed spread", "detector: spread of confidence over seeds"):
        at.selectbox(key="_kept_dm_color").set_value(name).run()
        assert not at.exception, (name, at.exception)
        assert _spec(at)["layout"]["meta"]["color_by"] == name
    # the toggle off: the run's own map again (every example)
    at.checkbox(key="_kept_dm_stable_only").uncheck().run()
    at.toggle(key=f"_kept_dm_seeds_mean_{runs[42].id}").set_value(False).run()
    assert not at.exception, at.exception
    assert "the mean of" not in _captions(at) and _count(at) == 400


def test_a_run_without_seeds_says_how_stable_such_maps_are_and_adds_seeds(root, spawned):
    from cartomap.experiments.seeds import seeds_of
    from cartomap.experiments.store import ExperimentStore

    runs = make_seed_runs(root, seeds=(42,))
    at = _app().run()
    assert not at.exception, at.exception
    captions = _captions(at)
    # the study's figures for a training-pass map on the map's axis (docs/stability.md), both datasets
    from cartomap.analysis.stability_reference import measured_stability
    from cartomap.scores import ambiguity
    from cartomap.scores.metrics import DEFAULT_AXIS

    row = measured_stability(runs[42].config.train)
    assert row["record"] == "train"
    snli, mnli = (row["figures"][d]["axes"][DEFAULT_AXIS] for d in ("SNLI", "MultiNLI"))
    label = ambiguity.get(DEFAULT_AXIS).label
    assert f"{label} with Spearman {snli['spearman']:.2f} / {mnli['spearman']:.2f}" in captions
    assert (
        f"{snli['same_in_all_seeds']:.0%} / {mnli['same_in_all_seeds']:.0%} were in the same region"
        in captions
    )
    assert not at.toggle
    button = next(b for b in at.button if b.label == "Add seeds")
    button.click().run()
    assert not at.exception, at.exception
    exp = seeds_of(runs[42], ExperimentStore(root))
    assert exp is not None and exp.params["seeds"] == [42, 43, 44]
    assert spawned == [["experiment", "run", exp.id, "--job"]]
    assert "Add seeds" not in [b.label for b in at.button]  # the job panel follows it instead


def test_runs_of_other_seeds_are_offered_as_a_mean_map_without_training(root, spawned):
    from cartomap.experiments.seeds import seeds_of
    from cartomap.experiments.store import ExperimentStore
    from pages.common import RUN_KEY

    runs = make_seed_runs(root, seeds=(42, 43))
    at = _app()
    at.session_state[RUN_KEY] = runs[42].id
    at.run()
    assert not at.exception, at.exception
    assert "2 finished runs are this run with another seed (42, 43)" in _captions(at)
    next(b for b in at.button if b.label == "Map these 2 seeds").click().run()
    assert not at.exception, at.exception
    exp = seeds_of(runs[42], ExperimentStore(root))
    assert exp.run_ids() == {"seed42": runs[42].id, "seed43": runs[43].id}
    assert spawned == [["experiment", "run", exp.id, "--job"]]


HOSTILE = "![g](https://example.invalid/g.png) **grp**"


def test_group_names_are_not_rendered_as_markdown(run):
    """A group name from a shared store is shown as written: no remote image, no emphasis."""
    frame = dm.map_frame(run)
    at = _app()
    at.session_state["selected_ids"] = frame["id"].iloc[:3].tolist()
    at.run()
    at.text_input(key="dm_group_name").input(HOSTILE)
    at.button[[b.label for b in at.button].index("Save 3 examples")].click().run()
    assert not at.exception, at.exception
    assert [g["name"] for g in list_groups(run)] == [HOSTILE]
    body = " ".join(s.value for s in at.success)
    assert "Saved group" in body and "![" not in body and "**grp**" not in body
    assert "https://example.invalid/g.png" in body  # the text is kept, escaped
    at.button[[b.label for b in at.button].index("Save 3 examples")].click().run()
    body = " ".join(e.value for e in at.error)
    assert "exists already" in body and "![" not in body and "**grp**" not in body


def test_example_filters_do_not_carry_over_to_another_run(run, tmp_path):
    other = make_run(tmp_path / "cache", epochs=4, seed=1)
    assert other.id != run.id
    at = _app()
    at.session_state["run_id"] = run.id
    at.run()
    at.multiselect(key="_kept_dm_regions").set_value(["ambiguous"]).run()
    at.slider(key="_kept_dm_conf").set_value((0.5, 1.0)).run()
    at.selectbox(key="_kept_dm_color").set_value("region").run()
    assert not at.exception, at.exception
    assert at.multiselect(key="_kept_dm_regions").value == ["ambiguous"]

    at.session_state["run_id"] = other.id  # another run picked in the sidebar
    at.run()
    assert not at.exception, at.exception
    assert at.multiselect(key="_kept_dm_regions").value == ["easy-to-learn", "ambiguous", "hard-to-learn"]
    assert tuple(at.slider(key="_kept_dm_conf").value) == (0.0, 1.0)
    assert at.selectbox(key="_kept_dm_color").value == "region"  # a display setting stays
    assert "4 epochs" in " ".join(c.value for c in at.caption)

    # the same run again: its filters are kept
    at.multiselect(key="_kept_dm_regions").set_value(["hard-to-learn"]).run()
    at.run()
    assert at.multiselect(key="_kept_dm_regions").value == ["hard-to-learn"]


def test_counts_of_one_are_singular(run):
    from cartomap.runs.groups import save_group_table

    frame = dm.map_frame(run)
    one = frame["id"].iloc[:1].tolist()
    save_group_table(run, [{"name": "auto-x", "ids": one, "source": "auto", "note": "", "created_at": 0.0}])
    at = _app()
    at.session_state["selected_ids"] = one
    at.run()
    assert not at.exception, at.exception
    assert "Save 1 example" in [b.label for b in at.button]
    captions = " ".join(c.value for c in at.caption)
    assert "1 automatic group (WaNLI seeds and neighbours) is on the Prompts page" in captions
    assert "1 automatic groups" not in captions


def _map_slot(at) -> list:
    """The elements of the map's slot (``pages/components/map_chart.py``'s ``MAP_SLOT``): [picture or empty, chart]."""

    def blocks(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from blocks(child)

    slot = next(b for b in blocks(at.main) if "dm_map_slot" in getattr(getattr(b, "proto", None), "id", ""))
    return list(slot.children.values())


def _picture(element) -> bytes | None:
    """The PNG a slot's picture shows (a Markdown image of a data URL), None when the element is no picture."""
    import base64

    body = getattr(element, "value", None) if getattr(element, "type", None) == "markdown" else None
    head = "![picture of the data map](data:image/png;base64,"
    if not body or not body.startswith(head):
        return None
    assert body.endswith(")") and not getattr(element.proto, "allow_html", False)  # Markdown, not HTML
    return base64.b64decode(body[len(head) : -1])


def _same_pixels(png: bytes, fig) -> bool:
    import io

    from PIL import Image

    from cartomap.analysis import preview

    drawn = Image.open(io.BytesIO(preview.figure_png(fig, palette=True)))
    return np.array_equal(np.asarray(Image.open(io.BytesIO(png))), np.asarray(drawn))


def test_a_sessions_first_map_comes_with_its_picture_and_later_runs_without(run):
    """The picture sent before the chart is the chart's own figure drawn (cartomap.analysis.preview), once
    per session: a rerun sends the chart alone, in the same place."""
    import plotly.graph_objects as go

    at = _app().run()
    assert not at.exception, at.exception
    first, chart = _map_slot(at)
    png = _picture(first)
    assert _same_pixels(png, go.Figure(json.loads(chart.proto.spec)))  # the chart's own map
    at.run()
    elements = _map_slot(at)
    assert _picture(elements[0]) is None and elements[-1].type == "plotly_chart"
    assert len(elements) == 2 and "n_total" in json.loads(elements[-1].proto.spec)["layout"]["meta"]


def test_the_first_map_with_a_selection_is_pictured_with_its_rings(run):
    """A session that opens the page with a selection (another page set it) gets the picture of that
    map, rings and all, not the plain map's kept picture."""
    import plotly.graph_objects as go

    ids = dm.map_frame(run)["id"].head(30).tolist()
    at = _app()
    at.session_state["selected_ids"] = ids
    at.run()
    assert not at.exception, at.exception
    first, chart = _map_slot(at)
    spec = json.loads(chart.proto.spec)
    assert any(t["name"].startswith("selected (30)") for t in spec["data"] if t.get("name"))
    assert _same_pixels(_picture(first), go.Figure(spec))


def test_the_map_split_by_gold_label_comes_without_a_picture(run):
    """Small multiples are not pictured (a session kept the setting from another visit)."""
    at = _app()
    at.session_state["dm_facet"] = True
    at.run()
    assert not at.exception, at.exception
    elements = _map_slot(at)
    assert "facets" in json.loads(elements[-1].proto.spec)["layout"]["meta"]
    assert _picture(elements[0]) is None


def test_a_picture_that_cannot_be_drawn_leaves_the_chart(run, monkeypatch):
    """The picture only comes before the chart: when it fails, the page draws the chart as before."""
    from cartomap.analysis import preview

    def broken(*args, **kwargs):
        raise ValueError("no room")

    monkeypatch.setattr(preview, "figure_png", broken)
    at = _app().run()
    assert not at.exception, at.exception
    elements = _map_slot(at)
    assert _picture(elements[0]) is None and elements[-1].type == "plotly_chart"


def test_the_focused_examples_neighbours_are_labelled_by_name(run):
    """The table of the focused example's same-label neighbours names each label; no integer code beside."""
    from cartomap.training.embeddings import save_embeddings

    ids = run.examples()["id"].astype(str).tolist()
    emb = np.random.default_rng(0).normal(size=(len(ids), 8)).astype(np.float32)
    save_embeddings(run, ids, emb)
    at = _app()
    at.session_state["selected_ids"] = ids[:1]
    at.run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "role" in d.value.columns)
    assert "label_name" not in table.columns and table["id"].iloc[-1] == ids[0]
    assert set(table["label"]) == {run.label_names[int(run.examples()["label"].iloc[0])]}


def test_switching_the_ambiguity_axis_redraws_the_map_and_its_regions(run):
    """The sidebar's axis picker: the map's x axis, its title and hover, the regions' rule and the axis's
    range filter follow the score picked; Cartography's variability stays one click away."""
    import json

    from cartomap.scores.metrics import RegionRule

    at = _app().run()
    assert not at.exception, at.exception
    picker = at.selectbox(key="_kept_dm_axis")
    assert set(picker.options) >= {
        "variability (Dataset Cartography's map)"
        + (" · default" if RegionRule().axis == "variability" else ""),
    } or any(o.startswith("variability (Dataset Cartography's map)") for o in picker.options)
    picker.set_value("mean_entropy").run()
    assert not at.exception, at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "the 33% of examples with the highest mean entropy" in captions and "x = mean entropy" in captions
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["xaxis"]["title"]["text"] == "mean entropy"
    frame = dm.map_frame(run, regions=RegionRule(axis="mean_entropy"))
    points = [t for t in spec["data"] if t.get("type") == "scattergl" and t.get("customdata") is not None]
    xs = {i: x for t in points for i, x in zip(_numbers(t["customdata"]), _numbers(t["x"]), strict=True)}
    some = frame["id"].iloc[0]
    assert xs[some] == pytest.approx(float(frame["mean_entropy"].iloc[0]), abs=1e-6)
    assert any(s.label == "Mean entropy" for s in at.slider)  # the range filter is on the axis
    at.selectbox(key="_kept_dm_axis").set_value("variability").run()  # the tree of the last run
    assert not at.exception
    assert "highest variability" in " ".join(c.value for c in at.caption)
