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

* **waiting chosen by the machine it starts on**: a process that finds the CPUs it may use free spins
  briefly (``GOMP_SPINCOUNT`` = :data:`SPIN_COUNT`, a tenth of the default: it bridges the short gaps
  between the pieces of one step and sleeps through a long wait; alone it trains as fast as the default);
  one that finds other processes runnable on them (:func:`crowded`: the kernel's count of runnable tasks,
  the median of 5 reads over 16 ms and then, when that says crowded, of 41 reads over a second, and a
  1-minute load average that says they have been busy a while) waits passively (``OMP_WAIT_POLICY=PASSIVE``), since beside two CPU-bound
  processes on 2 cores even the short spin took 1.8x its fair share of time on a quiet machine, and
  passive waiting 1.0-1.1x (``bench/bench_contention.py``, docs/benchmarks.md). How threads wait changes
  no result, so a run resumed under another load still matches one that was not interrupted. Env
  ``CARTOMAP_WAIT`` = ``spin`` or ``passive`` fixes the choice (default ``auto``);
* **threads sized to the CPUs this process may use**: torch follows the process's CPU affinity but not
  its cgroup's CPU quota (a container's or a SLURM job's limit), so ``OMP_NUM_THREADS`` is set to the
  quota (rounded up) when it allows fewer CPUs than the affinity.

The thread count does not follow the load while a run trains: it changes how sums are split between
threads and so the last bits of the results, and a resumed run must match one that was not interrupted.

**Waiting that follows the load.** OpenMP reads how its threads wait once, when it starts, and has no call
to change it later; so a training that began on free CPUs kept spinning when other work started beside it
(1.7x its fair share of time, where passive waiting keeps about 1.2x). A process that knows a command line
continuing its work (:func:`allow_restart`: ``cartomap train``, as ``train --run ID``; ``cartomap demo
--train``; the dashboard's training and experiment jobs; ``cartomap experiment run``) asks
:func:`rechoose` at the end of every epoch but the last, once the epoch's checkpoint is written, and
inside an epoch at each of its recordings and at least every :data:`FOLLOW_EVERY_S` of training: when the
CPUs it may use became crowded (or free again) and cartomap chose the waiting (``CARTOMAP_WAIT=auto``, no
user variable), it starts itself again in place (:func:`restart`: ``exec``, same pid), waiting the other
way, and resumes from the last checkpoint, bit-identical to a run that was not restarted. It does so only
when it pays (:func:`pays`): a run resumes at an epoch's end, so inside an epoch the steps done since
count as part of the restart's cost. The decision reads only the runnable tasks (:func:`crowded_now`),
not the load average, which the training itself has raised.

OpenMP reads its environment once, when torch loads it: :func:`apply` sets the policy in this process
before torch is imported, :func:`job_env` gives it to a process about to start. A user's own settings
win: an ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` in the environment keeps its meaning
(``GOMP_SPINCOUNT=300000`` is GNU OpenMP's default; ``OMP_WAIT_POLICY=PASSIVE`` keeps more of a crowded
machine), so does an ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``; and a process that imported torch before
(a script using cartomap as a library) is left as its owner set it.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from cartomap.errors import CartomapError

#: How often a waiting GNU OpenMP thread spins before it sleeps (its default: 300,000).
SPIN_COUNT = 30_000
#: A user's own choice of waiting: any of these in the environment and the spin count is not set.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
#: How cartomap's processes wait: "auto" (spin briefly on free CPUs, passively on crowded ones, decided
#: when a process starts), "spin" or "passive" whatever the machine.
WAIT_ENV = "CARTOMAP_WAIT"
WAIT_CHOICES = ("auto", "spin", "passive")
#: The variables cartomap set itself (comma-separated names): not a user's choice, so a process it starts
#: decides again for the machine as it is then.
POLICY_MARK = "CARTOMAP_CPU_POLICY"
#: Other runnable tasks (the median of the samples) from which the CPUs count as crowded.
CROWDED_AT = 0.5
#: How long a first reading of crowded CPUs is watched before it counts (:func:`crowded`), and how many
#: reads over that time: other tasks must stay runnable through more than half of it. The dashboard's
#: server answering the click that starts a job, and the browser redrawing the page, keep a CPU busy for
#: about half a second around the job's start; a job that took that for crowding waited passively and
#: trained the demo 17 % slower on free CPUs (docs/benchmarks.md, "A job followed from the dashboard").
CONFIRM_S = 1.0
CONFIRM_READS = 41
#: The waiting a restarted process takes (set by :func:`restart`, read once by :func:`apply`): the machine
#: was measured just before the restart, at a quiet moment of this process (between two epochs).
RESTART_ENV = "CARTOMAP_WAIT_RESTART"
#: The command line that continues this process's work (:func:`allow_restart`); None: it may not restart.
_restart_argv: list[str] | None = None
#: What passive waiting saves on crowded CPUs, and brief spinning on free ones, as a share of the training
#: time left (docs/benchmarks.md: beside two CPU-bound processes spinning took 1.7x its fair share and
#: passive waiting 1.2x, bench/bench_contention.py; alone on a quiet machine the demo's first epoch
#: trained in 51.7 s waiting passively and 44.9 s spinning, 15 % less, where a smaller run measured 8 %):
#: a restart is worth it when this share of the time left is more than the restart costs.
RESTART_GAIN = {"passive": 0.25, "spin": 0.15}
#: How often a training asks about the load inside an epoch, in seconds of training, besides at each of
#: its recordings and at each epoch's end (a quick question: 9 reads over 80 ms while free).
FOLLOW_EVERY_S = 60.0
#: When this module was imported (early in every cartomap process): the start of what a restart repeats.
_IMPORTED = time.monotonic()
#: Whether this process runs cartomap's own command line (:func:`own_process`).
_own_process = False
#: What to do just before a restart (:func:`allow_restart`'s ``before``).
_before_restart: list[Callable[[], None]] = []
#: Whether this process is such a restart (:func:`apply` found :data:`RESTART_ENV`).
_restarted = False
LOADAVG = Path("/proc/loadavg")
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


def affinity_cpus() -> int:
    """The CPUs this process's affinity allows (all of the machine's where there is no affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, capped by its cgroup's CPU quota (rounded up), >= 1."""
    cpus = affinity_cpus()
    quota = cgroup_quota()
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def others_runnable(samples: int = 5, interval: float = 0.004, loadavg: Path = LOADAVG) -> float | None:
    """Other tasks runnable on the machine now: the median of ``samples`` reads of the kernel's count of
    runnable tasks (``/proc/loadavg``'s fourth field, "running/total"), less the reading process itself;
    None where it cannot be read (not Linux)."""
    counts = []
    for k in range(samples):
        try:
            counts.append(int(loadavg.read_text().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return None
        if k + 1 < samples:
            time.sleep(interval)
    return float(sorted(counts)[len(counts) // 2])


def load_average(loadavg: Path = LOADAVG) -> float | None:
    """The kernel's 1-minute load average (``/proc/loadavg``'s first field); None where unreadable."""
    try:
        return float(loadavg.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def crowded(loadavg: Path = LOADAVG, usable: int | None = None, watch: bool = True) -> bool:
    """Whether other processes keep the CPUs this process may use busy: other tasks runnable beyond the
    machine's CPUs outside this process's share (:func:`usable_cpus`) by at least :data:`CROWDED_AT`, and
    a 1-minute load average beyond them by at least one CPU. A first quick reading that says crowded is
    watched for :data:`CONFIRM_S` (the median of :data:`CONFIRM_READS` reads must say so too), so that a
    burst of a moment (the dashboard's server and the browser answering the click that started a job,
    the end of the previous training still in the load average) does not count, work that keeps the
    CPUs busy does. Free CPUs answer at once. ``usable``: :func:`usable_cpus`, when the caller has it;
    ``watch`` False: the first reading alone (a process about to start another, which decides again)."""
    others = others_runnable(loadavg=loadavg)
    load = load_average(loadavg)
    if others is None or load is None:
        return False
    outside = _outside(usable)
    if others - outside < CROWDED_AT or load - outside < 1.0:
        return False
    return not watch or _stays_crowded(outside, loadavg)


def _outside(usable: int | None) -> int:
    """The machine's CPUs outside this process's share (:func:`usable_cpus`): what runs there is no
    neighbour of its threads."""
    return max(0, (os.cpu_count() or 1) - (usable_cpus() if usable is None else usable))


def _stays_crowded(outside: int, loadavg: Path) -> bool:
    """Whether other tasks stay runnable beyond ``outside`` CPUs for more than half of :data:`CONFIRM_S`
    (the median of :data:`CONFIRM_READS` reads): a first reading of crowded CPUs, confirmed."""
    interval = CONFIRM_S / max(1, CONFIRM_READS - 1)
    watched = others_runnable(samples=CONFIRM_READS, interval=interval, loadavg=loadavg)
    return watched is not None and watched - outside >= CROWDED_AT


def wait_setting(env: Mapping[str, str]) -> str:
    """``CARTOMAP_WAIT`` of ``env``: "auto" (the default), "spin" or "passive"; CartomapError naming the
    variable and the value as given for another."""
    raw = env.get(WAIT_ENV) or "auto"
    choice = raw.strip().lower()
    if choice not in WAIT_CHOICES:
        raise CartomapError(f"{WAIT_ENV}={raw!r}: expected one of {', '.join(WAIT_CHOICES)}")
    return choice


def wait_choice(env: Mapping[str, str], usable: int | None = None, watch: bool = True) -> str:
    """How a process started with ``env`` waits: "spin" or "passive" (:func:`wait_setting`; "auto" asks
    :func:`crowded`). CartomapError naming the variable for a bad value."""
    choice = wait_setting(env)
    if choice == "auto":
        if env.get(RESTART_ENV) in ("spin", "passive"):  # chosen just before this process restarted
            return env[RESTART_ENV]
        return "passive" if crowded(usable=usable, watch=watch) else "spin"
    return choice


def _ours(env: Mapping[str, str]) -> set[str]:
    """The variables an earlier decision of cartomap set (named by :data:`POLICY_MARK` in ``env``)."""
    return {name for name in (env.get(POLICY_MARK) or "").split(",") if name}


def _put(target, changes: Mapping[str, str | None]) -> None:
    """Set each of ``changes`` in ``target`` (a dict or ``os.environ``); None removes the variable."""
    for name, value in changes.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


def job_env(env: Mapping[str, str] | None = None, watch: bool = True) -> dict[str, str | None]:
    """What a process started with environment ``env`` (default: this process's) gets for the policy:
    how its threads wait (:func:`wait_choice`) unless ``env`` chose it, the thread count when the
    cgroup's quota allows fewer CPUs than the affinity and ``env`` chose none, and :data:`POLICY_MARK`
    naming what cartomap set. Variables an earlier decision of cartomap set (named by the mark in ``env``)
    are no user's choice: decided again, None for one to remove. Empty when the user chose everything and
    cartomap had set nothing. A bad ``CARTOMAP_WAIT`` is a CartomapError whatever else is set."""
    env = os.environ if env is None else env
    wait_setting(env)
    ours = _ours(env)
    user = {k: v for k, v in env.items() if k not in ours}
    out: dict[str, str | None] = {name: None for name in ours if name in env}
    usable = usable_cpus()
    if not any(user.get(k) for k in WAIT_VARIABLES):
        if wait_choice(user, usable, watch) == "passive":
            out["OMP_WAIT_POLICY"] = "PASSIVE"
        else:
            out["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    if not any(user.get(k) for k in THREAD_VARIABLES) and usable < affinity_cpus():
        out["OMP_NUM_THREADS"] = str(usable)
    set_now = sorted(k for k, v in out.items() if v is not None)
    if set_now or ours:
        out[POLICY_MARK] = ",".join(set_now) or None
    return out


def waiting(env: Mapping[str, str] | None = None) -> str:
    """How this process's OpenMP threads wait, for a run's log: "passive", "spinning 30000 times" or
    "OpenMP's default", and who chose it ("cartomap's choice": made when the process started, for the
    load it found, or as ``CARTOMAP_WAIT`` fixed it; else "as set")."""
    env = os.environ if env is None else env
    ours = _ours(env)
    if (env.get("OMP_WAIT_POLICY") or "").strip().upper() == "PASSIVE":
        how, name = "passive", "OMP_WAIT_POLICY"
    elif env.get("GOMP_SPINCOUNT"):
        how, name = f"spinning {env['GOMP_SPINCOUNT']} times, then sleeping", "GOMP_SPINCOUNT"
    elif any(env.get(k) for k in WAIT_VARIABLES):
        how, name = "as OMP_WAIT_POLICY/KMP_BLOCKTIME say", ""
    else:
        return "threads wait as OpenMP's default (spinning 300000 times)"
    if name not in ours:
        return f"threads wait {how} (as set)"
    if (env.get(WAIT_ENV) or "auto").strip().lower() != "auto":
        return f"threads wait {how} (as {WAIT_ENV} says)"
    when = "when it restarted" if _restarted else "at start"
    again = "; asked again at every recording and epoch's end" if _restart_argv is not None else ""
    return f"threads wait {how} (cartomap chose it for the load {when}{again})"


def with_policy(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the policy of :func:`job_env` put in (and cartomap's earlier choices it replaces taken
    out): the environment of a process about to start."""
    out = dict(env)
    _put(out, job_env(env, watch=False))  # the process decides again as it starts (apply), watching then
    return out


def apply() -> None:
    """Put the policy into this process's environment, for OpenMP to read when torch is imported. Once
    torch is loaded, its OpenMP has read the environment already: nothing is set. CartomapError for a bad
    ``CARTOMAP_WAIT``."""
    global _restarted
    if "torch" not in sys.modules:
        _put(os.environ, job_env(os.environ))
    _restarted = (
        os.environ.pop(RESTART_ENV, None) is not None
    )  # read once: processes this one starts decide for themselves


# --------------------------------------------------------------------------- waiting that follows the load
def own_process() -> None:
    """Declare that this process runs cartomap's own command line (``cartomap ...``, ``python -m
    cartomap.cli``, a bench's worker), not cartomap called inside another program: only then does
    :func:`allow_restart` take effect."""
    global _own_process
    _own_process = True


def allow_restart(argv: Sequence[str] | None = None, before: Callable[[], None] | None = None) -> None:
    """Declare that running ``argv`` again (default: this process's own command line, ``sys.orig_argv``)
    continues this process's work, so it may restart itself when the load changes (:func:`rechoose`); in
    a process that runs cartomap's own command line only (:func:`own_process`). ``before``: what to do just before a restart (an experiment's job marks its status queued, so that
    nobody reads it as interrupted while the process starts again)."""
    global _restart_argv
    if not _own_process:  # cartomap called inside another program (a test, a notebook): never restarted
        return
    _restart_argv = list(argv if argv is not None else sys.orig_argv)
    _before_restart.clear()
    if before is not None:
        _before_restart.append(before)


def current_wait(env: Mapping[str, str] | None = None) -> str | None:
    """How this process's threads wait when cartomap chose it for the load (``CARTOMAP_WAIT=auto``):
    "spin" or "passive"; None when a user's variable or ``CARTOMAP_WAIT`` chose it, or nobody did (a
    process that imported torch before :func:`apply`)."""
    env = os.environ if env is None else env
    if wait_setting(env) != "auto":
        return None
    ours = _ours(env)
    if "OMP_WAIT_POLICY" in ours and (env.get("OMP_WAIT_POLICY") or "").upper() == "PASSIVE":
        return "passive"
    if "GOMP_SPINCOUNT" in ours and env.get("GOMP_SPINCOUNT"):
        return "spin"
    return None


def crowded_now(loadavg: Path = LOADAVG, usable: int | None = None) -> bool:
    """Whether other tasks keep the CPUs this process may use busy right now: :func:`others_runnable`
    (9 reads over 80 ms) beyond the CPUs outside this process's share by at least :data:`CROWDED_AT`,
    confirmed as :func:`crowded` confirms (a page redrawn for the epoch just ended is a burst, not
    crowding). Asked between two steps, while this process computes nothing, so its own threads are not
    counted; the load average is not asked, since this process's own training raised it."""
    others = others_runnable(samples=9, interval=0.01, loadavg=loadavg)
    if others is None:
        return False
    outside = _outside(usable)
    return others - outside >= CROWDED_AT and _stays_crowded(outside, loadavg)


def rechoose(env: Mapping[str, str] | None = None, loadavg: Path = LOADAVG) -> str | None:
    """The waiting the machine asks for now ("spin" or "passive") when it is not how this process waits
    and this process may change it (:func:`allow_restart`, :func:`current_wait`, asked from the main
    thread: a restart ends every thread); else None."""
    now = current_wait(env)
    if _restart_argv is None or now is None or threading.current_thread() is not threading.main_thread():
        return None  # a training in a thread of its own (a thread-pool executor) has neighbours to keep
    wanted = "passive" if crowded_now(loadavg) else "spin"
    return wanted if wanted != now else None


def since_start() -> float:
    """Seconds since this process started cartomap (the import of this module, before torch): at a
    training's first step, what a restart would take again (imports, data, model, checkpoint)."""
    return time.monotonic() - _IMPORTED


def pays(choice: str, remaining_s: float | None, restart_s: float | None) -> bool:
    """Whether starting again to wait as ``choice`` says is worth it: the share :data:`RESTART_GAIN`
    of the training time left ``remaining_s`` exceeds the restart's cost ``restart_s`` (True where
    either is unknown)."""
    if remaining_s is None or restart_s is None:
        return True
    return remaining_s * RESTART_GAIN[choice] > restart_s


def restart(choice: str) -> NoReturn:
    """Start this process again in place (``exec``: the same pid, the same open log), its command line
    of :func:`allow_restart`, its threads waiting as ``choice`` says ("spin" or "passive")."""
    if _restart_argv is None:
        raise RuntimeError("this process did not allow a restart (cartomap.runs.cpu.allow_restart)")
    for prepare in _before_restart:
        prepare()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    env = dict(os.environ, **{RESTART_ENV: choice})
    os.execve(sys.executable, [sys.executable, *_restart_argv[1:]], env)
