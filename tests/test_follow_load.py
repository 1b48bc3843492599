"""Waiting that follows the load (cartomap.runs.cpu, the loop's follow_load): a training whose CPUs became
crowded between two epochs starts again in place (the same pid), waiting passively, resumes from the
checkpoint just written and ends with exactly the dynamics of a run that never restarted."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import patience
import pytest

from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.runs import cpu
from cartomap.runs.store import RunStore
from cartomap.training.loop import train_or_load
from cartomap.training.prepare import prepare_run

ROOT = Path(__file__).resolve().parent.parent

# The process under test: it notes each start, finds the CPUs crowded whenever it asks between epochs,
# and trains the run with the given id as `cartomap train --run ID --job` does.
SCRIPT = """
import json, os, sys
from pathlib import Path
from cartomap.runs import cpu
cpu.apply()
starts, cache, run_id = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
with starts.open("a") as f:
    f.write(json.dumps({"pid": os.getpid(), "wait": cpu.current_wait(), "log": cpu.waiting()}) + "\\n")
cpu.crowded_now = lambda *a, **k: True  # other work started beside the training
cpu.pays = lambda *a: True  # a restart is worth it even for this tiny training
cpu.own_process()
cpu.allow_restart()
from cartomap.runs.store import RunStore
from cartomap.training.loop import continue_run
run = continue_run(RunStore(cache).get(run_id), as_job=True)
print(run.state)
"""


def config(tmp_path: Path, model: str, record_points: int = 1) -> RunConfig:
    path = tmp_path / "pairs.jsonl"
    rows = [
        {
            "premise": f"a cat {i} sat",
            "hypothesis": f"the mat {i % 3}",
            "label": ["yes", "no", "maybe"][i % 3],
        }
        for i in range(12)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    train = TrainConfig(
        epochs=3,
        batch_size=4,
        learning_rate=1e-2,
        warmup_ratio=0.0,
        record="both",
        record_points=record_points,
    )
    return RunConfig(
        data=DataConfig(path=str(path)), dev=None, model=ModelConfig(model, max_length=32), train=train
    )


def clean_env(**extra: str) -> dict[str, str]:
    drop = {*cpu.WAIT_VARIABLES, *cpu.THREAD_VARIABLES, cpu.POLICY_MARK, cpu.WAIT_ENV, cpu.RESTART_ENV}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return dict(env, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)


@pytest.mark.parametrize(
    ("record_points", "where"),
    [
        (1, "during epoch 1: starting again with threads waiting passive, from the checkpoint of epoch 1"),
        # a recording inside the first epoch asks first: the steps before it are trained again
        (2, "in epoch 1, at step 2: starting again with threads waiting passive, from the start"),
    ],
)
def test_a_training_whose_cpus_became_crowded_restarts_once_waiting_passively_and_matches(
    tmp_path, tiny_model, record_points, where
):
    cfg = config(tmp_path, tiny_model, record_points)
    run = prepare_run(cfg, RunStore(tmp_path / "cache"))
    script, starts = tmp_path / "trainer.py", tmp_path / "starts.jsonl"
    script.write_text(SCRIPT, encoding="utf-8")
    # it started on free CPUs (spinning): as a restart asked to spin makes sure of, whatever this machine's load
    env = clean_env(**{cpu.RESTART_ENV: "spin"})
    done = patience.run(
        [sys.executable, str(script), str(starts), str(tmp_path / "cache"), run.id],
        watch=[tmp_path / "cache"],
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "done"
    lines = [json.loads(x) for x in starts.read_text().splitlines()]
    assert [x["wait"] for x in lines] == ["spin", "passive"]  # one restart: crowded stays crowded
    assert lines[0]["pid"] == lines[1]["pid"]  # in place: the job's pid stays valid
    assert "cartomap chose it for the load when it restarted" in lines[1]["log"]
    log = run.log_path.read_text()
    assert (
        "threads wait passive (cartomap chose it for the load when it restarted; asked again at every "
        "recording and epoch's end)" in log
    )
    assert f"the CPUs' load changed {where}" in log
    assert log.count("the CPUs' load changed") == 1

    alone = train_or_load(cfg, RunStore(tmp_path / "alone"))  # never restarted, in this process
    assert alone.id == run.id
    trained = RunStore(tmp_path / "cache").get(run.id)
    for source in ("train", "eval"):
        ids, logits = trained.dynamics(source)
        ids_alone, logits_alone = alone.dynamics(source)
        assert ids == ids_alone and np.array_equal(logits, logits_alone), source
    assert [h["train_loss"] for h in trained.history()] == [h["train_loss"] for h in alone.history()]


def test_rechoose_only_for_a_process_that_may_restart_and_whose_waiting_cartomap_chose(monkeypatch, tmp_path):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.10 0.10 0.10 4/200 1\n")  # 3 others runnable: crowded on 2 CPUs
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu, "usable_cpus", lambda: 2)
    spinning = {"GOMP_SPINCOUNT": str(cpu.SPIN_COUNT), cpu.POLICY_MARK: "GOMP_SPINCOUNT"}
    monkeypatch.setattr(cpu, "_restart_argv", None)
    assert cpu.rechoose(spinning, loadavg) is None  # not allowed to restart
    monkeypatch.setattr(cpu, "_restart_argv", ["python", "-m", "cartomap.cli"])
    assert cpu.rechoose(spinning, loadavg) == "passive"
    assert cpu.rechoose({"GOMP_SPINCOUNT": "5"}, loadavg) is None  # the user's own choice
    assert cpu.rechoose(dict(spinning, **{cpu.WAIT_ENV: "spin"}), loadavg) is None  # fixed by CARTOMAP_WAIT
    assert cpu.rechoose({}, loadavg) is None  # nobody chose (torch was loaded before cartomap's policy)
    passive = {"OMP_WAIT_POLICY": "PASSIVE", cpu.POLICY_MARK: "OMP_WAIT_POLICY"}
    assert cpu.rechoose(passive, loadavg) is None  # already passive
    loadavg.write_text("0.10 0.10 0.10 1/200 1\n")  # the others are gone
    assert cpu.rechoose(passive, loadavg) == "spin" and cpu.rechoose(spinning, loadavg) is None


def test_crowded_now_counts_the_runnable_tasks_not_the_load_average(monkeypatch, tmp_path):
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu, "CONFIRM_S", 0.04)  # the confirming watch (tests/test_cpu.py) in 40 ms
    loadavg.write_text("9.00 9.00 9.00 1/200 1\n")  # a high average (this training's own), nobody else now
    assert not cpu.crowded_now(loadavg, usable=2)
    loadavg.write_text("0.00 0.00 0.00 2/200 1\n")  # one other task runnable now
    assert cpu.crowded_now(loadavg, usable=2)
    assert not cpu.crowded_now(loadavg, usable=1)  # it runs on the CPU outside ours
    assert not cpu.crowded_now(tmp_path / "missing", usable=2)


def test_a_restart_decision_is_taken_once_by_the_restarted_process(monkeypatch):
    monkeypatch.setenv(cpu.RESTART_ENV, "passive")
    for name in (*cpu.WAIT_VARIABLES, cpu.POLICY_MARK, cpu.WAIT_ENV):
        monkeypatch.delenv(name, raising=False)
    assert cpu.wait_choice(os.environ) == "passive"  # whatever this machine's load
    assert cpu.job_env(os.environ)["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setattr(cpu, "_restarted", False)
    cpu.apply()  # torch is loaded here: nothing set, the decision still read once
    assert cpu.RESTART_ENV not in os.environ and cpu._restarted


def test_restart_without_allow_restart_is_refused(monkeypatch):
    monkeypatch.setattr(cpu, "_restart_argv", None)
    with pytest.raises(RuntimeError, match="allow_restart"):
        cpu.restart("passive")


def test_every_training_command_may_restart_with_a_command_line_that_continues_it(
    monkeypatch, tmp_path, tiny_model
):
    from cartomap.cli import main
    from cartomap.training.launch import train_job_args

    allowed = []
    monkeypatch.setattr(cpu, "allow_restart", lambda argv=None, before=None: allowed.append(argv))
    cfg = config(tmp_path, tiny_model)
    cache = tmp_path / "cache"
    run = train_or_load(cfg, RunStore(cache))  # done: the commands below only load it
    assert main(["--cache", str(cache), *train_job_args(run)]) == 0
    assert allowed == [None]  # `train --run ID --job`: its own command line continues the run
    options = ["--data", cfg.data.path, "--dev", "none", "--model", tiny_model, "--max-length", "32"]
    options += [
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--lr",
        "1e-2",
        "--warmup-ratio",
        "0",
        "--record",
        "both",
    ]
    assert main(["--cache", str(cache), "train", *options, "--quiet"]) == 0
    assert RunStore(cache).list() == [run]  # the same run, loaded
    # from options: continued by id (the data file could change before it runs again)
    assert allowed[1] == [sys.executable, "-m", "cartomap.cli", "--cache", str(cache.resolve()), "train"] + [
        "--run",
        run.id,
        "--quiet",
    ]


def test_a_training_in_a_thread_of_its_own_never_restarts_the_process(monkeypatch, tmp_path):
    import threading

    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.10 0.10 0.10 4/200 1\n")
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu, "usable_cpus", lambda: 2)
    monkeypatch.setattr(cpu, "_restart_argv", ["python", "-m", "cartomap.cli"])
    spinning = {"GOMP_SPINCOUNT": str(cpu.SPIN_COUNT), cpu.POLICY_MARK: "GOMP_SPINCOUNT"}
    seen = []
    thread = threading.Thread(target=lambda: seen.append(cpu.rechoose(spinning, loadavg)))
    thread.start()
    thread.join()
    assert seen == [None] and cpu.rechoose(spinning, loadavg) == "passive"


def test_an_experiment_job_marks_itself_queued_before_it_restarts(monkeypatch, tmp_path):
    from cartomap.cli import main
    from cartomap.experiments.store import ExperimentStore

    registered = []
    monkeypatch.setattr(cpu, "allow_restart", lambda argv=None, before=None: registered.append(before))
    monkeypatch.setattr("cartomap.cli.experiments.run_in_foreground", lambda exp, store, **kw: 0)
    store = ExperimentStore(tmp_path / "cache")
    exp = store.create("pruning", {"note": "a test"})
    assert main(["--cache", str(tmp_path / "cache"), "experiment", "run", exp.id, "--job"]) == 0
    (before,) = registered
    before()
    assert exp.status()["state"] == "queued" and exp.status()["pid"] == os.getpid()


def test_restart_does_what_was_asked_before_then_execs_the_same_command_line(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu, "_restart_argv", None)
    monkeypatch.setattr(cpu, "_before_restart", [])
    monkeypatch.setattr(cpu, "_own_process", True)
    cpu.allow_restart(
        ["/usr/bin/python3", "-m", "cartomap.cli", "train", "--run", "abc"],
        before=lambda: calls.append("before"),
    )

    def execve(path, argv, env):
        calls.append((path, argv, env[cpu.RESTART_ENV]))
        raise SystemExit(0)

    monkeypatch.setattr(cpu.os, "execve", execve)
    with pytest.raises(SystemExit):
        cpu.restart("passive")
    assert calls == [
        "before",
        (sys.executable, [sys.executable, "-m", "cartomap.cli", "train", "--run", "abc"], "passive"),
    ]


def test_cartomap_called_inside_another_program_never_restarts_it(monkeypatch, tmp_path, tiny_model):
    from cartomap.cli import main

    monkeypatch.setattr(cpu, "_restart_argv", None)
    monkeypatch.setattr(cpu, "_own_process", False)
    run = train_or_load(config(tmp_path, tiny_model), RunStore(tmp_path / "cache"))
    assert main(["--cache", str(tmp_path / "cache"), "train", "--run", run.id, "--quiet"]) == 0
    assert cpu._restart_argv is None  # this test's own process (pytest) is never exec'd again
    cpu.allow_restart(["python", "-m", "cartomap.cli"])
    assert cpu._restart_argv is None
    cpu.own_process()
    cpu.allow_restart(["python", "-m", "cartomap.cli"])
    assert cpu._restart_argv == ["python", "-m", "cartomap.cli"]


def test_a_restart_pays_when_the_time_it_saves_is_more_than_it_costs():
    assert cpu.pays("passive", 100.0, 20.0) and not cpu.pays("passive", 60.0, 20.0)  # 25 % of what is left
    assert cpu.pays("spin", 150.0, 20.0) and not cpu.pays("spin", 120.0, 20.0)  # 15 %
    assert cpu.pays("passive", None, 20.0) and cpu.pays("spin", 1.0, None)  # unknown: it restarts


class Restarted(Exception):
    pass


def test_follow_load_restarts_only_when_it_pays_and_marks_the_run_queued_first(monkeypatch, run_fixture):
    from types import SimpleNamespace

    from cartomap.training import loop

    t = SimpleNamespace(
        main=True,
        n_proc=1,
        accelerator=SimpleNamespace(device=SimpleNamespace(type="cpu")),
        tc=SimpleNamespace(epochs=3),
        trainer={"stopped_early": False},
        history=[{"train_seconds": 40.0}],
        ready_s=30.0,
        run=run_fixture,
        asked_at=0.0,
        declined=None,
        steps_log=SimpleNamespace(flush=lambda: None),
    )
    monkeypatch.setattr(cpu, "rechoose", lambda: "passive")
    monkeypatch.setattr(cpu, "restart", lambda choice: (_ for _ in ()).throw(Restarted(choice)))
    loop.follow_load(t, 0)  # 2 epochs of 40 s left: passive saves about 20 s, a restart costs 30 s
    assert (
        "would cost more than waiting passive could save of the 80 s of training left"
        in run_fixture.log_path.read_text()
    )
    t.ready_s = 10.0
    with pytest.raises(Restarted, match="passive"):
        loop.follow_load(t, 0)
    assert run_fixture.status()["state"] == "queued" and run_fixture.status()["pid"] == os.getpid()
    loop.follow_load(t, 2)  # after the last epoch: nothing to gain
    t.accelerator.device.type = "cuda"
    loop.follow_load(t, 0)  # OpenMP's waiting is a CPU's


@pytest.fixture()
def run_fixture(tmp_path, tiny_model):
    return prepare_run(config(tmp_path, tiny_model), RunStore(tmp_path / "cache"))


def test_inside_an_epoch_it_asks_at_recordings_and_every_so_often_counting_the_steps_done(
    monkeypatch, run_fixture
):
    """A restart inside an epoch resumes from the last epoch's checkpoint: the steps done since are part
    of its cost. Epoch 1 of 3, 100 steps of 1 s each, a restart costs 30 s plus the steps done."""
    import time
    from types import SimpleNamespace

    from cartomap.training import loop

    t = SimpleNamespace(
        main=True,
        n_proc=1,
        accelerator=SimpleNamespace(device=SimpleNamespace(type="cpu")),
        tc=SimpleNamespace(epochs=3),
        steps_per_epoch=100,
        mid_points={50: [0]},  # a recording after step 50
        ready_s=30.0,
        run=run_fixture,
        asked_at=time.monotonic(),
        declined=None,
        steps_log=SimpleNamespace(flush=lambda: None),
    )
    asked = []
    monkeypatch.setattr(cpu, "rechoose", lambda: asked.append(True) or "passive")
    monkeypatch.setattr(cpu, "restart", lambda choice: (_ for _ in ()).throw(Restarted(choice)))

    def after(steps: int) -> loop.EpochRecording:  # this epoch so far: ``steps`` steps of 1 s
        return loop.EpochRecording(rows=np.zeros(1, dtype=bool), eval_now=True, t0=time.time() - steps)

    loop.follow_load_inside(t, 0, 9, after(10))  # asked a moment ago, no recording here: not asked
    assert asked == []
    for _ in range(2):  # at the recording: 250 s left, passive saves about 62 s, the restart costs 30 + 50
        loop.follow_load_inside(t, 0, 49, after(50))
    assert len(asked) == 2
    log = run_fixture.log_path.read_text()
    assert log.count("the CPUs' load changed in epoch 1, at step 50; threads keep waiting as they do") == 1
    loop.follow_load_inside(t, 0, 99, after(100))  # the epoch's last step: its end asks
    assert len(asked) == 2
    t.asked_at = time.monotonic() - cpu.FOLLOW_EVERY_S - 1  # a minute of training since it last asked
    with pytest.raises(Restarted, match="passive"):  # 290 s left: saves about 72 s, costs 30 + 10
        loop.follow_load_inside(t, 0, 9, after(10))
    assert "starting again with threads waiting passive, from the start" in run_fixture.log_path.read_text()
    assert run_fixture.status()["state"] == "queued" and run_fixture.status()["phase"] == "restarting"
