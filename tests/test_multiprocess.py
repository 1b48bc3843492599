"""Multi-process training (torchrun / accelerate launch on CPU with gloo): every example recorded exactly once.

The end-to-end test starts two real training processes of ``cartomap train`` and compares the run
with the single-process run of the same config. The processes are started the way torchrun starts
them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE in the environment, ``python -m cartomap.cli``),
except that they meet through a file (``init_method=file://``) instead of torchrun's TCP store,
which listens on every interface whatever --master_addr says: nothing here listens beyond 127.0.0.1.
The command a user runs (``torchrun --nproc_per_node 2 -m cartomap.cli train ...``) was checked by
hand to give the same run (README, "Running on a cluster").
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
import torch

from cartomap.cli import main as cli_main
from cartomap.config import DataConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import RunError
from cartomap.runs.store import RunStore
from cartomap.training.batching import EpochBatches
from cartomap.training.sharding import PAD, check_complete, record_once, shard, training_loss

ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- pieces on hand-checkable input


def test_shard_splits_every_batch_and_pads_the_short_ones():
    assert shard([7, 8, 9, 10], 2, 0) == [(7, 4), (9, 4)]
    assert shard([7, 8, 9, 10], 2, 1) == [(8, 4), (10, 4)]
    # 3 rows on 2 processes: process 1 gets one real row and one padding copy of the first row (-1 - 7)
    assert shard([7, 8, 9], 2, 1) == [(8, 3), (-8, 3)]
    # 1 row on 2 processes: process 1 only pads (it must still step with the others)
    assert shard([5], 2, 0) == [(5, 1)] and shard([5], 2, 1) == [(-6, 1)]


def test_every_row_of_an_epoch_lands_on_exactly_one_process():
    lengths = np.random.default_rng(0).integers(5, 40, size=97)
    batches = EpochBatches(lengths, 16, seed=3, group_by_length=True)
    sizes = [len(b) for b in batches]
    assert sorted(sizes)[0] == 1 and sizes[-1] != 1  # the short batch is not last: accelerate drops it
    real = [row for batch in batches for p in range(2) for row, _ in shard(batch, 2, p) if row >= 0]
    assert sorted(real) == list(range(97))


def test_accelerate_sharding_drops_the_short_batch_of_length_grouped_epochs():
    """Why cartomap shards batches itself: accelerate's BatchSamplerShard loses the example."""
    from accelerate.data_loader import BatchSamplerShard

    lengths = np.random.default_rng(0).integers(5, 40, size=97)
    seen = []
    for p in range(2):
        batches = EpochBatches(lengths, 16, seed=0, group_by_length=True)
        for batch in BatchSamplerShard(batches, 2, p, split_batches=True, even_batches=True):
            seen += batch
    assert len(set(seen)) < 97


def test_record_once_keeps_the_first_logits_of_each_example():
    target, seen = np.zeros((4, 2), np.float32), np.zeros(4, bool)
    # step 1: rows 2 and 0, a padding row and row 2 repeated in the same gather
    assert (
        record_once(target, seen, np.array([2, 0, PAD, 2]), np.array([[1, 1], [2, 2], [9, 9], [5, 5]])) == 2
    )
    # step 2: row 0 again (an "even batches" repeat with a later model) and row 1
    assert record_once(target, seen, np.array([0, 1]), np.array([[7, 7], [3, 3]])) == 1
    assert target.tolist() == [[2, 2], [3, 3], [1, 1], [0, 0]]
    with pytest.raises(RunError, match=r"recorded 3 of 4 .* 'd'"):
        check_complete(seen, ["a", "b", "c", "d"], epoch=0)


def test_sharded_losses_average_to_the_global_mean():
    torch.manual_seed(0)
    logits, labels = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0])
    whole = training_loss(logits, labels, torch.arange(5), None, 1)
    parts = []
    for p in range(2):
        keys = shard(list(range(5)), 2, p)
        rows = torch.tensor([r if r >= 0 else -1 - r for r, _ in keys])
        index = torch.tensor([r if r >= 0 else PAD for r, _ in keys])
        parts.append(training_loss(logits[rows], labels[rows], index, 5, 2))
    assert float(sum(parts) / 2) == pytest.approx(float(whole), abs=1e-6)  # DDP averages the processes


# --------------------------------------------------------------------------- two real processes

LAUNCH = """
import os, sys
import torch.distributed as dist
dist.init_process_group("gloo", init_method=sys.argv[1], rank=int(os.environ["RANK"]), world_size=2)
from cartomap.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_model):
    """Train 97 / dev 40 / test 41 examples (every batch split unevenly somewhere), and the tiny model
    without dropout, so one and two processes compute the same function."""
    from transformers import AutoModelForSequenceClassification

    tmp = tmp_path_factory.mktemp("multiprocess")
    model = AutoModelForSequenceClassification.from_pretrained(
        tiny_model, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    model.save_pretrained(tmp / "model")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (Path(tiny_model) / name).exists():
            (tmp / "model" / name).write_bytes((Path(tiny_model) / name).read_bytes())
    demo = load_dataset(DataConfig(path="demo:dev"))
    paths = {}
    for name, rows in (("train", range(0, 97)), ("dev", range(300, 340)), ("test", range(340, 381))):
        paths[name] = tmp / f"{name}.jsonl"
        derived.to_frame(demo.subset(np.array(rows))).to_json(paths[name], orient="records", lines=True)
    args = [
        "train", "--data", str(paths["train"]), "--dev", str(paths["dev"]), "--test", str(paths["test"]),
        "--model", str(tmp / "model"), "--max-length", "48", "--epochs", "2", "--batch-size", "16",
        "--eval-batch-size", "16", "--lr", "1e-3", "--record", "both", "--device", "cpu",
        "--no-checkpoints", "--quiet",
    ]  # fmt: skip
    return tmp, args


def two_processes(cache: Path, args: list[str], rendezvous: Path) -> list[subprocess.CompletedProcess]:
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        GLOO_SOCKET_IFNAME="lo",
        OMP_NUM_THREADS="1",
    )
    command = [sys.executable, "-c", LAUNCH, f"file://{rendezvous}", "--cache", str(cache), *args]
    logs = [cache.parent / f"{cache.name}-rank{r}.log" for r in range(2)]
    procs = []
    for r, log in enumerate(logs):
        with open(log, "wb") as out:  # a file, not a pipe: a full pipe would stop the process
            procs.append(
                subprocess.Popen(
                    command,
                    env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    # both ranks, however long the machine takes while they make progress (tests/patience.py)
    patience.wait_progressing(procs, [cache, *logs], what="the two training processes", together=True)
    return [
        subprocess.CompletedProcess(command, proc.returncode, log.read_text(errors="replace"))
        for proc, log in zip(procs, logs, strict=True)
    ]


@pytest.mark.slow  # two torch processes (gloo) training: with -m slow
def test_two_processes_record_every_example_once_and_match_one_process(setup, capsys):
    tmp, args = setup
    assert cli_main(["--cache", str(tmp / "one"), *args]) == 0
    capsys.readouterr()
    results = two_processes(tmp / "two", args, tmp / "rendezvous")
    assert [r.returncode for r in results] == [0, 0], "\n".join(r.stdout[-3000:] for r in results)
    assert "done" in results[0].stdout and results[1].stdout.strip() == ""  # rank 0 reports, alone

    (one,) = RunStore(tmp / "one").list()
    (two,) = RunStore(tmp / "two").list()
    assert [p.name for p in (tmp / "two" / "runs").iterdir()] == [two.id]  # no temporary folder left behind
    # the process count is part of the run (dropout masks follow the split, see the test below); at 1 it
    # is left out of the identity, so single-process ids are those of before
    assert one.config.train.processes == 1 and "processes" not in one.config.identity()["train"]
    assert two.config == one.config.replace(train=dataclasses.replace(one.config.train, processes=2))
    assert two.id != one.id
    assert two.state == "done" and "(2 process(es))" in two.log_path.read_text()

    ids = two.examples()["id"].astype(str)
    for source in ("train", "eval"):
        for epoch in range(2):
            frame = pd.read_parquet(two.epoch_path(source, epoch))
            assert len(frame) == 97 and not frame["id"].duplicated().any() and set(frame["id"]) == set(ids)
    # Same function, same global batches, gradients averaged: the runs agree up to float32 rounding
    # (measured: 1e-8 on the logits). 1e-5 is far below what one optimizer step changes (asserted).
    tolerance = 1e-5
    for source in ("train", "eval", "dev", "test_0"):
        _, a = one.dynamics(source)
        _, b = two.dynamics(source)
        assert a.shape == b.shape and np.abs(a - b).max() < tolerance, source
    _, train = one.dynamics("train")
    assert np.abs(train[1] - train[0]).max() > 100 * tolerance  # training moved the logits
    for a, b in zip(one.history(), two.history(), strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-6)
        assert a["dev_accuracy"] == b["dev_accuracy"] and a["test_0_accuracy"] == b["test_0_accuracy"]
    m1, m2 = one.metrics(), two.metrics()
    assert list(m1["id"]) == list(m2["id"]) and list(m1["region"]) == list(m2["region"])
    for column in ("confidence", "variability", "correctness"):
        assert np.abs(m1[column] - m2[column]).max() < tolerance, column


@pytest.mark.slow  # two torch processes (gloo) training: with -m slow
def test_with_dropout_two_processes_train_another_run(setup, tiny_model, capsys):
    """Dropout on (the tiny model's 0.1): each process draws the masks of its share of a batch, so two
    processes do not compute what one does. Hence a run in two processes has an id of its own, and a
    run cannot be resumed with another process count."""
    tmp, args = setup
    args = [*args]
    args[args.index("--model") + 1] = tiny_model
    args[args.index("--epochs") + 1] = "1"
    assert cli_main(["--cache", str(tmp / "drop-one"), *args]) == 0
    capsys.readouterr()
    results = two_processes(tmp / "drop-two", args, tmp / "rendezvous-dropout")
    assert [r.returncode for r in results] == [0, 0], "\n".join(r.stdout[-3000:] for r in results)
    (one,) = RunStore(tmp / "drop-one").list()
    (two,) = RunStore(tmp / "drop-two").list()
    _, a = one.dynamics("train")
    _, b = two.dynamics("train")
    assert np.abs(a - b).max() > 1e-3  # not float rounding: another computation
    assert one.id != two.id and two.config.train.processes == 2
    # the 2-process run's config trained in one process: refused, not silently another computation
    from cartomap.training.loop import train_run
    from cartomap.training.prepare import prepare_run

    again = prepare_run(two.config, RunStore(tmp / "drop-three"))
    assert again.id == two.id
    with pytest.raises(RunError, match=r"trains in 2 process\(es\) and this launch has 1"):
        train_run(again)
    assert len(again.history()) == 0
