"""What a cluster user hits: Ray Client without its package, a wrong address, RAY_ADDRESS used
silently, GPUs a cluster does not have, a local Ray listening beyond 127.0.0.1, a driver interrupted
mid-grid. Each is said in one line before anything waits or is lost."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import patience
import pytest

from cartomap import cli
from cartomap.config import DataConfig, ExecutorConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.executors import registry
from cartomap.experiments.pruning import PruningParams, create_pruning
from cartomap.experiments.runner import run_experiment
from cartomap.experiments.store import ExperimentStore

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


PRUNE = ["prune", "--test", "demo:dev", "--folds", "2", "--epochs", "1"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster-data")
    demo = load_dataset(DataConfig(path="demo:dev"))
    paths = []
    for name, rows in (("train", np.arange(0, 60)), ("test", np.arange(300, 320))):
        path = tmp / f"{name}.jsonl"
        derived.to_frame(demo.subset(rows)).to_json(path, orient="records", lines=True, force_ascii=False)
        paths.append(path)
    return paths


def pruning(cache: Path, data, tiny_model: str):
    from cartomap.config import ModelConfig, RunConfig, TrainConfig

    train, test = data
    base = RunConfig(
        data=DataConfig(path=str(train)),
        dev=None,
        tests=(DataConfig(path=str(test)),),
        model=ModelConfig(tiny_model, 32),
        train=TrainConfig(epochs=1, batch_size=16, device="cpu", save_checkpoints=False),
    )
    store = ExperimentStore(cache)
    return create_pruning(PruningParams(base=base, folds=2, threshold=0), store), store


class FakeExecutor:
    """Trains nothing: its ``train`` runs ``action`` (raise, send a signal)."""

    name = "local"

    def __init__(self, config, action):
        self.config, self.action, self.closed = config, action, False

    def train(self, batch, watch):
        self.action()
        return {}

    def close(self):
        self.closed = True


def fake_local(monkeypatch, make) -> list:
    opened = []

    def open_(config, root, log_dir):
        opened.append(make(config))
        return opened[-1]

    monkeypatch.setitem(registry.REGISTRY, "local", registry.ExecutorEntry("local", "fake", open_))
    return opened


# --------------------------------------------------------------------------- before anything is created
def test_ray_client_without_its_package_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "grpc" else real(n, *a))
    cache = tmp_path / "cache"
    code, out, err = run_cli(
        "--cache", str(cache), *PRUNE, "--executor", "ray", "--ray-address", "ray://HEAD:10001"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert 'pip install "ray[client]"' in err and "Traceback" not in err
    assert not cache.exists()


def test_a_wrong_ray_address_is_one_line_not_a_hang(tmp_path):
    cache = tmp_path / "cache"
    code, _, err = run_cli(
        "--cache",
        str(cache),
        *PRUNE,
        "--executor",
        "ray",
        "--ray-address",
        "127.0.0.1:1",
        "--connect-timeout",
        "5",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot reach the Ray cluster at 127.0.0.1:1 within 5 s" in err
    assert not cache.exists()
    with pytest.raises(CartomapError, match="cannot reach"):
        registry.check_available(ExecutorConfig(kind="ray", ray_address="localhost:1", connect_timeout_s=2))


def test_ray_address_from_the_environment_is_checked_too(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    code, _, err = run_cli("--cache", str(tmp_path / "cache"), *PRUNE, "--executor", "ray")
    assert code == 2 and "RAY_ADDRESS=127.0.0.1:1: cannot reach" in err


# --------------------------------------------------------------------------- on a running Ray
def test_ray_address_in_the_environment_is_said_and_saved(ray_session, tmp_path, monkeypatch):
    from cartomap.executors.ray_tasks import RayExecutor

    address = ray_session.get_runtime_context().gcs_address
    monkeypatch.setenv("RAY_ADDRESS", address)
    executor = RayExecutor(ExecutorConfig(kind="ray"), tmp_path)
    try:
        assert executor.config == ExecutorConfig(kind="ray", ray_address=address)  # what the runner saves
        assert f"the cluster at {address} (from RAY_ADDRESS)" in executor.describe
        assert "1 node(s), 2 CPUs, 0 GPUs" in executor.describe
    finally:
        executor.close()
    assert ray_session.is_initialized()  # joined, not started here: left running


def test_gpus_the_cluster_does_not_have_are_refused_before_submitting(ray_session, tmp_path):
    from cartomap.executors.ray_tasks import RayExecutor

    with pytest.raises(
        CartomapError, match=r"1 GPU\(s\).*no node of the Ray cluster has that \(2 CPUs and 0 GPUs\)"
    ):
        RayExecutor(ExecutorConfig(kind="ray", gpus_per_run=1), tmp_path)
    with pytest.raises(CartomapError, match="it would wait forever"):
        RayExecutor(ExecutorConfig(kind="ray", cpus_per_run=3), tmp_path)
    assert ray_session.is_initialized()


def listening_hosts(port: int) -> set[str]:
    """The local addresses listening on TCP ``port`` (Linux /proc/net/tcp and tcp6)."""
    hosts = set()
    for name in ("tcp", "tcp6"):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            host, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                loopback = host in ("0100007F", "0000000000000000FFFF00000100007F")  # also ::ffff:127.0.0.1
                hosts.add("127.0.0.1" if loopback else "any" if set(host) == {"0"} else host)
    return hosts


START_RAY = """
import json, sys
from pathlib import Path
from cartomap.config import ExecutorConfig
from cartomap.executors.ray_tasks import RayExecutor
executor = RayExecutor(ExecutorConfig(kind="ray"), Path(sys.argv[1]))
import ray
gcs = ray.get_runtime_context().gcs_address
print(json.dumps({"node_ip": ray.util.get_node_ip_address(), "gcs": gcs, "listening": sys.argv[2]}), flush=True)
sys.stdin.readline()
executor.close()
"""


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
def test_a_local_ray_started_by_the_executor_listens_on_127_0_0_1_only(tmp_path):
    """In a fresh process (ray not imported yet), as the CLI does: the GCS binds 127.0.0.1, not *."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", START_RAY, str(tmp_path), ""],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line, "the Ray executor did not start"
        info = json.loads(line)
        assert info["node_ip"] == "127.0.0.1" and info["gcs"].startswith("127.0.0.1:")
        port = int(info["gcs"].rpartition(":")[2])
        assert listening_hosts(port) == {"127.0.0.1"}
    finally:
        proc.communicate("\n", timeout=patience.WAIT_S)
    assert proc.returncode == 0


# --------------------------------------------------------------------------- the driver
def test_the_executor_config_actually_used_is_saved(data, tiny_model, tmp_path, monkeypatch):
    """An executor that joined RAY_ADDRESS reports the address it used: saved, so a resume goes there."""
    from dataclasses import replace

    exp, store = pruning(tmp_path / "cache", data, tiny_model)
    fake_local(
        monkeypatch, lambda config: FakeExecutor(replace(config, ray_address="10.0.0.1:6379"), lambda: None)
    )
    run_experiment(exp, store, executor=ExecutorConfig())
    assert exp.executor().ray_address == "10.0.0.1:6379"


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_driver_says_how_to_resume(how, data, tiny_model, tmp_path, monkeypatch):
    exp, store = pruning(tmp_path / "cache", data, tiny_model)

    def interrupt():
        if how == "ctrl-c":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)
        import time

        time.sleep(patience.WAIT_S)  # the handler's exception ends the sleep at once
        raise AssertionError("SIGTERM did not stop the runner")

    opened = fake_local(monkeypatch, lambda config: FakeExecutor(config, interrupt))
    before = signal.getsignal(signal.SIGTERM)
    code, _, err = run_cli("--cache", str(tmp_path / "cache"), "experiment", "run", exp.id)
    assert code == 130
    assert err.strip() == f"cartomap: interrupted; resume with: cartomap experiment run {exp.id}"
    assert opened[0].closed and signal.getsignal(signal.SIGTERM) == before
    assert not exp.is_locked() and "resume with" in exp.log_path.read_text()


# --------------------------------------------------------------------------- portable run ids
def test_the_same_prune_in_two_stores_gives_the_same_run_ids(data, tiny_model, tmp_path):
    """Fold and Model 1 runs read derived datasets saved in each store: their ids come from config and
    data only, not from where the store is."""
    from cartomap.experiments.pruning import (
        PruningKind,
        load_training_set,
        model1_config,
        params_of,
        pruned_training_set,
    )
    from cartomap.experiments.pruning_analysis import MODEL1
    from cartomap.training.prepare import prepare_run

    ids = []
    for name in ("a", "b"):
        exp, store = pruning(tmp_path / name / "cache", data, tiny_model)
        planned = PruningKind().planned_runs(exp, store.runs)
        params = params_of(exp)
        train = load_training_set(params)
        pruned = pruned_training_set(train, [str(i) for i in train.ids[:5]], params.cache)
        planned.append((MODEL1, model1_config(params, pruned)))
        assert all(str(tmp_path / name) in c.data.path for role, c in planned if role != "model0")
        ids.append({role: prepare_run(config, store.runs).id for role, config in planned})
    assert ids[0] == ids[1] and len(ids[0]) == 4


# --------------------------------------------------------------------------- following it
def test_experiment_show_gives_each_roles_run_state_and_epoch(data, tiny_model, tmp_path):
    """While another process trains (here: one run held by this test at epoch 1 of 2), `experiment
    show` reads each run's own status."""
    from cartomap.experiments.pruning import PruningKind
    from cartomap.training.prepare import prepare_run

    exp, store = pruning(tmp_path / "cache", data, tiny_model)
    runs = {}
    for role, config in PruningKind().planned_runs(exp, store.runs):
        runs[role] = prepare_run(config, store.runs)
        exp.record_run(role, runs[role].id)
    busy = runs["fold_1"]
    with busy.acquire_lock():
        busy.set_status(
            state="running", epoch=1, epochs=2, step=3, steps_per_epoch=4, worker_host="node7", worker_pid=42
        )
        code, out, _ = run_cli("--cache", str(tmp_path / "cache"), "experiment", "show", exp.id)
    assert code == 0
    lines = {
        " ".join(line.split()[:2]): line for line in out.splitlines() if line.strip().startswith("Model")
    }
    assert "running" in lines["Model F1"] and "1/2" in lines["Model F1"] and "3/4" in lines["Model F1"]
    assert "node7:42" in lines["Model F1"]
    assert "queued" in lines["Model F0"] and "queued" in lines["Model 0"]
    assert out.startswith("experiment ") and exp.id in out.splitlines()[0]
