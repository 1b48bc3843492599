"""Regenerate the bundled demo data (cartomap/data/demo/nli_{train,dev}.jsonl.gz).

    python scripts/make_demo_data.py [--shared ../shared/data]

train: 3,198 SNLI pairs from SNLI dev: 1,066 premises drawn at random among those that have one
       hypothesis of each label, with all three of their hypotheses (so labels are balanced and the
       model sees each premise entailed, left open and contradicted);
dev:   400 SNLI pairs from SNLI test, labels balanced (a third each, the remainder to the first labels
       in entailment, neutral, contradiction order).
Sampling with numpy's default_rng(0), rows shuffled. Output is byte-for-byte reproducible (gzip mtime
0, no file name). Why SNLI only and this size: the demo must show the arc of a data map with its three
regions after 4 epochs of the default encoder on a 2-core CPU (docs/benchmarks.md, "Dashboard: time to
the first data map").
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
from pathlib import Path

import numpy as np

LABELS = ("entailment", "neutral", "contradiction")
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "cartomap" / "data" / "demo"
FIELDS = ("id", "premise", "hypothesis", "label", "genre")
TRAIN_PREMISES = 1_066
DEV_PAIRS = 400


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sample_balanced(rows: list[dict], n: int, rng: np.random.Generator) -> list[dict]:
    quotas = [n // len(LABELS) + (1 if k < n % len(LABELS) else 0) for k in range(len(LABELS))]
    picked = []
    for label, quota in zip(LABELS, quotas, strict=True):
        pool = [i for i, r in enumerate(rows) if r["label"] == label]
        picked.extend(sorted(rng.choice(pool, size=quota, replace=False).tolist()))
    return [rows[i] for i in picked]


def sample_premise_triples(rows: list[dict], n_premises: int, rng: np.random.Generator) -> list[dict]:
    """Every pair of ``n_premises`` premises drawn among those with exactly one hypothesis per label."""
    by_premise: dict[str, list[dict]] = {}
    for r in rows:
        by_premise.setdefault(r["premise"], []).append(r)
    complete = sorted(p for p, rs in by_premise.items() if sorted(r["label"] for r in rs) == sorted(LABELS))
    chosen = rng.choice(len(complete), size=n_premises, replace=False)
    return [r for k in sorted(chosen.tolist()) for r in by_premise[complete[k]]]


def write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(text.encode("utf-8"))
    path.write_bytes(buf.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    args.out.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": sample_premise_triples(
            read_jsonl_gz(args.shared / "snli/dev.jsonl.gz"), TRAIN_PREMISES, rng
        ),
        "dev": sample_balanced(read_jsonl_gz(args.shared / "snli/test.jsonl.gz"), DEV_PAIRS, rng),
    }
    for split, picked in splits.items():
        rows = [{**{k: r[k] for k in FIELDS if k != "genre"}, "genre": "snli"} for r in picked]
        rows = [{k: r[k] for k in FIELDS} for r in rows]
        order = rng.permutation(len(rows))
        rows = [rows[i] for i in order]
        ids = [r["id"] for r in rows]
        assert len(set(ids)) == len(ids), "ids must be unique"
        path = args.out / f"nli_{split}.jsonl.gz"
        write_jsonl_gz(path, rows)
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["label"]] = counts.get(r["label"], 0) + 1
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(rows)} rows {counts}")


if __name__ == "__main__":
    main()
