"""bench/bench_contention.py: its table's arithmetic on made-up figures, and (slow) a real run that stops
the CPU-bound processes it started."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import patience
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "bench_contention.py"


def bench_module():
    spec = importlib.util.spec_from_file_location("bench_contention", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measured(seconds: float, others: float = 0.0, last: float | None = None, restarts: int = 0) -> dict:
    return {
        "train_s": seconds,
        "last_s": seconds if last is None else last,
        "wall_s": seconds + 5,
        "restarts": restarts,
        "threads": 2,
        "others": others,
        "load": 1.0,
        "sleeps_per_step": 3.0,
    }


def test_the_table_gives_ratios_to_the_fair_share_of_the_same_try(monkeypatch):
    bench = bench_module()
    monkeypatch.setattr(bench, "usable_cpus", lambda: 2)
    results = {
        "default": {0: [measured(10), measured(12)], 2: [measured(60), measured(48)]},
        "cartomap": {0: [measured(10.2), measured(12.6, 0.5)], 2: [measured(20), measured(30)]},
    }
    args = types.SimpleNamespace(
        examples=8,
        epochs=1,
        max_length=64,
        tries=2,
        nice=None,
        beside=[0, 2],
        settings=["default", "cartomap"],
        start_after=0.0,
        record_points=1,
    )
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")
        for line in bench.report(args, results, ("0", "0"), 1).splitlines()
        if line.startswith("| ")
    }
    # fair share beside 2 on 2 CPUs: twice default's time alone in the same try (20 s, 24 s)
    assert rows["default"][6] == "2.50"  # median of 60/20 and 48/24
    assert rows["cartomap"][6] == "1.12"  # median of 20/20 and 30/24
    assert rows["cartomap"][7] == "0"  # restarts
    assert rows["cartomap"][8] == "1.035"  # alone against default alone: median of 1.02 and 1.05
    assert rows["cartomap"][2] == "0.25"  # others while it trained alone


def test_the_last_epoch_columns_compare_it_with_the_last_epoch_alone(monkeypatch):
    bench = bench_module()
    monkeypatch.setattr(bench, "usable_cpus", lambda: 2)
    results = {  # 3 epochs; the CPU-bound processes started during the first
        "default": {
            0: [measured(30, last=10), measured(36, last=12)],
            2: [measured(90, last=40), measured(84, last=36)],
        },
        "cartomap": {
            0: [measured(30, last=10), measured(36, last=12)],
            2: [measured(60, last=20, restarts=1), measured(66, last=30)],
        },
    }
    args = types.SimpleNamespace(
        examples=8,
        epochs=3,
        max_length=64,
        tries=2,
        nice=None,
        beside=[0, 2],
        settings=["default", "cartomap"],
        start_after=12.0,
        record_points=4,
    )
    text = bench.report(args, results, ("0", "0"), 1)
    assert "started 12 s after each training" in text
    assert "4 eval-mode recordings of the training set an epoch" in text
    row = next(line for line in text.splitlines() if line.startswith("| cartomap |")).split(" | ")
    # the last epoch's fair share beside 2: twice default's last epoch alone in the same try (20 s, 24 s)
    assert row[7].startswith("25.0") and row[8] == "1.12"  # median of 20/20 and 30/24
    assert row[9] == "68.0" and row[10] == "1"  # wall (median of 65 and 71), restarts in all tries


@pytest.mark.slow  # two trainings of the default encoder on 32 pairs, beside two CPU-bound processes
def test_a_small_run_prints_its_table_and_stops_the_processes_it_started(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = patience.run(
        [
            sys.executable,
            str(BENCH),
            "--examples",
            "32",
            "--tries",
            "1",
            "--beside",
            "0,2",
            "--settings",
            "cartomap",
        ],
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| default | 2 |" in done.stdout and "| cartomap | 2 |" in done.stdout
    hogs = subprocess.run(["pgrep", "-f", "parent = os.getppid"], capture_output=True, text=True)
    assert hogs.stdout.strip() == "", "CPU-bound processes left running"
