"""`cartomap map` of a multi-label run: the views the Data map page offers, picked with --view."""

from __future__ import annotations

import pandas as pd
import pytest
from multilabel_fixture import GOLD_PROBS, NAMES, make_multilabel_run

from cartomap.cli import main


@pytest.fixture()
def ml(cache, tmp_path):
    return make_multilabel_run(cache, tmp_path)


def _table(cache, run, tmp_path, *extra) -> tuple[int, pd.DataFrame | None]:
    table = tmp_path / f"t{len(list(tmp_path.glob('t*.csv')))}.csv"
    out = tmp_path / f"m{len(list(tmp_path.glob('m*.html')))}.html"
    rc = main(["--cache", str(cache), "map", run.id, "--out", str(out), "--table", str(table), *extra])
    return rc, (pd.read_csv(table) if rc == 0 else None)


def test_the_views_of_a_multilabel_run(ml, cache, tmp_path, capsys):
    rc, combined = _table(cache, ml, tmp_path)  # the default: each example at its worst label
    assert rc == 0 and len(combined) == 3
    conf = GOLD_PROBS.mean(axis=0)  # [example, label]
    assert combined["confidence"].tolist() == pytest.approx(conf.min(axis=1).tolist(), abs=1e-5)
    assert "each example at its worst label" in (tmp_path / "m0.html").read_text(encoding="utf-8")

    rc, units = _table(cache, ml, tmp_path, "--view", "units")
    assert rc == 0 and len(units) == 3 * len(NAMES)
    assert sorted(units["confidence"].round(5)) == sorted(conf.ravel().round(5))

    rc, sports = _table(cache, ml, tmp_path, "--view", "sports")
    assert rc == 0 and sports["id"].tolist() == ["ex-0#1", "ex-1#1", "ex-2#1"]
    assert sports["confidence"].tolist() == pytest.approx(conf[:, 1].tolist(), abs=1e-5)

    # after the first recording only: ex-2's worst label is politics then (0.4)
    rc, first = _table(cache, ml, tmp_path, "--view", "combined", "--burn-out", "1")
    assert rc == 0
    assert first["confidence"].tolist() == pytest.approx(GOLD_PROBS[0].min(axis=1).tolist(), abs=1e-5)

    capsys.readouterr()
    assert _table(cache, ml, tmp_path, "--view", "weather")[0] != 0
    assert "expected combined, units or one of the run's labels (politics, sports)" in capsys.readouterr().err
    assert _table(cache, ml, tmp_path, "--source", "eval")[0] != 0
    assert "no --source" in capsys.readouterr().err


def test_view_is_refused_on_a_run_of_one_label_per_example(cache, tmp_path, capsys):
    from cartomap.config import DataConfig, RunConfig, TrainConfig
    from cartomap.data.loading import load_dataset
    from cartomap.runs.store import RunStore

    config = RunConfig(data=DataConfig(path="demo:dev"), train=TrainConfig(epochs=1))
    run = RunStore(cache).create(config, load_dataset(config.data))
    rc = main(["--cache", str(cache), "map", run.id, "--out", str(tmp_path / "m.png"), "--view", "units"])
    assert rc != 0
    assert "--view is for multi-label runs" in capsys.readouterr().err
