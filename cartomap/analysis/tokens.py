"""A token run on the data map: the sentence-level map frame, one sentence's words with their tags, the
colour of a tag. Pure functions (no streamlit here); the Data map page and ``cartomap map --level
sentence`` call them.

A token run's dynamics are per word (its first sub-word), each word's id ``<sentence id>#<word index>``
(:data:`cartomap.tasks.base.UNIT_SEPARATOR`). The word level is the usual map
(:func:`cartomap.analysis.datamap.map_frame`); the sentence level puts each sentence where a score
over its words' confidences says (:data:`cartomap.scores.tokens.SENTENCE_METHODS`: "min", at its worst
word; "mean"; "softmin"), with the variability and correctness of its worst word.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.analysis import datamap, epochs
from cartomap.config import MAIN_METRICS
from cartomap.errors import DataError, RunError
from cartomap.scores import ambiguity
from cartomap.scores.columns import score_columns
from cartomap.scores.metrics import RegionRule, softmax
from cartomap.scores.tokens import SENTENCE_METHODS, sentence_metrics
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import UNIT_SEPARATOR, unit_id_of, word_key

#: The two levels of a token run's map: a point per word, or per sentence.
WORD_LEVEL, SENTENCE_LEVEL = "word", "sentence"
LEVELS = (WORD_LEVEL, SENTENCE_LEVEL)
#: Sentence scores by name (lower = harder), as :func:`cartomap.scores.tokens.sentence_scores` has them.
METHODS = tuple(SENTENCE_METHODS)
#: Columns of :func:`sentence_words`, in order.
WORD_TABLE_COLUMNS = (
    "word",
    "token",
    "gold",
    "predicted",
    "p_predicted",
    "confidence",
    "variability",
    "correctness",
)
#: Background colours of entity types (a tag's type: "PER" of "B-PER" and "I-PER"), picked by a hash of
#: the type so that a type keeps its colour whatever other tags the data has; pale enough for black text.
PALETTE = (
    "#cfe2ff",
    "#ffe0b3",
    "#d1f2d1",
    "#f8d0d8",
    "#e4d4f4",
    "#fff3b0",
    "#c8eef0",
    "#f2d9c4",
    "#dde7c2",
    "#f4cfee",
)
#: The colour of the outside tag "O" (and of an empty tag): none.
OUTSIDE = ""


def split_unit_id(unit_id: str) -> tuple[str, int]:
    """(sentence id, word index) of a word's id ``"<sentence id>#<k>"`` (:func:`cartomap.tasks.base.word_key`);
    RunError when it has no index."""
    try:
        return word_key(unit_id)
    except DataError:
        raise RunError(f"{unit_id!r} is not a word id (<sentence id>{UNIT_SEPARATOR}<word index>)") from None


def entity_type(tag: str) -> str:
    """The entity type of a BIO/BIOES tag: "PER" of "B-PER", "I-PER", "S-PER"; the tag itself otherwise
    ("O", a part-of-speech tag)."""
    tag = str(tag)
    head, sep, rest = tag.partition("-")
    return rest if sep and head.upper() in ("B", "I", "E", "S", "L", "U") and rest else tag


def tag_colour(tag) -> str:
    """A CSS background colour of ``tag`` (:data:`PALETTE` by its :func:`entity_type`); "" for "O"."""
    kind = entity_type(str(tag))
    if kind in ("", "O"):
        return OUTSIDE
    digest = hashlib.sha1(kind.encode("utf-8")).digest()
    return PALETTE[digest[0] % len(PALETTE)]


def tag_style(tag) -> str:
    """The Styler CSS of one cell holding ``tag``: its background colour, nothing for "O"."""
    colour = tag_colour(tag)
    return f"background-color: {colour}" if colour else ""


def sentence_map_frame(
    run,
    method: str = "min",
    regions: RegionRule | None = None,
    burn_out: int | None = None,
    *,
    dynamics=None,
    word_metrics: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """A token run's map at sentence level as a map frame (:func:`cartomap.analysis.datamap.build_map_frame`
    columns: id, the sentence's words joined, gold, predicted, confidence, variability, correctness,
    forgetfulness, region, bucket, ...), one row per sentence with a scored word, attrs ``unit`` its words'.

    confidence = the sentence score by ``method`` over its words' confidences
    (:func:`cartomap.analysis.datamap.sentence_map`; "min": the worst word's); variability,
    correctness, forgetfulness and every other score column of a word's map (the ambiguity scores, the
    detectors' columns: :func:`cartomap.scores.columns.score_columns`) are those of its worst word (lowest
    confidence), gold and predicted that word's tags; regions by ``regions`` over the sentences. Extra columns: n_words, worst_word (its
    index) and worst_token (the word). ``attrs["n_unscored"]``: sentences left out for having no word
    with a score.

    ``burn_out``: the map after that many recordings: its words' metrics over the first ``burn_out``
    recordings only (:func:`word_metrics_at`), aggregated the same way; ``dynamics`` (ids, logits,
    labels) of the recorded source already read, else read here; ``word_metrics``: the words' metrics over
    those recordings already computed (:func:`cartomap.analysis.epochs.run_map_at`: the word-level map
    after ``burn_out`` recordings shares them)."""
    datamap.require_token_run(run)
    at_k = None if burn_out is None else word_metrics_at(run, burn_out, dynamics=dynamics, units=word_metrics)
    table = datamap.sentence_map(run, method=method, metrics=at_k)
    kind = run.task_kind
    text = kind.text_fields[0]
    unscored = ~np.isfinite(table["confidence"].to_numpy(dtype=np.float64))
    table = table.loc[~unscored].reset_index(drop=True)
    metrics = run.metrics(columns=("example_id", "word", "label", "predicted")) if at_k is None else at_k
    index = pd.MultiIndex.from_arrays(
        [metrics["example_id"].astype(str).to_numpy(), metrics["word"].to_numpy(dtype=np.int64)]
    )
    where = index.get_indexer(
        pd.MultiIndex.from_arrays(
            [table["id"].astype(str).to_numpy(), table["worst_word"].to_numpy(dtype=np.int64)]
        )
    )
    if (where < 0).any():
        raise RunError(f"run {run.id}: the metrics lack the worst word of some sentences")
    label = metrics["label"].to_numpy(dtype=np.int64)[where]
    predicted = metrics["predicted"].to_numpy(dtype=np.int64)[where] if "predicted" in metrics else label
    conf = table["confidence"].to_numpy(dtype=np.float64)
    var = table["variability"].to_numpy(dtype=np.float64)
    correctness = table["correctness"].to_numpy(dtype=np.float64)
    sentence_metrics = pd.DataFrame(
        {
            "id": table["id"].astype(str).to_numpy(),
            "label": label,
            "predicted": predicted,
            "confidence": conf,
            "variability": var,
            "correctness": correctness,
            "forgetfulness": table["forgetfulness"].to_numpy(dtype=np.float64).astype(np.int64),
            "never_learned": correctness == 0,
        }
    )
    for column in score_columns(kind.unit):  # the worst word's other score columns (ambiguity, detectors')
        if column not in sentence_metrics.columns and column in table.columns:
            sentence_metrics[column] = table[column].to_numpy(dtype=np.float64)
    rule = regions or run.region_rule()
    sentence_metrics["region"] = rule.regions(sentence_metrics)
    sentence_metrics.attrs["regions"] = rule.to_dict()
    n_epochs = (
        datamap.n_epochs_of(run.metrics(columns=("correct_count", "correctness")), run)
        if at_k is None
        else int(at_k.attrs["n_epochs"])
    )
    out = datamap.build_map_frame(sentence_metrics, None, run.label_names, n_epochs, unit=kind.unit)
    out.insert(1, text, table[text].to_numpy())
    words = run.examples(columns=(text,))[text].to_numpy()  # the run's sentences, in its order
    worst = table["worst_word"].to_numpy(dtype=np.int64)
    out["n_words"] = table["n_words"].to_numpy(dtype=np.int64)
    out["worst_word"] = worst
    positions = table["sentence"].to_numpy(dtype=np.int64)  # each sentence's row in the run's examples
    out["worst_token"] = [str(words[r][k]) for r, k in zip(positions, worst, strict=True)]
    out.attrs.update(n_epochs=n_epochs, method=method, n_unscored=int(unscored.sum()), level="sentence")
    if at_k is not None:
        out.attrs.update(epochs_recorded=at_k.attrs["epochs_recorded"], burn_in=at_k.attrs["burn_in"])
    return out


def word_metrics_at(
    run, k: int, *, dynamics=None, regions: RegionRule | None = None, units: pd.DataFrame | None = None
) -> pd.DataFrame:
    """A token run's word metrics over its first ``k`` recordings (:func:`cartomap.analysis.epochs.run_map_at`,
    or ``units``, its result already computed) keyed like its metrics file: the unit id, then the
    sentence id (``example_id``) and word index (``word``) of each word."""
    from cartomap.runs.units import with_word_keys

    datamap.require_token_run(run)
    if units is None:
        units = epochs.run_map_at(run, k, dynamics=dynamics, regions=regions)
    out = with_word_keys(units, units["id"].astype(str).tolist())
    out.attrs = dict(units.attrs)
    return out


def sentence_points(units: pd.DataFrame, method: str = "min") -> pd.DataFrame:
    """Sentences placed on a map from their words' metrics ``units`` (a frame of
    :func:`cartomap.scores.metrics.compute_metrics` whose ids are word ids ``<sentence id>#<k>``) by
    :func:`cartomap.scores.tokens.sentence_metrics`: one row per sentence, in the order its first word
    comes: id (the sentence's), n_words, confidence (``method`` over its words' confidences),
    worst_word, worst_confidence, and its worst word's variability, correctness and forgetfulness."""
    keys = [split_unit_id(i) for i in units["id"].astype(str)]
    codes, sentences = pd.factorize(pd.Series([k[0] for k in keys], dtype=object), sort=False)
    words = units.assign(
        sentence=codes.astype(np.int64), word=np.asarray([k[1] for k in keys], dtype=np.int64)
    )
    out = sentence_metrics(words, method=method, n_sentences=len(sentences))
    out.insert(0, "id", np.asarray(sentences, dtype=object)[out["sentence"].to_numpy()])
    return out.drop(columns="sentence")


def words_of(ids, sentence_ids) -> dict[str, list[str]]:
    """{sentence id: the ids of its words, in order} for each of ``sentence_ids`` among a token run's unit
    ``ids`` (a ``pd.Index`` made once, or a sequence): the words ``<id>#0``, ``<id>#1``, ... that follow each
    other in ``ids``, as a run lists them. A sentence with no word there is left out."""
    index = ids if isinstance(ids, pd.Index) else pd.Index(np.asarray([str(i) for i in ids], dtype=object))
    wanted = list(dict.fromkeys(str(s) for s in sentence_ids))
    firsts = index.get_indexer([unit_id_of(s, 0) for s in wanted]) if wanted else []
    out: dict[str, list[str]] = {}
    for sentence, first in zip(wanted, firsts, strict=True):
        if first < 0:
            continue
        words, k = [], 0
        while first + k < len(index) and index[first + k] == unit_id_of(sentence, k):
            words.append(index[first + k])
            k += 1
        out[sentence] = words
    return out


def sentence_trajectories(
    logits: np.ndarray,
    labels: np.ndarray,
    ids,
    selected,
    *,
    method: str = "min",
    burn_in=None,
    start: int = 2,
    limit: int | None = epochs.MAX_TRAJECTORIES,
    axis: str = ambiguity.VARIABILITY,
) -> pd.DataFrame:
    """The paths of the ``selected`` sentences through the sentence-level map as recordings are added
    (:func:`cartomap.analysis.epochs.grouped_trajectories` over the word dynamics ``logits`` [E, M, C],
    ``labels`` [M], ``ids`` [M] of a token run): a sentence's point after k recordings is
    :func:`sentence_points` (by ``method``) of its words' metrics over those k recordings."""
    return epochs.grouped_trajectories(
        logits,
        labels,
        ids,
        words_of(ids, selected),
        lambda units: sentence_points(units, method),
        burn_in=burn_in,
        start=start,
        limit=limit,
        axis=axis,
    )


def sentence_rows(word_frame: pd.DataFrame, sentence_id: str) -> np.ndarray:
    """Row positions in a word-level map frame of the words of ``sentence_id``, in word order."""
    ids = pd.Series(datamap.id_array(word_frame["id"]), dtype=object)
    prefix = f"{sentence_id}{UNIT_SEPARATOR}"
    hit = ids.str.startswith(prefix).to_numpy(dtype=bool)
    rest = ids[hit].str.slice(len(prefix))
    digits = rest.str.isdigit().to_numpy(dtype=bool)
    rows = np.flatnonzero(hit)[digits]
    order = np.argsort(rest[digits].astype(np.int64).to_numpy(), kind="stable")
    return rows[order]


def map_recording(frame: pd.DataFrame) -> int | None:
    """The recording (1-based) whose prediction is the "predicted" of a map frame made after k
    recordings (:func:`cartomap.analysis.epochs.map_at`: its ``n_epochs`` used after the ``burn_in`` left
    out); None for a map of every recording (its last)."""
    if "epochs_recorded" not in frame.attrs or "n_epochs" not in frame.attrs:
        return None
    k = int(frame.attrs.get("burn_in") or 0) + int(frame.attrs["n_epochs"])
    return None if k >= int(frame.attrs["epochs_recorded"]) else k


def predicted_probabilities(
    run, unit_ids: Sequence[str], source: str = MAIN_METRICS, k: int | None = None
) -> np.ndarray:
    """p(predicted tag) of each word of ``unit_ids`` at recording ``k`` (1-based; default the last) of
    ``source`` (the recording whose argmax is the map's "predicted", :func:`map_recording`), float
    [len(unit_ids)]; NaN for a word not recorded."""
    recorded = run.recorded_source(source)
    epochs = run.dynamics_epochs(recorded)
    out = np.full(len(unit_ids), np.nan)
    if not epochs or not len(unit_ids):
        return out
    if k is not None and not 1 <= k <= len(epochs):
        raise DataError(f"recording {k} of run {run.id}: expected 1 to {len(epochs)}", field="k")
    wanted = [str(i) for i in unit_ids]
    epoch = epochs[-1] if k is None else epochs[k - 1]
    part = pd.read_parquet(run.epoch_path(recorded, epoch), filters=[("id", "in", wanted)])
    logits = part[[c for c in part.columns if str(c).startswith("logit_")]].to_numpy(dtype=np.float64)
    probs = softmax(logits).max(axis=-1) if len(part) else np.zeros(0)
    found = pd.Series(probs, index=part["id"].astype(str).to_numpy())
    return found.reindex(wanted).to_numpy(dtype=np.float64)


def sentence_words(word_frame: pd.DataFrame, sentence_id: str, p_predicted=None) -> pd.DataFrame:
    """One sentence of a token run, one row per word in order (:data:`WORD_TABLE_COLUMNS`): its index,
    the word, its gold and predicted tags, p(predicted) (``p_predicted``, e.g. from
    :func:`predicted_probabilities`; NaN without), and the word's confidence (mean p(gold) over the
    epochs), variability and correctness from the word-level map frame. Empty when the frame has no word
    of that sentence (filtered out, or another run's)."""
    rows = sentence_rows(word_frame, sentence_id)
    part = word_frame.iloc[rows]
    text = next((c for c in task_kinds.text_fields() if c in part.columns), None)
    probs = np.full(len(part), np.nan) if p_predicted is None else np.asarray(p_predicted, dtype=np.float64)
    if probs.shape != (len(part),):
        raise ValueError(f"expected {len(part)} probabilities (one per word), got shape {probs.shape}")
    return pd.DataFrame(
        {
            "word": [split_unit_id(i)[1] for i in part["id"]],
            "token": datamap.str_array(part[text]) if text else [""] * len(part),
            "gold": datamap.str_array(part["gold"]),
            "predicted": datamap.str_array(part["predicted"]),
            "p_predicted": probs,
            "confidence": part["confidence"].to_numpy(dtype=np.float64),
            "variability": part["variability"].to_numpy(dtype=np.float64),
            "correctness": part["correctness"].to_numpy(dtype=np.float64),
        },
        columns=list(WORD_TABLE_COLUMNS),
    )


def styled_words(table: pd.DataFrame):
    """:func:`sentence_words` as a pandas Styler: the gold and predicted cells coloured by tag
    (:func:`tag_colour`), numbers to 3 decimals. The text stays text (a Styler renders no HTML of its
    cells in ``st.dataframe``)."""
    styler = table.style.map(tag_style, subset=["gold", "predicted"])
    return styler.format(
        {"p_predicted": "{:.3f}", "confidence": "{:.3f}", "variability": "{:.3f}", "correctness": "{:.2f}"},
        na_rep="",
    )


def sentence_of(focus: str | None, level: str) -> str | None:
    """The sentence to open for a focused point: the sentence of a word id at word level, the id itself
    at sentence level; None when nothing is focused (or a word-level id is not a word's)."""
    if not focus:
        return None
    if level == SENTENCE_LEVEL:
        return str(focus)
    try:
        return split_unit_id(focus)[0]
    except RunError:
        return None
