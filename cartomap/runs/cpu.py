"""How cartomap's processes compute on a CPU: how long idle threads wait actively, and how many threads.
The one owner of that policy.

Torch computes on a CPU with OpenMP threads, one per CPU the process may use. A training step runs about
a thousand short pieces of parallel work; between two of them a thread waits for the others, and GNU
OpenMP (the one PyPI's torch ships) lets it spin 300,000 times (about 3 ms) before it sleeps. Alone on
the machine that keeps the threads hot; beside other CPU-bound processes (the dashboard's server and its
other jobs, a test suite, another user) the spinning burns the process's own share of the CPUs while the
thread it waits for is not running: beside two CPU-bound processes on 2 cores a training took 1.3 to 8
times its fair share of time. Sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) keeps the share, but then
every piece of work waits for a thread to wake up, and alone it trained 8 % (quiet machine) to 100 %
(busy one) slower. So every process cartomap starts for long work (the command line and so its jobs, the
executors' workers, the dashboard's launcher and so its jobs) computes with:

* **short spinning**: ``GOMP_SPINCOUNT`` = :data:`SPIN_COUNT`, a tenth of the default: a waiting thread
  bridges the short gaps between the pieces of one step and sleeps through a long wait for a thread that
  is not running. Alone it trained as fast as with the default, beside two CPU-bound processes on 2
  cores it kept its fair share (``bench/bench_contention.py``, docs/benchmarks.md);
* **threads sized to the CPUs this process may use**: torch follows the process's CPU affinity but not
  its cgroup's CPU quota (a container's or a SLURM job's limit), so ``OMP_NUM_THREADS`` is set to the
  quota (rounded up) when it allows fewer CPUs than the affinity.

The thread count does not follow the load while a run trains: it changes how sums are split between
threads and so the last bits of the results, and a resumed run must match one that was not interrupted.

OpenMP reads its environment once, when torch loads it: :func:`apply` sets the policy in this process
before torch is imported, :func:`job_env` gives it to a process about to start. A user's own settings
win: an ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` in the environment keeps its meaning
(``GOMP_SPINCOUNT=300000`` is GNU OpenMP's default; ``OMP_WAIT_POLICY=PASSIVE`` keeps more of a crowded
machine), so does an ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``; and a process that imported torch before
(a script using cartomap as a library) is left as its owner set it.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path

#: How often a waiting GNU OpenMP thread spins before it sleeps (its default: 300,000).
SPIN_COUNT = 30_000
#: A user's own choice of waiting: any of these in the environment and the spin count is not set.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
#: A user's own choice of thread count: any of these in the environment and the count is not set.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
CGROUP = Path("/sys/fs/cgroup")


def cgroup_quota(root: Path = CGROUP, self_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use (quota / period, e.g. 1.5), the smallest along its path up
    to the hierarchy's root; None without a limit, or where it cannot be read. cgroup v2 (``cpu.max``) and
    v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of the cpu controller)."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2: one hierarchy
            base, read = root, _v2_limit
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's hierarchy
            names = ("cpu,cpuacct", "cpu", "cpuacct,cpu")
            base = next((root / n for n in names if (root / n).is_dir()), None)
            if base is None:
                continue
            read = _v1_limit
        else:
            continue
        folder = base / path.lstrip("/")
        while True:
            limit = read(folder)
            if limit is not None:
                limits.append(limit)
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    return min(limits) if limits else None


def _v2_limit(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_limit(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, capped by its cgroup's CPU quota (rounded up), >= 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_quota()
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def job_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a process started with environment ``env`` (default: this process's) gets for the policy:
    the spin count unless ``env`` chose how threads wait, the thread count when the cgroup's quota allows
    fewer CPUs than the affinity and ``env`` chose none. Empty when ``env`` has them already."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    if not any(env.get(k) for k in WAIT_VARIABLES):
        out["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    if not any(env.get(k) for k in THREAD_VARIABLES):
        cpus = usable_cpus()
        try:
            affinity = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            affinity = os.cpu_count() or cpus
        if cpus < affinity:
            out["OMP_NUM_THREADS"] = str(cpus)
    return out


def apply() -> dict[str, str]:
    """Put the policy into this process's environment, for OpenMP to read when torch is imported; returns
    what was set. Once torch is loaded, its OpenMP has read the environment already: nothing is set."""
    if "torch" in sys.modules:
        return {}
    added = job_env(os.environ)
    os.environ.update(added)
    return added
