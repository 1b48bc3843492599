"""The run picker's entries and default (cartomap.experiments.picker) and the sidebar that shows them."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app_train import make_run

from cartomap.experiments.picker import default_run, experiment_runs, picker_runs
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore


def with_map(run):
    run.metrics_path().write_bytes(b"")  # has_metrics: the file is there
    return run


@pytest.fixture()
def store(root) -> tuple[Path, dict]:
    """A standalone run with a map (oldest), a pruning experiment's two fold runs (with maps, newer),
    a seeds experiment on the standalone run (its base) and one extra seed, and a newest standalone
    run without a map (failed)."""
    base = with_map(make_run(root, "done", seed=1, name="mine"))
    fold1 = with_map(make_run(root, "done", seed=2))
    fold2 = with_map(make_run(root, "done", seed=3))
    seed5 = with_map(make_run(root, "done", seed=5))
    failed = make_run(root, "failed", seed=4, name="broken")
    exps = ExperimentStore(root)
    pruning = exps.create("pruning", {"k": 2}, name="snli")
    pruning.record_run("fold_2", fold2.id)
    pruning.record_run("fold_1", fold1.id)
    seeds = exps.create("seeds", {"base_run": base.id, "seeds": [1, 5]}, name="more seeds")
    seeds.record_run("seed1", base.id)
    seeds.record_run("seed5", seed5.id)
    ids = {"base": base.id, "fold1": fold1.id, "fold2": fold2.id, "seed5": seed5.id, "failed": failed.id}
    return root, ids


def test_experiment_sub_runs_are_grouped_after_the_standalone_runs(store):
    root, ids = store
    entries = picker_runs(RunStore(root).list(), ExperimentStore(root).list())
    assert [e.run.id for e in entries] == [
        ids["failed"],
        ids["base"],
        ids["seed5"],
        ids["fold1"],
        ids["fold2"],
    ]
    labels = [e.label for e in entries]
    assert labels[0].startswith(f"broken ({ids['failed']}) · failed")
    assert labels[1].startswith(f"mine ({ids['base']}) · done")  # a seeds experiment's base stays the user's
    assert labels[2].startswith(f"seeds 'more seeds' › seed 5 · {ids['seed5']} · done")
    assert labels[3].startswith(f"pruning 'snli' › Model F1 · {ids['fold1']}")
    assert labels[4].startswith(f"pruning 'snli' › Model F2 · {ids['fold2']}")
    assert [bool(e.experiment) for e in entries] == [False, False, True, True, True]


def test_the_default_is_the_newest_run_with_a_data_map_standalone_first(store):
    root, ids = store
    entries = picker_runs(RunStore(root).list(), ExperimentStore(root).list())
    assert default_run(entries) == ids["base"]  # not the newer failed run, not a newer fold run
    assert default_run([e for e in entries if e.run.id != ids["base"]]) == ids["seed5"]
    assert default_run([]) is None


def test_without_any_map_the_default_is_the_first_finished_run(tmp_path):
    root = tmp_path / "cache"
    done = make_run(root, "done", seed=1)
    make_run(root, "failed", seed=2)
    assert default_run(picker_runs(RunStore(root).list(), [])) == done.id


def test_a_run_shared_by_two_experiments_is_listed_under_the_newer(tmp_path):
    root = tmp_path / "cache"
    run = make_run(root, "done", seed=1)
    exps = ExperimentStore(root)
    old = exps.create("pruning", {"k": 1}, name="old")
    old.record_run("model0", run.id)
    new = exps.create("pruning", {"k": 2}, name="new")
    new.record_run("model0", run.id)
    (exp, role), *rest = experiment_runs(exps.list()).values()
    assert not rest and exp.id == new.id and role == "model0"


def test_the_sidebar_lists_the_groups_and_defaults_to_a_map(store):
    from test_app_shell import PICKER, script

    root, ids = store
    at = script(PICKER).run()
    assert not at.exception
    picker = at.sidebar.selectbox[0]
    assert picker.value == ids["base"]
    assert any(o.startswith("pruning 'snli' › Model F2") for o in picker.options)
    assert picker.options.index(next(o for o in picker.options if o.startswith("mine"))) < 2


def test_a_queued_run_whose_job_took_it_is_listed_as_running(root):
    """A job takes the run's lock, then prepares (loads the model, reads data) before its first
    progress write: the saved state is still queued, and the picker says running, as the panel does."""
    import os

    run = make_run(root, "queued", pid=os.getpid())
    assert picker_runs([run], [])[0].label.split(" · ")[1] == "queued"
    handle = run.acquire_lock()
    try:
        assert run.state == "running"
        assert picker_runs([run], [])[0].label.split(" · ")[1] == "running"
    finally:
        handle.close()
    assert run.state == "queued"
