"""The Neighbours page under streamlit.testing (no browser), on a synthetic finished run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import patience
import pytest

from cartomap.analysis.neighbours import same_label_neighbors
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.io import atomic_write_parquet
from cartomap.runs.groups import list_groups, save_group
from cartomap.runs.store import Run, RunStore
from cartomap.runs.tasks import task_status
from cartomap.scores.metrics import compute_metrics
from cartomap.training.embeddings import save_embeddings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "neighbours.py"


def make_run(cache: Path, embeddings: bool = True) -> Run:
    """A finished run on the demo dev set (400 pairs): synthetic logits, metrics and random embeddings."""
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=3), name="nb")
    run = RunStore(cache).create(config, data, None)
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 1.5, size=(3, len(data), data.num_labels)).astype(np.float32)
    atomic_write_parquet(run.path / "metrics.parquet", compute_metrics(logits, data.labels, data.ids))
    run.set_status(state="done", progress=1.0)
    if embeddings:
        emb = rng.normal(size=(len(data), 16)).astype(np.float32)
        save_embeddings(run, data.ids, emb / np.linalg.norm(emb, axis=1, keepdims=True))
    return run


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    return tmp_path / "cache"


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _table(at):
    tables = [d.value for d in at.dataframe if "similarity" in d.value.columns]
    return tables[0] if tables else None


def _expected_group(run: Run, seed: str, k: int) -> list[str]:
    data = run.examples()
    ids = data["id"].astype(str).tolist()
    emb = np.load(run.path / "embeddings.npy")
    idx, _ = same_label_neighbors(emb, data["label"].to_numpy(), k=k, query_idx=[ids.index(seed)])
    return [ids[i] for i in idx[0][::-1]] + [seed]


def test_page_renders_ambiguous_seed(env):
    run = make_run(env)
    at = _app().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Nearest neighbours"]
    assert at.radio(key="_kept_nb_source").value == "Most ambiguous per label"
    table = _table(at)
    assert table is not None and len(table) == 5
    assert table["role"].tolist() == ["neighbour"] * 4 + ["seed"]
    seed = at.selectbox(key="_kept_nb_seed").value
    assert table["id"].tolist() == _expected_group(run, seed, 4)
    # labels by name only: the integer code is not a column of the table
    assert "label_name" not in table.columns and set(table["label"]) <= set(run.label_names)
    assert (table["label"] == table["label"].iloc[-1]).all()
    assert at.get("plotly_chart"), "no 2-D map drawn"
    assert (run.path / "projection_pca.npy").exists()


def test_seed_picker_and_k_change_the_table(env):
    run = make_run(env)
    at = _app().run()
    picker = at.selectbox(key="_kept_nb_seed")
    first = _table(at)["id"].tolist()
    other = picker.options[3].split(" · ")[0]  # options are shown formatted: id · label · texts
    picker.set_value(other).run()
    assert not at.exception, at.exception
    table = _table(at)
    assert table["id"].iloc[-1] == other and table["id"].tolist() != first
    assert table["id"].tolist() == _expected_group(run, other, 4)
    at.slider(key="_kept_nb_k").set_value(7).run()
    assert len(_table(at)) == 8
    assert _table(at)["id"].tolist() == _expected_group(run, other, 7)


def test_injected_selection_is_the_seed_source(env):
    run = make_run(env)
    ids = run.examples()["id"].astype(str).tolist()
    picked = [ids[17], ids[250], ids[3]]
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    assert not at.exception, at.exception
    assert at.radio(key="_kept_nb_source").value == "Current selection"
    picker = at.selectbox(key="_kept_nb_seed")
    assert [o.split(" · ")[0] for o in picker.options] == picked and picker.value == picked[0]
    assert _table(at)["id"].tolist() == _expected_group(run, picked[0], 4)
    picker.set_value(picked[1]).run()
    assert _table(at)["id"].iloc[-1] == picked[1]


def test_saved_group_source_and_save(env):
    run = make_run(env)
    ids = run.examples()["id"].astype(str).tolist()
    save_group(run, "three", [ids[5], ids[6], ids[7]], source="data map")
    at = _app().run()
    at.radio(key="_kept_nb_source").set_value("A saved group").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="_kept_nb_seed").value == ids[5]
    group = _table(at)["id"].tolist()

    at.text_input(key="nb_group_name").input("my group")
    at.button[[b.label for b in at.button].index("Save 5 examples")].click().run()
    assert not at.exception, at.exception
    saved = {g["name"]: g for g in list_groups(run)}
    assert saved["my group"]["ids"] == group and saved["my group"]["source"] == "neighbours"
    assert saved["my group"]["seed"] == ids[5]

    # the same name again is an error unless "replace" is ticked
    at.slider(key="_kept_nb_k").set_value(2).run()
    at.text_input(key="nb_group_name").input("my group")
    at.button[[b.label for b in at.button].index("Save 3 examples")].click().run()
    assert any("exists already" in e.value for e in at.error)
    assert len({g["name"]: g for g in list_groups(run)}["my group"]["ids"]) == 5
    at.checkbox(key="nb_group_replace").check()
    at.button[[b.label for b in at.button].index("Save 3 examples")].click().run()
    assert not at.exception, at.exception
    assert len({g["name"]: g for g in list_groups(run)}["my group"]["ids"]) == 3


def test_no_embeddings_offers_the_job(env, monkeypatch):
    import cartomap.analysis.projection
    import cartomap.runs.jobs

    run = make_run(env, embeddings=False)
    run.model_dir.mkdir()
    (run.model_dir / "config.json").write_text("{}")  # a final model to embed with (never loaded here)
    started = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None: started.append(args) or os.getpid()
    )
    at = _app().run()
    assert not at.exception, at.exception
    assert not at.get("plotly_chart") and _table(at) is None
    button = next(b for b in at.button if b.label == "Compute embeddings")
    button.click().run()
    assert not at.exception, at.exception
    assert started == [["embed", run.id, "--quiet"]]
    assert task_status(run, "embeddings")["state"] == "queued"
    assert not any(b.label == "Compute embeddings" for b in at.button)  # progress shown instead
    assert at.get("progress")


def test_a_run_recorded_without_its_weights_says_why_instead_of_offering_the_job(env, monkeypatch, capsys):
    """A recorder run has logits but no model: the page names the reason and the command that embeds it
    with a model folder; `cartomap embed` refuses with the same line (rc 2) before starting anything."""
    import cartomap.runs.jobs
    from cartomap.cli import main
    from cartomap.integrations.recorder import DynamicsRecorder

    data = load_dataset(DataConfig(path="demo:dev")).frame.head(20)
    recorder = DynamicsRecorder(
        data["id"].tolist(),
        data["label"].tolist(),
        list(zip(data["premise"], data["hypothesis"], strict=True)),
        label_names=("entailment", "neutral", "contradiction"),
        store=env,
    )
    rng = np.random.default_rng(0)
    for epoch in range(2):
        recorder(epoch, data["id"].tolist(), rng.normal(size=(20, 3)))
    run = recorder.close()
    started = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None: started.append(args) or os.getpid()
    )
    at = _app().run()
    assert not at.exception, at.exception
    assert not any(b.label == "Compute embeddings" for b in at.button)
    (warning,) = [w.value for w in at.warning]
    assert "recorded outside cartomap by a DynamicsRecorder" in warning
    assert f"cartomap embed {run.id} --model PATH" in warning
    assert started == []

    capsys.readouterr()
    assert main(["--cache", str(env), "embed", run.id, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cartomap embed {run.id} --model PATH" in err
    assert task_status(run, "embeddings") is None  # nothing started, nothing half-written
    assert main(["--cache", str(env), "embed", run.id, "--model", str(env / "nowhere")]) == 2
    assert "not a saved model folder" in capsys.readouterr().err


def test_umap_on_request(env, monkeypatch):
    import cartomap.analysis.projection
    import cartomap.runs.jobs

    run = make_run(env)
    started = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None: started.append(args) or os.getpid()
    )
    at = _app().run()
    at.radio(key="_kept_nb_proj").set_value("UMAP").run()
    assert not at.exception, at.exception
    assert at.get("plotly_chart")  # PCA meanwhile
    next(b for b in at.button if b.label == "Compute UMAP").click().run()
    assert started == [["project", run.id, "--method", "umap"]]
    # a finished UMAP (faked here: no fit in the fast tests) is drawn from the run folder
    coords = np.random.default_rng(0).normal(size=(400, 2)).astype(np.float32)
    np.save(run.path / "projection_umap.npy", coords)
    cartomap.runs.tasks.task_update(run, "projection_umap", state="done", progress=1.0)
    at.run()
    assert not at.exception, at.exception
    assert not any(b.label == "Compute UMAP" for b in at.button)
    assert "UMAP" in at.get("plotly_chart")[0].proto.spec
    assert any(c.value == "UMAP fitted on all 400 examples." for c in at.caption)
    # above the fit sample the page says that most points were placed, not fitted
    monkeypatch.setattr(cartomap.analysis.projection, "UMAP_FIT_SAMPLE", 150)
    at.run()
    note = next(c.value for c in at.caption if c.value.startswith("UMAP fitted on"))
    assert "a random sample of 150 of the 400 examples; the other 250 are placed" in note


def test_no_run_offers_demo(tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "empty"))
    monkeypatch.syspath_prepend(str(ROOT))
    at = _app().run()
    assert not at.exception, at.exception
    assert any(b.label == "Train the demo" for b in at.button)


def test_group_names_are_not_rendered_as_markdown(env):
    hostile = "![g](https://example.invalid/g.png) **grp**"
    run = make_run(env)
    ids = run.examples()["id"].astype(str).tolist()
    save_group(run, hostile, [ids[5], ids[6], ids[7]], source="data map")
    at = _app().run()
    at.radio(key="_kept_nb_source").set_value("A saved group").run()
    assert not at.exception, at.exception
    body = " ".join(c.value for c in at.caption if "examples (source" in c.value)
    assert "Group" in body and "![" not in body and "**grp**" not in body
    at.text_input(key="nb_group_name").input(hostile + " 2")
    at.button[[b.label for b in at.button].index("Save 5 examples")].click().run()
    body = " ".join(s.value for s in at.success)
    assert "Saved group" in body and "![" not in body and "**grp**" not in body
