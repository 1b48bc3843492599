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


class SilentPort:
    """A TCP server on 127.0.0.1 that accepts connections and never says a word: a port that passes a
    TCP check but is no Ray cluster (``ray.init`` used to wait on it for good). Stopped on exit."""

    def __enter__(self):
        import socket
        import threading

        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)  # accept() wakes to see the stop (closing the socket would not wake it)
        self.port = self.server.getsockname()[1]
        self.held: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        return self

    def _accept(self):
        while not self.stop.is_set():
            try:
                self.held.append(self.server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=patience.WAIT_S)
        self.server.close()
        for conn in self.held:
            conn.close()


def test_a_port_that_is_no_ray_cluster_is_one_line_within_the_timeout(tmp_path):
    cache = tmp_path / "cache"
    with SilentPort() as port:
        address = f"127.0.0.1:{port.port}"
        with pytest.raises(CartomapError, match="nothing there answers as a Ray cluster does"):
            registry.check_available(ExecutorConfig(kind="ray", ray_address=address, connect_timeout_s=2))
        code, out, err = run_cli(
            "--cache", str(cache), *PRUNE, "--executor", "ray", "--ray-address", address, "--connect-timeout", "2"
        )  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--ray-address {address}: cannot reach the Ray cluster at {address} within 2 s" in err
    assert not cache.exists() and out == ""  # nothing created


def test_an_http_server_is_no_ray_cluster_either(tmp_path):
    """A port that answers, but not as a gRPC server does (here a plain HTTP server)."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        with pytest.raises(CartomapError, match="what answers there is no Ray cluster"):
            registry.check_available(ExecutorConfig(kind="ray", ray_address=address, connect_timeout_s=5))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=patience.WAIT_S)


KEEPS_ADDRESS = """
import sys
from cartomap.executors import ray_tasks
ray_tasks.before_import(sys.argv[1])  # what the Ray executor does before it imports ray
print(ray_tasks._address_ray_uses(sys.argv[1]))
"""


def test_a_loopback_address_is_the_one_ray_joins():
    """Ray rewrote 127.0.0.1:PORT to the host's own address (where a Ray listening on 127.0.0.1 is not),
    then waited on it for good. In a fresh process, as the CLI has: the address stays as given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    for address in ("127.0.0.1:6379", "localhost:6379"):
        done = patience.run([sys.executable, "-c", KEEPS_ADDRESS, address], env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "127.0.0.1:6379", (address, done.stdout)


HEAD = """
import sys
from cartomap.executors.ray_tasks import start_local_ray
start_local_ray(num_cpus=2, num_gpus=0)
import ray
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.readline()
ray.shutdown()
"""


def tiny_finished_run(cache: Path, data, tiny_model: str):
    """A finished run of the tiny BERT on the 60 training pairs, with synthetic dynamics (no training)."""
    from cartomap.config import ModelConfig, RunConfig, TrainConfig
    from cartomap.io import atomic_write_parquet
    from cartomap.runs.store import RunStore
    from cartomap.scores.metrics import compute_metrics

    config = RunConfig(
        data=DataConfig(path=str(data[0])),
        dev=None,
        model=ModelConfig(name_or_path=tiny_model, max_length=32),
        train=TrainConfig(epochs=2, batch_size=16, seed=1, record="train"),
    )
    train = load_dataset(config.data)
    run = RunStore(cache).create(config, train)
    logits = np.random.default_rng(0).normal(size=(2, len(train), 3)).astype(np.float32)
    atomic_write_parquet(run.metrics_path(), compute_metrics(logits, train.labels, train.ids))
    run.set_status(state="done", epochs_done=2)
    return run


@pytest.mark.slow
def test_a_ray_on_127_0_0_1_is_joined_at_that_address(data, tiny_model, tmp_path):
    """A Ray listening on 127.0.0.1 only (as cartomap's own local Ray does) joined with --ray-address
    127.0.0.1:PORT: without the cluster's token one line and no experiment left; with it the grid trains
    there, and the address saved is the one given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        address = head.stdout.readline().strip()
        assert address.startswith("127.0.0.1:"), address
        cache = tmp_path / "cache"
        base = tiny_finished_run(cache, data, tiny_model)
        seeds = [
            sys.executable,
            "-m",
            "cartomap.cli",
            "--cache",
            str(cache),
            "seeds",
            base.id,
            "--seeds",
            "2",
        ]
        seeds += ["--executor", "ray", "--ray-address", address, "--connect-timeout", "10"]
        refused = patience.run(seeds, watch=[cache], env=env)
        said = [line for line in refused.stderr.splitlines() if line.startswith("cartomap")]
        assert refused.returncode == 2 and len(said) == 1, refused.stderr
        assert "could not join the Ray cluster at " + address in said[0] and "RAY_AUTH_MODE=token" in said[0]
        assert "Traceback" not in refused.stderr and ExperimentStore(cache).list() == []
        assert refused.stderr.strip().splitlines() == said  # Ray's own lines are in its log, not here
        assert "InvalidAuthToken" in (cache / "ray.log").read_text(encoding="utf-8")
        joined = patience.run(seeds, watch=[cache], env={**env, "RAY_AUTH_MODE": "token"})
        assert joined.returncode == 0, joined.stderr[-3000:]
        (exp,) = ExperimentStore(cache).list()
        assert exp.state == "done" and exp.executor().ray_address == address
        assert f"the cluster at {address} (from --ray-address)" in joined.stdout
    finally:
        head.communicate("\n", timeout=patience.WAIT_S)


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


# --------------------------------------------------------------------------- joining: the time and the noise
AUTH_LINE = (
    "[2026-01-01 00:00:00,000 W 1 1] gcs_client.cc:210: Failed to get cluster ID from GCS server: "
    "Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing or incorrect\n"
)


def test_joining_a_cluster_that_wants_a_token_is_bounded_and_quiet(tmp_path, monkeypatch, capfd):
    """Ray's C++ core prints a line per failed try to file descriptor 2 and tries on past the timeout:
    here a fake ray.init that does so for good. The attempt ends at --connect-timeout, the terminal gets
    nothing of Ray's, the log file in the run store gets it all, and the one line says to send a token."""
    import time

    import ray

    from cartomap.executors import ray_tasks
    from cartomap.executors.base import ExecutorUnavailable

    tries = []

    def init_forever(**kwargs):
        tries.append(os.environ[ray_tasks.GCS_WAIT_ENV])
        for _ in range(3000):  # 5 minutes: only the deadline ends it
            os.write(2, AUTH_LINE.encode())
            print("ray: a line of Python", file=sys.stderr)
            time.sleep(0.1)

    monkeypatch.setattr(ray, "init", init_forever)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # the session's Ray, if any, is left alone
    monkeypatch.delenv(ray_tasks.VERBOSE_ENV, raising=False)
    log = tmp_path / "cache" / ray_tasks.RAY_LOG
    start = time.monotonic()
    with pytest.raises(ExecutorUnavailable) as err:
        ray_tasks.join_ray("10.255.255.1:6379", 1.5, "--ray-address 10.255.255.1:6379", log=log)
    took = time.monotonic() - start
    assert took < 60, took  # bounded by the timeout, not by Ray's own count of tries
    message = str(err.value)
    assert "RAY_AUTH_MODE=token" in message and f"(Ray's log: {log})" in message and "\n" not in message
    out, errs = capfd.readouterr()
    assert "gcs_client" not in out + errs and "a line of Python" not in out + errs
    written = log.read_text(encoding="utf-8")
    assert written.count("InvalidAuthToken") >= 2 and "a line of Python" in written
    assert tries == ["2"]  # Ray's own count fills the time left, the alarm ends it


def test_ray_verbose_leaves_its_output_on_the_terminal(tmp_path, monkeypatch, capfd):
    from cartomap.executors import ray_tasks

    log = tmp_path / "ray.log"
    with ray_tasks.output_to(log):
        os.write(2, b"hidden\n")
    monkeypatch.setenv(ray_tasks.VERBOSE_ENV, "1")
    with ray_tasks.output_to(log):
        os.write(2, b"shown\n")
    assert capfd.readouterr().err == "shown\n" and log.read_text(encoding="utf-8") == "hidden\n"
