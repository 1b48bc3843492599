"""The run's memory-mapped Arrow copy of its examples (runs/layout.EXAMPLES_ARROW) and the rank
regions found by a partition: same answers as the Parquet read and the stable sort they replace."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.runs.store import Run, RunStore
from cartomap.runs.tables import read_columns
from cartomap.scores.metrics import AMBIGUOUS, RegionRule, region_partition, top_by_rank


def make_run(cache, path="demo:dev") -> Run:
    data = load_dataset(DataConfig(path=path))
    config = RunConfig(data=DataConfig(path=path), dev=None, train=TrainConfig(epochs=2, record="train"))
    return RunStore(cache).create(config, data)


def test_a_new_run_has_the_copy_and_it_reads_as_the_parquet_file(tmp_path):
    run = make_run(tmp_path / "cache")
    assert run.examples_arrow_path.exists()
    for columns in (None, ["id"], ["hypothesis", "id", "no such column"], ["id", "premise", "genre"]):
        fast = run.examples(columns=columns)
        pd.testing.assert_frame_equal(fast, read_columns(run.examples_path, columns))
    assert list(run.examples(columns=["hypothesis", "id"]).columns) == ["hypothesis", "id"]


def test_an_old_run_gets_the_copy_on_its_first_read_of_texts_only(tmp_path):
    run = make_run(tmp_path / "cache")
    run.examples_arrow_path.unlink()
    run.examples(columns=["id", "label"])  # no texts wanted: the Parquet columns, nothing written
    assert not run.examples_arrow_path.exists()
    texts = run.examples(columns=["id", "premise"])
    assert run.examples_arrow_path.exists()
    pd.testing.assert_frame_equal(texts, read_columns(run.examples_path, ["id", "premise"]))


def test_a_copy_older_than_the_parquet_file_is_not_read(tmp_path):
    run = make_run(tmp_path / "cache")
    frame = read_columns(run.examples_path, None)
    changed = frame.assign(premise="rewritten")
    changed.to_parquet(run.examples_path, index=False)
    old = run.examples_arrow_path.stat().st_mtime_ns
    os.utime(run.examples_arrow_path, ns=(old, run.examples_path.stat().st_mtime_ns - 1_000_000_000))
    assert (run.examples(columns=["premise"])["premise"] == "rewritten").all()
    assert (run.examples(columns=["premise"])["premise"] == "rewritten").all()  # the copy made again


def test_a_damaged_copy_falls_back_to_the_parquet_file(tmp_path):
    run = make_run(tmp_path / "cache")
    run.examples_arrow_path.write_bytes(b"not an arrow file")
    pd.testing.assert_frame_equal(run.examples(columns=["id"]), read_columns(run.examples_path, ["id"]))


def test_a_read_only_store_reads_the_parquet_file_without_the_copy(tmp_path, monkeypatch):
    import errno

    import cartomap.runs.store as store_module

    run = make_run(tmp_path / "cache")
    run.examples_arrow_path.unlink()

    def read_only(path, frame):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(store_module, "write_arrow_copy", read_only)
    texts = run.examples(columns=["id", "premise"])
    pd.testing.assert_frame_equal(texts, read_columns(run.examples_path, ["id", "premise"]))
    assert not run.examples_arrow_path.exists()


def test_token_runs_list_columns_survive_the_copy(tmp_path):
    from token_fixture import make_token_run

    run = make_token_run(tmp_path / "cache", tmp_path)
    fast = run.examples()
    slow = read_columns(run.examples_path, None)
    assert list(fast.columns) == list(slow.columns)
    for column in fast.columns:
        assert [np.asarray(v).tolist() for v in fast[column]] == [
            np.asarray(v).tolist() for v in slow[column]
        ]


@pytest.mark.parametrize("seed", range(40))
def test_top_by_rank_is_the_first_n_of_a_stable_sort(seed):
    rng = np.random.default_rng(seed)
    n_rows = int(rng.integers(1, 60))
    values = rng.choice([0.1, 0.2, 0.3, np.nan], size=n_rows) if seed % 2 else rng.random(n_rows)
    for n in range(n_rows + 1):
        expected = np.zeros(n_rows, dtype=bool)
        expected[np.argsort(-values, kind="stable")[:n]] = True
        assert (top_by_rank(values, n) == expected).all()


def test_rank_regions_by_hand():
    conf = np.array([0.9, 0.1, 0.5, 0.95, 0.2])
    var = np.array([0.3, 0.3, 0.1, 0.3, 0.0])  # three tie at the top: the first two by index are ambiguous
    regions = region_partition(conf, var, RegionRule(method="rank", fraction=0.4))
    assert regions.tolist() == [AMBIGUOUS, AMBIGUOUS, "easy-to-learn", "easy-to-learn", "hard-to-learn"]
