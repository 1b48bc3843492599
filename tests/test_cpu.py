"""cartomap's CPU thread policy (cartomap.runs.cpu): how OpenMP threads wait and how many there are, given
to every process cartomap starts, a user's own settings kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cartomap.errors import CartomapError
from cartomap.runs import cpu, jobs

ROOT = Path(__file__).resolve().parents[1]
POLICY_VARIABLES = (*cpu.WAIT_VARIABLES, *cpu.THREAD_VARIABLES)


def clean_env(**extra) -> dict[str, str]:
    """This process's environment without any thread setting (a fresh user's shell), plus ``extra``; the
    wait fixed to spinning (``CARTOMAP_WAIT=spin``) unless ``extra`` says otherwise, so that what a
    process sets does not depend on how busy the machine is while the test runs."""
    env = {k: v for k, v in os.environ.items() if k not in (*POLICY_VARIABLES, cpu.POLICY_MARK)}
    return dict(env, PYTHONPATH=str(ROOT), **{cpu.WAIT_ENV: "spin", **extra})


@pytest.fixture()
def free_cpus(monkeypatch):
    """A machine whose CPUs nobody else keeps busy, whatever the test machine's load."""
    monkeypatch.setattr(cpu, "crowded", lambda *a, **k: False)
    monkeypatch.delenv(cpu.WAIT_ENV, raising=False)


SPIN = {"GOMP_SPINCOUNT": str(cpu.SPIN_COUNT), cpu.POLICY_MARK: "GOMP_SPINCOUNT"}
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE", cpu.POLICY_MARK: "OMP_WAIT_POLICY"}


def test_the_policy_shortens_spinning_unless_the_user_chose_how_threads_wait(monkeypatch, free_cpus):
    monkeypatch.setattr(cpu, "usable_cpus", lambda: len(os.sched_getaffinity(0)))  # no quota
    assert cpu.job_env({}) == SPIN
    assert cpu.SPIN_COUNT < 300_000  # GNU OpenMP's own default: the policy spins less
    for variable, value in (
        ("OMP_WAIT_POLICY", "ACTIVE"),
        ("GOMP_SPINCOUNT", "300000"),
        ("KMP_BLOCKTIME", "0"),
    ):
        assert cpu.job_env({variable: value}) == {}, variable
    assert cpu.job_env({"OMP_WAIT_POLICY": ""}) == SPIN  # empty = unset


def test_threads_wait_passively_on_crowded_cpus_and_spin_briefly_on_free_ones(monkeypatch):
    monkeypatch.setattr(cpu, "usable_cpus", lambda: len(os.sched_getaffinity(0)))
    monkeypatch.delenv(cpu.WAIT_ENV, raising=False)
    monkeypatch.setattr(cpu, "crowded", lambda *a, **k: True)
    assert cpu.job_env({}) == PASSIVE
    assert cpu.job_env({cpu.WAIT_ENV: "spin"}) == SPIN  # fixed by the user
    assert cpu.job_env({"GOMP_SPINCOUNT": "5"}) == {}  # the user's own choice
    monkeypatch.setattr(cpu, "crowded", lambda *a, **k: False)
    assert cpu.job_env({}) == SPIN
    assert cpu.job_env({cpu.WAIT_ENV: "passive"}) == PASSIVE


def test_a_process_cartomap_starts_decides_again_for_the_machine_as_it_is_then(monkeypatch):
    """What an earlier cartomap process chose (the dashboard's server at its start) is no user's choice:
    a job started later decides for the load it finds, and the earlier variable is taken out."""
    monkeypatch.setattr(cpu, "usable_cpus", lambda: len(os.sched_getaffinity(0)))
    monkeypatch.delenv(cpu.WAIT_ENV, raising=False)
    server = {"PATH": "/bin", **SPIN}  # chosen when the machine was free
    monkeypatch.setattr(cpu, "crowded", lambda *a, **k: True)  # busy when the job starts
    job = cpu.with_policy(server)
    assert job == {"PATH": "/bin", **PASSIVE}  # no GOMP_SPINCOUNT left beside PASSIVE
    monkeypatch.setattr(cpu, "crowded", lambda *a, **k: False)
    assert cpu.with_policy(job) == {"PATH": "/bin", **SPIN}


def test_the_runnable_count_comes_from_the_kernel_and_counts_only_others(
    tmp_path, monkeypatch, quick_confirm
):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("2.10 1.50 0.90 3/211 4242\n")  # 3 runnable: this reader and 2 others
    assert cpu.others_runnable(samples=3, interval=0, loadavg=loadavg) == 2.0
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu, "usable_cpus", lambda: 2)
    assert cpu.crowded(loadavg)
    loadavg.write_text("0.05 0.10 0.20 1/211 4242\n")  # only this reader
    assert not cpu.crowded(loadavg)
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 16)  # 2 of 16 CPUs ours: the others run elsewhere
    loadavg.write_text("2.10 1.50 0.90 3/211 4242\n")
    assert not cpu.crowded(loadavg)
    assert cpu.others_runnable(loadavg=tmp_path / "missing") is None and not cpu.crowded(tmp_path / "missing")
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    loadavg.write_text("0.40 0.30 0.20 3/211 4242\n")  # a burst on a machine idle for the last minute
    assert not cpu.crowded(loadavg)
    loadavg.write_text("garbled\n")
    assert cpu.others_runnable(loadavg=loadavg) is None and cpu.load_average(loadavg) is None


class Readings:
    """A /proc/loadavg whose runnable count follows ``counts``, one per read (the last one repeated); the
    1-minute load average stays at 2 (a machine busy a while ago: the previous training)."""

    def __init__(self, counts):
        self.counts, self.reads = list(counts), 0

    def read_text(self):
        count = self.counts[min(self.reads, len(self.counts) - 1)]
        self.reads += 1
        return f"2.00 1.50 0.90 {count + 1}/211 4242\n"  # + 1: the reader itself


@pytest.fixture()
def quick_confirm(monkeypatch):
    """The confirming watch over 40 ms instead of a second (the reads are the same)."""
    monkeypatch.setattr(cpu, "CONFIRM_S", 0.04)
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu, "usable_cpus", lambda: 2)


def test_a_burst_at_the_decision_is_not_crowding_work_that_stays_is(quick_confirm):
    """The click that starts a job: the server and the browser runnable for the first reads, then gone. The
    first 5 reads say crowded, the watch that follows does not: the job spins. Two processes that keep
    computing stay runnable through the watch: passive. Free CPUs are answered by the first reads."""
    burst = Readings([2] * 5 + [2] * 10 + [0] * 31)  # runnable through 10 of the watch's 41 reads
    assert not cpu.crowded(burst)
    assert burst.reads == 5 + 1 + cpu.CONFIRM_READS  # the quick reads, the load average, the watch
    unwatched = Readings([2] * 5 + [0] * 41)
    assert cpu.crowded(unwatched, watch=False) and unwatched.reads == 5 + 1  # the server starting a job:
    # no second of watching on the click's path; the job decides again, watching, as it starts
    assert cpu.crowded(Readings([2] * 5 + [2] * 30 + [0] * 11))  # most of the watch
    free = Readings([0])
    assert not cpu.crowded(free) and free.reads == 5 + 1  # nothing to confirm: no watch
    # between epochs (the page redrawn for the epoch just ended is such a burst)
    assert not cpu.crowded_now(Readings([0] * 9 + [2] * 50), usable=2)  # free when asked
    assert not cpu.crowded_now(Readings([2] * 9 + [0] * 50), usable=2)  # a burst
    assert cpu.crowded_now(Readings([2] * 9 + [1] * 50), usable=2)  # another process that stays


def test_an_unknown_wait_choice_is_one_line_from_the_command_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "cartomap.cli", "--cache", str(tmp_path), "runs"],
        capture_output=True,
        text=True,
        env=clean_env(**{cpu.WAIT_ENV: "sometimes"}),
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert (
        out.stderr.strip()
        == "cartomap: error: CARTOMAP_WAIT='sometimes': expected one of auto, spin, passive"
    )


def test_threads_follow_the_cgroup_quota_unless_the_user_set_them(monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(cpu, "usable_cpus", lambda: affinity)
    assert "OMP_NUM_THREADS" not in cpu.job_env({})  # torch follows the affinity by itself
    if affinity < 2:
        pytest.skip("one CPU: no quota can allow fewer")
    monkeypatch.setattr(cpu, "usable_cpus", lambda: affinity - 1)
    assert cpu.job_env({})["OMP_NUM_THREADS"] == str(affinity - 1)
    assert "OMP_NUM_THREADS" not in cpu.job_env({"OMP_NUM_THREADS": "7"})
    assert "OMP_NUM_THREADS" not in cpu.job_env({"MKL_NUM_THREADS": "7"})


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_is_the_smallest_along_the_path(tmp_path):
    write(tmp_path / "proc_cgroup", "0::/user.slice/job\n")
    write(tmp_path / "fs" / "user.slice" / "cpu.max", "300000 100000\n")
    write(tmp_path / "fs" / "user.slice" / "job" / "cpu.max", "150000 100000\n")
    assert cpu.cgroup_quota(tmp_path / "fs", tmp_path / "proc_cgroup") == 1.5
    write(tmp_path / "fs" / "user.slice" / "job" / "cpu.max", "max 100000\n")
    assert cpu.cgroup_quota(tmp_path / "fs", tmp_path / "proc_cgroup") == 3.0  # the parent's limit
    write(tmp_path / "fs" / "user.slice" / "cpu.max", "max 100000\n")
    assert cpu.cgroup_quota(tmp_path / "fs", tmp_path / "proc_cgroup") is None  # no limit


def test_cgroup_v1_quota_and_unreadable_files(tmp_path):
    write(tmp_path / "proc_cgroup", "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n")
    write(tmp_path / "fs" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "200000\n")
    write(tmp_path / "fs" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "fs" / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")  # the root: no limit
    write(tmp_path / "fs" / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cpu.cgroup_quota(tmp_path / "fs", tmp_path / "proc_cgroup") == 2.0
    assert cpu.cgroup_quota(tmp_path / "fs", tmp_path / "missing") is None
    write(tmp_path / "garbled", "not a cgroup line\n0::/\n")
    assert cpu.cgroup_quota(tmp_path / "nothing", tmp_path / "garbled") is None


def test_usable_cpus_rounds_a_fractional_quota_up_within_the_affinity(monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(cpu, "cgroup_quota", lambda: 0.5)
    assert cpu.usable_cpus() == 1
    monkeypatch.setattr(cpu, "cgroup_quota", lambda: 1000.0)
    assert cpu.usable_cpus() == affinity
    monkeypatch.setattr(cpu, "cgroup_quota", lambda: None)
    assert cpu.usable_cpus() == affinity


PROBE = """
import json, os, sys
{before}
from cartomap.cli import main
main(["--cache", sys.argv[1], "runs"])
import torch
print(json.dumps({{"env": {{k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}},
                  "threads": torch.get_num_threads()}}))
"""


@pytest.mark.parametrize(
    "before, extra, expected",
    [
        ("", {}, {"GOMP_SPINCOUNT": str(cpu.SPIN_COUNT), "OMP_WAIT_POLICY": None}),  # cartomap's policy
        (
            "",
            {"OMP_WAIT_POLICY": "ACTIVE"},
            {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": "ACTIVE"},
        ),  # the user's
        ("import torch", {}, {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": None}),  # torch loaded: too late
    ],
)
def test_the_command_line_sets_the_policy_before_torch_loads(before, extra, expected, tmp_path):
    code = PROBE.format(before=before)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=clean_env(**extra),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["env"] == expected
    if not before:  # threads sized to the CPUs the process may use (the cgroup's quota too)
        assert probe["threads"] == cpu.usable_cpus()


def test_a_job_gets_the_policy_and_keeps_the_users_settings(tmp_path, monkeypatch, free_cpus):
    started = []

    class FakePopen:
        def __init__(self, args, env, **kwargs):
            started.append(env)
            self.pid = 12345

    monkeypatch.setattr(jobs.subprocess, "Popen", FakePopen)
    for variable in (*POLICY_VARIABLES, cpu.POLICY_MARK):
        monkeypatch.delenv(variable, raising=False)
    jobs.spawn(["runs"], tmp_path / "job.log", tmp_path)
    assert started[-1]["GOMP_SPINCOUNT"] == str(cpu.SPIN_COUNT)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # the user's choice in the dashboard's environment
    jobs.spawn(["runs"], tmp_path / "job.log", tmp_path)
    assert started[-1]["OMP_WAIT_POLICY"] == "PASSIVE" and "GOMP_SPINCOUNT" not in started[-1]
    jobs.spawn(["runs"], tmp_path / "job.log", tmp_path, env={"GOMP_SPINCOUNT": "5"})  # the caller's
    assert started[-1]["GOMP_SPINCOUNT"] == "5"


WORKER = """
import os, sys
from cartomap.executors.worker import train_in_worker
try:
    train_in_worker(sys.argv[1])  # no such run: the worker refuses it, after setting the policy
except Exception as err:
    print(type(err).__name__)
print(os.environ.get("GOMP_SPINCOUNT"), "torch" in sys.modules)
"""

LAUNCHER = """
import os, sys
sys.path.insert(0, sys.argv[1])
import dashboard
from streamlit.web import cli
cli.main = lambda **kwargs: 0  # the server itself is not started
dashboard.main([])
print(os.environ.get("GOMP_SPINCOUNT"))
"""


def test_an_executor_worker_and_the_dashboard_launcher_set_the_policy(tmp_path):
    env = clean_env(CARTOMAP_WARM_UP="0")
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(tmp_path / "nowhere")], capture_output=True, text=True, env=env
    )
    assert out.stdout.split() == ["RunError", str(cpu.SPIN_COUNT), "False"], out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", LAUNCHER, str(ROOT)], capture_output=True, text=True, env=env)
    assert out.stdout.split()[-1:] == [str(cpu.SPIN_COUNT)], out.stderr[-2000:]


def test_a_runs_log_says_how_its_threads_wait_and_who_chose_it():
    assert cpu.waiting(PASSIVE) == "threads wait passive (cartomap chose it for the load at start)"
    assert (
        cpu.waiting(SPIN)
        == "threads wait spinning 30000 times, then sleeping (cartomap chose it for the load at start)"
    )
    assert cpu.waiting({"GOMP_SPINCOUNT": "5"}) == "threads wait spinning 5 times, then sleeping (as set)"
    assert cpu.waiting({"KMP_BLOCKTIME": "0"}).endswith("(as set)")
    assert cpu.waiting({}) == "threads wait as OpenMP's default (spinning 300000 times)"


def test_a_training_logs_its_cpu_threads_and_waiting(tiny_model, tmp_path, free_cpus):
    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from cartomap.runs.store import RunStore
    from cartomap.training.loop import train_or_load

    path = tmp_path / "pairs.jsonl"
    rows = [{"premise": f"p {i}", "hypothesis": f"h {i}", "label": ["yes", "no"][i % 2]} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = DataConfig(path=str(path))
    config = RunConfig(
        data=data,
        dev=data,
        model=ModelConfig(tiny_model, max_length=16),
        train=TrainConfig(epochs=1, batch_size=2),
    )
    run = train_or_load(config, RunStore(tmp_path / "cache"))
    first = run.log_path.read_text().splitlines()[0]
    assert "CPU threads, threads wait" in first, first


def test_a_bad_wait_setting_is_refused_whatever_else_is_set_and_quoted_as_given():
    with pytest.raises(
        CartomapError, match=r"CARTOMAP_WAIT=' Sometimes': expected one of auto, spin, passive"
    ):
        cpu.job_env({cpu.WAIT_ENV: " Sometimes", "OMP_WAIT_POLICY": "PASSIVE"})  # the user's waiting too


def test_a_runs_log_says_when_cartomap_wait_fixed_the_waiting():
    forced = cpu.with_policy({cpu.WAIT_ENV: "passive"})
    assert cpu.waiting(forced) == "threads wait passive (as CARTOMAP_WAIT says)"


def test_the_dashboard_launcher_refuses_a_bad_wait_setting_in_one_line():
    out = subprocess.run(
        [sys.executable, "-c", "import dashboard; dashboard.main(['--help'])"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=clean_env(**{cpu.WAIT_ENV: "often", "CARTOMAP_WARM_UP": "0"}),
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr.strip() == "cartomap: error: CARTOMAP_WAIT='often': expected one of auto, spin, passive"
