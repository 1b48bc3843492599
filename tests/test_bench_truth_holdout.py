"""bench/bench_truth_holdout.py's data: the voted items only in Model 0's training set and the test set."""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _write(path: Path, rows) -> str:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)


def _read(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def test_make_data_keeps_the_voted_items_out_of_the_held_out_model(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    bench = importlib.import_module("bench_truth_holdout")
    pair = {"premise": "p", "hypothesis": "h"}
    matched = [{"id": f"m{i}", **pair, "label": "neutral"} for i in range(6)]
    matched.append({"id": "m-bad", **pair, "label": "-"})  # no gold label: left out
    mismatched = [{"id": f"x{i}", **pair, "label": "entailment"} for i in range(5)]
    votes = {"entailment": 10, "neutral": 60, "contradiction": 30}
    chaos = [{"id": "m1", "votes": votes}, {"id": "m4", "votes": votes}]
    a = argparse.Namespace(
        cache=str(tmp_path / "store"),
        matched=_write(tmp_path / "m.jsonl.gz", matched),
        mismatched=_write(tmp_path / "x.jsonl.gz", mismatched),
        chaos=_write(tmp_path / "c.jsonl.gz", chaos),
        n_dev=2,
    )
    paths = bench.make_data(a)
    rows = {name: _read(p) for name, p in paths.items()}
    dev_ids = {r["id"] for r in rows["dev"]}
    assert len(dev_ids) == 2 and dev_ids <= {f"x{i}" for i in range(5)}
    all_ids = [r["id"] for r in rows["train_all"]]
    assert sorted(all_ids) == sorted(
        [f"m{i}" for i in range(6)] + [f"x{i}" for i in range(5) if f"x{i}" not in dev_ids]
    )
    assert {r["id"] for r in rows["voted"]} == {"m1", "m4"}
    assert all(r["votes"] == votes for r in rows["voted"])
    assert [r["id"] for r in rows["train_heldout"]] == [i for i in all_ids if i not in ("m1", "m4")]
    assert all("votes" not in r for r in rows["train_heldout"])
    # the same files again (seed 0), and an existing file is never overwritten
    Path(paths["dev"]).write_text("kept\n", encoding="utf-8")
    again = bench.make_data(a)
    assert again == paths and Path(paths["dev"]).read_text(encoding="utf-8") == "kept\n"


def test_make_data_names_a_missing_file_in_one_line(tmp_path):
    import pytest

    sys.path.insert(0, str(ROOT / "bench"))
    bench = importlib.import_module("bench_truth_holdout")
    a = argparse.Namespace(
        cache=str(tmp_path),
        matched="m.jsonl",
        mismatched="x.jsonl",
        chaos=str(tmp_path / "c.jsonl.gz"),
        n_dev=2,
    )
    with pytest.raises(SystemExit, match=r"--chaos .*c.jsonl.gz: no such file"):
        bench.make_data(a)
    assert not list(tmp_path.iterdir())  # nothing written
