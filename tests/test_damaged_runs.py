"""A damaged run must not take the others down: each kind of damage done by hand to a finished run,
against the command line (runs, show, map, export, repair, delete) and the Data map page (AppTest)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest

from cartomap.cli import main
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import Run, RunStore
from cartomap.scores.metrics import RegionRule, compute_metrics

ROOT = Path(__file__).resolve().parents[1]


def finished_run(cache: Path, seed: int) -> Run:
    """A finished 3-epoch run on the demo dev set with synthetic logits (no training)."""
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(
        data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=3, seed=seed, record="train")
    )
    run = RunStore(cache).create(config, data)
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(3, len(data), 3)).astype(np.float32)
    logits[:, np.arange(len(data)), data.labels] += np.linspace(0.5, 2.5, 3)[:, None]
    for e in range(3):
        run.write_epoch("train", e, data.ids, logits[e])
    atomic_write_parquet(run.metrics_path(), compute_metrics(logits, data.labels, data.ids))
    run.set_status(state="done", epochs_done=3)
    return run


@pytest.fixture()
def store(tmp_path) -> RunStore:
    """Two healthy finished runs; tests damage one of them."""
    cache = tmp_path / "cache"
    finished_run(cache, seed=1)
    finished_run(cache, seed=2)
    return RunStore(cache)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def cli(store: RunStore, *args) -> int:
    return main(["--cache", str(store.root), *args])


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_a_garbage_status_is_listed_as_damaged_and_the_others_work(store, tmp_path, capsys):
    victim, healthy = store.list()
    victim.status_path.write_text("{not json", encoding="utf-8")
    assert cli(store, "runs") == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert any(victim.id in line and "damaged" in line for line in lines)
    assert any(healthy.id in line and "done" in line for line in lines)
    assert f"damaged run {victim.id}: status.json cannot be read" in captured.err
    assert "Traceback" not in captured.err
    assert cli(store, "show", healthy.id) == 0 and cli(store, "show", victim.id) == 0
    assert "damaged: status.json cannot be read" in capsys.readouterr().out
    # its dynamics and metrics are intact: the map and the export still work
    assert cli(store, "map", victim.id, "--out", str(tmp_path / "map.png")) == 0
    assert cli(store, "export", victim.id, "--out", str(tmp_path / "model")) == 0
    assert len(list((tmp_path / "model" / "training_dynamics").iterdir())) == 3
    # repair writes a fresh status from the history and the saved model
    assert cli(store, "repair", victim.id) == 0
    assert "status.json written afresh" in capsys.readouterr().out
    assert victim.status()["state"] in ("done", "cancelled")


def test_truncated_metrics_are_recomputed_from_the_dynamics(store, tmp_path, capsys):
    victim, healthy = store.list()
    expected = victim.metrics()
    truncate(victim.metrics_path())
    assert any("metrics.parquet cannot be read" in p and "recomputed" in p for p in victim.check())
    assert cli(store, "show", victim.id) == 0
    assert "confidence" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_parquet(victim.metrics_path()), expected, check_like=True)
    truncate(victim.metrics_path())
    assert cli(store, "map", victim.id, "--out", str(tmp_path / "map.png")) == 0
    assert (tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"
    truncate(victim.metrics_path())
    assert cli(store, "export", victim.id, "--out", str(tmp_path / "model")) == 0
    assert len(list((tmp_path / "model" / "training_dynamics").iterdir())) == 3
    truncate(victim.metrics_path())
    assert cli(store, "repair", victim.id) == 0
    assert "metrics.parquet recomputed from the dynamics" in capsys.readouterr().out
    assert victim.check() == [] and healthy.check() == []


def test_metrics_and_dynamics_both_damaged_give_one_clear_line(store, tmp_path, capsys):
    victim, healthy = store.list()
    truncate(victim.metrics_path())
    truncate(victim.epoch_path("train", 1))
    capsys.readouterr()
    for args in (
        ("show", victim.id),
        ("map", victim.id, "--out", str(tmp_path / "m.png")),
        ("export", victim.id, "--out", str(tmp_path / "x")),
    ):
        assert cli(store, *args) == 2
        err = one_line_error(capsys)
        assert f"run {victim.id} is damaged" in err or "dynamics/train/epoch_1.parquet cannot be read" in err
    assert cli(store, "repair", victim.id) == 2
    assert "epoch_1.parquet cannot be read" in capsys.readouterr().err
    assert cli(store, "map", healthy.id, "--out", str(tmp_path / "ok.png")) == 0


def test_a_run_without_config_is_listed_not_vanished(store, capsys):
    victim, healthy = store.list()
    victim.config_path.unlink()
    listed = {r.id: r.summary() for r in store.list()}
    assert set(listed) == {victim.id, healthy.id}
    assert (
        listed[victim.id]["state"] == "damaged" and "config.json is missing" in listed[victim.id]["problem"]
    )
    assert cli(store, "runs") == 0
    assert f"damaged run {victim.id}: config.json is missing" in capsys.readouterr().err
    assert cli(store, "show", victim.id) == 2
    assert "config.json is missing" in one_line_error(capsys)
    assert cli(store, "repair", victim.id) == 2
    assert "cannot fix: config.json is missing" in capsys.readouterr().err
    assert cli(store, "map", healthy.id, "--out", str(store.root / "ok.html")) == 0
    assert cli(store, "delete", victim.id, "--yes") == 0
    assert [r.id for r in store.list()] == [healthy.id]


def test_a_lost_config_comes_back_when_the_same_run_is_made_again(tmp_path):
    cache = tmp_path / "cache"
    run = finished_run(cache, seed=3)
    run.config_path.unlink()
    again = RunStore(cache).create(
        RunConfig(
            data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=3, seed=3, record="train")
        ),
        load_dataset(DataConfig(path="demo:dev")),
    )
    assert again.id == run.id and again.config_path.exists() and again.problems() == []
    assert len(again.dynamics_epochs()) == 3  # what it held is kept


# --------------------------------------------------------------------------- the Data map page


@pytest.fixture()
def app_store(store, monkeypatch) -> RunStore:
    monkeypatch.setenv("CARTOMAP_CACHE", str(store.root))
    monkeypatch.syspath_prepend(str(ROOT))
    return store


def data_map_page(run_id: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / "data_map.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run_id
    return at.run()


def test_data_map_page_with_damaged_runs(app_store):
    victim, healthy = app_store.list()
    truncate(victim.metrics_path())
    at = data_map_page(victim.id)  # recomputed from the dynamics: the map is drawn
    assert not at.exception and not at.error
    assert len(at.get("plotly_chart")) >= 1
    axis = RegionRule().axis_label  # the run's default rule: ranked on the default axis
    assert f"Regions: ambiguous = the 33% of examples with the highest {axis}" in " ".join(
        c.value for c in at.caption
    )
    truncate(victim.metrics_path())
    truncate(victim.epoch_path("train", 2))
    at = data_map_page(victim.id)
    assert not at.exception
    assert any(f"run {victim.id} is damaged" in e.value for e in at.error)
    victim.status_path.write_text("garbage", encoding="utf-8")
    at = data_map_page(victim.id)
    assert not at.exception
    assert any("status.json cannot be read" in e.value and "cartomap repair" in e.value for e in at.error)
    at = data_map_page(healthy.id)  # the other run is untouched
    assert not at.exception and not at.error and len(at.get("plotly_chart")) >= 1
    victim.config_path.unlink()
    at = data_map_page(healthy.id)  # a run without config.json is in the picker, and harms nothing
    assert not at.exception and not at.error


def test_the_default_run_of_the_dashboard_is_never_a_damaged_one(app_store):
    from streamlit.testing.v1 import AppTest

    for victim in app_store.list():  # whichever is newest, damage it: the other one is picked
        healthy = next(r for r in app_store.list() if r.id != victim.id)
        saved = victim.status_path.read_bytes()
        victim.status_path.write_text("garbage", encoding="utf-8")
        at = AppTest.from_file(str(ROOT / "pages" / "data_map.py"), default_timeout=patience.WAIT_S).run()
        assert not at.exception and not at.error
        assert at.session_state["run_id"] == healthy.id
        victim.status_path.write_bytes(saved)


def test_a_garbage_history_gives_one_line_and_is_listed_as_damaged(store, capsys):
    victim, healthy = store.list()
    victim.history_path.write_text("{garbage", encoding="utf-8")
    capsys.readouterr()
    assert cli(store, "show", victim.id) == 2
    err = one_line_error(capsys)
    assert f"run {victim.id} is damaged: history.json cannot be read" in err
    assert "cartomap repair RUN" in err and "cartomap delete RUN" in err
    assert cli(store, "runs") == 0
    captured = capsys.readouterr()
    assert any(victim.id in line and "damaged" in line for line in captured.out.splitlines())
    assert f"damaged run {victim.id}: history.json cannot be read" in captured.err
    assert cli(store, "show", healthy.id) == 0


def test_a_deleted_examples_file_gives_one_line_and_is_listed_as_damaged(store, tmp_path, capsys):
    victim, healthy = store.list()
    victim.examples_path.unlink()
    capsys.readouterr()
    for args in (
        ("map", victim.id, "--out", str(tmp_path / "x.png")),
        ("export", victim.id, "--out", str(tmp_path / "m")),
    ):
        assert cli(store, *args) == 2
        err = one_line_error(capsys)
        assert f"run {victim.id} is damaged: examples.parquet is missing" in err
        assert "cartomap repair RUN" in err and "cartomap delete RUN" in err
    assert cli(store, "runs") == 0
    captured = capsys.readouterr()
    assert any(victim.id in line and "damaged" in line for line in captured.out.splitlines())
    assert f"damaged run {victim.id}: examples.parquet is missing" in captured.err
    assert cli(store, "repair", victim.id) == 2
    assert "cannot fix: examples.parquet is missing" in capsys.readouterr().err
    assert cli(store, "map", healthy.id, "--out", str(tmp_path / "ok.png")) == 0
