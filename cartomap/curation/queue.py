"""A review queue of a finished run: the examples to review, in score order, with their cards.

A queue lives in the run folder, ``review/<queue>/`` (names from :mod:`cartomap.runs.layout`):
``queue.parquet`` (one row per item, written last: it marks a queue as complete) and
``review.sqlite`` (the decisions, :class:`cartomap.curation.store.QueueDB`).

Each item's card, computed once when the queue is made: the texts, the gold label, the model's
prediction and its probability at the final epoch, the probability of the gold label at every epoch
(the run's recorded dynamics), the human votes when the data has them
(:mod:`cartomap.data.annotations`) and, when the run has embeddings (``cartomap embed``), its nearest
neighbours (cosine of [CLS] vectors, any label) with their labels. A token run's queue holds words
(``<sentence id>#<k>``): each card is a tag to review, the word marked in its sentence. A multi-label
run's queue holds (example, label) units (``<example id>#<j>``, :mod:`cartomap.curation.sources`): each
card asks whether one label applies to its text (gold and prediction "present" or "absent", the text's
label set beside it), so a relabel toggles that label's presence.
"""

from __future__ import annotations

import math
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.multilabel import label_sets
from cartomap.analysis.tokens import split_unit_id
from cartomap.curation.levels import WORD, check_level, group_cards, run_scheme
from cartomap.curation.sources import Candidates, queue_ids
from cartomap.curation.store import DEFAULT_PER_ITEM, QueueDB, check_guidelines
from cartomap.curation.tags import decode_tags, edit_tags, encode_tags
from cartomap.data.annotations import votes_matrix
from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_write_parquet
from cartomap.runs import layout
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.scores.knn import cosine_top_k
from cartomap.scores.metrics import softmax
from cartomap.tasks import registry as task_kinds
from cartomap.training.embeddings import load_embeddings

NEIGHBOURS = 5
MAX_QUEUE = 100_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
#: Every task kind's text fields (:func:`cartomap.tasks.registry.text_fields`).
#: How a token run's card marks the word under review in its sentence (:func:`mark_word`).
WORD_MARKS = ("⟦", "⟧")


def check_name(name: str) -> str:
    """A queue's name: letters, digits, ``_ . -``, up to 80 characters (it names a folder)."""
    name = str(name or "").strip()
    if not _NAME.match(name):
        raise CartomapError(
            f"queue name {name!r}: use 1-80 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return name


def queue_path(run: Run, name: str) -> Path:
    return run.review_queue_dir(check_name(name)) / layout.QUEUE


def db_path(run: Run, name: str) -> Path:
    return run.review_queue_dir(check_name(name)) / layout.REVIEW_DB


def list_queues(run: Run) -> list[str]:
    """The names of the run's complete queues, sorted."""
    if not run.review_dir.is_dir():
        return []
    return sorted(p.name for p in run.review_dir.iterdir() if (p / layout.QUEUE).exists())


def open_queue(run: Run, name: str) -> QueueDB:
    """The decision store of queue ``name``; CartomapError listing the queues when there is none."""
    if not queue_path(run, name).exists():
        known = ", ".join(list_queues(run)) or "none yet"
        raise CartomapError(f"run {run.id} has no review queue {name!r} (its queues: {known})")
    return QueueDB(db_path(run, name))


def load_queue(run: Run, name: str) -> pd.DataFrame:
    """The queue's items with their cards, in queue order."""
    path = queue_path(run, name)
    if not path.exists():
        open_queue(run, name)  # raises the error listing the queues
    return pd.read_parquet(path)


# --------------------------------------------------------------------------- the cards
def _probabilities(run: Run, rows: np.ndarray) -> np.ndarray | None:
    """Softmax probabilities [E, Q, C] of the queued rows over the recorded epochs, or None."""
    try:
        _, logits = run.dynamics(run.recorded_source())
    except (RunError, OSError, ValueError, KeyError):
        return None
    if logits.ndim != 3 or logits.shape[0] == 0:
        return None
    return softmax(np.asarray(logits[:, rows, :], dtype=np.float64))


def nearest_neighbours(
    vectors: np.ndarray, rows: np.ndarray, k: int = NEIGHBOURS, block: int = 4096
) -> tuple[np.ndarray, np.ndarray]:
    """The k most cosine-similar rows of ``vectors`` [N, H] to each of ``rows`` (itself left out), any
    label: (indices [Q, k], similarities [Q, k]), most similar first; -1 / NaN where N - 1 < k
    (:func:`cartomap.scores.knn.cosine_top_k`)."""
    return cosine_top_k(vectors, rows, k, block)


def seed_curves(seed_runs, ids: Sequence[str], gold: np.ndarray) -> tuple[list[int], list[list[list[float]]]]:
    """(seeds, curves): for each candidate, p(gold) over the recorded epochs of every run of ``seed_runs``
    ({seed: run}, the same data trained with other seeds), looked up by example id; a seed whose run lacks
    dynamics or an example is left out."""
    seeds: list[int] = []
    per_seed: list[np.ndarray] = []
    for seed, other in sorted((seed_runs or {}).items()):
        try:
            pos = {str(i): k for k, i in enumerate(queue_ids(other))}
        except (RunError, OSError, ValueError):
            continue
        if not all(i in pos for i in ids):
            continue
        probs = _probabilities(other, np.asarray([pos[i] for i in ids], dtype=np.int64))
        if probs is None:
            continue
        seeds.append(int(seed))
        per_seed.append(probs[:, np.arange(len(ids)), gold])  # [E, Q]
    curves = [[p[:, q].tolist() for p in per_seed] for q in range(len(ids))]
    return seeds, curves


def mark_word(words: Sequence[str], k: int) -> str:
    """A sentence's words joined by spaces with word ``k`` between :data:`WORD_MARKS`: the word a card asks
    about, in its sentence ("Mary visited ⟦Berlin⟧")."""
    return " ".join(f"{WORD_MARKS[0]}{w}{WORD_MARKS[1]}" if j == k else str(w) for j, w in enumerate(words))


def word_items(run: Run, examples: pd.DataFrame, unit_ids: Sequence[str]) -> pd.DataFrame:
    """A token run's words to review (ids ``<sentence id>#<k>``), in their order: the sentence with the
    word marked (the text field, :func:`mark_word`), ``word``, ``sentence_id``, ``word_index`` and the
    word's tag code ``gold_index``."""
    field, tags = run.task_kind.text_fields[0], run.task_kind.label_field
    row_of = {sid: k for k, sid in enumerate(examples["id"].astype(str))}
    out = {field: [], "word": [], "sentence_id": [], "word_index": [], "gold_index": []}
    for unit in unit_ids:
        sentence, k = split_unit_id(unit)
        row = examples.iloc[row_of[sentence]]
        words = [str(w) for w in row[field]]
        out[field].append(mark_word(words, k))
        out["word"].append(words[k])
        out["sentence_id"].append(sentence)
        out["word_index"].append(k)
        out["gold_index"].append(int(row[tags][k]))
    return pd.DataFrame(out)


def label_items(run: Run, examples: pd.DataFrame, unit_ids: Sequence[str]) -> pd.DataFrame:
    """A multi-label run's (example, label) units to review (ids ``<example id>#<j>``), in their order: the
    example's texts, ``example_id``, ``label_index`` (j), ``label_name`` (the label the card asks about),
    ``label_set`` (the example's gold labels, joined; "(none)" for an empty set) and ``gold_index`` (1
    when the label applies, else 0: :data:`cartomap.tasks.base.LABEL_UNIT_CLASSES`)."""
    kind, names = run.task_kind, [str(n) for n in run.label_names]
    row_of = {eid: k for k, eid in enumerate(examples["id"].astype(str))}
    keys = [split_unit_id(unit) for unit in unit_ids]
    rows = np.asarray([row_of[eid] for eid, _ in keys], dtype=np.int64)
    picked = examples.iloc[rows].reset_index(drop=True)
    out = {f: picked[f].astype(str).to_numpy() for f in kind.text_fields if f in picked.columns}
    sets = [[str(n) for n in labels] for labels in picked[kind.label_field]]
    out["example_id"] = [eid for eid, _ in keys]
    out["label_index"] = [j for _, j in keys]
    out["label_name"] = [names[j] for _, j in keys]
    out["label_set"] = label_sets(sets, names)
    out["gold_index"] = [int(names[j] in labels) for (_, j), labels in zip(keys, sets, strict=True)]
    return pd.DataFrame(out)


def build_cards(
    run: Run, candidates: Candidates, neighbours: int = NEIGHBOURS, seed_runs=None
) -> pd.DataFrame:
    """One row per candidate, in their order: id, position, score, queued_by, the text columns, gold,
    gold_index, predicted, p_predicted, p_gold, p_gold_epochs (list), votes (list per label, or None),
    neighbour_ids / neighbour_labels / neighbour_similarity / neighbour_<text column> (lists; empty
    without embeddings); with ``seed_runs`` ({seed: run} of the same data with other seeds),
    ``seed_list`` and ``p_gold_seeds`` (per candidate, one p(gold)-over-epochs list per seed). A token
    run's candidates are words: a tag to review, its sentence as the text with the word marked
    (:func:`word_items`: also word, sentence_id, word_index), gold and predicted tags, no votes or
    neighbours."""
    examples = run.examples()
    names = list(run.task_kind.unit_classes(run.label_names))  # a label unit's: absent, present
    words = run.task_kind.unit.sentences
    label_units = run.task_kind.unit.label_sets
    ids = queue_ids(run) if words or label_units else examples["id"].astype(str).tolist()
    pos = {i: k for k, i in enumerate(ids)}
    unknown = [i for i in candidates.ids if i not in pos]
    if unknown:
        what = run.task_kind.unit.plural() if words else "examples"
        raise CartomapError(f"{len(unknown)} ids are not {what} of run {run.id}, e.g. {unknown[:3]}")
    rows = np.asarray([pos[i] for i in candidates.ids], dtype=np.int64)
    frame = pd.DataFrame(
        {
            "id": list(candidates.ids),
            "position": np.arange(len(rows), dtype=np.int64),
            "score": np.asarray(candidates.scores, dtype=np.float64),
            "queued_by": candidates.queued_by,
        }
    )
    if words or label_units:  # a tag to review in its sentence; a label of a text, present or absent
        items = word_items if words else label_items
        picked = items(run, examples, list(candidates.ids))
        gold = picked.pop("gold_index").to_numpy(dtype=np.int64)
        for column in picked.columns:
            frame[column] = picked[column].to_numpy()
    else:
        picked = examples.iloc[rows].reset_index(drop=True)
        gold = picked["label"].to_numpy(dtype=np.int64)
        for column in task_kinds.text_fields():
            if column in picked.columns:
                frame[column] = picked[column].astype(str).to_numpy()
    frame["gold"] = [names[g] for g in gold]
    frame["gold_index"] = gold
    probs = _probabilities(run, rows)
    if probs is not None:
        final = probs[-1]
        pred = final.argmax(axis=1)
        frame["predicted"] = [names[p] for p in pred]
        frame["p_predicted"] = final[np.arange(len(rows)), pred]
        frame["p_gold"] = final[np.arange(len(rows)), gold]
        frame["p_gold_epochs"] = [probs[:, q, gold[q]].tolist() for q in range(len(rows))]
    else:
        frame["predicted"] = None
        frame["p_predicted"] = np.nan
        frame["p_gold"] = np.nan
        frame["p_gold_epochs"] = [[] for _ in range(len(rows))]
    if seed_runs:
        seeds, curves = seed_curves(seed_runs, list(candidates.ids), gold)
        if seeds:
            frame["seed_list"] = [seeds] * len(rows)
            frame["p_gold_seeds"] = curves
    units = words or label_units  # a unit of an example: no votes of its own; embeddings are examples'
    votes = None if units else votes_matrix(picked, names)
    frame["votes"] = [v.tolist() for v in votes] if votes is not None else None
    embeddings = None if units else load_embeddings(run)  # a token run's embeddings are its sentences'
    if embeddings is not None and embeddings[0] == ids and neighbours > 0:
        idx, sims = nearest_neighbours(embeddings[1], rows, k=neighbours)
        labels = examples["label"].to_numpy(dtype=np.int64)
        frame["neighbour_ids"] = [[ids[j] for j in r if j >= 0] for r in idx]
        frame["neighbour_labels"] = [[names[labels[j]] for j in r if j >= 0] for r in idx]
        frame["neighbour_similarity"] = [[float(s) for s in r if not math.isnan(s)] for r in sims]
        for column in task_kinds.text_fields():
            if column in examples.columns:
                texts = examples[column].astype(str).to_numpy()
                frame[f"neighbour_{column}"] = [[str(texts[j]) for j in r if j >= 0] for r in idx]
    else:
        for column in (
            "ids",
            "labels",
            "similarity",
            *(c for c in task_kinds.text_fields() if c in examples.columns),
        ):
            frame[f"neighbour_{column}"] = [[] for _ in range(len(rows))]
    return frame


def create_queue(
    run: Run,
    name: str,
    candidates: Candidates,
    *,
    top: int | None = None,
    per_item: int = DEFAULT_PER_ITEM,
    neighbours: int = NEIGHBOURS,
    seed_runs=None,
    by: str | None = None,
    guidelines: str = "",
) -> pd.DataFrame:
    """Make review queue ``name`` of ``run`` from ``candidates`` (highest score first, the first ``top``
    when given), each item wanting ``per_item`` annotators; returns its items. ``seed_runs`` ({seed: run},
    the run's data trained with other seeds) add each item's p(gold) curve per seed; ``guidelines``, the
    annotators' guidelines shown with every card (the creator may edit them later). A queue of that name
    is never replaced (its decisions would be lost): CartomapError. A token run's candidates by sentence
    or span (:mod:`cartomap.curation.levels`) get those items' cards (:func:`~cartomap.curation.levels.group_cards`)
    and a store that takes a relabel as the sentence's tag list, in the file's scheme. ``by``: the person who made it (noted
    in the queue's store, :meth:`~cartomap.runs.sqlite.SQLiteStore.writes`)."""
    name = check_name(name)
    guidelines = check_guidelines(guidelines)
    if int(per_item) != per_item or per_item < 1:
        raise CartomapError(f"annotators per item must be a whole number >= 1, got {per_item!r}")
    if run.state != State.DONE:
        raise RunError(
            f"run {run.id} is not finished (state: {run.state}): review queues need a finished run"
        )
    ordered = candidates.ordered(top)
    if len(ordered.ids) > MAX_QUEUE:
        raise CartomapError(f"a queue holds at most {MAX_QUEUE:,} examples; pass a smaller top k")
    folder = run.review_queue_dir(name)
    if (folder / layout.QUEUE).exists():
        raise CartomapError(f"run {run.id} has a review queue {name!r} already: pick another name")
    if (folder / layout.REVIEW_DB).exists() and len(QueueDB(folder / layout.REVIEW_DB).history()):
        raise CartomapError(
            f"{folder} holds decisions but no {layout.QUEUE}: move it away or pick another queue name"
        )
    level = check_level(run, ordered.level)
    cards = build_cards(run, ordered, neighbours, seed_runs) if level == WORD else group_cards(run, ordered)
    if folder.exists():  # a queue whose creation stopped half-way: nothing was decided in it
        shutil.rmtree(folder)
    try:
        scheme = None if level == WORD else run_scheme(run)
        classes = run.task_kind.unit_classes(run.label_names)  # a label unit's: relabel toggles it
        db = QueueDB(folder / layout.REVIEW_DB, classes, int(per_item), level, scheme)
        db.load_items(cards[["id", "position", "score", "gold"]])
        db.log_write("created", by, items=int(len(cards)), queued_by=candidates.queued_by)
        if guidelines:
            db.set_guidelines(guidelines, by)
        atomic_write_parquet(folder / layout.QUEUE, cards)
    except BaseException:  # a full disk, an interrupt: no half-made queue is left (nothing was decided)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return cards


def gold_curves(card: dict[str, Any]) -> pd.DataFrame:
    """A card's p(gold) over the recorded epochs, one column per run: ``this run`` and ``seed <s>`` for
    each other seed the queue recorded (index: epoch, from 1)."""
    found = card.get("p_gold_epochs")
    own = [] if found is None or isinstance(found, float) else list(found)
    columns = {"this run": own}
    seeds = card.get("seed_list")
    curves = card.get("p_gold_seeds")
    if seeds is not None and curves is not None and not isinstance(seeds, float):
        for seed, curve in zip(list(seeds), list(curves), strict=False):
            values = list(curve)
            if len(values) == len(own):
                columns[f"seed {int(seed)}"] = values
    return pd.DataFrame(columns, index=pd.Index(range(1, len(own) + 1), name="epoch"))


def gold_change(card: dict[str, Any]) -> float | None:
    """How much p(gold) changed from the first recorded epoch to the last (last - first: > 0 the model
    came to believe the gold label more), or None with fewer than two recorded epochs."""
    found = card.get("p_gold_epochs")
    values = [] if found is None or isinstance(found, float) else [float(v) for v in found]
    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return None
    return values[-1] - values[0]


def queue_summary(run: Run, name: str) -> dict[str, Any]:
    """name, items, queued_by, per_item, progress counts, created (the queue file's time), created_by
    (who made it, "" when unknown)."""
    items = load_queue(run, name)
    db = open_queue(run, name)
    progress = db.progress()
    return {
        "name": name,
        "items": int(len(items)),
        "queued_by": str(items["queued_by"].iloc[0]) if len(items) else "",
        **{k: v for k, v in progress.items() if k != "items"},
        "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(queue_path(run, name).stat().st_mtime)),
        "created_by": db.creator() or "",
    }


def item_card(run: Run, name: str, item_id: str, items: pd.DataFrame | None = None) -> dict[str, Any]:
    """One item's card as a dict (the queue row), plus ``neighbours``: a frame of id, label,
    similarity and the neighbour's texts (all from the queue file: the run's examples are not read)."""
    items = items if items is not None else load_queue(run, name)
    match = items[items["id"].astype(str) == str(item_id)]
    if match.empty:
        raise CartomapError(f"no item {item_id!r} in review queue {name!r}")
    card = match.iloc[0].to_dict()

    def listed(key: str) -> list[Any]:
        value = card.get(key)
        return [] if value is None or isinstance(value, float) else list(value)

    table = pd.DataFrame(
        {
            "id": [str(i) for i in listed("neighbour_ids")],
            "label": listed("neighbour_labels"),
            "similarity": listed("neighbour_similarity"),
        }
    )
    for column in task_kinds.text_fields():
        if f"neighbour_{column}" in card:
            table[column] = listed(f"neighbour_{column}")
    card["neighbours"] = table
    return card


def edited_tags(db: QueueDB, item_id: str, changes, repair: bool = True) -> str:
    """The tag list (one value, :func:`cartomap.curation.tags.encode_tags`) of item ``item_id`` of a queue
    of sentences or spans with ``changes`` ({word index: new tag}) made to its gold tags by
    :func:`cartomap.curation.tags.edit_tags` in the queue's scheme (repaired, or refused without
    ``repair``): the ``label`` of a relabel of several words in one decision."""
    if not db.tag_lists:
        raise CartomapError(
            f"review queue {db.path.parent.name!r} holds {db.level}s: relabel them with one tag"
        )
    gold = db.items().set_index("item_id")["gold"]
    if str(item_id) not in gold.index:
        raise CartomapError(f"no item {item_id!r} in review queue {db.path.parent.name!r}")
    tags = decode_tags(gold[str(item_id)])
    return encode_tags(edit_tags(tags, changes, db.scheme, repair=repair, names=db.label_names or None))
