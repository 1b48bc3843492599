"""Regenerate the bundled demo data (cartomap/data/demo/nli_{train,dev}.jsonl.gz).

    python scripts/make_demo_data.py [--shared ../shared/data]

train: 800 pairs from SNLI dev + 800 from MultiNLI dev_matched;
dev:   200 pairs from SNLI test + 200 from MultiNLI dev_mismatched.
Each source is sampled with labels balanced (a third each, the remainder to the first
labels in entailment, neutral, contradiction order) from numpy's default_rng(0), then the
rows are shuffled. Output is byte-for-byte reproducible (gzip mtime 0, no file name).
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
FIELDS = ("id", "premise", "hypothesis", "label", "genre", "bert_runs_correct_of_100")

# (output split, [(corpus, file, rows)])
PLAN = {
    "train": [("snli", "snli/dev.jsonl.gz", 800), ("mnli", "mnli/dev_matched.jsonl.gz", 800)],
    "dev": [("snli", "snli/test.jsonl.gz", 200), ("mnli", "mnli/dev_mismatched.jsonl.gz", 200)],
}


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
    for split, sources in PLAN.items():
        rows = []
        for corpus, file, n in sources:
            for r in sample_balanced(read_jsonl_gz(args.shared / file), n, rng):
                rec = {
                    "id": r["id"],
                    "premise": r["premise"],
                    "hypothesis": r["hypothesis"],
                    "label": r["label"],
                    "genre": corpus,
                    "bert_runs_correct_of_100": r.get("bert_runs_correct_of_100"),
                }
                rows.append({k: rec[k] for k in FIELDS})
        order = rng.permutation(len(rows))
        rows = [rows[i] for i in order]
        ids = [r["id"] for r in rows]
        assert len(set(ids)) == len(ids), "ids must be unique"
        path = args.out / f"nli_{split}.jsonl.gz"
        write_jsonl_gz(path, rows)
        counts: dict[tuple[str, str], int] = {}
        for r in rows:
            counts[(r["genre"], r["label"])] = counts.get((r["genre"], r["label"]), 0) + 1
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(rows)} rows {counts}")


if __name__ == "__main__":
    main()
