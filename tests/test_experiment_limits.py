"""How many runs an experiment may make, what deleting or cancelling one leaves behind, and how
`experiment list` counts its runs: a mistyped count is refused before anything is written, a cancelled
experiment leaves no run queued for good, and `experiment delete` takes the runs it made with it."""

from __future__ import annotations

import pytest
from test_damaged_runs import finished_run, one_line_error

from cartomap.cli import main
from cartomap.config import DataConfig, RunConfig
from cartomap.errors import DataError
from cartomap.experiments import forms, runner
from cartomap.experiments.combination import CombinationParams, TrainingSet
from cartomap.experiments.curriculum import CurriculumParams
from cartomap.experiments.pruning import PruningParams
from cartomap.experiments.seeds import create_seeds
from cartomap.experiments.store import MAX_RUNS, ExperimentStore
from cartomap.runs.store import RunStore


def listing(cache) -> list[str]:
    """Every file and folder under the store (what a refused command must leave as it was)."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))


def refuse_creation(monkeypatch) -> None:
    """Creating a run or experiment folder fails the test at once (a refused count must come first: the
    old behaviour made 1,664 queued runs in 120 s and would otherwise run on)."""
    from cartomap.runs.folders import FolderStore

    def refuse(self, item_id, write):
        raise AssertionError(f"a {self.WHAT} folder was created before the count was refused")

    monkeypatch.setattr(FolderStore, "create_folder", refuse)


@pytest.fixture()
def nothing_created(monkeypatch):
    refuse_creation(monkeypatch)


@pytest.fixture()
def cache(tmp_path):
    cache = tmp_path / "cache"
    finished_run(cache, seed=1)  # synthetic: no training
    return cache


def with_dev(cache, seed: int):
    """A finished run with a dev set (what a retrain after review needs), synthetic like finished_run."""
    from cartomap.data.loading import load_dataset

    run = finished_run(cache, seed=seed)
    data = load_dataset(DataConfig(path="demo:dev"))
    other = RunStore(cache).create(run.config.replace(dev=DataConfig(path="demo:dev")), data, data)
    for e in range(3):
        other.epoch_path("train", e).parent.mkdir(parents=True, exist_ok=True)
        other.epoch_path("train", e).write_bytes(run.epoch_path("train", e).read_bytes())
    other.metrics_path().write_bytes(run.metrics_path().read_bytes())
    other.set_status(state="done", epochs_done=3)
    return other


# --------------------------------------------------------------------------- the cap


@pytest.mark.parametrize(
    "args, option",
    [
        (["seeds", "RUN", "--seeds", "100000"], "--seeds"),
        (["seeds", "RUN", "--seeds", "10000000000000000000"], "--seeds"),
        (["seeds", "RUN", "--seed-list", ",".join(str(s) for s in range(2, MAX_RUNS + 2))], "--seeds"),
        (["prune", "--data", "demo:dev", "--test", "demo:dev", "--folds", "5000"], "--folds"),
        (
            ["curriculum", "--test", "demo:dev", "--methods", "shuffled", "oversampled", "--seeds"]
            + [str(s) for s in range(MAX_RUNS // 2)],
            "--seeds",
        ),
        (
            ["combine", "--test", "demo:dev", "--a", "demo:dev", "--b", "demo:dev", "--seeds"]
            + [str(s) for s in range(MAX_RUNS // 3 + 1)],
            "--seeds",
        ),
        (["noise-benchmark", "--data", "demo:dev", "--folds", "1000"], "--folds"),
    ],
)
def test_a_count_past_the_cap_is_one_line_before_anything_is_written(
    cache, capsys, nothing_created, args, option
):
    (run,) = RunStore(cache).list()
    args = [run.id if a == "RUN" else a for a in args]
    before = listing(cache)
    assert main(["--cache", str(cache), *args]) == 2
    err = one_line_error(capsys)
    assert err.startswith(f"cartomap: error: {option}: ") and f"at most {MAX_RUNS}" in err, err
    assert "own folder and copy of the data" in err  # why
    assert listing(cache) == before


def test_a_retrain_past_the_cap_writes_no_corrected_set(cache, capsys, monkeypatch):
    run = with_dev(cache, seed=5)
    refuse_creation(monkeypatch)
    before = listing(cache)
    args = ["retrain", run.id, "--queue", "q", "--seeds", str(MAX_RUNS // 3 + 1)]
    assert main(["--cache", str(cache), *args]) == 2
    err = one_line_error(capsys)
    assert "3 training sets x 67 seeds would make 201 runs" in err and "--seeds" in err
    assert listing(cache) == before


def test_counts_at_the_cap_are_accepted():
    base = RunConfig(tests=(DataConfig(path="demo:dev"),))
    assert PruningParams(base=base, folds=MAX_RUNS - 2).folds == MAX_RUNS - 2
    with pytest.raises(DataError, match="would make 201 runs"):
        PruningParams(base=base, folds=MAX_RUNS - 1)
    CurriculumParams(base=base, methods=("shuffled",), seeds=tuple(range(MAX_RUNS - 1))).validate()
    with pytest.raises(DataError, match="would make 201 runs"):
        CurriculumParams(base=base, methods=("shuffled",), seeds=tuple(range(MAX_RUNS))).validate()
    sets = (TrainingSet("A", DataConfig(path="demo:dev")),)
    CombinationParams(
        base=base, training_sets=sets, tests=base.tests, seeds=tuple(range(MAX_RUNS))
    ).validate()


def test_the_dashboards_seed_fields_have_the_same_cap():
    assert forms.MAX_SEEDS == MAX_RUNS
    assert len(forms.parse_seeds(f"0-{MAX_RUNS - 1}")) == MAX_RUNS
    with pytest.raises(DataError, match=f"at most {MAX_RUNS}"):
        forms.parse_seeds(f"0-{MAX_RUNS}")


# --------------------------------------------------------------------------- a stopped experiment's runs


class CancelOnSubmit:
    """An executor that asks the experiment to stop when it is handed its batch, trains nothing: what a
    cancel that lands before the batch's runs started does (its runs were made, queued)."""

    name = "local"

    def __init__(self, exp):
        self.exp = exp

    def train(self, batch, watch):
        self.exp.request_cancel()
        return {}

    def close(self):
        pass


def cancelled_seeds(cache, monkeypatch, seeds=3, seed_list=None):
    store = ExperimentStore(cache)
    (base,) = [r for r in store.runs.list() if r.config.train.seed == 1]
    exp = create_seeds(store, base, n_seeds=seeds, seeds=seed_list)
    monkeypatch.setattr(runner, "open_executor", lambda *a, **k: CancelOnSubmit(exp))
    runner.run_experiment(exp, store, as_job=True)
    return store, exp


def test_a_cancelled_experiment_leaves_no_run_queued(cache, monkeypatch, capsys):
    store, exp = cancelled_seeds(cache, monkeypatch)
    assert exp.state == "cancelled"
    states = {role: store.runs.get(run_id).state for role, run_id in exp.run_ids().items()}
    assert states == {"seed1": "done", "seed2": "cancelled", "seed3": "cancelled"}
    assert "stopped before it started" in store.runs.get(exp.run_ids()["seed2"]).status()["error"]
    assert main(["--cache", str(cache), "experiment", "list"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if exp.id in line]
    assert "cancelled" in row and "1/3 done" in row
    summary = exp.summary(store.runs)
    assert (summary["running"], summary["queued"], summary["cancelled"], summary["failed"]) == (0, 0, 2, 0)


def test_a_run_with_a_job_of_its_own_is_left_to_it(cache, monkeypatch):
    """A run the Train page queued (its job's pid saved) is that job's: the experiment does not stop it."""
    import os

    store = ExperimentStore(cache)
    (base,) = store.runs.list()
    exp = create_seeds(store, base, n_seeds=2)
    from cartomap.experiments.seeds import seed_config
    from cartomap.training.prepare import prepare_run

    theirs = prepare_run(seed_config(exp.params, 2), store.runs)
    theirs.set_status(state="queued", pid=os.getpid())
    monkeypatch.setattr(runner, "open_executor", lambda *a, **k: CancelOnSubmit(exp))
    runner.run_experiment(exp, store, as_job=True)
    assert exp.run_ids()["seed2"] == theirs.id and theirs.state == "queued"


def test_experiment_list_tells_queued_from_running(cache):
    store = ExperimentStore(cache)
    runs = [finished_run(cache, seed=s) for s in (2, 3, 4)]
    runs[1].set_status(state="queued")  # submitted, waiting for a worker
    runs[2].set_status(state="running")
    handle = runs[2].acquire_lock()  # a worker trains it
    try:
        params = CurriculumParams(base=RunConfig(tests=(DataConfig(path="demo:dev"),)), seeds=(0,))
        exp = store.create("curriculum", params.to_params(), name="counts")
        for role, run in zip("abc", runs, strict=True):
            exp.record_run(role, run.id)
        summary = exp.summary(store.runs)
    finally:
        handle.close()
    assert (summary["runs"], summary["running"], summary["queued"], summary["failed"]) == (
        "1/3 done",
        1,
        1,
        0,
    )


# --------------------------------------------------------------------------- deleting an experiment


def test_delete_takes_the_runs_it_made_and_keeps_the_others(cache, monkeypatch, capsys):
    store, first = cancelled_seeds(cache, monkeypatch)  # seeds 1 (the base, yours), 2, 3
    ids = first.run_ids()
    _, second = cancelled_seeds(cache, monkeypatch, seed_list=(3, 4))  # shares seed 3's run
    assert second.run_ids()["seed3"] == ids["seed3"]
    seed4 = second.run_ids()["seed4"]
    reviewed = store.runs.get(ids["seed2"])
    (reviewed.review_dir / "mine").mkdir(parents=True)  # a review queue of yours on it
    (reviewed.review_dir / "mine" / "review.sqlite").write_bytes(b"")

    assert main(["--cache", str(cache), "experiment", "delete", first.id]) == 0
    out = capsys.readouterr().out
    assert f"deleted experiment {first.id} and 0 of its runs" in out
    assert f"kept run {ids['seed1']}: another experiment uses it" in out  # the base of both
    assert f"kept run {ids['seed2']}: it holds your review queues" in out
    assert f"kept run {ids['seed3']}: another experiment uses it" in out
    assert store.find_id(first.id) is None and {r.id for r in store.runs.list()} >= set(ids.values())

    assert main(["--cache", str(cache), "experiment", "delete", second.id]) == 0
    out = capsys.readouterr().out
    assert f"and 2 of its runs: {ids['seed3']}, {seed4}" in out  # seed 3's: its maker is gone too
    assert f"kept run {ids['seed1']}: the experiment did not make it" in out  # your run
    assert {r.id for r in store.runs.list()} == {ids["seed1"], ids["seed2"]}


def test_delete_of_a_refused_count_leaves_nothing_to_delete(cache, capsys, nothing_created):
    """The issue's case: 100,000 seeds made 1,664 queued runs that delete left behind; now none is made."""
    (run,) = RunStore(cache).list()
    assert main(["--cache", str(cache), "seeds", run.id, "--seeds", "100000"]) == 2
    capsys.readouterr()
    assert ExperimentStore(cache).list() == [] and RunStore(cache).list() == [run]


def test_runs_made_by_the_runner_record_their_experiment(cache, monkeypatch):
    store, exp = cancelled_seeds(cache, monkeypatch)
    made = {role: store.runs.get(run_id).made_for for role, run_id in exp.run_ids().items()}
    assert made == {"seed1": "", "seed2": exp.id, "seed3": exp.id}
