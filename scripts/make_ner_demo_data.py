"""Build the token-classification demo (ner_{train,dev}.conll.gz) from the WikiGold NER corpus.

    python scripts/make_ner_demo_data.py --source wikigold.conll.txt [--out cartomap/data/demo]

WikiGold (Balasuriya et al., 2009, "Named Entity Recognition in Wikipedia"; Nothman et al., 2013) is a
hand-annotated sample of English Wikipedia articles, tagged PER, LOC, ORG and MISC in CoNLL-2003's
IOB1 scheme (``I-`` opens an entity, ``B-`` only separates two adjacent ones), one ``token TAG`` per
line, a blank line between sentences and a ``-DOCSTART- O`` line between articles. Licence: CC BY 4.0.
No package on PyPI ships it, so it is not fetched here: pass the file (``wikigold.conll.txt``).

What this does: reads every article with :func:`cartomap.data.conll.parse_conll`, converts the tags
to IOB2 (:func:`cartomap.data.conll.to_iob2`: every entity opens with ``B-``), shuffles the articles
with ``numpy.random.default_rng(0)`` and puts :data:`DEV_SHARE` of them (rounded, at least one) into
the dev file, the rest into the training file, so no article is in both. Each sentence keeps its
place in the corpus as its id, ``wikigold-<article>-<sentence>`` (0-based, in the source's order),
written as a ``# sent_id = ...`` comment (read it with ``id_field="sent_id"``). Files are two
tab-separated columns, gzip with mtime 0 and no file name: byte for byte the same on every run.
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.data.conll import parse_conll, read_text, to_conll, to_iob2

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "cartomap" / "data" / "demo"
#: Share of the articles that go to the dev file.
DEV_SHARE = 0.15
SEED = 0
_DOCSTART = re.compile(r"^-DOCSTART-[^\n]*$", flags=re.MULTILINE)


def read_articles(path: Path) -> list[pd.DataFrame]:
    """One frame (id, tokens, tags in IOB2) per article of the WikiGold file, in the file's order."""
    text = read_text(path, str(path))
    articles = []
    for chunk in _DOCSTART.split(text):
        if not chunk.strip():
            continue
        k = len(articles)
        frame = parse_conll(chunk, f"{path} (article {k})", token_column=0, comments=False).frame
        frame["tags"] = [to_iob2(tags) for tags in frame["tags"]]
        frame["id"] = [f"wikigold-{k}-{i}" for i in range(len(frame))]
        articles.append(frame)
    if not articles:
        raise SystemExit(f"--source {path}: no sentences found")
    return articles


def split_articles(articles: list[pd.DataFrame], dev_share: float = DEV_SHARE, seed: int = SEED):
    """(train, dev) frames: the articles shuffled by ``seed``, the first round(dev_share * n) to dev."""
    order = np.random.default_rng(seed).permutation(len(articles))
    n_dev = max(1, int(round(dev_share * len(articles))))
    if n_dev >= len(articles):
        raise SystemExit(f"{len(articles)} articles are too few to keep some for training")
    dev = sorted(order[:n_dev].tolist())
    train = sorted(order[n_dev:].tolist())
    join = lambda picked: pd.concat([articles[k] for k in picked], ignore_index=True)  # noqa: E731
    return join(train), join(dev)


def write_conll_gz(path: Path, frame: pd.DataFrame) -> None:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(to_conll(frame, id_comments=True).encode("utf-8"))
    path.write_bytes(buf.getvalue())


def summary(frame: pd.DataFrame) -> str:
    entities = Counter(tag[2:] for tags in frame["tags"] for tag in tags if tag.startswith("B-"))
    words = sum(len(tokens) for tokens in frame["tokens"])
    return f"{len(frame):,} sentences, {words:,} words, entities {dict(sorted(entities.items()))}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="WikiGold's wikigold.conll.txt")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not args.source.is_file():
        raise SystemExit(f"--source {args.source}: no such file")
    articles = read_articles(args.source)
    train, dev = split_articles(articles)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("train", train), ("dev", dev)):
        path = args.out / f"ner_{name}.conll.gz"
        write_conll_gz(path, frame)
        print(f"{path}: {summary(frame)}")


if __name__ == "__main__":
    main()
