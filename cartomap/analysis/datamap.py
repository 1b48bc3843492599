"""The interactive data map of the dashboard, as pure functions (no streamlit here).

* :func:`map_frame`: one row per training example, metrics joined with the example texts.
* :func:`filter_frame`: label / region / genre / metric-range filters.
* :func:`figure`: the plotly WebGL data map (x = the map's ambiguity axis, :func:`axis_of`;
  y = confidence) with marginal histograms; above ``max_points`` it draws a density layer of every
  point plus a random sample.
* what a person selected on the map (a lasso, a box, clicks) is :mod:`cartomap.analysis.selection`'s.
* :func:`gold_trajectory`: one example's probabilities epoch by epoch.
* the table of a selection and its downloads are :mod:`cartomap.analysis.tables`'; a map as a file,
  :mod:`cartomap.analysis.map_files`'.

Dataset text is untrusted: everything that goes into plotly hover text or trace names is
HTML-escaped (plotly renders a subset of HTML in those strings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import MAIN_METRICS, Source
from cartomap.errors import DataError, RunError
from cartomap.scores import ambiguity
from cartomap.scores.columns import score_columns
from cartomap.scores.metrics import (
    UNIT_METRICS,
    RegionRule,
    compute_metrics,
    correctness_bucket,
    softmax,
)
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.units import Unit

DEFAULT_MAX_POINTS = 20_000
#: Metric columns of :func:`map_frame`, in display order.
#: The ambiguity scores a map can be drawn and its regions ranked on (its second axis), every one a
#: column of the run's metrics file (:data:`cartomap.scores.ambiguity.MAP_SCORES`).
AXIS_COLUMNS: tuple[str, ...] = ambiguity.MAP_SCORES


def table_metric_columns(unit=None) -> tuple[str, ...]:
    """The metrics a table of ``unit``'s map (None: any unit's) shows first, in this order: confidence, the
    ambiguity scores, correctness, forgetfulness, the other score columns
    (:func:`cartomap.scores.columns.score_columns`, asked when called), region."""
    first = ("confidence", *ambiguity.map_scores(unit), "correctness", "forgetfulness")
    rest = [c for c in score_columns(unit) if c not in first and c not in UNIT_METRICS]
    return (*first, *rest, "region")


#: :func:`table_metric_columns` of the built-in scores (when the module is loaded).
TABLE_METRIC_COLUMNS = table_metric_columns()


def number_columns(frame: pd.DataFrame) -> list[str]:
    """The score columns of a map frame's unit (:func:`cartomap.scores.columns.score_columns`, its
    ``attrs["unit"]``) that ``frame`` holds as floats: what a table of it shows as numbers to 3 decimals."""
    unit = frame.attrs.get("unit")
    return [c for c in score_columns(unit) if c in frame.columns and pd.api.types.is_float_dtype(frame[c])]


#: The metrics ``cartomap show`` summarises: the map's own and the score columns of an example's map that
#: are neither a unit metric nor an ambiguity axis (AUM, EL2N, ...; :func:`cartomap.scores.columns.score_columns`).
RANGE_COLUMNS = (
    "confidence",
    "variability",
    "correctness",
    "forgetfulness",
    *(c for c in score_columns() if c not in UNIT_METRICS and c not in AXIS_COLUMNS),
)
#: At most this many selected points get a ring (a larger selection is sampled for drawing only).


# --------------------------------------------------------------------------- the frame


def n_epochs_of(metrics: pd.DataFrame, run=None) -> int | None:
    """E of a metrics frame: its attrs, else the run's recorded epochs, else correct_count / correctness."""
    n = metrics.attrs.get("n_epochs")
    if n:
        return int(n)
    if run is not None:
        epochs = run.dynamics_epochs()
        if epochs:
            return len(epochs)
    if "correct_count" in metrics.columns and "correctness" in metrics.columns:
        frac = metrics["correctness"].to_numpy(dtype=np.float64)
        count = metrics["correct_count"].to_numpy(dtype=np.float64)
        ok = frac > 0
        if ok.any():
            return int(np.round(np.median(count[ok] / frac[ok])))
    return None


def id_array(values) -> np.ndarray:
    """Ids as a numpy object array of Python str. Hash lookups on it are fast; pandas 3's default
    Arrow-backed str dtype iterates in Python for ``isin`` against a long list."""
    if isinstance(values, pd.Series | pd.Index):
        if values.dtype == object and (
            not len(values) or isinstance(values.iloc[0] if isinstance(values, pd.Series) else values[0], str)
        ):
            return values.to_numpy()
        return values.astype(str).astype(object).to_numpy()
    return np.asarray([str(v) for v in values], dtype=object)


def str_array(series: pd.Series) -> np.ndarray:
    """A column as an object array of str (cheap for categoricals: one str per category)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = np.asarray([str(c) for c in series.cat.categories] + [""], dtype=object)
        return cats[series.cat.codes.to_numpy()]  # code -1 (missing) -> ""
    return np.asarray([str(v) for v in series.astype(object)], dtype=object)


def _id_index(frame: pd.DataFrame) -> pd.Index:
    """``frame``'s ids as an Index, kept with the frame while it lives (:func:`frame_memo`): pandas builds
    an Index's hash table once, on its first lookup, and that is the cost of a lookup in 2M ids (about
    0.5 s); a page looks up one selection in the same frame several times (rings, histograms, table),
    and the dashboard's cached frame on every rerun. Frames are read-only here."""
    return frame_memo(frame, "id index", lambda: pd.Index(id_array(frame["id"]), dtype=object))


#: What :func:`frame_memo` keeps: {(id(frame), what): (weak ref, rows, value)}.
_FRAME_MEMO: dict[tuple[int, Any], tuple[Any, int, Any]] = {}
_FRAME_MEMO_KEPT = 16


def frame_memo(frame: pd.DataFrame, what, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept for ``frame`` while it lives (``what``: a hashable name of the value): the
    summaries of every row a figure draws again on each rerun (the density under the sample, the
    marginal histograms, the regions' label points) are computed once per dashboard frame, which is
    read-only. A frame that cannot be weakly referenced is not memoised."""
    import weakref

    key = (id(frame), what)
    hit = _FRAME_MEMO.get(key)
    if hit is not None and hit[0]() is frame and hit[1] == len(frame):
        return hit[2]
    value = compute()
    try:
        ref = weakref.ref(frame)
    except TypeError:
        return value
    for gone in [k for k, (r, _, _) in _FRAME_MEMO.items() if r() is None]:  # frames no longer alive
        del _FRAME_MEMO[gone]
    while len(_FRAME_MEMO) >= _FRAME_MEMO_KEPT:
        _FRAME_MEMO.pop(next(iter(_FRAME_MEMO)))
    _FRAME_MEMO[key] = (ref, len(frame), value)
    return value


_UNIQUE: dict[tuple[int, int], tuple[list, np.ndarray]] = {}


def unique_ids(ids) -> np.ndarray:
    """``ids`` as str, repeats dropped, first occurrence order kept (an object array, read-only). The
    answer for the last few selections is kept, keyed by their content: a page asks for the same
    selection of 700k ids for its table, rings and histograms."""
    items = ids.tolist() if isinstance(ids, np.ndarray | pd.Series | pd.Index) else list(ids)
    try:
        key = (len(items), hash(tuple(items)))
    except TypeError:
        key = None
    hit = _UNIQUE.get(key) if key is not None else None
    if hit is not None and hit[0] == items:
        return hit[1]
    values = np.asarray(items, dtype=object)
    if not all(isinstance(v, str) for v in items):
        values = np.asarray([str(i) for i in items], dtype=object)
    out = pd.unique(values) if len(values) else values
    out = np.asarray(out, dtype=object)
    out.setflags(write=False)
    if key is not None:
        while len(_UNIQUE) >= 4:
            _UNIQUE.pop(next(iter(_UNIQUE)))
        _UNIQUE[key] = (items, out)
    return out


#: The last lookups of :func:`positions_of`: {(id of the frame's id index, ids' length, hash of the ids):
#: (weak ref to that index, positions)}.
_POSITIONS: dict[tuple[int, int, int], tuple[Any, np.ndarray]] = {}
_POSITIONS_KEPT = 4


def positions_of(frame: pd.DataFrame, ids) -> np.ndarray:
    """Row positions in ``frame`` of ``ids`` (in the order given; ids not in the frame skipped).

    The last few answers are kept (keyed by the frame and the ids' content): a page looks up the same
    selection of 700k ids in the same frame for its rings, histograms and table, 0.5 s each at 2M."""
    ids = np.asarray(ids, dtype=object)
    if not len(ids) or frame.empty:
        return np.zeros(0, dtype=np.int64)
    index = _id_index(frame)
    try:
        key = (id(index), len(ids), hash(tuple(ids.tolist())))
    except TypeError:  # an unhashable id: no memo
        key = None
    hit = _POSITIONS.get(key) if key is not None else None
    if hit is not None and hit[0]() is index:  # the same index still (not another at its address)
        return hit[1]
    pos = index.get_indexer_for(ids) if not index.is_unique else index.get_indexer(ids)
    pos = pos[pos >= 0].astype(np.int64)
    pos.setflags(write=False)  # shared by every caller
    if key is not None:
        import weakref

        while len(_POSITIONS) >= _POSITIONS_KEPT:
            _POSITIONS.pop(next(iter(_POSITIONS)))
        _POSITIONS[key] = (weakref.ref(index), pos)
    return pos


def as_map_frame(frame: pd.DataFrame, label_names: Sequence[str] | None = None) -> pd.DataFrame:
    """``frame`` itself when it is a map frame (:func:`build_map_frame`), else the map frame of a
    metrics frame without texts; classes are named by ``label_names`` (their numbers without)."""
    if {"bucket", "gold"} <= set(frame.columns):
        return frame
    names = list(label_names) if label_names is not None else frame.attrs.get("label_names")
    if names is None:
        n = int(frame["label"].max()) + 1 if "label" in frame.columns and len(frame) else 0
        names = [str(i) for i in range(n)]
    return build_map_frame(frame, None, names, unit=frame.attrs.get("unit"))


#: The column of a word's sentence (its words joined by spaces) on a word-level map.
SENTENCE = "context"
#: A multi-label map's columns (:mod:`cartomap.analysis.multilabel`): the label a point is about, its
#: example's label set, the label an example sits at on the combined map.
LABEL_COLUMNS = ("label_name", "label_set", "worst_label")


def unit_rows(examples: pd.DataFrame) -> pd.DataFrame:
    """A run's examples as one row per unit of its task kind (the rows its dynamics and metrics have):
    as they are for a sequence kind; per word for token classification, with the unit's id
    (``<id>#<k>``), the word as the text field and its sentence (:data:`SENTENCE`). Rows that already are
    words (a word-level map frame: its text field holds a word, not a sentence's list) are kept. A bare table
    (no run comes with it): its columns say the kind (``registry.of_columns``)."""
    try:
        kind = task_kinds.of_columns(examples.columns)
    except DataError:
        return examples
    if not kind.unit.sentences:
        return examples
    texts = examples[kind.text_fields[0]]
    if len(texts) and isinstance(texts.iloc[0], str):  # one row per word already
        return examples
    unit_ids, counts = kind.unit_ids(examples)
    words = [[str(w) for w in row] for row in examples[kind.text_fields[0]]]
    return pd.DataFrame(
        {
            "id": unit_ids,
            kind.text_fields[0]: [w for row in words for w in row],
            SENTENCE: np.repeat(np.asarray([" ".join(row) for row in words], dtype=object), counts),
        }
    )


def require_token_run(run) -> None:
    """RunError when ``run``'s units are not the words of sentences (its task is not token classification)."""
    kind = run.task_kind
    if not kind.unit.sentences:
        raise RunError(
            f"run {run.id}: a sentence-level map is for token runs; this run's task is {kind.name}"
        )


def sentence_map(run, method: str = "min", metrics: pd.DataFrame | None = None) -> pd.DataFrame:
    """A token run's data map at sentence level: each sentence scored over its words' confidences by
    ``method`` ("min": at its worst word, where the word-level map has it;
    :func:`cartomap.scores.tokens.sentence_metrics`), with its id and its words joined. ``metrics``: the
    word metrics to aggregate, keyed like the run's metrics file (default: that file). RunError for a
    run whose task has no words."""
    from cartomap.scores.tokens import sentence_metrics

    require_token_run(run)
    kind = run.task_kind
    examples = run.examples(columns=("id", kind.text_fields[0]))
    ids = examples["id"].astype(str).to_numpy()
    metrics = run.metrics() if metrics is None else metrics
    position = pd.Series(np.arange(len(ids)), index=ids)
    words = metrics.assign(sentence=position.reindex(metrics["example_id"].astype(str)).to_numpy())
    out = sentence_metrics(words, method=method, n_sentences=len(ids))
    rows = out["sentence"].to_numpy(dtype=np.int64)
    out.insert(0, "id", ids[rows])
    words_field = kind.text_fields[0]  # the sentence's words, joined
    column = examples[words_field].to_numpy()  # positional: no pandas lookup per sentence
    out.insert(1, words_field, [" ".join(str(w) for w in column[r]) for r in rows])
    return out


def unit_of(examples: pd.DataFrame | None, unit=None) -> Unit:
    """The unit a map's rows are about: ``unit`` when given, else that of the task kind whose columns
    ``examples`` have (a bare map frame: no run to ask), else an example."""
    if unit is not None:
        return Unit(unit)
    if examples is not None:
        try:
            return task_kinds.of_columns(examples.columns).unit
        except DataError:
            pass
    return Unit.EXAMPLE


def _score_part(out: pd.DataFrame, metrics: pd.DataFrame, unit: Unit) -> None:
    """The map's metrics, into ``out``: confidence, variability and correctness (its y, default x and
    buckets), every ambiguity score of ``unit``'s map the metrics have, forgetfulness and never_learned,
    then every other score column of ``unit`` (:func:`cartomap.scores.columns.score_columns`: what the
    detectors serving it read) the metrics have; booleans kept, the rest as floats."""
    for col in ("confidence", "variability", "correctness"):
        out[col] = metrics[col].to_numpy(dtype=np.float64)
    for col in ambiguity.map_scores(unit):  # the other ambiguity scores, where the metrics have them
        if col not in out.columns and col in metrics.columns:
            out[col] = metrics[col].to_numpy(dtype=np.float64)
    out["forgetfulness"] = metrics["forgetfulness"].to_numpy(dtype=np.int64)
    if "never_learned" in metrics.columns:
        out["never_learned"] = metrics["never_learned"].to_numpy(dtype=bool)
    for col in score_columns(unit):  # what the unit's detectors read (aum, el2n, ...)
        if col not in out.columns and col in metrics.columns:
            bools = pd.api.types.is_bool_dtype(metrics[col])
            out[col] = metrics[col].to_numpy(dtype=bool if bools else np.float64)


def build_map_frame(
    metrics: pd.DataFrame,
    examples: pd.DataFrame | None,
    label_names: Sequence[str],
    n_epochs: int | None = None,
    *,
    unit=None,
) -> pd.DataFrame:
    """:func:`map_frame` on already loaded tables (metrics from compute_metrics, examples of the run).

    Columns: id, the text fields of the run's task kind (a pair's two texts, or the text), gold, predicted (label names), genre (when the
    examples have one), confidence, variability, correctness, the ambiguity scores, forgetfulness,
    never_learned and every other score column of the map's ``unit`` the metrics have
    (:func:`_score_part`: aum, el2n, ...), region, bucket (correctness bucket "0.0" ... "1.0"), label and
    predicted_label (class indices). ``unit``: what a row is about (default: :func:`unit_of` the
    examples), kept in ``attrs["unit"]``. Rows follow ``metrics``; texts are joined by id (positionally
    when both tables list the same ids in the same order, as a run's do: no hash join of 550k strings).
    """
    unit = unit_of(examples, unit)
    ids = metrics["id"].astype(str)
    if examples is not None:
        examples = unit_rows(examples)
    text_cols = list(task_kinds.text_fields_in(examples.columns)) if examples is not None else []
    extra = [c for c in ("genre", SENTENCE) if examples is not None and c in examples.columns]
    if examples is not None:
        extra += [c for c in examples.columns if c in HUMAN_MAP_COLUMNS or str(c).startswith("votes_")]
    joined = pd.DataFrame({"id": ids.to_numpy()}, index=metrics.index)
    if text_cols or extra:
        right = examples[[*text_cols, *extra]]
        example_ids = examples["id"].astype(str)
        if _same_ids(ids, example_ids):
            joined = pd.concat([joined, right.set_axis(metrics.index)], axis=1)
        else:
            right = right.assign(id=example_ids.to_numpy())
            joined = joined.merge(right, on="id", how="left", validate="one_to_one", sort=False)
            joined.index = metrics.index
    label = metrics["label"].astype(np.int64)
    predicted = metrics["predicted"].astype(np.int64) if "predicted" in metrics.columns else label
    n_epochs = n_epochs or n_epochs_of(metrics)
    out = pd.DataFrame({"id": pd.Series(id_array(ids), dtype=object)})
    for col in text_cols:
        out[col] = _text(joined[col]).array
    out["gold"] = _name_categories(label.to_numpy(), label_names)
    out["predicted"] = _name_categories(predicted.to_numpy(), label_names)
    if "genre" in extra:
        genre = joined["genre"]
        out["genre"] = (
            genre if isinstance(genre.dtype, pd.CategoricalDtype) else _text(genre).astype("category")
        ).array
    for col in extra:
        if col != "genre":
            out[col] = joined[col].to_numpy()
    if "gold_disagrees" in extra and "human_majority" in extra:
        out["agreement"] = agreement_of(joined["human_majority"], joined["gold_disagrees"])
    _score_part(out, metrics, unit)
    out["region"] = metrics["region"].astype(str).astype("category").array
    out["bucket"] = bucket_categories(out["correctness"].to_numpy(), n_epochs)
    out["label"] = label.to_numpy()
    out["predicted_label"] = predicted.to_numpy()
    out.attrs["n_epochs"] = n_epochs
    out.attrs["label_names"] = list(label_names)
    out.attrs["unit"] = unit.value
    if "regions" in metrics.attrs:
        out.attrs["regions"] = dict(metrics.attrs["regions"])
    if metrics.attrs.get(X_AXIS) in out.columns:  # drawn on another axis than its regions' (with_x_axis)
        out.attrs[X_AXIS] = metrics.attrs[X_AXIS]
    if "epochs_recorded" in metrics.attrs:
        out.attrs["epochs_recorded"] = metrics.attrs["epochs_recorded"]
    return out


def with_regions(metrics: pd.DataFrame, rule: RegionRule | None = None) -> pd.DataFrame:
    """``metrics`` with its region column drawn again by ``rule`` (default: by rank on the default axis),
    from its confidence and the rule's axis (:meth:`RegionRule.regions`): a run's saved regions may come
    from another rule. DataError when ``metrics`` lack the axis's column."""
    rule = rule or RegionRule()
    out = metrics.copy(deep=False)  # only the region column is new
    out["region"] = rule.regions(out)
    out.attrs = {**metrics.attrs, "regions": rule.to_dict()}
    return out


def rule_of(frame: pd.DataFrame) -> RegionRule:
    """The region rule a map or metrics frame was drawn with (its attrs; by rank when unknown; a rule saved
    before rules had an axis is on variability)."""
    saved = frame.attrs.get("regions")
    return RegionRule.from_dict(saved) if isinstance(saved, dict) else RegionRule()


#: A map frame's ``attrs`` key of the score its x axis shows when that is not its regions' axis.
X_AXIS = "x"


def axis_of(frame: pd.DataFrame) -> str:
    """The column a map frame's second axis (x) is drawn from: the score set by :func:`with_x_axis`, else the
    axis its regions were drawn on (:func:`rule_of`)."""
    x = frame.attrs.get(X_AXIS)
    return x if x in AXIS_COLUMNS and x in frame.columns else rule_of(frame).axis


def with_x_axis(frame: pd.DataFrame, axis: str) -> pd.DataFrame:
    """``frame`` drawn with ``axis`` (an ambiguity score it has a column for) on x, whatever axis its regions
    were drawn on: e.g. Cartography's map (variability) with regions ranked by another score. DataError when
    the frame has no such column."""
    if axis not in AXIS_COLUMNS:
        raise DataError(
            f"unknown ambiguity axis {axis!r}; expected one of {', '.join(AXIS_COLUMNS)}", field="x"
        )
    if axis not in frame.columns:
        raise DataError(f"this map has no {axis} column (its metrics predate it)", field="x")
    out = frame.copy(deep=False)
    out.attrs = {**frame.attrs, X_AXIS: axis}
    return out


def axes_in(frame: pd.DataFrame) -> tuple[str, ...]:
    """The ambiguity axes a metrics or map frame has columns for (a run's metrics written before a score
    existed lack it until they are computed again)."""
    return tuple(c for c in AXIS_COLUMNS if c in frame.columns)


def _same_ids(a: pd.Series, b: pd.Series) -> bool:
    """Whether two id columns hold the same ids in the same order, row by row: a join is then positional
    (row i with row i, what a one-to-one join by id gives when the ids are unique, as a run's are);
    compared as Arrow strings (no Python string per row, no hash table of 2M ids)."""
    import pyarrow as pa

    def arrow(column: pd.Series):
        try:
            values = pa.array(column)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            values = pa.array(id_array(column))
        values = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
        return values.cast(pa.large_string())

    if len(a) != len(b):
        return False
    return arrow(a).equals(arrow(b))


_STR = pd.Series([], dtype=str).dtype


def _text(column: pd.Series) -> pd.Series:
    """A text column as strings, missing values as "" (cheap for pandas' own string dtype)."""
    if column.dtype == _STR:
        return column.fillna("")
    return column.astype(object).where(column.notna(), "").astype(str)


def _name_categories(codes: np.ndarray, label_names: Sequence[str]) -> pd.Categorical:
    """Class names of ``codes`` (a code without a name: its number) as a categorical with the sorted
    names present as categories, built from the distinct codes (not 550k string conversions)."""
    present, inverse = np.unique(codes, return_inverse=True)
    names = [str(label_names[c]) if 0 <= c < len(label_names) else str(c) for c in present.tolist()]
    categories = sorted(set(names))
    where = {name: k for k, name in enumerate(categories)}
    lookup = np.asarray([where[name] for name in names], dtype=np.int64)
    return pd.Categorical.from_codes(lookup[inverse.reshape(-1)], categories=pd.Index(categories, dtype=_STR))


def bucket_categories(correct_fraction: np.ndarray, n_epochs: int | None) -> pd.Categorical:
    """:func:`correctness_bucket` as a categorical, formatted once per distinct value."""
    present, inverse = np.unique(correct_fraction, return_inverse=True)
    labels = np.asarray(correctness_bucket(present, n_epochs), dtype=object)
    return pd.Categorical(labels[inverse.reshape(-1)]) if len(present) else pd.Categorical([])


#: What the map reads of a run's metrics file of its own: the unit's id, gold and prediction, the metrics of
#: every unit and the region (:func:`map_metric_columns` adds the unit's score columns).
MAP_OWN_COLUMNS = ("id", "label", "predicted", *UNIT_METRICS, "region")


def map_metric_columns(unit=Unit.EXAMPLE) -> tuple[str, ...]:
    """What the map of ``unit`` reads of a run's metrics file: :data:`MAP_OWN_COLUMNS` and the unit's score
    columns (:func:`cartomap.scores.columns.score_columns`, asked when called); not the curricula's
    columns (the reference files' row index, threshold closeness, the difficulty scores) unless a detector
    serving the unit reads one."""
    return tuple(dict.fromkeys((*MAP_OWN_COLUMNS, *score_columns(unit))))


#: The human columns of a run with votes (cartomap.data.annotations) the map carries along.
HUMAN_MAP_COLUMNS = ("human_n", "human_majority", "human_majority_share", "human_entropy", "gold_disagrees")


def map_example_columns() -> tuple[str, ...]:
    """The columns of a run's examples a map carries: id, every registered kind's text fields (asked of
    the registry when called: a kind registered after import counts), genre and the human columns."""
    return ("id", *task_kinds.text_fields(), "genre", *HUMAN_MAP_COLUMNS)


#: ``agreement`` values of a map frame with votes.
GOLD_IS_MAJORITY, GOLD_NOT_MAJORITY, NO_MAJORITY = "gold = majority", "gold ≠ majority", "no majority (tie)"


def agreement_of(human_majority, gold_disagrees) -> pd.Categorical:
    """The ``agreement`` column of a run with votes: gold = majority, gold ≠ majority, or no majority
    (a tie, ``human_majority`` < 0)."""
    tie = np.asarray(human_majority) < 0
    wrong = np.asarray(gold_disagrees, dtype=bool)
    agreement = np.where(tie, NO_MAJORITY, np.where(wrong, GOLD_NOT_MAJORITY, GOLD_IS_MAJORITY))
    return pd.Categorical(agreement, categories=[GOLD_IS_MAJORITY, GOLD_NOT_MAJORITY, NO_MAJORITY])


def map_frame(
    run,
    source: str = MAIN_METRICS,
    regions: RegionRule | None = None,
    burn_out: int | None = None,
    *,
    dynamics: tuple[Sequence[str], np.ndarray, np.ndarray] | None = None,
    examples: pd.DataFrame | None = None,
    metrics_at: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Metrics of every training example of ``run`` joined with its texts (see :func:`build_map_frame`).

    ``regions``: the rule of the region column (default: the run's, :meth:`Run.region_rule`). ``burn_out``: metrics over the first
    that many epochs only (computed from the dynamics; the reference's ``--burn_out``), from ``dynamics``
    ((ids, logits [E, N, C], labels) of the recorded source, read once by the caller) when given, else
    read here. ``examples``: the run's texts (id, :func:`map_example_columns`, votes) already read, e.g.
    another map frame of the same run (the texts of 2M examples take seconds to read); else read here.
    ``metrics_at``: the metrics over the first ``burn_out`` recordings already computed
    (:func:`cartomap.analysis.epochs.run_map_at` with the same ``regions``), used instead of computing
    them again. Reads only the Parquet columns the map shows."""
    regions = regions or run.region_rule()
    recorded = run.recorded_source(source)
    epochs = run.dynamics_epochs(recorded)
    if burn_out is not None and burn_out < len(epochs) and metrics_at is not None:
        metrics = metrics_at
    elif burn_out is not None and burn_out < len(epochs):
        if dynamics is None:
            ids, logits = run.dynamics(recorded)
            labels = run.unit_labels(recorded)[1]  # a token run's: one per word
        else:
            ids, logits, labels = dynamics
        burn_in = run.config.train.map_burn_in(
            recorded, epochs[:burn_out]
        )  # the run's skip_epochs, if it fits
        metrics = compute_metrics(logits, labels, ids, regions=regions, burn_out=burn_out, burn_in=burn_in)
    else:
        metrics = with_regions(run.metrics(source, columns=map_metric_columns(run.task_kind.unit)), regions)
    vote_cols = [f"votes_{name}" for name in run.label_names]
    if examples is None:
        examples = run.examples(columns=(*map_example_columns(), *vote_cols))
    return build_map_frame(
        metrics,
        examples,
        run.task_kind.unit_classes(run.label_names),  # a label unit's classes: absent, present
        n_epochs_of(metrics) or len(epochs) or None,
        unit=run.task_kind.unit,
    )


def metric_bounds(frame: pd.DataFrame, column: str) -> tuple[float, float]:
    """(min, max) of a metric column over finite values, (0, 1) for an empty column."""
    values = frame[column].to_numpy(dtype=np.float64)
    values = values[np.isfinite(values)]
    if not values.size:
        return 0.0, 1.0
    return float(values.min()), float(values.max())


def filter_frame(
    frame: pd.DataFrame,
    labels: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    genres: Iterable[str] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Rows whose gold label, region and genre are among the given ones and whose metrics lie in
    the closed ranges ``{column: (lo, hi)}`` (None for a bound = open). ``None`` = no filter; an
    empty list keeps nothing. The index of ``frame`` is kept. When every row passes, ``frame`` itself is
    returned (no copy: treat it as read-only, as the dashboard's cached frames are)."""
    mask = np.ones(len(frame), dtype=bool)
    for column, allowed in (("gold", labels), ("region", regions), ("genre", genres)):
        if allowed is None:
            continue
        if column not in frame.columns:
            if column == "genre":
                continue  # no genres in this dataset: nothing to filter on
            raise KeyError(f"frame has no column {column!r}")
        mask &= frame[column].isin([str(a) for a in allowed]).to_numpy()
    for column, bounds in (ranges or {}).items():
        if column not in frame.columns:
            raise KeyError(f"cannot filter on {column!r}: the frame has no such column")
        lo, hi = bounds
        values = frame[column].to_numpy(dtype=np.float64)
        if lo is not None:
            mask &= values >= lo
        if hi is not None:
            mask &= values <= hi
    return frame if mask.all() else frame[mask]


# --------------------------------------------------------------------------- figure


#: Hover of a map point: the escaped :func:`hover_text` plus the coordinates (numbers only).


#: A bin of :func:`sample_rows`' 2-D grid holding at most this many points is sparse: its points are kept.
SPARSE_BIN = 3
#: Bins per axis of that grid.
SAMPLE_GRID = 60


def sample_rows(frame: pd.DataFrame, max_points: int, seed: int = 0) -> pd.DataFrame:
    """At most ``max_points`` rows to draw (frame order kept): every row when they fit. Else the rows a
    uniform sample would lose first are kept whole when they fit in ``max_points`` (:func:`kept_first`: a
    map's regions other than its largest, e.g. a token map's ambiguous and hard words beside 95 % easy
    ones, and the points of sparse areas), the rest of ``max_points`` a uniform sample of the others; when
    they alone are more, a uniform sample of them (a figure draws the density of every row beneath)."""
    if len(frame) <= max_points:
        return frame
    rng = np.random.default_rng(seed)
    mask = kept_first(frame)
    first = np.flatnonzero(mask)
    if len(first) >= max_points:
        keep = rng.choice(first, size=max_points, replace=False)
    else:
        rest = np.flatnonzero(~mask)
        keep = np.concatenate([first, rng.choice(rest, size=max_points - len(first), replace=False)])
    return frame.iloc[np.sort(keep)]


def kept_first(frame: pd.DataFrame) -> np.ndarray:
    """bool [N]: the rows :func:`sample_rows` keeps before any other: those of every region but the
    largest (a map frame's ``region``) and those alone in their area of the map (in a bin of a
    :data:`SAMPLE_GRID` x :data:`SAMPLE_GRID` grid over the axis and confidence holding at most
    :data:`SPARSE_BIN` points). All False for a frame with neither column."""
    out = np.zeros(len(frame), dtype=bool)
    if "region" in frame.columns and len(frame):
        codes, _ = pd.factorize(frame["region"])  # a map frame's categorical: its codes, no string compared
        counts = np.bincount(codes[codes >= 0])
        out |= codes != (np.argmax(counts) if len(counts) else -1)
    axis = axis_of(frame)
    if {axis, "confidence"} <= set(frame.columns) and len(frame):
        x = frame[axis].to_numpy(dtype=np.float64)
        y = frame["confidence"].to_numpy(dtype=np.float64)
        ok = np.isfinite(x) & np.isfinite(y)
        lo, hi = (float(x[ok].min()), float(x[ok].max())) if ok.any() else (0.0, 1.0)
        x, y = np.where(ok, x, lo), np.where(ok, y, 0.0)
        col = np.clip(((x - lo) / max(hi - lo, 1e-12) * SAMPLE_GRID).astype(np.int64), 0, SAMPLE_GRID - 1)
        row = np.clip((y * SAMPLE_GRID).astype(np.int64), 0, SAMPLE_GRID - 1)
        cell = row * SAMPLE_GRID + col
        counts = np.bincount(cell[ok], minlength=SAMPLE_GRID * SAMPLE_GRID)
        out |= ok & (counts[cell] <= SPARSE_BIN)
    return out


# --------------------------------------------------------------------------- one example


def gold_trajectory(run, example_id: str, source: str = Source.TRAIN) -> pd.DataFrame:
    """Per-epoch probabilities of one example: columns epoch (1-based), gold_prob and
    ``prob_<class name>`` for every class, from the run's recorded dynamics.

    Reads only that example's row of each epoch file (same values as ``run.dynamics()``)."""
    example_id = str(example_id)
    unit_ids, unit_labels = run.unit_labels(source)  # a token run's words, with their tags
    try:
        gold = int(unit_labels[unit_ids.index(example_id)])
    except ValueError:
        raise RunError(f"run {run.id} has no example {example_id!r}") from None
    names = list(run.label_names)
    rows = []
    for epoch in run.dynamics_epochs(source):
        part = pd.read_parquet(run.epoch_path(source, epoch), filters=[("id", "==", example_id)])
        if part.empty:
            raise RunError(f"run {run.id}: epoch {epoch} of {source} dynamics lacks example {example_id!r}")
        logits = part[[c for c in part.columns if c.startswith("logit_")]].to_numpy(dtype=np.float64)[0]
        probs = softmax(logits)
        record = {"epoch": epoch + 1, "gold_prob": float(probs[gold])}
        for c, p in enumerate(probs):
            name = names[c] if c < len(names) else str(c)
            record[f"prob_{name}"] = float(p)
        rows.append(record)
    if not rows:
        raise RunError(f"run {run.id} has no recorded {source} dynamics")
    return pd.DataFrame(rows)
