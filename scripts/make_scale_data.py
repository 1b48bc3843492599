"""Build a synthetic full-size NLI training set (SNLI-sized by default) from real NLI pairs.

    python scripts/make_scale_data.py [--examples 550000] [--out cache/scale] [--source demo]

``--source``: where the real pairs come from. ``demo`` (the default) is the bundled demo data
(``cartomap/data/demo``, 3,598 pairs), so a plain clone needs nothing else; a folder is read as the
layout of ``SOURCES`` below (the NLI sets of a ``shared/data`` folder; missing files are skipped);
a single ``.jsonl[.gz]`` file with premise, hypothesis and label fields is read as one genre.

Writes ``<out>/nli_<N>.jsonl.gz`` and ``<out>/nli_<N>.parquet`` (the same rows; ``cache/`` is
git-ignored: never commit them) and prints a summary. Nothing is downloaded.

**The data is synthetic.** The rows are made from real pairs: the bundled demo's, or (the numbers in
docs/benchmarks.md) the 42,611 real English pairs of a ``shared/data`` folder (SNLI dev and test, MultiNLI dev matched and
mismatched, ANLI dev rounds 1-3 and the WaNLI sample; RoNLI is left out: another language and other
classes). Row by row:

* Round 0 holds every real pair once, unchanged. Round v = 1, 2, ... holds every real pair again,
  varied by deterministic edits that keep the label's meaning: (1) a table of common words (man,
  woman, dog, street, two, red, walking, ...) is rewritten with alternatives (guy, lady, puppy, road,
  2, crimson, strolling, ...), the alternative of each word chosen by a hash of (v, word) and applied
  alike to premise and hypothesis, and (2) the premise gets one of 48 framing prefixes ("In the
  photo, ...", "Earlier today, ...") chosen by v. Each round lists the pairs in its own seeded random
  order; the file is round 0, then round 1, ... cut at N rows, so the first N rows of a larger set are
  the smaller set (``--examples 50000`` gives the first 50,000 rows of the 550,000).
* Every (premise, hypothesis) is distinct: a variant that repeats an earlier row is re-drawn with
  the next variant number of the same pair (deterministically).
* Texts stay real sentences with real NLI lengths: the length distribution is that of the source
  pairs plus a short prefix (the summary prints it next to the source pairs'). Labels are the source labels
  (entailment / neutral / contradiction); ``genre`` is the source corpus (snli, mnli, anli, wanli);
  ``source_id`` and ``variant`` say where each row comes from.

The output is reproducible: the same command writes the same rows (gzip mtime 0).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
LABELS = ("entailment", "neutral", "contradiction")
SOURCES = (  # (genre, file under a shared/data folder given as --source)
    ("snli", "snli/dev.jsonl.gz"),
    ("snli", "snli/test.jsonl.gz"),
    ("mnli", "mnli/dev_matched.jsonl.gz"),
    ("mnli", "mnli/dev_mismatched.jsonl.gz"),
    ("anli", "anli/dev_r1.jsonl.gz"),
    ("anli", "anli/dev_r2.jsonl.gz"),
    ("anli", "anli/dev_r3.jsonl.gz"),
    ("wanli", "wanli/train_sample.jsonl.gz"),
)
#: word -> alternatives; a variant rewrites a word to one of them (or keeps it), alike in both texts.
LEXICON = {
    "man": ("guy", "gentleman", "fellow", "person"),
    "men": ("guys", "gentlemen", "fellows"),
    "woman": ("lady", "female", "person"),
    "women": ("ladies", "females"),
    "boy": ("kid", "lad", "youngster"),
    "girl": ("kid", "lass", "young girl"),
    "child": ("kid", "youngster"),
    "children": ("kids", "youngsters"),
    "people": ("persons", "folks", "individuals"),
    "person": ("individual", "someone"),
    "dog": ("puppy", "hound", "pup"),
    "cat": ("kitten", "kitty"),
    "street": ("road", "avenue", "lane"),
    "city": ("town", "metropolis"),
    "house": ("home", "building"),
    "car": ("vehicle", "automobile"),
    "shirt": ("top", "tee"),
    "water": ("lake", "pool"),
    "ball": ("football", "toy"),
    "group": ("crowd", "bunch", "team"),
    "two": ("2", "a pair of"),
    "three": ("3", "a trio of"),
    "red": ("crimson", "scarlet"),
    "blue": ("navy", "azure"),
    "green": ("emerald", "olive"),
    "black": ("dark", "ebony"),
    "white": ("pale", "ivory"),
    "young": ("little", "youthful"),
    "old": ("elderly", "aged"),
    "big": ("large", "huge"),
    "small": ("little", "tiny"),
    "walking": ("strolling", "wandering"),
    "running": ("jogging", "sprinting"),
    "sitting": ("seated", "resting"),
    "standing": ("waiting", "posing"),
    "playing": ("messing around", "having fun"),
    "looking": ("gazing", "staring"),
    "wearing": ("dressed in", "in"),
    "holding": ("carrying", "gripping"),
    "eating": ("having", "munching"),
    "outside": ("outdoors", "out"),
    "near": ("by", "close to"),
    "very": ("really", "quite"),
    "said": ("stated", "noted"),
    "says": ("states", "notes"),
    "government": ("administration", "state"),
    "time": ("moment", "period"),
    "year": ("season", "twelvemonth"),
    "new": ("fresh", "recent"),
    "good": ("fine", "great"),
}
PREFIXES = ("",) + tuple(
    p + " "
    for p in (
        "In the photo,",
        "In this picture,",
        "Earlier today,",
        "Yesterday,",
        "This morning,",
        "Last week,",
        "As reported,",
        "Apparently,",
        "According to the caption,",
        "In the image,",
        "On a sunny day,",
        "On a cold day,",
        "At the weekend,",
        "In the scene,",
        "As seen here,",
        "In the story,",
        "At noon,",
        "In the evening,",
        "Meanwhile,",
        "Once again,",
        "As usual,",
        "For a while,",
        "In the video,",
        "On the news,",
        "In the report,",
        "By all accounts,",
        "At first glance,",
        "Later on,",
        "In the end,",
        "Right now,",
        "At the moment,",
        "Not long ago,",
        "In the city,",
        "In the country,",
        "Outdoors,",
        "Indoors,",
        "In the summer,",
        "In the winter,",
        "In spring,",
        "In autumn,",
        "On Monday,",
        "On Friday,",
        "At the festival,",
        "At the park,",
        "During the day,",
        "At night,",
        "Today,",
    )
)
LOWER_FIRST = {"a", "an", "the", "two", "three", "four", "some", "several", "many", "people", "one"}
WORD_RE = re.compile(r"\b(" + "|".join(sorted(LEXICON, key=len, reverse=True)) + r")\b", re.IGNORECASE)
ENTRIES = {word: n for n, word in enumerate(LEXICON)}


DEMO = "demo"


def source_files(source: str | Path) -> list[tuple[str | None, Path]]:
    """(genre or None: the file's own ``genre`` field, file) of every source file of ``source``."""
    if str(source) == DEMO:
        folder = ROOT / "cartomap" / "data" / "demo"
        return [(None, folder / "nli_train.jsonl.gz"), (None, folder / "nli_dev.jsonl.gz")]
    source = Path(source)
    if source.is_file():
        return [(source.name.split(".")[0], source)]
    if not source.is_dir():
        raise SystemExit(f"--source {source}: no such file or folder (use `demo` for the bundled data)")
    found = [(genre, source / name) for genre, name in SOURCES if (source / name).exists()]
    if not found:
        raise SystemExit(f"--source {source}: none of {', '.join(n for _, n in SOURCES)} is there")
    return found


def read_pairs(source: str | Path = DEMO) -> pd.DataFrame:
    """Every real English pair with a gold label: genre, source_id, premise, hypothesis, label."""
    rows = []
    for genre, path in source_files(source):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if (
                    record.get("label") in LABELS
                    and record["premise"].strip()
                    and record["hypothesis"].strip()
                ):
                    rows.append(
                        (
                            genre or record.get("genre") or "demo",
                            str(record["id"]),
                            record["premise"],
                            record["hypothesis"],
                            record["label"],
                        )
                    )
    return pd.DataFrame(rows, columns=["genre", "source_id", "premise", "hypothesis", "label"])


def choice(variant: int, entry: int, n_options: int) -> int:
    """Which alternative (0 = keep the word) variant ``variant`` takes for lexicon entry ``entry``."""
    return ((variant * 2654435761) ^ (entry * 40503 + 12345)) % 99991 % (n_options + 1)


def vary(premise: str, hypothesis: str, variant: int) -> tuple[str, str]:
    """The pair's ``variant``-th edit (0 = unchanged): lexicon rewrites in both texts, a premise prefix."""
    if variant == 0:
        return premise, hypothesis

    def swap(match: re.Match) -> str:
        word = match.group(0)
        options = LEXICON[word.lower()]
        k = choice(variant, ENTRIES[word.lower()], len(options))
        if k == 0:
            return word
        new = options[k - 1]
        return new[0].upper() + new[1:] if word[0].isupper() else new

    premise, hypothesis = WORD_RE.sub(swap, premise), WORD_RE.sub(swap, hypothesis)
    prefix = PREFIXES[variant % len(PREFIXES)]
    round_no = variant % 1000
    if round_no >= len(PREFIXES):  # a small source needs many rounds: a second framing (never below)
        prefix = PREFIXES[1 + (round_no // len(PREFIXES)) % (len(PREFIXES) - 1)] + prefix.lower()
    if prefix:
        first = premise.split(" ", 1)[0]
        if first.lower() in LOWER_FIRST:
            premise = premise[0].lower() + premise[1:]
        premise = prefix + premise
    return premise, hypothesis


def _candidates(round_no: int):
    """The variants a pair of round ``round_no`` tries, in order, until one is new: the round's own, then
    the same round's next ones (+1000 each: other lexicon rewrites, 6 of the framings), then, for a pair
    none of those makes new (one without lexicon words in a late round: past about a million rows of a
    42k-pair source), variants of the following rounds' framings (+1 each). Deterministic."""
    yield from range(round_no, round_no + 100 * 1000, 1000)
    yield from range(100 * 1000 + round_no + 1, 100 * 1000 + round_no + 2000)


def build(pairs: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` distinct rows: round 0 (the real pairs), then rounds 1, 2, ... of varied pairs."""
    premises, hypotheses = pairs["premise"].tolist(), pairs["hypothesis"].tolist()
    seen: set[tuple[str, str]] = set()
    out_rows, out_variant, out_p, out_h = [], [], [], []
    round_no = 0
    while len(out_rows) < n:
        order = np.random.default_rng([seed, round_no]).permutation(len(pairs))
        for row in order.tolist():
            for variant in _candidates(round_no):
                p, h = vary(premises[row], hypotheses[row], variant)
                if (p, h) not in seen:
                    break
            else:
                raise SystemExit(
                    f"{len(pairs):,} source pairs cannot make {n:,} distinct rows: pass a bigger --source"
                )
            seen.add((p, h))
            out_rows.append(row)
            out_variant.append(variant)
            out_p.append(p)
            out_h.append(h)
            if len(out_rows) == n:
                break
        round_no += 1
    picked = pairs.iloc[out_rows].reset_index(drop=True)
    return pd.DataFrame(
        {
            "id": [f"syn-{i:07d}" for i in range(n)],
            "premise": out_p,
            "hypothesis": out_h,
            "label": picked["label"].to_numpy(),
            "genre": picked["genre"].to_numpy(),
            "source_id": picked["source_id"].to_numpy(),
            "variant": np.asarray(out_variant, dtype=np.int64),
        }
    )


def write_jsonl_gz(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as f,
    ):
        columns = list(frame.columns)
        for values in zip(*(frame[c].tolist() for c in columns), strict=True):
            f.write((json.dumps(dict(zip(columns, values, strict=True)), ensure_ascii=False) + "\n").encode())
    tmp.replace(path)


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_parquet(tmp, index=False)
    tmp.replace(path)


def paths(out: Path, n: int) -> tuple[Path, Path]:
    """(JSONL.gz, Parquet) of the ``n``-row set under ``out``."""
    return out / f"nli_{n}.jsonl.gz", out / f"nli_{n}.parquet"


def make(n: int, out: Path, source: str | Path = DEMO, quiet: bool = False) -> tuple[Path, Path]:
    """Write the ``n``-row set (both formats) unless it exists; returns their paths."""
    jsonl, parquet = paths(out, n)
    if jsonl.exists() and parquet.exists():
        return jsonl, parquet
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pairs = read_pairs(source)
    frame = build(pairs, n)
    write_parquet(frame, parquet)
    write_jsonl_gz(frame, jsonl)
    if not quiet:
        summary(frame, pairs, time.perf_counter() - t0, jsonl, parquet)
    return jsonl, parquet


def summary(frame, pairs, seconds: float, jsonl: Path, parquet: Path) -> None:
    def lengths(f) -> str:
        chars = (f["premise"].str.len() + f["hypothesis"].str.len()).to_numpy()
        q = np.percentile(chars, [10, 50, 90])
        return f"mean {chars.mean():.0f}, p10/p50/p90 {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f} characters per pair"

    print(f"{len(frame):,} synthetic pairs from {len(pairs):,} real ones in {seconds:.1f} s")
    print(
        f"  {jsonl} ({jsonl.stat().st_size / 1e6:.1f} MB)  {parquet} ({parquet.stat().st_size / 1e6:.1f} MB)"
    )
    print(f"  labels: {frame['label'].value_counts().to_dict()}")
    print(f"  genres: {frame['genre'].value_counts().to_dict()}")
    redrawn = int((frame["variant"] >= 1000).sum())
    print(
        f"  rounds: {int((frame['variant'] % 1000).max()) + 1}; re-drawn repeats: {redrawn:,}; distinct pairs: "
        f"{len(frame.drop_duplicates(['premise', 'hypothesis'])):,}"
    )
    print(f"  lengths: {lengths(frame)}; the source pairs: {lengths(pairs)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=550_000, help="rows to write (default 550,000)")
    parser.add_argument("--out", type=Path, default=ROOT / "cache" / "scale")
    parser.add_argument(
        "--source",
        "--shared",
        default=DEMO,
        help="the real pairs: demo (the bundled demo data, default), a shared/data folder or a .jsonl[.gz] file",
    )
    args = parser.parse_args()
    jsonl, parquet = paths(args.out, args.examples)
    if jsonl.exists() and parquet.exists():
        print(f"{jsonl} and {parquet} exist already (delete them to rebuild)")
        return
    make(args.examples, args.out, args.source)


if __name__ == "__main__":
    main()
