"""Test-set evaluation, derived datasets and the experiment runner, on a tiny random BERT."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import patience
import pytest

from cartomap.config import DataConfig, ModelConfig, OrderConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.experiments.registry import register
from cartomap.experiments.runner import run_experiment
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore, dataset_names
from cartomap.training.curricula import oversample
from cartomap.training.loop import train_or_load


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DataConfig(path="demo:dev"))


def split_demo(demo, cache):
    train = derived.save_dataset(demo.subset(np.arange(0, 120)), cache, name="first 120")
    test = derived.save_dataset(demo.subset(np.arange(300, 360)), cache, name="held out")
    return train, test


def tiny(tiny_model, data, tests=(), dev=None, **train) -> RunConfig:
    settings = dict(epochs=2, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0, record="none")
    settings.update(train)
    return RunConfig(
        data=data,
        dev=dev,
        model=ModelConfig(tiny_model, max_length=48),
        train=TrainConfig(**settings),
        tests=tuple(tests),
    )


def test_identity_of_runs_without_new_fields_is_unchanged():
    identity = RunConfig().identity()
    assert "order" not in identity and "tests" not in identity
    named = RunConfig(data=DataConfig(path="demo:train", name="whatever"))
    assert named.identity() == RunConfig().identity()
    assert RunConfig(order=OrderConfig(name="cart")).identity()["order"]["name"] == "cart"


def test_test_names_are_short_and_unique():
    configs = [
        DataConfig(path="/x/shared/data/snli/test.jsonl.gz"),
        DataConfig(path="/y/snli/test.jsonl.gz"),
        DataConfig(path="demo:dev"),
        DataConfig(path="/z/a.parquet", name="A + B"),
    ]
    assert dataset_names(configs) == ["snli/test", "snli/test (2)", "demo:dev", "A + B"]


def test_run_evaluates_its_test_sets_every_epoch(tiny_model, cache, demo):
    train, test = split_demo(demo, cache)
    run = train_or_load(tiny(tiny_model, train, tests=[test]), RunStore(cache))
    assert run.state == "done"
    assert run.test_names == ["held out"]
    history = run.history()
    assert len(history) == 2
    frame, logits = run.test_logits(0)
    assert logits.shape == (60, 3)
    assert list(frame["id"]) == list(demo.frame["id"][300:360])
    accuracy = float((logits.argmax(1) == frame["label"].to_numpy()).mean())
    assert history[run.best_epoch()]["test_0_accuracy"] == pytest.approx(accuracy)
    # the same config is the same run, and a different test set a different one
    assert train_or_load(tiny(tiny_model, train, tests=[test]), RunStore(cache)).id == run.id
    other = derived.save_dataset(demo.subset(np.arange(360, 400)), cache)
    assert RunStore(cache).find(tiny(tiny_model, train, tests=[other]), *_loaded(train, other)) is None


def _loaded(train, test):
    t = load_dataset(train)
    return t, None, (load_dataset(test, label_names=t.label_names),)


def test_best_epoch_follows_dev_accuracy(tiny_model, cache, demo):
    train, test = split_demo(demo, cache)
    run = train_or_load(tiny(tiny_model, train, tests=[test], dev=test, epochs=3), RunStore(cache))
    dev = [h["dev_accuracy"] for h in run.history()]
    assert run.best_epoch() == int(np.argmax(dev))


def test_curriculum_order_rejects_training_pass_recording(tiny_model, cache, demo):
    train, _ = split_demo(demo, cache)
    config = tiny(tiny_model, train, record="train").replace(order=OrderConfig(name="length"))
    with pytest.raises(DataError, match="record 'eval'"):
        train_or_load(config, RunStore(cache))


# --------------------------------------------------------------------------- derived datasets
def test_augment_replace_and_prune(demo):
    a, b = demo.subset(np.arange(0, 10)), demo.subset(np.arange(10, 14))
    both = derived.augment(a, b)
    assert both.ids == a.ids + b.ids
    swapped = derived.replace_random(a, b, seed=1)
    assert len(swapped) == 10 and set(b.ids) <= set(swapped.ids)
    assert len(set(a.ids) & set(swapped.ids)) == 6
    assert derived.replace_random(a, b, seed=1).ids == swapped.ids
    with pytest.raises(DataError, match="occurs in both"):
        derived.augment(a, a)
    with pytest.raises(DataError, match="more than A"):
        derived.replace_random(b, a)
    pruned = derived.without_ids(a, a.ids[2:4])
    assert pruned.ids == a.ids[:2] + a.ids[4:]


def test_balanced_sample_has_equal_classes(demo):
    sample = derived.balanced_sample(demo, seed=0)
    counts = np.bincount(sample.labels)
    assert len(set(counts.tolist())) == 1
    assert (
        derived.balanced_sample(demo, per_label=5, seed=0).ids
        == derived.balanced_sample(demo, per_label=5, seed=0).ids
    )
    with pytest.raises(DataError, match="smallest class"):
        derived.balanced_sample(demo, per_label=10_000)


def test_saved_dataset_reloads_identically(demo, cache):
    config = derived.save_dataset(demo, cache)
    again = load_dataset(config)
    assert again.fingerprint() == demo.fingerprint()


# --------------------------------------------------------------------------- experiment runner
class TwoStep:
    """Run "first", then (once it is done) "second" on a smaller set: a dependent plan."""

    name = "test-two-step"

    def __init__(self):
        self.finalized = 0

    def planned_runs(self, exp, store):
        p = exp.params
        base = RunConfig.from_dict(p["base"])
        plan = [("first", base)]
        first = exp.run("first", store)
        if first is not None and first.state == "done":
            frame, logits = first.test_logits(0)  # a dependency on the first run's results
            assert logits.shape == (len(frame), 3)
            data = load_dataset(base.data)
            subset = derived.without_ids(data, data.ids[:10])
            plan.append(("second", base.replace(data=derived.save_dataset(subset, p["cache"]))))
        return plan

    def finalize(self, exp, store):
        self.finalized += 1
        second = exp.run("second", store)
        exp.write_result("summary", {"second_examples": second.info["n_train"]})
        exp.write_result("table", pd.DataFrame({"role": list(exp.run_ids())}))


def test_experiment_runs_dependent_plan_then_reloads(tiny_model, cache, demo):
    kind = register(TwoStep())
    train, _ = split_demo(demo, cache)
    base = tiny(tiny_model, train, tests=[train])
    store = ExperimentStore(cache)
    exp = store.create(kind.name, {"base": base.to_dict(), "cache": str(cache)}, name="dependent")
    assert store.create(kind.name, {"base": base.to_dict(), "cache": str(cache)}).id == exp.id
    run_experiment(exp, store)
    assert exp.state == "done"
    assert set(exp.run_ids()) == {"first", "second"}
    assert exp.status()["runs_done"] == 2
    assert exp.result("summary")["second_examples"] == 110
    assert list(exp.result("table")["role"]) == ["first", "second"]
    assert store.get("dependent").id == exp.id
    import cartomap.training.loop

    calls = []
    real = cartomap.training.prepare.prepare_run
    cartomap.training.prepare.prepare_run = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        run_experiment(exp, store)  # everything exists: only finalize again
    finally:
        cartomap.training.prepare.prepare_run = real
    assert kind.finalized == 2
    assert calls == []  # finished runs recorded for their roles are not loaded again


def test_cancelled_experiment_stops_before_training(tiny_model, cache, demo):
    kind = register(TwoStep())
    train, _ = split_demo(demo, cache)
    store = ExperimentStore(cache)
    exp = store.create(
        kind.name, {"base": tiny(tiny_model, train, tests=[train], seed=5).to_dict(), "cache": str(cache)}
    )
    exp.request_cancel()
    run_experiment(exp, store, as_job=True)
    assert exp.state == "cancelled"
    assert exp.run_ids() == {}


def test_curriculum_run_trains_on_its_plan(tiny_model, cache, demo):
    train, test = split_demo(demo, cache)
    base = train_or_load(tiny(tiny_model, train, record="train"), RunStore(cache))
    order = OrderConfig(name="cart-stra++", scores=str(base.path / "metrics.parquet"))
    run = train_or_load(tiny(tiny_model, train, tests=[test]).replace(order=order), RunStore(cache))
    assert run.state == "done"
    stages = json.loads((run.path / "plan.json").read_text())
    assert [s["name"] for s in stages][-1] == "all data"
    # every stage holds every class (stratified), and the run saw the baseline's number of steps
    assert all(min(s[name] for name in run.label_names) > 0 for s in stages if s["n_steps"])
    oversampled = len(oversample(np.arange(120), demo.labels[:120]))
    assert run.status()["total_steps"] == 2 * -(-oversampled // 16)


def test_cartography_order_needs_a_scores_file(tiny_model, cache, demo):
    train, _ = split_demo(demo, cache)
    config = tiny(tiny_model, train).replace(order=OrderConfig(name="cart"))
    with pytest.raises(DataError, match="confidence"):
        train_or_load(config, RunStore(cache))
    assert not (cache / "runs").exists() or not list((cache / "runs").iterdir())
    missing = tiny(tiny_model, train).replace(
        order=OrderConfig(name="cart", scores=str(cache / "nope.parquet"))
    )
    with pytest.raises(DataError, match="does not exist"):
        train_or_load(missing, RunStore(cache))


def test_runner_waits_for_a_run_another_process_is_training(tiny_model, cache, demo, monkeypatch):
    import threading

    from cartomap.experiments import runner as experiments
    from cartomap.training.prepare import prepare_run

    monkeypatch.setattr(experiments, "WAIT_S", 0.05)
    kind = register(TwoStep())
    train, _ = split_demo(demo, cache)
    base = tiny(tiny_model, train, tests=[train], seed=11)
    store = ExperimentStore(cache)
    exp = store.create(kind.name, {"base": base.to_dict(), "cache": str(cache)})
    first = prepare_run(base, store.runs)
    handle = first.acquire_lock()  # "another process" holds the first run
    waited = threading.Event()
    original = experiments.time.sleep

    def sleep(seconds):
        waited.set()
        original(seconds)

    monkeypatch.setattr(experiments.time, "sleep", sleep)
    runner = threading.Thread(target=run_experiment, args=(exp, store))
    runner.start()
    assert patience.wait_progressing(runner, [cache], until=waited.is_set, what="the runner")
    assert exp.status()["phase"] == "waiting"
    handle.close()  # the other worker gave up: the runner takes the run over
    patience.wait_progressing(runner, [cache], what="the runner")
    assert exp.state == "done" and set(exp.run_ids()) == {"first", "second"}


def test_sts_order_uses_the_runs_cached_similarity(tiny_model, cache, demo):
    from cartomap.training.similarity import load_similarity

    train, _ = split_demo(demo, cache)
    run = train_or_load(tiny(tiny_model, train).replace(order=OrderConfig(name="sts")), RunStore(cache))
    assert run.state == "done"
    saved = load_similarity(run)
    assert saved["id"].tolist() == demo.ids[:120]  # computed once for the plan, kept with the run
    stages = json.loads((run.path / "plan.json").read_text())
    assert [s["name"] for s in stages][-1] == "all data"
