"""Executors: the same pruning experiment through local, Ray (a real local Ray, 2 CPU workers on
127.0.0.1) and SLURM (submitit's local executor: jobs as local processes) gives the same runs and
results; a Ray worker killed mid-run leaves a run that is resumed; cancel; missing packages."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import threading
from pathlib import Path

import numpy as np
import patience
import pytest

from cartomap import cli
from cartomap.config import DataConfig, ExecutorConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.executors import registry
from cartomap.executors.worker import probe_store, train_in_worker, write_probe
from cartomap.experiments.pruning import KIND, fold_role, load_results
from cartomap.experiments.pruning_analysis import MODEL0, MODEL1
from cartomap.experiments.runner import run_experiment
from cartomap.experiments.store import ExperimentStore

TRAIN_ROWS, TEST_ROWS = np.arange(0, 150), np.arange(300, 340)
ROLES = {MODEL0, MODEL1, *(fold_role(f) for f in range(3))}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("executors")
    demo = load_dataset(DataConfig(path="demo:dev"))
    paths = []
    for name, rows in (("train", TRAIN_ROWS), ("test", TEST_ROWS)):
        path = tmp / f"{name}.jsonl"
        derived.to_frame(demo.subset(rows)).to_json(path, orient="records", lines=True, force_ascii=False)
        paths.append(str(path))
    return tmp, paths


def prune_args(cache: Path, data, tiny_model: str, *extra: str) -> list[str]:
    _, (train, test) = data
    return [
        "--cache", str(cache), "prune", train, "--test", test, "--folds", "3", "--threshold", "0",
        "--categories", "P1G0", "P2G0", "P0G1", "--model", tiny_model, "--max-length", "48", "--epochs", "2",
        "--batch-size", "16", "--lr", "1e-3", "--warmup-ratio", "0", "--device", "cpu", "--no-checkpoints",
        *extra,
    ]  # fmt: skip


def prune(cache: Path, data, tiny_model: str, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(prune_args(cache, data, tiny_model, *extra))
    return code, out.getvalue()


def prune_in_thread(cache: Path, data, tiny_model: str, *extra: str) -> tuple[threading.Thread, dict]:
    """`cartomap prune` in a thread of this process (so it uses the session's Ray); the result dict
    gets "code" and "out" when it ends."""
    result: dict = {}

    def target():
        result["code"], result["out"] = prune(cache, data, tiny_model, *extra)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result


def outcome(cache: Path) -> dict:
    """What an experiment produced: its roles -> run ids, pruned ids, OOF logits, per-run test logits."""
    store = ExperimentStore(cache)
    (exp,) = store.list(KIND)
    results = load_results(exp)
    runs = {role: store.runs.get(run_id) for role, run_id in exp.run_ids().items()}
    return {
        "exp": exp,
        "store": store,
        "state": exp.state,
        "run_ids": exp.run_ids(),
        "runs": runs,
        "pruned": sorted(results["pruned_ids"]) if results else None,
        "oof": results["oof"].set_index("id").sort_index() if results else None,
        "test_logits": {role: run.test_logits(0)[1] for role, run in runs.items() if run.state == "done"},
        "accuracy": results["summary"]["model1_test_accuracy"] if results else None,
        "signatures": {role: signature(run, cache) for role, run in runs.items()},
    }


def signature(run, cache: Path) -> str:
    """A run's config identity, with the store's own path left out, and its data fingerprints: equal
    for the same run in two stores (fold and pruned datasets live in each store's datasets folder)."""
    info = run.info
    content = {
        "config": run.config.identity(),
        "train": info["train_fingerprint"],
        "tests": [t["fingerprint"] for t in info["tests"]],
    }
    return json.dumps(content, sort_keys=True).replace(str(Path(cache).resolve()), "<store>")


def assert_same(a: dict, b: dict) -> None:
    """The same runs (ids: config and data) and results; logits to float32 rounding (the workers run
    torch with one thread, this process with its own count)."""
    assert a["state"] == b["state"] == "done"
    assert set(a["run_ids"]) == set(b["run_ids"]) == ROLES
    assert a["run_ids"] == b["run_ids"]  # ids from config and data only, wherever the store is
    assert a["signatures"] == b["signatures"]
    assert a["pruned"] == b["pruned"] and a["pruned"]
    logit_columns = ["logit_0", "logit_1", "logit_2"]
    assert np.abs(a["oof"][logit_columns].to_numpy() - b["oof"][logit_columns].to_numpy()).max() < 1e-5
    for role in ROLES:
        assert np.abs(a["test_logits"][role] - b["test_logits"][role]).max() < 1e-5, role
    assert a["accuracy"] == b["accuracy"]


@pytest.fixture(scope="module")
def local(tmp_path_factory, data, tiny_model):
    cache = tmp_path_factory.mktemp("local") / "cache"
    code, out = prune(cache, data, tiny_model, "--executor", "local")
    assert code == 0, out
    return outcome(cache)


def check_ray(ray: dict, out: str) -> None:
    # the runs trained in Ray's worker processes, two at a time (Model 0 and the folds in one batch)
    workers = {run.saved_status().get("worker_pid") for run in ray["runs"].values()}
    assert None not in workers and os.getpid() not in workers and len(workers) >= 2
    log = ray["exp"].log_path.read_text()
    assert "executor ray: Ray: 1 node(s), 2 CPUs" in log
    assert "training model0, fold_0, fold_1, fold_2 on ray" in log and "training model1 on ray" in log
    assert ray["exp"].executor().kind == "ray"  # saved: a resume uses Ray again


def check_slurm(slurm: dict, out: str) -> None:
    assert "local processes" in out
    # one job per run (a job array per batch): submitit's folders hold each job's pickled call and logs
    jobs = list(slurm["exp"].executor_log_dir.iterdir())
    assert len([j for j in jobs if any(j.glob("*_log.out"))]) == 5
    workers = {run.saved_status().get("worker_pid") for run in slurm["runs"].values()}
    assert os.getpid() not in workers and len(workers) == 5


#: What each executor's conformance run checks beyond "the same runs and results as local".
SPECIFIC_CHECKS = {"local": lambda _outcome, _out: None, "ray": check_ray, "slurm": check_slurm}


def test_the_registry_names_the_configs_executors():
    """config validates the kind without importing executors: its names are the registry's."""
    from cartomap.cli.options import add_executor_arguments
    from cartomap.config import EXECUTORS

    assert registry.names() == EXECUTORS
    assert set(SPECIFIC_CHECKS) == set(EXECUTORS)  # a new executor joins the conformance test
    parser = __import__("argparse").ArgumentParser()
    add_executor_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "executor"]
    assert tuple(action.choices) == EXECUTORS
    for name, text in registry.descriptions().items():
        assert text and "\n" not in text and text in action.help, name
    with pytest.raises(CartomapError, match="unknown executor 'kubernetes'"):
        registry.entry("kubernetes")


def test_every_executors_form_settings_are_build_executor_config_keywords(monkeypatch):
    """The dashboard's executor form asks for the settings each entry declares and passes them to
    build_executor_config by name: every name is one of its keywords, no two settings of an executor
    share a name or a form key, and the form's defaults give the config's defaults."""
    import inspect

    from cartomap.experiments import forms

    keywords = set(inspect.signature(forms.build_executor_config).parameters) - {"kind"}
    monkeypatch.setattr(forms, "check_available", lambda config: None)  # ray / submitit not needed
    for entry in registry.REGISTRY.values():
        names, keys = [o.name for o in entry.options], [o.key for o in entry.options]
        assert set(names) <= keywords, entry.name
        assert len(set(names)) == len(names) and len(set(keys)) == len(keys), entry.name
        assert all(o.label and o.type in registry.OPTION_TYPES for o in entry.options), entry.name
        defaults = {o.name: o.default for o in entry.options}
        assert forms.build_executor_config(entry.name, **defaults) == ExecutorConfig(kind=entry.name)
    assert [o.name for o in registry.entry("local").options] == []
    assert {"ray_address", "cpus_per_run", "gpus_per_run"} == {o.name for o in registry.entry("ray").options}
    assert {"slurm_partition", "slurm_time_min", "sbatch", "slurm_mem_gb", "slurm_local"} < {
        o.name for o in registry.entry("slurm").options
    }
    with pytest.raises(ValueError, match="type 'float'"):
        registry.ExecutorOption("x", "x", "X", float, 0.5)


@pytest.mark.parametrize(
    "name",
    # another executor than local starts Ray or a SLURM stand-in: with -m slow (the default suite's 10 minutes)
    [pytest.param(name, marks=() if name == "local" else pytest.mark.slow) for name in registry.names()],
)
def test_every_registered_executor_gives_the_same_runs_and_results_as_local(
    name, local, data, tiny_model, tmp_path, request
):
    """Conformance (every executor of the registry): the same tiny pruning experiment through it, on
    its one-machine stand-in (a local Ray; SLURM's local stand-in), gives the same runs and results."""
    import importlib.util

    entry = registry.entry(name)
    if entry.package and importlib.util.find_spec(entry.package) is None:
        pytest.skip(f"{entry.package} is not installed")
    if name == "ray":
        request.getfixturevalue("ray_session")
    code, out = prune(tmp_path / "cache", data, tiny_model, "--executor", name, *entry.stand_in)
    assert code == 0, out
    result = outcome(tmp_path / "cache")
    assert_same(result, local)
    SPECIFIC_CHECKS[name](result, out)


@pytest.mark.slow  # a local Ray, a worker killed mid-run and a resume
def test_a_killed_ray_worker_leaves_a_run_that_is_resumed(ray_session, local, data, tiny_model, tmp_path):
    """SIGKILL the Ray worker training a run after its first epoch: Ray retries the task, the retry
    resumes the run from epoch 1, and the experiment ends with the same runs and results."""
    from cartomap.runs.store import RunStore

    cache = tmp_path / "cache"
    thread, result = prune_in_thread(cache, data, tiny_model, "--executor", "ray")

    def mid_run():
        """(run, pid) of a run between its first and last epoch, its worker killed."""
        for run in RunStore(cache).list():
            status = run.saved_status()
            pid = status.get("worker_pid")
            if status.get("state") == "running" and pid and run.state_latest_path.exists():
                os.kill(pid, signal.SIGKILL)  # mid-run: epoch 1 saved, epoch 2 under way
                return run, pid
        return None

    # however slow the machine, while the experiment makes progress (tests/patience.py)
    killed = patience.wait_progressing(thread, [cache], until=mid_run, poll_s=0.02, what="the experiment")
    patience.wait_progressing(thread, [cache], what="the experiment")
    assert killed is not None, "no run was caught between its first and last epoch"
    assert result.get("code") == 0, result.get("out")
    assert_same(outcome(cache), local)
    run, pid = killed
    assert run.state == "done" and run.saved_status()["worker_pid"] != pid
    assert "resuming after epoch 1" in run.log_path.read_text()


CANCEL_EPOCHS = 12


@pytest.mark.slow  # a local Ray, cancelled mid-run and resumed
def test_cancel_stops_the_ray_tasks_and_resume_finishes(ray_session, data, tiny_model, tmp_path, monkeypatch):
    from cartomap.executors import ray_tasks
    from cartomap.runs.store import RunStore

    cache = tmp_path / "cache"
    # A run caught in its second epoch must still be training when the cancel reaches it: the executor
    # looks at the cancel flag every POLL_S (1 s), and on a quiet machine 8 epochs of the tiny model ended
    # before that (the run "done", the others still "queued"). Here it looks every 0.05 s, and the runs
    # have 12 epochs.
    monkeypatch.setattr(ray_tasks, "POLL_S", 0.05)
    longer = ("--executor", "ray", "--epochs", str(CANCEL_EPOCHS))
    thread, result = prune_in_thread(cache, data, tiny_model, *longer)

    def in_epoch_1() -> bool:
        statuses = [run.saved_status() for run in RunStore(cache).list()]
        return any(st.get("state") == "running" and st.get("epoch") == 1 for st in statuses)

    if patience.wait_progressing(thread, [cache], until=in_epoch_1, poll_s=0.02, what="the experiment"):
        (exp,) = ExperimentStore(cache).list(KIND)
        exp.request_cancel()
    patience.wait_progressing(thread, [cache], what="the experiment")
    assert result.get("code") == 3, result.get("out")
    (exp,) = ExperimentStore(cache).list(KIND)
    assert exp.state == "cancelled"
    states = {run.state for run in RunStore(cache).list()}
    assert "running" not in states and "interrupted" not in states and "cancelled" in states
    assert MODEL1 not in exp.run_ids()  # planned only after the folds: never reached
    # Resume (the saved executor, Ray) finishes every run, each with all its epochs, and the results
    store = ExperimentStore(cache)
    run_experiment(exp, store)
    done = outcome(cache)
    assert done["state"] == "done" and set(done["run_ids"]) == ROLES
    for run in done["runs"].values():
        assert run.state == "done" and len(run.history()) == CANCEL_EPOCHS
    assert done["pruned"] is not None and done["accuracy"] is not None


def test_a_worker_that_does_not_see_the_store_says_so(tmp_path):
    with pytest.raises(RunError, match="does not see .* the run store is not shared"):
        train_in_worker(str(tmp_path / "elsewhere" / "runs" / "abc"), 1)
    probe, token = write_probe(tmp_path)
    assert probe_store(str(probe), token)[1] and not probe_store(str(probe), "another token")[1]
    assert not probe_store(str(tmp_path / "missing"), token)[1]


def test_ray_probe_sees_the_store_on_every_node(ray_session, tmp_path):
    from cartomap.executors.ray_tasks import check_shared_store

    hosts = check_shared_store(tmp_path)
    assert len(hosts) == 1 and not list(tmp_path.iterdir())  # the probe file is removed again
    # the session's Ray (cartomap's start_local_ray) listens on the loopback address only
    (node,) = ray_session.nodes()
    assert node["NodeManagerAddress"] == "127.0.0.1"
    assert ray_session.get_runtime_context().gcs_address.startswith("127.0.0.1:")


def test_ray_probe_names_a_node_that_does_not_see_the_store(ray_session, tmp_path, monkeypatch):
    """As if the store were not mounted on the node: the probe file the workers look for is not there."""
    from cartomap.executors import ray_tasks

    monkeypatch.setattr(ray_tasks, "write_probe", lambda root: (tmp_path / "not-mounted" / "probe", "token"))
    with pytest.raises(RunError, match=r"Ray node\(s\) .* do not see the run store .*CARTOMAP_CACHE"):
        ray_tasks.check_shared_store(tmp_path)


def test_missing_package_says_how_to_install_before_creating_anything(
    data, tiny_model, tmp_path, monkeypatch, capsys
):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("ray", "submitit") else real(name, *a)
    )
    for kind, extra in (("ray", "ray"), ("slurm", "slurm")):
        code, _ = prune(tmp_path / "cache", data, tiny_model, "--executor", kind)
        assert code == 2
        assert f"pip install 'cartomap[{extra}]'" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


def test_executor_options_are_checked():
    assert ExecutorConfig(kind="slurm", slurm_options=("--account=nlp", "qos=high")).sbatch_options() == {
        "account": "nlp",
        "qos": "high",
    }
    for bad, field in (
        (dict(kind="kubernetes"), "executor"),
        (dict(cpus_per_run=0), "cpus_per_run"),
        (dict(gpus_per_run=-1), "gpus_per_run"),
        (dict(slurm_options=("account",)), "slurm_options"),
    ):
        with pytest.raises(DataError) as err:
            ExecutorConfig(**bad)
        assert err.value.field == field
    assert ExecutorConfig.from_dict(
        ExecutorConfig(kind="ray", slurm_options=("a=b",)).to_dict()
    ) == ExecutorConfig(kind="ray", slurm_options=("a=b",))
