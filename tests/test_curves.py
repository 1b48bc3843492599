"""Live training curves (cartomap.analysis.curves) and the job panel drawing them while a run trains."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import patience
import pytest

from cartomap.analysis import curves
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.io import atomic_write_json
from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
HISTORY = [
    {
        "epoch": 1,
        "train_loss": 1.05,
        "train_seconds": 9.0,
        "dev_accuracy": 0.5,
        "dev_loss": 0.98,
        "test_0_accuracy": 0.4,
    },
    {
        "epoch": 2,
        "train_loss": 0.81,
        "train_seconds": 9.0,
        "dev_accuracy": 0.7,
        "dev_loss": 0.80,
        "test_0_accuracy": 0.6,
    },
]
RUNNING = {"state": "running", "epoch": 3, "epochs": 4, "step": 5, "steps_per_epoch": 20, "loss": 0.66}


def test_history_and_status_make_one_tidy_frame():
    frame = curves.training_curves(HISTORY, RUNNING, test_names=["hans"])
    assert list(frame.columns) == list(curves.CURVE_COLUMNS)
    done = frame[~frame["live"]]
    assert len(done) == 8  # 2 epochs x (train loss, dev loss, dev accuracy, test accuracy)
    dev = done[done["metric"] == "dev accuracy"]
    assert dev["epoch"].tolist() == [1.0, 2.0] and dev["value"].tolist() == [0.5, 0.7]
    assert set(done.loc[done["panel"] == "loss", "metric"]) == {"train loss", "dev loss"}
    assert set(done.loc[done["panel"] == "accuracy", "metric"]) == {"dev accuracy", "test accuracy (hans)"}
    live = frame[frame["live"]]
    assert live[["epoch", "metric", "value"]].to_numpy().tolist() == [[2.25, "train loss", 0.66]]


def test_no_live_point_unless_running_in_an_epoch_not_yet_recorded():
    assert not curves.training_curves(HISTORY, {**RUNNING, "state": "done"})["live"].any()
    assert not curves.training_curves(HISTORY, {**RUNNING, "epoch": 2})["live"].any()  # evaluating epoch 2
    assert not curves.training_curves(HISTORY, {**RUNNING, "loss": None})["live"].any()
    assert not curves.training_curves(HISTORY, None)["live"].any()
    first = curves.training_curves([], {**RUNNING, "epoch": 1, "step": 20})
    assert first[["epoch", "value"]].to_numpy().tolist() == [[1.0, 0.66]]
    assert curves.training_curves([], None).empty
    no_dev = curves.training_curves([{"epoch": 1, "train_loss": 1.0}])
    assert no_dev["metric"].tolist() == ["train loss"]


def test_figure_has_a_loss_and_an_accuracy_panel():
    fig = curves.training_curves_figure(curves.training_curves(HISTORY, RUNNING))
    by_name = {t.name: t for t in fig.data}
    assert by_name["train loss"].xaxis == "x" and by_name["dev accuracy"].xaxis == "x2"
    live = by_name["train loss (this epoch so far)"]
    assert list(live.x) == [2.0, 2.25] and list(live.y) == [0.81, 0.66]  # from the last epoch on
    assert fig.layout.meta["metrics"][0] == "train loss"


STEPS = [  # the step log of 1.5 epochs at 4 steps an epoch, k = 2
    {"epoch": 1, "step": 2, "steps_per_epoch": 4, "global_step": 2, "loss": 1.1, "n": 2},
    {"epoch": 1, "step": 4, "steps_per_epoch": 4, "global_step": 4, "loss": 0.9, "n": 2},
    {"epoch": 2, "step": 2, "steps_per_epoch": 4, "global_step": 6, "loss": 0.7, "n": 2},
]


def test_step_curve_places_each_line_within_its_epoch_with_a_debiased_moving_average():
    frame = curves.step_curve(STEPS)
    assert list(frame.columns) == list(curves.STEP_COLUMNS)
    assert frame["epoch"].tolist() == [0.5, 1.0, 1.5] and frame["global_step"].tolist() == [2, 4, 6]
    assert frame["loss"].tolist() == [1.1, 0.9, 0.7]
    # span 2 (the least): w = 1 - 2 / 3 = 1/3; s_t = sum w^(t-i) v_i / sum w^(t-i)
    w = 1 / 3
    expected = [1.1, (w * 1.1 + 0.9) / (w + 1), (w * w * 1.1 + w * 0.9 + 0.7) / (w * w + w + 1)]
    np.testing.assert_allclose(frame["smoothed"], expected)
    assert curves.smoothed([2.0], 10).tolist() == [2.0]  # not pulled towards 0
    assert curves.step_span(STEPS) == curves.SPAN_MIN
    many = [{**STEPS[0], "step": k, "global_step": k} for k in range(1, 301)]
    assert curves.step_span(many) == 30.0 and curves.step_span([]) == curves.SPAN_MIN
    assert curves.step_curve([]).empty and list(curves.step_curve([]).columns) == list(curves.STEP_COLUMNS)


def test_the_step_curve_is_drawn_in_the_loss_panel_beside_the_epoch_curves():
    fig = curves.training_curves_figure(
        curves.training_curves(HISTORY, RUNNING), steps=curves.step_curve(STEPS)
    )
    by_name = {t.name: t for t in fig.data}
    raw, smooth = by_name[curves.STEP_LOSS], by_name[curves.STEP_SMOOTHED]
    assert raw.xaxis == smooth.xaxis == by_name["train loss"].xaxis == "x"  # the loss panel
    assert list(raw.x) == [0.5, 1.0, 1.5] and list(raw.y) == [1.1, 0.9, 0.7]
    assert raw.opacity < smooth.opacity
    assert fig.layout.meta["steps"] == 3
    # before the first epoch ends there is no epoch curve yet, and the step curve is the chart
    alone = curves.training_curves_figure(
        curves.training_curves([], None), steps=curves.step_curve(STEPS[:1])
    )
    assert [t.name for t in alone.data] == [curves.STEP_LOSS, curves.STEP_SMOOTHED]


def _running_run(root: Path):
    from tests.test_app_train import demo_dev

    config = RunConfig(
        data=DataConfig(path="demo:dev"), dev=DataConfig(path="demo:dev"), train=TrainConfig(epochs=4)
    )
    run = RunStore(root).create(config, demo_dev(), demo_dev())
    atomic_write_json(run.history_path, HISTORY)
    run.set_status(**RUNNING, global_step=45, total_steps=80)
    run.steps_path.write_text("".join(json.dumps(r) + "\n" for r in STEPS))
    return run


@pytest.mark.parametrize("page", ["data_map.py", "train.py"])
def test_a_running_run_shows_its_curves(root, page):
    from streamlit.testing.v1 import AppTest

    run = _running_run(root)
    lock = run.acquire_lock()  # as the training process would
    try:
        at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=patience.WAIT_S)
        at.session_state["run_id"] = run.id
        at.run()
        assert not at.exception, at.exception
        specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
        chart = next(s for s in specs if s["layout"].get("meta", {}).get("metrics"))
        names = {t["name"] for t in chart["data"]}
        assert {"train loss", "dev loss", "dev accuracy", "train loss (this epoch so far)"} <= names
        assert {curves.STEP_LOSS, curves.STEP_SMOOTHED} <= names  # the loss every k steps, smoothed
        live = next(t for t in chart["data"] if t["name"] == "train loss (this epoch so far)")
        x = live["x"]  # plotly sends numeric arrays as base64
        x = (
            np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"]).tolist()
            if isinstance(x, dict)
            else x
        )
        assert x == [2.0, 2.25]
    finally:
        lock.close()


def test_a_finished_runs_curves_keep_the_step_curve(root):
    """After training, the Data map's "Training curves" draw the step log beside the epoch curves."""
    from streamlit.testing.v1 import AppTest
    from test_app_datamap import make_run

    run = make_run(root, dev=True)
    run.steps_path.write_text("".join(json.dumps(r) + "\n" for r in STEPS))
    at = AppTest.from_file(str(ROOT / "pages" / "data_map.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception, at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    chart = next(s for s in specs if s["layout"].get("meta", {}).get("metrics"))
    names = {t["name"] for t in chart["data"]}
    assert {"train loss", curves.STEP_LOSS, curves.STEP_SMOOTHED} <= names


def test_a_token_runs_dev_entity_f1_is_drawn_beside_the_dev_accuracy():
    history = [
        {"epoch": 1, "train_loss": 1.0, "dev_accuracy": 0.85, "dev_entity_f1": 0.2, "dev_entities": {}},
        {"epoch": 2, "train_loss": 0.5, "dev_accuracy": 0.9, "dev_entity_f1": 0.6, "dev_entities": {}},
    ]
    frame = curves.training_curves(history)
    f1 = frame[frame["metric"] == "dev entity F1"]
    assert f1["value"].tolist() == [0.2, 0.6] and set(f1["panel"]) == {curves.ACCURACY}
