"""Agreement between several annotators who reviewed the same items (suspected label errors).

The input is the long **decisions table**, one row per (item, annotator), with the columns ``item`` and
``annotator`` and either

* ``value``: the category string itself ("keep", "remove", "relabel:contradiction", "unsure"), or
* ``decision`` (one of :data:`cartomap.config.REVIEW_DECISIONS`) and ``new_label`` (the class a
  "relabel" moves the example to): the table :mod:`cartomap.data.interchange` reads back from
  annotation tools. :func:`decision_values` joins them: ``relabel`` + ``contradiction`` is the value
  ``"relabel:contradiction"`` (two annotators who relabel to different classes disagree), other decisions
  are their own value.

Items and annotators are strings; one decision per (item, annotator) (a repeated pair is a DataError).

**unsure** is no decision: by default (``unsure="exclude"``) an "unsure" row is left out of every
agreement statistic, as if that annotator had not seen the item (it is still counted in ``n_unsure``).
``unsure="category"`` counts it as a category of its own (an item where one annotator keeps and one is
unsure is then a disagreement).

Statistics (direction: higher = the annotators agree more, unless said otherwise):

* :func:`fleiss_kappa` on an items x categories count matrix, every item with the same number m of
  ratings: kappa = (P - Pe) / (1 - Pe), P the mean observed pairwise agreement per item, Pe the agreement
  expected by chance from the pooled category shares. 1 = perfect, 0 = chance, < 0 = worse than chance.
* :func:`krippendorff_alpha` on a units x coders matrix with missing values: alpha = 1 - Do / De
  (observed over expected disagreement of all pairable values), nominal, ordinal, interval or ratio.
  Missing decisions and items with different numbers of annotators are fine (unlike Fleiss' kappa).
* :func:`annotator_agreement`: per annotator, the share of their items where they agree with the
  majority of the *other* annotators (leave-one-out).
* :func:`item_consensus`: per item, the majority value, its share, strict majority, entropy (bits;
  higher = more disagreement).

Undefined statistics are NaN, never an exception: with ``with_reason=True`` the functions also return
the reason in words (one annotator, every rating identical, no items).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import REVIEW_DECISIONS
from cartomap.errors import DataError
from cartomap.scores.human import check_counts, entropy_bits

#: The long table the statistics read: one row per (item, annotator).
VALUE_COLUMNS: tuple[str, ...] = ("item", "annotator", "value")
#: The decision that is no decision (see the module docstring).
UNSURE = "unsure"
#: How "unsure" is handled: left out of the statistics (default) or counted as a category.
UNSURE_MODES: tuple[str, ...] = ("exclude", "category")
#: "relabel" + new label -> "relabel:<new label>".
RELABEL_SEPARATOR = ":"
#: Krippendorff's alpha: the metric of the differences between values.
ALPHA_LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")
#: The columns of :func:`annotator_agreement`, in order.
ANNOTATOR_COLUMNS: tuple[str, ...] = (
    "annotator",
    "n_items",
    "n_unsure",
    "n_compared",
    "n_ties",
    "n_agree",
    "agreement",
)
#: The columns of :func:`item_consensus`, in order.
CONSENSUS_COLUMNS: tuple[str, ...] = (
    "item",
    "n_annotators",
    "n_unsure",
    "majority",
    "majority_share",
    "strict_majority",
    "tie",
    "entropy",
    "decision",
    "new_label",
)


# ---------------------------------------------------------------------------------------------------------
# The decisions table
# ---------------------------------------------------------------------------------------------------------


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and np.isnan(value)


def decision_values(decisions: pd.DataFrame, *, with_new_label: bool = True) -> pd.DataFrame:
    """The decisions as the long table of :data:`VALUE_COLUMNS` (item, annotator, value; all strings).

    A table that has a ``value`` column is taken as it is; otherwise ``decision`` (one of
    :data:`~cartomap.config.REVIEW_DECISIONS`) and the optional ``new_label`` give the value:
    ``"relabel:<new_label>"`` for a relabel with a new label (``with_new_label=False``: plain ``"relabel"``,
    so relabels to different classes agree), else the decision. DataError (naming the row and the field)
    for a missing column or value, an unknown decision, or a second decision of one annotator on one item.
    """
    if not isinstance(decisions, pd.DataFrame):
        raise DataError(
            f"expected a DataFrame of decisions, got {type(decisions).__name__}", field="decisions"
        )
    source = "value" if "value" in decisions.columns else "decision"
    for column in ("item", "annotator", source):
        if column not in decisions.columns:
            raise DataError(
                f"the decisions table has no column {column!r} (columns: {list(decisions.columns)}); expected "
                "item, annotator and value, or item, annotator, decision and new_label",
                field=column,
            )
    items, annotators, values = [], [], []
    new_labels = decisions["new_label"].tolist() if "new_label" in decisions.columns else None
    for row, (item, annotator, raw) in enumerate(
        zip(
            decisions["item"].tolist(),
            decisions["annotator"].tolist(),
            decisions[source].tolist(),
            strict=True,
        )
    ):
        for field, value in (("item", item), ("annotator", annotator), (source, raw)):
            if _missing(value) or str(value).strip() == "":
                raise DataError(f"row {row}: no {field}", field=field)
        value = str(raw).strip()
        if source == "decision":
            if value not in REVIEW_DECISIONS:
                raise DataError(
                    f"row {row}: unknown decision {value!r}; expected one of {list(REVIEW_DECISIONS)}",
                    field="decision",
                )
            new = None if new_labels is None else new_labels[row]
            if value == "relabel" and with_new_label and not _missing(new) and str(new).strip():
                value = f"relabel{RELABEL_SEPARATOR}{str(new).strip()}"
        elif not with_new_label and value.startswith(f"relabel{RELABEL_SEPARATOR}"):
            value = "relabel"
        items.append(str(item))
        annotators.append(str(annotator))
        values.append(value)
    table = pd.DataFrame(
        {"item": items, "annotator": annotators, "value": values}, columns=list(VALUE_COLUMNS)
    )
    repeated = table.duplicated(["item", "annotator"], keep="first")
    if repeated.any():
        row = int(np.flatnonzero(repeated.to_numpy())[0])
        raise DataError(
            f"row {row}: annotator {table['annotator'].iat[row]!r} decided item {table['item'].iat[row]!r} "
            "twice; expected one decision per annotator and item",
            field="annotator",
        )
    return table


def split_value(value: str | None) -> tuple[str | None, str | None]:
    """A value back as (decision, new label): ``"relabel:neutral"`` -> ("relabel", "neutral"),
    ``"keep"`` -> ("keep", None); None (a tie) -> (None, None)."""
    if value is None:
        return None, None
    decision, sep, new_label = str(value).partition(RELABEL_SEPARATOR)
    if sep and decision == "relabel" and new_label:
        return decision, new_label
    return str(value), None


def _check_unsure(unsure: str) -> None:
    if unsure not in UNSURE_MODES:
        raise DataError(f"unsure must be one of {list(UNSURE_MODES)}, got {unsure!r}", field="unsure")


def _counted(decisions: pd.DataFrame, unsure: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(all rows as :data:`VALUE_COLUMNS`, the rows the statistics count)."""
    _check_unsure(unsure)
    table = decision_values(decisions)
    if unsure == "exclude":
        return table, table[table["value"] != UNSURE].reset_index(drop=True)
    return table, table


def _in_order(values: pd.Series) -> list[str]:
    return list(dict.fromkeys(values.tolist()))


def _category_order(values) -> list[str]:
    """Decisions in :data:`REVIEW_DECISIONS` order, a relabel's targets after "relabel", by name."""
    rank = {name: i for i, name in enumerate(REVIEW_DECISIONS)}

    def key(value: str) -> tuple[int, str]:
        base = value.split(RELABEL_SEPARATOR, 1)[0]
        return (rank.get(base, len(rank)), value)

    return sorted(set(values), key=key)


def count_matrix(
    decisions: pd.DataFrame, *, unsure: str = "exclude", categories: Sequence[str] | None = None
) -> pd.DataFrame:
    """Items x categories counts (int64): how many annotators gave item i the value c.

    Rows: the items with at least one counted decision, in order of first appearance (index ``item``);
    columns: ``categories`` when given (a value outside them is a DataError), else every value seen
    (keep, relabel, relabel:<class>..., remove, unsure, then others by name). "unsure" rows are left out
    unless ``unsure="category"``. The input of :func:`fleiss_kappa`.
    """
    _, counted = _counted(decisions, unsure)
    if categories is None:
        cats = _category_order(counted["value"])
    else:
        cats = [str(c) for c in categories]
        unknown = sorted(set(counted["value"]) - set(cats))
        if unknown:
            raise DataError(f"values {unknown} are not among the categories {cats}", field="value")
    items = _in_order(counted["item"])
    matrix = np.zeros((len(items), len(cats)), dtype=np.int64)
    if len(counted):
        rows = pd.Categorical(counted["item"], categories=items).codes
        cols = pd.Categorical(counted["value"], categories=cats).codes
        np.add.at(matrix, (rows, cols), 1)
    return pd.DataFrame(matrix, index=pd.Index(items, name="item"), columns=pd.Index(cats, name="value"))


def units_by_coders(decisions: pd.DataFrame, *, unsure: str = "exclude") -> pd.DataFrame:
    """Items x annotators: the value each annotator gave each item (strings), NaN where they gave none
    (or "unsure", unless ``unsure="category"``). The input of :func:`krippendorff_alpha`."""
    _, counted = _counted(decisions, unsure)
    items = _in_order(counted["item"])
    coders = _in_order(counted["annotator"])
    frame = pd.DataFrame(
        np.nan, index=pd.Index(items, name="item"), columns=pd.Index(coders, name="annotator")
    )
    frame = frame.astype(object)
    for item, annotator, value in counted.itertuples(index=False):
        frame.at[item, annotator] = value
    return frame


# ---------------------------------------------------------------------------------------------------------
# Fleiss' kappa
# ---------------------------------------------------------------------------------------------------------


def _result(value: float, reason: str | None, with_reason: bool):
    return (float(value), reason) if with_reason else float(value)


def fleiss_kappa(counts, *, with_reason: bool = False):
    """Fleiss' kappa of an items x categories count matrix (array or :func:`count_matrix`'s DataFrame).

    Every item must have the same number m >= 2 of ratings (the original Fleiss 1971 statistic, computed
    by ``statsmodels.stats.inter_rater.fleiss_kappa(..., method="fleiss")``); a matrix whose rows sum to
    different numbers is a DataError (use :func:`krippendorff_alpha`, which handles missing ratings).
    With N items, n_ij ratings of item i in category j::

        P_i = (sum_j n_ij^2 - m) / (m (m - 1))       observed agreement on item i
        P   = mean_i P_i
        p_j = sum_i n_ij / (N m)                     share of all ratings in category j
        Pe  = sum_j p_j^2                            agreement expected by chance
        kappa = (P - Pe) / (1 - Pe)

    Higher = more agreement: 1 perfect, 0 what chance gives, negative worse than chance. NaN where it is
    undefined: no items, fewer than 2 ratings per item, or every rating in one category (Pe = 1). With
    ``with_reason=True`` returns ``(kappa, reason)``, reason None when defined.
    """
    names = list(counts.columns) if isinstance(counts, pd.DataFrame) else None
    table = check_counts(counts, "counts", "[items, categories]", "counts", min_columns=0)
    if table.shape[0] == 0:
        return _result(np.nan, "no items", with_reason)
    raters = table.sum(axis=1)
    if np.any(raters != raters[0]):
        lo, hi = int(raters.min()), int(raters.max())
        first = int(np.flatnonzero(raters != raters[0])[0])
        raise DataError(
            f"Fleiss' kappa needs the same number of ratings on every item; items have {lo} to {hi} "
            f"(row 0: {int(raters[0])}, row {first}: {int(raters[first])}); Krippendorff's alpha handles "
            "missing ratings",
            field="counts",
        )
    m = int(raters[0])
    if m < 2:
        return _result(np.nan, f"{m} rating(s) per item: agreement needs at least 2", with_reason)
    p_j = table.sum(axis=0) / (table.shape[0] * m)
    if np.isclose(float(np.sum(p_j**2)), 1.0):
        only = int(np.argmax(p_j))
        what = repr(names[only]) if names is not None else f"column {only}"
        return _result(
            np.nan, f"every rating is {what}: chance agreement is 1, kappa is undefined", with_reason
        )
    from statsmodels.stats import inter_rater  # statsmodels takes seconds to import: only where used

    return _result(float(inter_rater.fleiss_kappa(table, method="fleiss")), None, with_reason)


# ---------------------------------------------------------------------------------------------------------
# Krippendorff's alpha
# ---------------------------------------------------------------------------------------------------------


def krippendorff_alpha(table, level: str = "nominal", *, with_reason: bool = False):
    """Krippendorff's alpha of a units x coders matrix (items x annotators), missing values NaN/None.

    Values are any hashable labels for ``level="nominal"`` (e.g. :func:`units_by_coders`' strings) and
    numbers for ``"ordinal"``, ``"interval"`` and ``"ratio"``. Only units with >= 2 values are pairable.
    With n_uc the number of coders giving unit u value c and m_u the values of unit u, the coincidences
    and their marginals are::

        o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1),   n_c = sum_k o_ck,   n = sum_c n_c
        alpha = 1 - (n - 1) * sum_ck o_ck delta2_ck / sum_ck n_c n_k delta2_ck

    delta2 is 1 for different values (nominal), (c - k)^2 (interval), ((c - k) / (c + k))^2 (ratio),
    or (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2 (ordinal). Higher = more agreement: 1 perfect, 0 what
    chance gives, negative systematic disagreement (Krippendorff: rely on alpha >= 0.8, tentative >= 0.667).
    Computed by the ``krippendorff`` package from the units' value counts. NaN where undefined: no unit with two values, or a
    single value throughout (no expected disagreement). ``with_reason=True`` returns ``(alpha, reason)``.
    """
    if level not in ALPHA_LEVELS:
        raise DataError(f"level must be one of {list(ALPHA_LEVELS)}, got {level!r}", field="level")
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(np.asarray(table, dtype=object))
    if frame.ndim != 2:
        raise DataError(f"expected a units x coders matrix, got {frame.ndim} dimensions", field="table")
    cells = frame.to_numpy(dtype=object)
    present = ~pd.isna(frame).to_numpy(dtype=bool)
    if not present.any():
        return _result(np.nan, "no values", with_reason)
    if level == "nominal":
        seen = cells[present]
        domain_list = sorted(set(seen.tolist()), key=lambda x: (str(type(x)), x))
        domain = np.asarray(domain_list, dtype=object)
        index = {v: i for i, v in enumerate(domain_list)}
        codes_present = np.array([index[v] for v in seen], dtype=np.int64)
    else:
        try:
            numbers = np.asarray(cells[present], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DataError(f"level {level!r} needs numeric values ({err})", field="table") from err
        if not np.all(np.isfinite(numbers)):
            raise DataError(f"level {level!r} needs finite numeric values", field="table")
        domain, codes_present = np.unique(numbers, return_inverse=True)
    codes = np.full(cells.shape, -1, dtype=np.int64)
    codes[present] = codes_present
    n_uc = np.zeros((cells.shape[0], len(domain)), dtype=np.float64)
    rows, cols = np.nonzero(codes >= 0)
    np.add.at(n_uc, (rows, codes[rows, cols]), 1.0)
    m_u = n_uc.sum(axis=1)
    pairable = m_u >= 2
    if not pairable.any():
        return _result(np.nan, "no item has two or more values (one annotator per item)", with_reason)
    n_uc = n_uc[pairable]
    n_c = n_uc.sum(axis=0)  # the pairable values (the coincidences' marginals)
    if np.count_nonzero(n_c) < 2:
        only = domain[int(np.argmax(n_c))]
        return _result(
            np.nan, f"every value is {only!r}: no expected disagreement, alpha is undefined", with_reason
        )
    import krippendorff

    values = np.arange(len(domain)) if level == "nominal" else domain  # nominal: only equality counts
    alpha = krippendorff.alpha(value_counts=n_uc, value_domain=values, level_of_measurement=level)
    return _result(float(alpha), None, with_reason)


# ---------------------------------------------------------------------------------------------------------
# Per annotator, per item
# ---------------------------------------------------------------------------------------------------------


def annotator_agreement(decisions: pd.DataFrame, *, unsure: str = "exclude") -> pd.DataFrame:
    """Each annotator against the majority of the others (leave-one-out), one row per annotator.

    For annotator a and an item they decided (a counted decision), the others' majority is the value most
    of the *other* annotators gave it. Items no other annotator decided are not compared; items where the
    others tie for the most are counted in ``n_ties`` and left out of the share. Columns
    (:data:`ANNOTATOR_COLUMNS`):

    * ``n_items``: items a decided (counted decisions); ``n_unsure``: a's "unsure" decisions;
    * ``n_compared``: items with at least one other annotator; ``n_ties``: of those, the others tied;
    * ``n_agree``: a's value equals the others' (untied) majority;
    * ``agreement`` = n_agree / (n_compared - n_ties) in [0, 1], higher = a agrees with the others more;
      NaN when nothing could be compared.

    With two annotators this is their plain share of agreeing items (the same for both).
    Annotators in order of first appearance.
    """
    table, counted = _counted(decisions, unsure)
    per_item: dict[str, Counter] = {}
    for item, _, value in counted.itertuples(index=False):
        per_item.setdefault(item, Counter())[value] += 1
    stats: dict[str, dict[str, int]] = {
        a: dict.fromkeys(("n_items", "n_unsure", "n_compared", "n_ties", "n_agree"), 0)
        for a in _in_order(table["annotator"])
    }
    for annotator, value in zip(table["annotator"], table["value"], strict=True):
        if value == UNSURE:
            stats[annotator]["n_unsure"] += 1
    for item, annotator, value in counted.itertuples(index=False):
        s = stats[annotator]
        s["n_items"] += 1
        others = per_item[item].copy()
        others[value] -= 1
        others = +others  # drop zero counts
        if not others:
            continue
        s["n_compared"] += 1
        top = max(others.values())
        leaders = [v for v, c in others.items() if c == top]
        if len(leaders) > 1:
            s["n_ties"] += 1
        elif leaders[0] == value:
            s["n_agree"] += 1
    rows = []
    for annotator, s in stats.items():
        decided = s["n_compared"] - s["n_ties"]
        rows.append({"annotator": annotator, **s, "agreement": s["n_agree"] / decided if decided else np.nan})
    frame = pd.DataFrame(rows, columns=list(ANNOTATOR_COLUMNS))
    ints = [c for c in ANNOTATOR_COLUMNS if c.startswith("n_")]
    frame[ints] = frame[ints].astype(np.int64)
    frame["agreement"] = frame["agreement"].astype(np.float64)
    return frame


def _entropy(values: np.ndarray) -> np.ndarray:
    if values.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if values.shape[1] < 2:  # one category seen: every item agrees
        values = np.hstack([values, np.zeros((values.shape[0], 2 - values.shape[1]), dtype=values.dtype)])
    return entropy_bits(values)


def item_consensus(
    decisions: pd.DataFrame, *, min_annotators: int = 1, unsure: str = "exclude"
) -> pd.DataFrame:
    """What the annotators say about each item, one row per item (:data:`CONSENSUS_COLUMNS`).

    * ``n_annotators``: counted decisions on the item; ``n_unsure``: its "unsure" decisions;
    * ``majority``: the value with the most decisions, None when two or more tie (``tie`` True);
    * ``majority_share`` = most decisions / n_annotators in [1/C, 1], higher = more agreement;
    * ``strict_majority``: the most decisions > n_annotators / 2 (more than half agree on one value);
    * ``entropy``: H = -sum_c p_c log2 p_c over the item's values, in bits; 0 = all agree, higher = more
      disagreement (as :func:`cartomap.scores.human.entropy_bits`).
    * ``decision``, ``new_label``: the majority split back (:func:`split_value`): "relabel" and its class,
      or the decision and None; both None on a tie. What a retrain applies: e.g. the rows with
      ``strict_majority`` and decision "remove" or "relabel".

    Items with fewer than ``min_annotators`` counted decisions (>= 1) are left out: with the default 1,
    an item only ever called "unsure" has no row. Items in order of first appearance.
    """
    if (
        isinstance(min_annotators, bool)
        or not isinstance(min_annotators, (int, np.integer))
        or min_annotators < 1
    ):
        raise DataError(
            f"min_annotators must be an integer >= 1, got {min_annotators!r}", field="min_annotators"
        )
    table, counted = _counted(decisions, unsure)
    unsure_per_item = table[table["value"] == UNSURE].groupby("item").size()
    counts = count_matrix(counted, unsure="category")
    values = counts.to_numpy()
    n = values.sum(axis=1)
    keep = n >= min_annotators
    counts, values, n = counts[keep], values[keep], n[keep]
    cats = np.asarray(counts.columns, dtype=object)
    top = values.max(axis=1) if values.size else np.zeros(len(values), dtype=np.int64)
    tie = (values == top[:, None]).sum(axis=1) > 1 if values.size else np.zeros(len(values), dtype=bool)
    majority = [
        None if t else cats[i]
        for t, i in zip(tie, np.argmax(values, axis=1) if values.size else [], strict=True)
    ]
    frame = pd.DataFrame(
        {
            "item": counts.index.astype(str),
            "n_annotators": n.astype(np.int64),
            "n_unsure": [int(unsure_per_item.get(item, 0)) for item in counts.index],
            "majority": pd.Series(majority, dtype=object),
            "majority_share": (top / np.where(n > 0, n, 1)).astype(np.float64),
            "strict_majority": 2 * top > n,
            "tie": tie.astype(bool),
            "entropy": _entropy(values),
            "decision": pd.Series([split_value(v)[0] for v in majority], dtype=object),
            "new_label": pd.Series([split_value(v)[1] for v in majority], dtype=object),
        },
        columns=list(CONSENSUS_COLUMNS),
    )
    frame["n_unsure"] = frame["n_unsure"].astype(np.int64)
    return frame.reset_index(drop=True)


def _common_count(n_i: np.ndarray) -> int | None:
    """The number of counted decisions most items have, among those with two or more (the larger on a
    tie); None when no item has two."""
    found = Counter(int(n) for n in n_i if n >= 2)
    return max(found, key=lambda m: (found[m], m)) if found else None


def agreement_summary(decisions: pd.DataFrame, *, unsure: str = "exclude") -> dict[str, Any]:
    """The whole table in numbers: ``n_items``, ``n_annotators``, ``n_decisions`` (all rows),
    ``n_unsure``, ``n_counted`` (rows the statistics count), ``observed_agreement`` (the share of agreeing
    pairs of decisions on the same item, over items with >= 2 counted decisions; NaN without such items),
    ``fleiss_kappa`` / ``fleiss_kappa_reason`` and ``krippendorff_alpha`` / ``krippendorff_alpha_reason``
    (nominal). Never raises for agreement that is undefined: the value is NaN and the reason says why.

    Fleiss' kappa needs the same number of decisions on every item; when items have different numbers
    (an annotator was unsure, or has not reached an item yet), it is computed on the items with the
    number most of them have (two or more): ``fleiss_kappa_items`` says on how many, and
    ``fleiss_kappa_note`` says so in words (None when every item counted). Krippendorff's alpha uses
    every item."""
    table, counted = _counted(decisions, unsure)
    counts = count_matrix(counted, unsure="category").to_numpy().astype(np.float64)
    n_i = counts.sum(axis=1) if counts.size else np.zeros(0)
    pairs = n_i * (n_i - 1)
    observed = float(np.sum(counts * (counts - 1)) / pairs.sum()) if pairs.sum() > 0 else np.nan
    kappa_items, kappa_note = len(n_i), None
    common = _common_count(n_i)
    if len(n_i) and np.any(n_i != n_i[0]) and common is not None:
        same = n_i == common
        kappa_items = int(same.sum())
        kappa, kappa_reason = fleiss_kappa(counts[same], with_reason=True)
        kappa_note = (
            f"on the {kappa_items:,} of {len(n_i):,} items with {common} counted decisions (Fleiss' kappa "
            "needs the same number on every item; Krippendorff's alpha uses them all)"
        )
    elif len(n_i) and np.any(n_i != n_i[0]):
        kappa, kappa_reason, kappa_items = np.nan, "no item has two counted decisions", 0
    else:
        kappa, kappa_reason = fleiss_kappa(counts, with_reason=True)
    alpha, alpha_reason = krippendorff_alpha(units_by_coders(counted, unsure="category"), with_reason=True)
    return {
        "n_items": int(table["item"].nunique()),
        "n_annotators": int(table["annotator"].nunique()),
        "n_decisions": len(table),
        "n_unsure": int((table["value"] == UNSURE).sum()),
        "n_counted": len(counted),
        "observed_agreement": observed,
        "fleiss_kappa": kappa,
        "fleiss_kappa_reason": kappa_reason,
        "fleiss_kappa_items": kappa_items,
        "fleiss_kappa_note": kappa_note,
        "krippendorff_alpha": alpha,
        "krippendorff_alpha_reason": alpha_reason,
    }
