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
* **Joining a cluster** (:func:`join_ray`): ``--connect-timeout`` bounds the whole attempt, from the
  address's check to Ray's last try; what Ray itself prints meanwhile (a line per failed try of its
  C++ core) goes to :data:`RAY_LOG` in the run store, not the terminal (``CARTOMAP_RAY_VERBOSE=1``
  leaves it there); a failure is one line naming that file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import ipaddress
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from cartomap.config import ExecutorConfig
from cartomap.errors import CartomapError, RunError
from cartomap.executors.base import POLL_S, ExecutorUnavailable, Watch
from cartomap.executors.worker import probe_store, train_in_worker, write_probe
from cartomap.runs.store import Run

PROBE_TIMEOUT_S = 300  # a node busy with other work may take a while to run the probe


def pin_loopback() -> None:
    """Make a Ray started by this process listen on 127.0.0.1 only, and keep a loopback address given
    to join (``127.0.0.1:PORT``) as it is.

    Ray binds its servers to the node's address, and rewrites a loopback address to join into the
    host's own (where a Ray listening on 127.0.0.1 is not: the driver then waits on it for good); on
    Linux it does neither when it believes clusters are off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``),
    read when ``ray`` is first imported: so this must run before that import (:class:`RayExecutor` and
    :func:`check_ray` call it first thing)."""
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def start_local_ray(num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Start a Ray instance on this machine that listens on 127.0.0.1 only, with no dashboard
    (:func:`pin_loopback` first: before ``ray`` is imported). Always a new one (``address="local"``):
    without it ``ray.init`` joins the cluster named in Ray's ``/tmp/ray/ray_current_cluster``, which a
    ``ray start`` stopped long ago leaves behind (it then refuses the CPU count, or waits)."""
    pin_loopback()
    import ray

    ray.init(
        address="local",
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


#: What an HTTP/2 client sends first (RFC 9113 3.4), then an empty SETTINGS frame: every gRPC server (a
#: Ray cluster's GCS, a Ray Client server) answers with a SETTINGS frame of its own.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4  # the frame type of a SETTINGS frame (byte 3 of a frame header)


def split_address(address: str) -> tuple[str, int] | None:
    """(host, port) of ``HOST:PORT`` or ``ray://HOST:PORT``; None for auto, local and "" (and a port
    that is not a number: :func:`check_ray` refuses it)."""
    host_port = address.removeprefix("ray://")
    if not address or address in ("auto", "local") or ":" not in host_port:
        return None
    host, _, port = host_port.rpartition(":")
    return (host.strip("[]"), int(port)) if port.isdigit() else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def speaks_grpc(host: str, port: int, timeout: float) -> str:
    """ "" when the server at (host, port) answers an HTTP/2 connection preface with a SETTINGS frame
    within ``timeout`` seconds (as a Ray cluster's GCS and a Ray Client server do), else why not: the
    TCP connection's error, "no answer", or what the port did instead."""
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        return "no answer"
    except OSError as err:
        return err.strerror or type(err).__name__
    head = b""
    with conn:
        try:
            conn.settimeout(timeout)
            conn.sendall(_HTTP2_PREFACE)
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except TimeoutError:
            return "the port takes connections, but nothing there answers as a Ray cluster does"
        except OSError as err:
            return err.strerror or type(err).__name__
    if len(head) == 9 and head[3] == _SETTINGS:
        return ""
    return "the port takes connections, but what answers there is no Ray cluster (no gRPC)"


def check_ray(config: ExecutorConfig) -> None:
    """Before anything is created: Ray Client's package, and that a Ray cluster answers at the address
    within ``connect_timeout_s`` (a gRPC server there, which Ray's GCS is: a port that takes TCP
    connections but is no Ray would make ``ray.init`` wait for good)."""
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
    where = split_address(address)
    if where is None:
        raise CartomapError(f"{given}: expected auto, HOST:PORT or ray://HOST:PORT")
    timeout = config.connect_timeout_s
    why = speaks_grpc(*where, timeout)
    if why:
        raise CartomapError(
            f"{given}: cannot reach the Ray cluster at {host_port} within {timeout} s ({why}); "
            "check the address and that `ray start --head` runs there (--connect-timeout to wait longer)"
        )


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


#: Ray's own count of one-second tries to reach a cluster's GCS (``ray.init`` of an address); set from
#: ``--connect-timeout`` while joining, so that a cluster that answers but refuses (a missing auth token)
#: fails in about that time, not in Ray's 20 tries.
GCS_WAIT_ENV = "RAY_gcs_server_port_wait_time_s"


@contextlib.contextmanager
def _environ(name: str, value: str):
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def before_import(address: str) -> None:
    """What must happen before ``ray`` is imported for ``address`` (the one Ray will join, "" for a local
    Ray): :func:`pin_loopback` for a local Ray (it listens on 127.0.0.1 only) and for a loopback address
    (Ray keeps it, not the host's own)."""
    where = split_address(address)
    if not address or (where is not None and is_loopback(where[0])):
        pin_loopback()


#: Ray's own output while joining a cluster, in the run store's folder (appended).
RAY_LOG = "ray.log"
#: Set to "1" to leave Ray's own output on the terminal while joining.
VERBOSE_ENV = "CARTOMAP_RAY_VERBOSE"
#: About how long one of Ray's tries to reach a cluster's GCS takes (a second's sleep and the call).
_TRY_S = 1.2


class _Deadline(Exception):
    """The connect timeout ran out while Ray was still trying."""


@contextlib.contextmanager
def output_to(path: Path | None):
    """While inside, this process's output (file descriptors 1 and 2, which Ray's C++ core writes to, and
    Python's ``sys.stdout``/``sys.stderr``) is appended to ``path``; None, or env ``CARTOMAP_RAY_VERBOSE=1``:
    left as it is."""
    if path is None or os.environ.get(VERBOSE_ENV, "") == "1":
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(path, "a", encoding="utf-8", errors="replace") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
            log.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


@contextlib.contextmanager
def deadline_alarm(deadline: float):
    """Raise :class:`_Deadline` in this (the main) thread at ``deadline`` (``time.monotonic()``), where
    Ray's tries run Python between them; nothing where signals cannot be used (another thread)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def ring(signum, frame):
        raise _Deadline()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, deadline - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _tries(deadline: float, alarm: bool) -> int:
    """Ray's count of tries to reach the GCS for the time left before ``deadline``: enough to fill it
    when the alarm (:func:`deadline_alarm`) cuts the attempt off; else about as many as fit."""
    left = max(0.0, deadline - time.monotonic())
    return max(1, math.ceil(left) if alarm else int(left / _TRY_S))


def join_ray(
    address: str, timeout_s: float, given: str, deadline: float | None = None, log: Path | None = None
) -> None:
    """``ray.init(address)`` at the address as given (a loopback one is not rewritten to the host's
    address: :func:`pin_loopback` came first), giving up at ``deadline`` (``time.monotonic()``; default
    ``timeout_s`` from now); Ray's output meanwhile goes to ``log`` (:func:`output_to`).
    ExecutorUnavailable in one line when it cannot join (the address Ray would use instead, a token
    the cluster wants, Ray's own error, no answer in time)."""
    import ray

    where = split_address(address)
    if where is not None and not address.startswith("ray://") and is_loopback(where[0]):
        used = _address_ray_uses(address)
        if used is not None and not is_loopback(used.rpartition(":")[0].strip("[]")):
            raise ExecutorUnavailable(
                f"{given}: Ray would connect to {used} instead of the loopback address given (ray was "
                "imported in this process before cartomap could keep the address); run the command in "
                "a fresh process"
            )
    deadline = time.monotonic() + timeout_s if deadline is None else deadline
    start = log.stat().st_size if log is not None and log.exists() else 0
    alarm = threading.current_thread() is threading.main_thread()
    try:
        with output_to(log):
            try:
                with deadline_alarm(deadline), _environ(GCS_WAIT_ENV, str(_tries(deadline, alarm))):
                    ray.init(address=address, configure_logging=False)
            except BaseException:
                if ray.is_initialized():
                    ray.shutdown()
                raise
    except (Exception, _Deadline) as err:  # ConnectionError, RuntimeError, AuthenticationError: Ray's words
        said = _logged(log, start)
        why = _why(err) if not isinstance(err, _Deadline) else _why_logged(said, timeout_s)
        where = f" (Ray's log: {log})" if log is not None and said.strip() else ""
        raise ExecutorUnavailable(
            f"{given}: could not join the Ray cluster at {address}: {why}{where}"
        ) from None


def _logged(log: Path | None, start: int) -> str:
    """What Ray wrote to ``log`` from byte ``start`` on ("" without a log)."""
    if log is None or not log.exists():
        return ""
    with open(log, "rb") as f:
        f.seek(start)
        return f.read().decode("utf-8", errors="replace")


#: What Ray's log says when the cluster wants a token this process does not send.
_AUTH_WORDS = ("AuthenticationError", "InvalidAuthToken", "Unauthenticated")
_AUTH_HINT = (
    "it uses token authentication: set RAY_AUTH_MODE=token, with the cluster's token in "
    "~/.ray/auth_token or RAY_AUTH_TOKEN"
)


def _why_logged(said: str, timeout_s: float) -> str:
    """Why joining ran out of time, from what Ray logged meanwhile: a token the cluster wants, else no
    answer within ``timeout_s``."""
    if any(word in said for word in _AUTH_WORDS):
        return _AUTH_HINT
    return f"no answer within {timeout_s:g} s (--connect-timeout to wait longer)"


def _address_ray_uses(address: str) -> str | None:
    """The address ``ray.init`` would connect to for ``address`` (Ray rewrites a loopback one when it
    believes clusters are on); None when Ray does not say."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address)
    except Exception:  # a private helper: another Ray version may lack it
        return None


def _why(err: BaseException) -> str:
    """What went wrong joining, in a few words: a cluster that wants an auth token says how to give it;
    else the innermost cause's last line (Ray puts a whole traceback into some messages: its last line
    is the error)."""
    causes = [err]
    while causes[-1].__cause__ is not None and len(causes) < 10:
        causes.append(causes[-1].__cause__)
    text = " ".join(f"{type(c).__name__}: {c}" for c in causes)
    if any(word in text for word in _AUTH_WORDS):
        return _AUTH_HINT
    lines = [line.strip() for line in str(causes[-1]).splitlines() if line.strip()]
    return f"{type(causes[-1]).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


class RayExecutor:
    name = "ray"

    def __init__(self, config: ExecutorConfig, store_root: Path):
        deadline = time.monotonic() + config.connect_timeout_s  # the whole attempt to join, not each step
        address, source = ray_address(config)
        before_import(address)
        check_ray(config)
        import ray

        self.root = store_root
        self.config = dataclasses.replace(config, ray_address=address) if source == "RAY_ADDRESS" else config
        self.started_ray = False
        if not ray.is_initialized():
            if address:
                given = f"--ray-address {address}" if source == "--ray-address" else f"RAY_ADDRESS={address}"
                join_ray(address, config.connect_timeout_s, given, deadline, Path(store_root) / RAY_LOG)
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
