"""The Ray executor: one Ray task per run, placed by Ray on a local instance or an existing cluster.

Each run of a batch becomes a task of :func:`cartomap.executors.worker.train_in_worker` asking for
``cpus_per_run`` CPUs and ``gpus_per_run`` GPUs (by default one GPU where the cluster has GPUs), so
Ray packs as many runs at once as the machines hold. With no address a local Ray is started for the
experiment (one machine, all its GPUs; it listens on 127.0.0.1 only) and stopped at the end;
``auto`` joins the cluster of ``ray start`` on this machine, ``ray://host:10001`` a remote one.

* **Shared store**: at start one probe task per node reads a token the driver wrote into the run
  store; a node that cannot read it stops the experiment with an error naming it.
* **Killed workers**: a task whose worker process dies is retried by Ray (``retries`` times); the
  retry resumes the run from its last completed epoch.
* **Cancel**: the experiment's cancel flag becomes each run's cancel flag (a running task stops after
  its current step, its run saved as cancelled), and tasks that have not started are cancelled in Ray.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
import sys
from pathlib import Path

from cartomap.config import ExecutorConfig
from cartomap.errors import CartomapError, RunError
from cartomap.executors.base import POLL_S, Watch
from cartomap.executors.worker import probe_store, train_in_worker, write_probe
from cartomap.runs.store import Run

PROBE_TIMEOUT_S = 300  # a node busy with other work may take a while to run the probe


def pin_loopback() -> None:
    """Make a Ray started by this process listen on 127.0.0.1 only.

    Ray binds its servers to the node's address; on Linux it takes the loopback address only when it
    believes clusters are off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), read when ``ray`` is first
    imported: so this must run before that import (:class:`RayExecutor` calls it first thing)."""
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def start_local_ray(num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Start a Ray instance on this machine that listens on 127.0.0.1 only, with no dashboard
    (:func:`pin_loopback` first: before ``ray`` is imported)."""
    pin_loopback()
    import ray

    ray.init(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=False,
        configure_logging=False,
        _node_ip_address="127.0.0.1",
    )


def check_shared_store(root: Path) -> list[str]:
    """The hosts of every alive Ray node, after checking that each reads a probe file written into the
    run store here (RunError naming the nodes that do not)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe, token = write_probe(root)
    try:
        task = ray.remote(probe_store)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        refs = [
            task.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False),
            ).remote(str(probe), token)
            for n in nodes
        ]
        results = ray.get(refs, timeout=PROBE_TIMEOUT_S)
    finally:
        probe.unlink(missing_ok=True)
    blind = [host for host, seen in results if not seen]
    if blind:
        raise RunError(
            f"Ray node(s) {', '.join(sorted(set(blind)))} do not see the run store {root}. On a cluster, "
            "CARTOMAP_CACHE (or --cache) must be a folder on a filesystem every node mounts at the same "
            "path (NFS, Lustre, GPFS, ...)"
        )
    return sorted({host for host, _ in results})


def ray_address(config: ExecutorConfig) -> tuple[str, str]:
    """(the address Ray will join, where it came from): ``--ray-address``, else ``RAY_ADDRESS`` (which
    ``ray.init`` would read silently), else "" (a local Ray is started)."""
    if config.ray_address:
        return config.ray_address, "--ray-address"
    env = os.environ.get("RAY_ADDRESS", "").strip()
    return (env, "RAY_ADDRESS") if env else ("", "")


def check_ray(config: ExecutorConfig) -> None:
    """Before anything is created: Ray Client's package, and that the cluster's address answers
    (a TCP connection within ``connect_timeout_s``; a wrong address would make ``ray.init`` wait)."""
    address, source = ray_address(config)
    given = f"--ray-address {address}" if source == "--ray-address" else f"RAY_ADDRESS={address}"
    if address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
        raise CartomapError(
            f'{given}: Ray Client needs ray\'s "client" extra: pip install "ray[client]" '
            "(or pip install 'cartomap[ray]')"
        )
    host_port = address.removeprefix("ray://")
    if not address or address in ("auto", "local") or ":" not in host_port:
        return
    host, _, port = host_port.rpartition(":")
    if not port.isdigit():
        raise CartomapError(f"{given}: expected auto, HOST:PORT or ray://HOST:PORT")
    timeout = config.connect_timeout_s
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as err:
        why = "no answer" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise CartomapError(
            f"{given}: cannot reach the Ray cluster at {host_port} within {timeout} s ({why}); "
            "check the address and that `ray start --head` runs there (--connect-timeout to wait longer)"
        ) from None


def check_resources(config: ExecutorConfig, gpus: int) -> None:
    """CartomapError when no alive node of the cluster can ever hold one run (its tasks would wait
    forever): the CPUs and GPUs per run against each node's."""
    import ray

    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if any(n.get("CPU", 0) >= config.cpus_per_run and n.get("GPU", 0) >= gpus for n in nodes):
        return
    have = ", ".join(f"{n.get('CPU', 0):g} CPUs and {n.get('GPU', 0):g} GPUs" for n in nodes) or "no node"
    raise CartomapError(
        f"a run asks for {config.cpus_per_run} CPU(s) and {gpus} GPU(s) (--cpus-per-run, --gpus-per-run), "
        f"but no node of the Ray cluster has that ({have}): it would wait forever"
    )


class RayExecutor:
    name = "ray"

    def __init__(self, config: ExecutorConfig, store_root: Path):
        address, source = ray_address(config)
        if not address:
            pin_loopback()  # before ray is imported: a local Ray listens on 127.0.0.1 only
        check_ray(config)
        import ray

        self.root = store_root
        self.config = dataclasses.replace(config, ray_address=address) if source == "RAY_ADDRESS" else config
        self.started_ray = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, configure_logging=False)
            else:
                start_local_ray()
            self.started_ray = True
        try:
            resources = ray.cluster_resources()
            gpus = config.gpus_per_run
            self.gpus = gpus if gpus is not None else (1 if resources.get("GPU", 0) >= 1 else 0)
            check_resources(config, self.gpus)
            self.hosts = check_shared_store(store_root)
        except BaseException:
            self.close()
            raise
        where = (
            f"the cluster at {address} (from {source})"
            if address
            else "a local Ray on 127.0.0.1 started for this experiment"
        )
        self.describe = (
            f"Ray: {len(self.hosts)} node(s), {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs; "
            f"{self.config.cpus_per_run} CPU(s) and {self.gpus} GPU(s) per run; {where}"
        )

    def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]:
        import ray

        # a fresh worker process per run (max_calls=1): a cancel that lands while a task imports torch
        # leaves a half-imported torch behind, which would fail every later run given to that worker
        task = ray.remote(max_calls=1)(train_in_worker)
        owners: dict = {}
        for role, run in batch:
            run.clear_cancel()
            ref = task.options(
                num_cpus=self.config.cpus_per_run,
                num_gpus=self.gpus,
                max_retries=self.config.retries,
                retry_exceptions=False,
                name=f"cartomap {role} {run.id}",
            ).remote(str(run.path.resolve()), self.config.cpus_per_run, os.getcwd())
            owners[ref] = (role, run)
        watch.echo(f"submitted {len(batch)} run(s) to {self.describe}")
        errors: dict[str, str] = {}
        pending, cancelling = list(owners), False
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
            for ref in ready:
                role, run = owners[ref]
                try:
                    ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    pass
                except ray.exceptions.RayError as err:
                    errors[run.id] = f"{role}: {type(err).__name__}: {first_line(err)}"
            if watch.cancelled() and not cancelling:
                cancelling = True
                for ref in pending:
                    role, run = owners[ref]
                    run.request_cancel()  # a running task stops after its current step
                    if not run.is_locked():  # not started: take it out of Ray's queue
                        ray.cancel(ref)
        return errors

    def close(self) -> None:
        import ray

        if self.started_ray and ray.is_initialized():
            ray.shutdown()
        self.started_ray = False


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
