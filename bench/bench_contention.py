"""Training under CPU contention: cartomap's loop alone and beside CPU-bound processes, per thread setting.

On a machine whose cores are shared (the dashboard's server and its jobs, other users, a test suite), a
training competes with other processes, and torch's OpenMP threads spin while they wait for each other:
beside CPU-bound work they burn their own share of the CPUs. This measures the training time of
cartomap's own loop (``history.json``'s ``train_seconds``: the epoch loop only)

  * alone,
  * beside 2 and beside 4 CPU-bound processes (``python -c "while True: pass"`` in the bench's own session,
    started before the training and stopped right after it, also when the bench is interrupted: they end
    when the bench does),

for each thread setting (``--settings``, default: today's ``default``, ``passive``, ``threads1`` and
``cartomap``'s policy; ``--list`` describes every one, ``--settings all`` runs them all). Every training
runs in a fresh process (OpenMP reads its environment when torch loads it) with its own temporary run
store, on the first ``--examples`` pairs of a fixed permutation of the bundled demo set and the default
encoder (no network), fp32 on CPU, 1 epoch, recording the training pass only.

The tries are interleaved: try 1 runs every (setting, beside) pair once, then try 2, ..., the order of
the settings rotated each time, so that load from other processes hits every setting alike. Figures are
medians over tries with their spread (min-max); ratios are medians of per-try ratios, against
``default`` alone measured in the same try.

**Fair share.** Beside n CPU-bound processes on C usable CPUs, the scheduler shares the CPUs between the
n processes and the training's C threads (torch's default: one per CPU), so a training that loses
nothing takes ``alone x (n + C) / C``: twice its time alone beside 2 processes on 2 cores. ``ratio n`` is
a setting's time beside n over that fair share (<= 1: it got at least its share). ``sleeps`` counts how
often per step a thread went to sleep (voluntary context switches): each costs a wake-up later, the
price of waiting passively when the machine is otherwise idle.

**Load.** Other processes using the CPUs change every figure. ``others`` is the CPU the processes not
started by the bench used while it trained alone (from /proc/stat, minus the CPU time of the training and
of the CPU-bound processes), in cores, about 0 on a quiet machine; the load averages at the start and the
end are printed too. On a shared machine, ``--nice -20`` (root) runs the bench in a scheduling group of
its own at that niceness, so that the others' work fades from the measurement (they still took 0.5-1
core here: "alone" stays an approximation, and settings that sleep more leave them more).

    HF_HUB_OFFLINE=1 python bench/bench_contention.py                   # 4 settings, alone / beside 2 / 4, 3 tries
    python bench/bench_contention.py --settings all --beside 0,2          # every setting, the spin counts too
    python bench/bench_contention.py --examples 64 --tries 1 --beside 0,2  # a smoke run (minutes)
    python bench/bench_contention.py --settings cartomap-start,cartomap --beside 0,2 --epochs 3 --start-after 12
        # load that starts after the training: does the training follow it (the last epoch's ratio)?
    python bench/bench_contention.py --settings cartomap-start,cartomap --beside 0,2 --examples 3198 --epochs 2 \
        --record-points 4 --start-after 8   # ... and inside an epoch, at its recordings
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from cartomap.runs import cpu  # noqa: E402 - no torch: the policy's own module

#: The thread settings: name -> (description, environment of the training process, thread rule).
#: A thread rule is applied in the training process before torch is imported.
SETTINGS: dict[str, tuple[str, dict[str, str], str]] = {
    "default": ("torch's defaults (one thread per core, OpenMP's default waiting)", {}, ""),
    "passive": ("OMP_WAIT_POLICY=PASSIVE: waiting threads sleep at once", {"OMP_WAIT_POLICY": "PASSIVE"}, ""),
    "threads1": ("one thread (OMP_NUM_THREADS=1)", {"OMP_NUM_THREADS": "1"}, ""),
    "passive-load": (
        "PASSIVE, threads = usable CPUs minus the CPUs others keep busy at the start (at least 1)",
        {"OMP_WAIT_POLICY": "PASSIVE"},
        "load",
    ),
    "cartomap": (
        "cartomap's policy: cartomap.runs.cpu.apply() before torch loads, as its command line, jobs and "
        f"workers do (GOMP_SPINCOUNT={cpu.SPIN_COUNT} on free CPUs, OMP_WAIT_POLICY=PASSIVE on crowded ones, "
        "decided when the training starts), chosen again at every epoch's end but the last, at each recording "
        "inside an epoch and every minute of training, as the dashboard's training jobs and `cartomap train "
        "--run` do (a restart in place when the load changed and it pays)",
        {},
        "cartomap",
    ),
    "cartomap-epoch-ends": (
        "cartomap's policy chosen again at epoch ends only, never inside an epoch (as before the question "
        "was asked at recordings)",
        {},
        "cartomap-epoch-ends",
    ),
    "cartomap-start": (
        "cartomap's policy decided when the training starts only (no restart: an experiment's runs, a "
        "library call, a worker of Ray or SLURM)",
        {},
        "cartomap-start",
    ),
}
for _spins in (1_000, 3_000, 10_000, 30_000):  # OpenMP (GNU) spins this often before a waiting thread sleeps
    SETTINGS[f"spin{_spins // 1000}k"] = (
        f"GOMP_SPINCOUNT={_spins}: a waiting thread spins {_spins:,} times, then sleeps (default 300,000)",
        {"GOMP_SPINCOUNT": str(_spins)},
        "",
    )
#: What the bench runs without --settings: today's default, the candidates and cartomap's policy.
DEFAULT_SETTINGS = ("default", "passive", "threads1", "cartomap")
SEED_SUBSET = 0  # which demo rows make up the subset
HOG = (
    "import os\n"
    "parent = os.getppid()\n"
    "while os.getppid() == parent:  # a pure CPU loop that ends when the bench does\n"
    "    for _ in range(2_000_000):\n"
    "        pass\n"
)


# ----------------------------------------------------------------------------- /proc readers
def cpu_busy_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - idle, total


def process_ticks(pid: int) -> int:
    """utime + stime of process ``pid`` in clock ticks (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- worker side
def subset(n: int):
    """The first ``n`` rows of a fixed random permutation of the demo training set."""
    import numpy as np

    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    data = load_dataset(DataConfig(path="demo:train"))
    if n > len(data):
        raise SystemExit(f"--examples {n}: the demo training set has only {len(data)} rows")
    rows = np.sort(np.random.default_rng(SEED_SUBSET).permutation(len(data))[:n])
    return data.subset(rows)


def sleeps() -> int:
    """Voluntary context switches of this process's threads so far: how often a thread went to sleep (an
    OpenMP thread that stopped waiting actively, mostly)."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            continue
    return total


def others_busy_cores(seconds: float = 0.5) -> float:
    """CPUs kept busy by other processes over ``seconds`` (this process sleeps meanwhile)."""
    b0, t0 = cpu_busy_ticks()
    time.sleep(seconds)
    b1, t1 = cpu_busy_ticks()
    cpus = os.cpu_count() or 1
    return cpus * (b1 - b0) / max(t1 - t0, 1)


def worker(args) -> None:
    rule = SETTINGS[args.worker][2]
    threads = None
    if rule in ("cartomap", "cartomap-start", "cartomap-epoch-ends"):
        cpu.apply()  # before torch is imported, as cartomap's processes do
    if rule in ("cartomap", "cartomap-epoch-ends"):
        cpu.own_process()
        cpu.allow_restart()  # this command line again continues the run in --cache
    elif rule == "load":
        usable = len(os.sched_getaffinity(0))
        threads = max(1, round(usable - others_busy_cores()))
    import torch

    if threads:
        torch.set_num_threads(threads)
    import cartomap.training.loop as loop

    if rule == "cartomap-epoch-ends":
        loop.follow_load_inside = lambda *a, **k: None  # the loop asks only at its epochs' ends
    from cartomap.config import ModelConfig, RunConfig, TrainConfig
    from cartomap.runs.store import RunStore

    data = subset(args.examples)
    points = args.record_points  # > 1: eval-mode recordings inside each epoch, where a training asks again
    train = TrainConfig(
        epochs=args.epochs,
        record="both" if points > 1 else "train",
        record_points=points,
        save_checkpoints=False,
        device="cpu",
        precision="fp32",
    )
    config = RunConfig(dev=None, model=ModelConfig(max_length=args.max_length), train=train)
    run = RunStore(args.cache).create(config, data)  # the run there already after a restart
    slept = sleeps()
    loop.train_run(run)
    slept = sleeps() - slept
    history = run.history()
    if len(history) != args.epochs:
        raise SystemExit(f"{args.worker}: {len(history)} of {args.epochs} epochs ran")
    out = {
        "train_s": sum(h["train_seconds"] for h in history),
        "last_s": history[-1]["train_seconds"],
        "restarts": run.log_path.read_text().count(loop.RESTARTED),
        "not_worth": run.log_path.read_text().count(loop.NOT_WORTH),
        "threads": torch.get_num_threads(),
        "loss": history[-1]["train_loss"],
        "sleeps_per_step": slept / (history[-1].get("steps") or -(-args.examples // train.batch_size)),
        "wait": cpu.waiting(),  # how its threads waited, as the run's log says it
    }
    Path(args.out).write_text(json.dumps(out))


# ----------------------------------------------------------------------------- driver side
def own_scheduling_group(niceness: int) -> str:
    """Move the bench (and so every process it starts) into a scheduling group of its own at ``niceness``:
    a session of its own, whose Linux autogroup gets that niceness (the kernel shares the CPUs between
    sessions first, so a process's own niceness does not reach beyond its session); without autogroups,
    this process's niceness. Returns how. The bench forks: the parent waits for the child in the session."""
    pid = os.fork()
    if pid:  # the parent: wait for the bench in its session, pass Ctrl-C on
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                sys.exit(os.waitstatus_to_exitcode(status))
            except KeyboardInterrupt:
                os.kill(pid, signal.SIGINT)
    os.setsid()
    autogroup = Path("/proc/self/autogroup")
    if autogroup.exists() and Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1":
        autogroup.write_text(str(niceness))
        return f"a session of its own, its autogroup at niceness {niceness}"
    os.setpriority(os.PRIO_PROCESS, 0, niceness)
    return f"niceness {niceness}"


def start_hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG], stdin=subprocess.DEVNULL) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        if hog.poll() is None:
            hog.kill()
    for hog in hogs:
        hog.wait()


def worker_env(setting: str) -> dict[str, str]:
    """This process's environment for a training process of ``setting``: the variables every setting
    may set are removed first (a user's own would otherwise blur the comparison), then the setting's."""
    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARIABLES}
    return dict(env, **SETTINGS[setting][1])


#: What any setting or a user may set (and cartomap's own choice and its mark), taken out of each training's
#: environment before its setting's variables are put in.
SETTING_VARIABLES = {*cpu.WAIT_VARIABLES, *cpu.THREAD_VARIABLES, cpu.POLICY_MARK, cpu.WAIT_ENV}


def measure(args, setting: str, beside: int) -> dict:
    """One training of ``setting`` beside ``beside`` CPU-bound processes; the hogs are stopped after it."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    cmd = [sys.executable, __file__, "--worker", setting, "--out", str(out)]
    cmd += [
        "--examples",
        str(args.examples),
        "--epochs",
        str(args.epochs),
        "--max-length",
        str(args.max_length),
        "--record-points",
        str(args.record_points),
    ]
    load = os.getloadavg()[0]
    later = args.start_after > 0
    hogs = [] if later else start_hogs(beside)
    proc = None
    cache = tempfile.TemporaryDirectory(prefix="cartomap-bench-")
    cmd += ["--cache", cache.name]
    try:
        time.sleep(0.5 if hogs else 0)  # the hogs up and running
        b0, t0 = cpu_busy_ticks()
        hog0 = sum(process_ticks(h.pid) for h in hogs)
        with tempfile.TemporaryFile() as log:
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=worker_env(setting))
            if later and beside:  # the other work starts while the training runs (its first epoch)
                time.sleep(args.start_after)
                hogs = start_hogs(beside)
            _, status, usage = os.wait4(proc.pid, 0)  # the training's CPU time, children included
            wall = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            hog1 = sum(process_ticks(h.pid) for h in hogs)
            b1, t1 = cpu_busy_ticks()
            log.seek(0)
            output = log.read()
    finally:
        stop_hogs(hogs)
        if proc is not None and proc.returncode is None:  # interrupted: the training stops with the bench
            proc.kill()
            proc.wait()
            out.unlink(missing_ok=True)
        cache.cleanup()
    try:
        if proc.returncode != 0:
            sys.stderr.write(output.decode(errors="replace")[-3000:])
            raise SystemExit(f"training of {setting} beside {beside} failed (exit {proc.returncode})")
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    cpus = os.cpu_count() or 1
    wall_ticks = max(t1 - t0, 1) / cpus  # ticks per CPU over the measurement
    ours = (hog1 - hog0) + round((usage.ru_utime + usage.ru_stime) * os.sysconf("SC_CLK_TCK"))
    result["others"] = max(0.0, (b1 - b0 - ours) / wall_ticks)
    result["wall_s"] = wall  # the process from start to end: imports, data, training, any restart
    result["load"] = load
    return result


def med(values) -> float:
    return statistics.median(values)


def spread(values, fmt="{:.1f}") -> str:
    return f"{fmt.format(min(values))}-{fmt.format(max(values))}" if len(values) > 1 else "-"


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def report(args, results: dict, loads: tuple[str, str], elapsed: float) -> str:
    cpus = usable_cpus()
    lines = []
    p = lines.append
    p("")
    p(
        f"== Training under contention: {args.examples} demo pairs x {args.epochs} epoch(s), max_length "
        f"{args.max_length}, default encoder, {cpus} usable CPUs; {args.tries} interleaved tries"
    )
    p(
        f"   load average (1, 5, 15 min): at the start {loads[0]}, at the end {loads[1]}; {elapsed / 60:.1f} min"
    )
    if args.nice is not None:
        p(f"   the bench's processes ran in {args.group}")
    p("   s: training seconds (the epoch loop), median (min-max) over tries")
    p(
        "   others: CPUs busy with processes the bench did not start while it trained alone (median; 0 = quiet)"
    )
    p("   load: the 1-minute load average when each training started (median; the bench's own included)")
    p(
        f"   ratio n: time beside n CPU-bound processes / fair share, default alone x (n + {cpus}) / {cpus} in the"
    )
    p("            same try (median over tries; <= 1: at least its fair share of the CPUs)")
    p("   vs default: time alone / default's time alone in the same try (median)")
    p("   sleeps: times per training step a thread went to sleep, alone (how often waking one cost time)")
    if args.start_after > 0:
        p(f"   the CPU-bound processes started {args.start_after:g} s after each training, not before it")
    if args.record_points > 1:
        p(f"   {args.record_points} eval-mode recordings of the training set an epoch, the last at its end")
    if args.epochs > 1:
        p("   last epoch: its training seconds; last ratio n: over default's last epoch alone x (n + C) / C;")
        p(
            "   wall: the training process from start to end (imports, data, any restart); restarts: in all tries"
        )
    p("")
    base = [r["train_s"] for r in results.get("default", {}).get(0, [])]
    base_last = [r["last_s"] for r in results.get("default", {}).get(0, [])]
    per_epoch = args.epochs > 1  # the last epoch's own columns: what a training did once the load was there
    header = ["setting", "threads", "others", "load", "alone s"]
    for n in args.beside:
        if n:
            header += [f"beside {n} s", f"ratio {n}"]
            header += (
                [f"last epoch beside {n} s", f"last ratio {n}", f"wall beside {n} s"] if per_epoch else []
            )
    header += ["restarts", "vs default", "sleeps"]
    table = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for setting in args.settings:
        rs = results[setting]
        every = [r for rows in rs.values() for r in rows]
        threads = "/".join(str(t) for t in sorted({r["threads"] for r in every}))
        quiet = [r["others"] for r in rs.get(0, [])] or [r["others"] for r in every]
        cells = [setting, threads, f"{med(quiet):.2f}", f"{med([r['load'] for r in every]):.1f}"]
        alone = [r["train_s"] for r in rs.get(0, [])]
        cells.append(f"{med(alone):.1f} ({spread(alone)})" if alone else "")
        for n in args.beside:
            if not n:
                continue
            times = [r["train_s"] for r in rs[n]]
            cells.append(f"{med(times):.1f} ({spread(times)})")
            fair = [b * (n + cpus) / cpus for b in base]
            cells.append(f"{med([t / f for t, f in zip(times, fair, strict=True)]):.2f}" if base else "")
            if per_epoch:
                last = [r["last_s"] for r in rs[n]]
                cells.append(f"{med(last):.1f} ({spread(last)})")
                fair_last = [b * (n + cpus) / cpus for b in base_last]
                ratios = [t / f for t, f in zip(last, fair_last, strict=True)]
                cells.append(f"{med(ratios):.2f}" if base_last else "")
                cells.append(f"{med([r['wall_s'] for r in rs[n]]):.1f}")
        cells.append(str(sum(r.get("restarts", 0) for r in every)))
        cells.append(
            f"{med([a / b for a, b in zip(alone, base, strict=True)]):.3f}" if alone and base else ""
        )
        cells.append(f"{med([r['sleeps_per_step'] for r in rs.get(0, [])]):.0f}" if alone else "")
        table.append("| " + " | ".join(cells) + " |")
    lines += table
    p("")
    for setting in args.settings:
        p(f"  {setting}: {SETTINGS[setting][0]}")
        for n, rows in results[setting].items():
            each = ", ".join(
                f"{r['train_s']:.1f} s (last {r['last_s']:.1f} s, wall {r['wall_s']:.1f} s, {r['restarts']} restart(s), "
                f"{r.get('not_worth', 0)} load change(s) not worth one, "
                f"others {r['others']:.2f}, load {r['load']:.1f}, "
                f"{r['sleeps_per_step']:.0f} sleeps/step)"
                for r in rows
            )
            p(f"    beside {n}: {each}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--settings",
        default=",".join(DEFAULT_SETTINGS),
        help=f"comma-separated, or all (--list describes them); default: {','.join(DEFAULT_SETTINGS)}",
    )
    parser.add_argument(
        "--beside", default="0,2,4", help="numbers of CPU-bound processes beside the training"
    )
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument(
        "--record-points",
        type=int,
        default=1,
        help="eval-mode recordings of the training set per epoch (default 1: the training pass only); with more, "
        "recordings inside each epoch, where a training following the load asks again (and their passes "
        "count in the wall time, not in the epoch loop's)",
    )
    parser.add_argument(
        "--nice",
        type=int,
        help="run the bench (its trainings and CPU-bound processes) in a scheduling group of its own at this "
        "niceness. On a machine shared with other work, a negative value (root only) makes that work fade "
        "from the measurement, nearly as on a quiet machine; it takes the CPUs from that work meanwhile, so "
        "keep such runs short",
    )
    parser.add_argument(
        "--start-after",
        type=float,
        default=0.0,
        help="start the CPU-bound processes this many seconds after the training (default 0: before it). With "
        "--epochs 3 and a start inside the first epoch, the last epoch shows whether the training followed "
        "the load (the report's last-epoch columns)",
    )
    parser.add_argument("--json", help="also write every measurement to this file")
    parser.add_argument("--list", action="store_true", help="describe the settings and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.list:
        for name, (text, _, _) in SETTINGS.items():
            print(f"{name:>14}: {text}")
        return None
    chosen = list(SETTINGS) if args.settings == "all" else args.settings.split(",")
    args.settings = [s.strip() for s in chosen if s.strip()]
    unknown = [s for s in args.settings if s not in SETTINGS]
    if unknown:
        parser.error(f"--settings: unknown {', '.join(unknown)}; known: {', '.join(SETTINGS)}")
    args.beside = sorted({int(x) for x in args.beside.split(",")})
    if any(n > 0 for n in args.beside) and 0 not in args.beside:
        args.beside = [0, *args.beside]  # the fair share needs the time alone
    if any(n > 0 for n in args.beside) and "default" not in args.settings:
        args.settings = ["default", *args.settings]  # ratios are against default, in the same try
    if args.nice is not None:
        args.group = own_scheduling_group(args.nice)
    results = {s: {n: [] for n in args.beside} for s in args.settings}
    loads = [load_average(), ""]
    t0 = time.time()
    print(
        f"{len(args.settings)} settings x {len(args.beside)} conditions x {args.tries} tries; load {loads[0]}"
    )
    for k in range(args.tries):
        order = args.settings[k % len(args.settings) :] + args.settings[: k % len(args.settings)]
        for n in args.beside:
            for setting in order:
                r = measure(args, setting, n)
                results[setting][n].append(r)
                print(
                    f"try {k + 1}, beside {n}, {setting:>12}: {r['train_s']:6.1f} s, {r['threads']} thread(s), {r.get('wait', '')}, "
                    f"others {r['others']:.2f} cores, load {r['load']:.1f}",
                    flush=True,
                )
    loads[1] = load_average()
    text = report(args, results, tuple(loads), time.time() - t0)
    print(text)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "loads": loads, "results": results}, indent=1)
        )
    return None


if __name__ == "__main__":
    main()
