"""Near-chance accuracy: the rule (cartomap.scores.chance), a run's own accuracy
(cartomap.analysis.evaluation), and the pages that show the warning (Data map, Prune labels, Compare)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import patience
import pytest
from streamlit.testing.v1 import AppTest

from cartomap.analysis import compare as cmp
from cartomap.analysis.evaluation import final_accuracy, run_chance_warning
from cartomap.io import atomic_write_json
from cartomap.scores.chance import NEAR_CHANCE_MARGIN, chance_accuracy, chance_warning, near_chance

REPO = Path(__file__).resolve().parent.parent


def test_chance_is_the_better_of_a_random_guess_and_the_majority_class():
    assert chance_accuracy(3) == pytest.approx(1 / 3)
    assert chance_accuracy(3, [0, 0, 0, 1, 2]) == pytest.approx(0.6)  # always "0": 3 of 5
    assert chance_accuracy(2, [0, 1, 1, 0]) == 0.5
    assert chance_accuracy(4, []) == 0.25
    with pytest.raises(ValueError):
        chance_accuracy(0)


def test_near_chance_is_within_the_margin_or_below():
    assert NEAR_CHANCE_MARGIN == 0.05
    assert near_chance(0.36, 3) and near_chance(0.20, 3) and near_chance(1 / 3 + 0.05, 3)
    assert not near_chance(0.39, 3)
    assert near_chance(0.62, 3, [0, 0, 0, 1, 2])  # the majority class alone gets 60 %
    assert not near_chance(None, 3) and not near_chance(float("nan"), 3)
    message = chance_warning(0.35, 3, what="dev accuracy")
    assert message.startswith(
        "Near chance: dev accuracy 35.0% is within 5% of chance (33.3%, 1 of 3 classes)"
    )
    assert "always the majority class" in chance_warning(0.6, 3, [0, 0, 0, 1, 2])
    assert chance_warning(0.9, 3) is None


def _guessing(run):
    """The run's last recorded epoch replaced by a model that always says label 0."""
    epoch = run.dynamics_epochs("train")[-1]
    ids = run.examples(columns=["id"])["id"].astype(str).tolist()
    logits = np.zeros((len(ids), len(run.label_names)), dtype=np.float32)
    logits[:, 0] = 1.0
    run.write_epoch("train", epoch, ids, logits)
    return run


def test_a_runs_accuracy_is_its_dev_accuracy_else_its_final_train_pass(tmp_path):
    from test_app_datamap import make_run

    learned = make_run(tmp_path / "a")
    acc, what = final_accuracy(learned)
    assert what == "final train-pass accuracy" and acc > 0.6 and run_chance_warning(learned) is None
    guessing = _guessing(make_run(tmp_path / "b"))
    labels = guessing.examples(columns=["label"])["label"].to_numpy()
    assert final_accuracy(guessing) == (
        pytest.approx(float((labels == 0).mean())),
        "final train-pass accuracy",
    )
    assert run_chance_warning(guessing).startswith("Near chance: final train-pass accuracy")
    atomic_write_json(guessing.history_path, [{"epoch": 1, "dev_accuracy": 0.9}])
    assert final_accuracy(guessing) == (0.9, "dev accuracy") and run_chance_warning(guessing) is None
    assert run_chance_warning(guessing, 0.34, "dev").startswith("Near chance: dev accuracy 34.0%")


def test_the_data_map_page_says_when_the_model_is_near_chance(tmp_path, monkeypatch):
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(REPO))
    learned = make_run(cache, seed=1)
    page = AppTest.from_file(str(REPO / "pages" / "data_map.py"), default_timeout=patience.WAIT_S)
    page.session_state["run_id"] = learned.id
    page.run()
    assert not page.exception, page.exception
    assert not [w for w in page.warning if "Near chance" in w.value]
    guessing = _guessing(make_run(cache, epochs=2))  # another config: another run
    page = AppTest.from_file(str(REPO / "pages" / "data_map.py"), default_timeout=patience.WAIT_S)
    page.session_state["run_id"] = guessing.id
    page.run()
    assert not page.exception, page.exception
    assert [w.value for w in page.warning if "Near chance: final train-pass accuracy" in w.value]


def test_prune_labels_says_when_model_0_is_near_chance(root):
    from test_pruning import make_finished_experiment

    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    exp, _ = make_finished_experiment(root, load_dataset(DataConfig(path="demo:dev")))
    page = lambda: AppTest.from_file(str(REPO / "pages" / "pruning.py"), default_timeout=patience.WAIT_S)  # noqa: E731
    at = page().run()
    assert not at.exception, at.exception
    assert not [w for w in at.warning if "Near chance" in w.value]  # Model 0 at 60 % on 10 test pairs
    exp.write_result("summary", {**exp.result("summary"), "model0_test_accuracy": 0.3})
    at = page().run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if w.value.startswith("Model 0: Near chance: test accuracy 30.0%")]


def test_compare_says_which_runs_are_near_chance(root):
    from test_compare import finished_run, make_data

    data = make_data(root)
    from cartomap.runs.store import RunStore

    store = RunStore(root)

    def config(name, seed):  # the name is not part of a run's identity: the seed makes two runs
        train = dataclasses.replace(data.base.train, seed=seed)
        return data.base.replace(name=name, train=train, tests=(data.configs["test"],))

    good = finished_run(store, config("good", 0), data.train, data.dev, (data.test,), 0)
    bad = finished_run(store, config("bad", 1), data.train, data.dev, (data.test,), 0)
    zeros = np.zeros((len(data.test.ids), 3), dtype=np.float32)
    zeros[:, 0] = 1.0
    for epoch in bad.dynamics_epochs("test_0"):
        bad.write_epoch("test_0", epoch, data.test.ids, zeros)  # always label 0 on the test set
    table = cmp.comparison_table([good, bad], "test")
    warnings = cmp.chance_warnings([good, bad], table)
    assert len(warnings) == 1 and warnings[0].startswith(f"{table['run'][1]}: Near chance: test accuracy")
    at = AppTest.from_file(str(REPO / "pages" / "compare.py"), default_timeout=patience.WAIT_S)
    at.session_state["cmp_runs"] = [good.id, bad.id]
    at.run()
    assert not at.exception, at.exception
    shown = [w.value for w in at.warning if "Near chance" in w.value]
    assert len(shown) == 1 and "bad" in shown[0]
