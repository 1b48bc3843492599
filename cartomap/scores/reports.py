"""Evaluation reports: per-class scores, run selection, result tables and significance tests.

What the source papers report, and the helper here for each:

* RoNLI (Poesina et al., 2024): per-class precision / recall / F1 and micro F1 (= accuracy) and
  macro F1 on the test set (:func:`classification_table`, :func:`summary_scores`); five runs per
  method, the run best on validation reported (:func:`best_on_validation`); Cochran's Q and a
  Mann-Whitney U test between two methods (:func:`cochrans_q`, :func:`mann_whitney`,
  :func:`significance_report`).
* WaNLI (Liu et al., 2022) Table 3: training sets as rows, test sets as columns, accuracy in the
  cells, the best of each column in bold (:func:`results_matrix`, :func:`mark_best`).

Pure functions on numpy arrays and pandas frames. Labels are integer class indices in
``[0, n_classes)``. Bad data raises :class:`cartomap.errors.DataError` (a ``ValueError``) whose
message names the argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError

BOTH_RIGHT = "both right"
BOTH_WRONG = "both wrong"
ONLY_A = "only A right"
ONLY_B = "only B right"
#: Outcomes of :func:`per_example_diff`, in display order.
OUTCOMES: tuple[str, str, str, str] = (BOTH_RIGHT, ONLY_A, ONLY_B, BOTH_WRONG)

#: Score columns of :func:`classification_table`.
SCORE_COLUMNS: tuple[str, str, str, str] = ("precision", "recall", "f1", "support")


# --------------------------------------------------------------------------- validation


def _labels(values, name: str, n_classes: int) -> np.ndarray:
    """Return ``values`` as int64 [N] class indices in [0, n_classes) or raise DataError naming ``name``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"expected a 1-d sequence of class indices, got shape {arr.shape}", field=name)
    whole_floats = arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(np.mod(arr, 1) == 0)
    if arr.size and not np.issubdtype(arr.dtype, np.integer) and not whole_floats:
        raise DataError(f"expected integer class indices, got dtype {arr.dtype}", field=name)
    arr = arr.astype(np.int64)
    outside = (arr < 0) | (arr >= n_classes)
    if np.any(outside):
        bad = int(np.flatnonzero(outside)[0])
        raise DataError(
            f"value {int(arr[bad])} at position {bad} is outside [0, {n_classes}) for {n_classes} classes",
            field=name,
        )
    return arr


def _same_length(**arrays: np.ndarray) -> int:
    """Return the common length of the arrays or raise DataError listing every length."""
    lengths = {name: len(arr) for name, arr in arrays.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{name}={n}" for name, n in lengths.items())
        first = next(iter(lengths))
        raise DataError(f"lengths differ ({listed}); expected one value per example", field=first)
    return next(iter(lengths.values()))


def _check_n_classes(n_classes: int) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise ValueError(f"n_classes must be a positive integer, got {n_classes!r}")
    return int(n_classes)


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], name: str = "results") -> None:
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(frame).__name__}", field=name)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"missing column(s) {missing}; columns are {list(frame.columns)}", field=name)


def _numeric(frame: pd.DataFrame, column: str, name: str = "results") -> pd.Series:
    """``frame[column]`` as float; DataError naming the column if some value is not a number."""
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() & frame[column].notna()
    if bad.any():
        row = frame.index[int(np.flatnonzero(bad.to_numpy())[0])]
        raise DataError(f"row {row!r}: {frame[column][row]!r} is not a number", field=column)
    return values.astype(float)


# --------------------------------------------------------------------------- scores


def classification_table(y_true, y_pred, label_names: Sequence[str]) -> pd.DataFrame:
    """Per-class precision, recall, F1 and support, plus the rows ``micro`` and ``macro``.

    For class k: precision = TP_k / (TP_k + FP_k), recall = TP_k / (TP_k + FN_k),
    F1 = 2 P R / (P + R), support = number of gold examples of class k; 0/0 counts as 0
    (``zero_division=0``), so a class never predicted has precision 0. Higher = better.

    ``micro`` pools the counts of all classes: with one label per example, micro P = R = F1 =
    accuracy. ``macro`` is the unweighted mean over the classes of ``label_names`` (every class
    counts, also one absent from both y_true and y_pred, which then scores 0). The support of
    both summary rows is the number of examples.

    ``y_true`` / ``y_pred``: integer class indices in ``[0, len(label_names))``.
    Index: the label names, then "micro" and "macro"; columns :data:`SCORE_COLUMNS`.
    """
    names = [str(n) for n in label_names]
    if not names:
        raise DataError("expected at least one class name", field="label_names")
    if len(set(names)) != len(names) or {"micro", "macro"} & set(names):
        raise DataError(
            f"class names must be unique and not 'micro'/'macro', got {names}", field="label_names"
        )
    n_classes = len(names)
    y_true = _labels(y_true, "y_true", n_classes)
    y_pred = _labels(y_pred, "y_pred", n_classes)
    n = _same_length(y_true=y_true, y_pred=y_pred)
    if n == 0:
        raise DataError("expected at least one example", field="y_true")

    labels = list(range(n_classes))
    from sklearn.metrics import precision_recall_fscore_support  # imported when used: ~0.3 s

    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    rows = {name: (p[k], r[k], f[k], int(s[k])) for k, name in enumerate(names)}
    for average in ("micro", "macro"):
        pa, ra, fa, _ = precision_recall_fscore_support(
            y_true, y_pred, labels=labels, average=average, zero_division=0
        )
        rows[average] = (pa, ra, fa, n)
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(SCORE_COLUMNS))
    table[["precision", "recall", "f1"]] = table[["precision", "recall", "f1"]].astype(float)
    table["support"] = table["support"].astype(np.int64)
    table.index.name = "class"
    return table


def summary_scores(y_true, y_pred, n_classes: int) -> dict[str, float]:
    """``{"accuracy", "micro_f1", "macro_f1"}`` over classes ``0..n_classes-1``. Higher = better.

    accuracy = mean [y_pred == y_true] (equal to micro F1 with one label per example);
    macro F1 = mean over the n_classes of the per-class F1 (0/0 counts as 0).
    """
    n_classes = _check_n_classes(n_classes)
    y_true = _labels(y_true, "y_true", n_classes)
    y_pred = _labels(y_pred, "y_pred", n_classes)
    if _same_length(y_true=y_true, y_pred=y_pred) == 0:
        raise DataError("expected at least one example", field="y_true")
    labels = list(range(n_classes))
    from sklearn.metrics import precision_recall_fscore_support

    micro = precision_recall_fscore_support(y_true, y_pred, labels=labels, average="micro", zero_division=0)
    macro = precision_recall_fscore_support(y_true, y_pred, labels=labels, average="macro", zero_division=0)
    return {
        "accuracy": float(np.mean(y_true == y_pred)),
        "micro_f1": float(micro[2]),
        "macro_f1": float(macro[2]),
    }


# --------------------------------------------------------------------------- significance tests


def _correctness_table(correct, name: str = "correct") -> np.ndarray:
    """``correct`` as bool [n_examples, n_methods] (0/1 or bool values) or DataError."""
    arr = np.asarray(correct)
    if arr.ndim != 2:
        raise DataError(f"expected a 2-d array [examples, methods], got shape {arr.shape}", field=name)
    if arr.shape[1] < 2:
        raise DataError(f"Cochran's Q compares at least 2 methods (columns), got {arr.shape[1]}", field=name)
    if arr.shape[0] < 1:
        raise DataError("expected at least one example (row)", field=name)
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.all(np.isin(arr, (0, 1))):
            raise DataError("expected booleans or 0/1 (1 = the method got the example right)", field=name)
        arr = arr.astype(bool)
    return arr


def cochrans_q(correct) -> dict[str, float]:
    """Cochran's Q test that k methods have the same accuracy on the same N examples.

    ``correct``: bool ``[N, k]``, ``correct[i, j]`` = method j got example i right. With column
    totals C_j, row totals R_i and grand total T = sum C_j,

        Q = (k - 1) * (k * sum_j C_j^2 - T^2) / (k * T - sum_i R_i^2),

    ~ chi-square with k - 1 degrees of freedom under H0 (all methods equally accurate);
    p_value = P(chi2_{k-1} >= Q). Higher Q / lower p = stronger evidence the methods differ.
    For k = 2 it equals McNemar's test without continuity correction. Computed with
    ``statsmodels.stats.contingency_tables.cochrans_q``.

    Only discordant examples (some methods right, some wrong) carry information; when there is
    none (every example right for all or wrong for all) Q is 0/0 and this returns Q = 0, p = 1.

    Returns ``{"q", "df", "p_value", "n_examples", "n_methods", "n_discordant"}``.
    """
    table = _correctness_table(correct)
    n_examples, k = table.shape
    row_totals = table.sum(axis=1)
    n_discordant = int(np.count_nonzero((row_totals > 0) & (row_totals < k)))
    result = {"df": k - 1, "n_examples": n_examples, "n_methods": k, "n_discordant": n_discordant}
    if n_discordant == 0:
        return {"q": 0.0, "p_value": 1.0, **result}
    # Imported here: statsmodels is only needed for this test and is slow to import.
    from statsmodels.stats.contingency_tables import cochrans_q as sm_cochrans_q

    res = sm_cochrans_q(table.astype(np.int64))
    return {"q": float(res.statistic), "p_value": float(res.pvalue), **result}


def _sample(values, name: str) -> np.ndarray:
    """``values`` as a finite float [n >= 1] sample or DataError naming ``name``."""
    if values is None:
        raise DataError("expected a sequence of numbers, got None", field=name)
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"expected a 1-d sequence of numbers, got shape {arr.shape}", field=name)
    try:
        arr = arr.astype(float)
    except (TypeError, ValueError) as err:
        raise DataError(f"expected numbers: {err}", field=name) from None
    if arr.size == 0:
        raise DataError("expected at least one value", field=name)
    if not np.all(np.isfinite(arr)):
        raise DataError("values must be finite (no NaN or inf)", field=name)
    return arr


def mann_whitney(a, b, alternative: str = "two-sided") -> dict[str, float]:
    """Mann-Whitney U test between two independent samples (e.g. the per-run scores of two methods).

    U = #{(i, j): a_i > b_j} + 0.5 * #{(i, j): a_i == b_j}, the U of ``a`` (scipy's convention);
    U ranges over [0, n_a * n_b] and n_a * n_b / 2 is "no difference". ``alternative``:
    "two-sided", "greater" (a tends to be larger) or "less". Lower p = stronger evidence.
    scipy's ``mannwhitneyu`` with ``method="auto"``: the exact distribution for small samples
    without ties, else the normal approximation (with continuity and tie corrections).

    Note the floor set by tiny samples: with 5 runs against 5 the smallest two-sided exact p
    is 2 / C(10, 5) = 0.0079; with 3 against 3 it is 0.1, so never "significant" at 0.05.

    Returns ``{"u", "p_value", "n_a", "n_b"}``.
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    a = _sample(a, "a")
    b = _sample(b, "b")
    from scipy import stats  # imported when used: scipy.stats takes ~0.5 s

    res = stats.mannwhitneyu(a, b, alternative=alternative, method="auto")
    return {"u": float(res.statistic), "p_value": float(res.pvalue), "n_a": int(a.size), "n_b": int(b.size)}


def paired_test(a, b) -> dict[str, float | int | None]:
    """Paired t-test of ``b - a`` over matched pairs (e.g. the test accuracy of seed s without and with
    a change, one pair per seed).

    With d_i = b_i - a_i over n pairs: mean_diff = mean(d), std_diff = its sample standard deviation
    (ddof = 1), t = mean_diff / (std_diff / sqrt(n)) with n - 1 degrees of freedom, two-sided p_value
    (``scipy.stats.ttest_rel``). Positive mean_diff = ``b`` scores higher; lower p = stronger evidence.
    When every difference is the same, t is undefined: p_value is 1 if they are all 0, else None (a
    constant shift over so few pairs says nothing about its spread). DataError for fewer than 2 pairs
    or samples of different lengths.

    Returns ``{"mean_diff", "std_diff", "t", "p_value", "n"}``.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    if a.size != b.size:
        raise DataError(f"expected one value of b per value of a, got {a.size} and {b.size}", field="b")
    if a.size < 2:
        raise DataError(f"a paired test needs at least 2 pairs, got {a.size}", field="a")
    d = b - a
    std = float(d.std(ddof=1))
    out: dict[str, float | int | None] = {"mean_diff": float(d.mean()), "std_diff": std, "n": int(d.size)}
    if std == 0.0 or not np.isfinite(std) or np.allclose(d, d[0], rtol=0, atol=1e-12):
        out.update(t=None, p_value=1.0 if np.allclose(d, 0, rtol=0, atol=1e-12) else None)
        return out
    from scipy import stats

    res = stats.ttest_rel(b, a)
    out.update(t=float(res.statistic), p_value=float(res.pvalue))
    return out


def significance_report(
    correct_by_method: Mapping[str, np.ndarray],
    scores_by_method: Mapping[str, Sequence[float]],
    a: str,
    b: str,
) -> dict:
    """Significance of the difference between methods, in the manner of RoNLI's "Statistical testing".

    What RoNLI did (Poesina et al., 2024, §5): a Cochran's Q test between two models, the
    oversampling baseline and Cart-Stra-CL++, "applied on the contingency tables" of their test
    predictions, so it says the predictions differ significantly rather than testing the reported
    scores; then a Mann-Whitney U test between the same two models. The paper does not say which
    samples the Mann-Whitney test compared.

    What this function does:

    * ``cochran``: Cochran's Q over **all** methods of ``correct_by_method`` (bool per test
      example, the same examples in the same order for every method; typically the run chosen
      by :func:`best_on_validation`). H0: all methods are equally accurate.
    * ``cochran_pair``: the same test for ``a`` and ``b`` alone (k = 2, McNemar's test), the
      comparison the paper reports.
    * ``mann_whitney``: Mann-Whitney U between ``scores_by_method[a]`` and ``scores_by_method[b]``,
      one score per run (e.g. the macro F1 of the 5 seeds), two-sided. U is the count of
      (run of a, run of b) pairs where a scores higher (ties 1/2).

    Also returned: ``methods`` (order of ``correct_by_method``), ``accuracy`` per method
    (mean correctness), ``a``, ``b``, and the mean run score of each (``mean_score_a/b``).
    """
    if len(correct_by_method) < 2:
        raise DataError(
            f"Cochran's Q needs at least 2 methods, got {len(correct_by_method)}", field="correct_by_method"
        )
    for name, mapping in (("correct_by_method", correct_by_method), ("scores_by_method", scores_by_method)):
        for method in (a, b):
            if method not in mapping:
                raise DataError(f"method {method!r} missing; methods are {list(mapping)}", field=name)
    if a == b:
        raise ValueError(f"a and b must be two different methods, got {a!r} twice")

    methods = list(correct_by_method)
    columns = {str(m): np.asarray(correct_by_method[m]) for m in methods}
    for method, col in columns.items():
        if col.ndim != 1:
            raise DataError(
                f"method {method!r}: expected a 1-d array (one value per example), got shape {col.shape}",
                field="correct_by_method",
            )
    lengths = {m: len(c) for m, c in columns.items()}
    if len(set(lengths.values())) > 1:
        raise DataError(
            f"every method must be scored on the same examples; lengths are {lengths}",
            field="correct_by_method",
        )
    table = _correctness_table(np.column_stack(list(columns.values())), name="correct_by_method")
    ia, ib = methods.index(a), methods.index(b)
    scores_a = _sample(scores_by_method[a], f"scores_by_method[{a!r}]")
    scores_b = _sample(scores_by_method[b], f"scores_by_method[{b!r}]")
    return {
        "methods": methods,
        "a": a,
        "b": b,
        "n_examples": int(table.shape[0]),
        "accuracy": {m: float(table[:, j].mean()) for j, m in enumerate(methods)},
        "cochran": cochrans_q(table),
        "cochran_pair": cochrans_q(table[:, [ia, ib]]),
        "mann_whitney": mann_whitney(scores_a, scores_b),
        "mean_score_a": float(scores_a.mean()),
        "mean_score_b": float(scores_b.mean()),
    }


# --------------------------------------------------------------------------- runs


def best_on_validation(
    results: pd.DataFrame, method_col: str = "method", score_col: str = "dev_accuracy"
) -> pd.DataFrame:
    """One row per method: its run (row) with the highest validation score, as RoNLI reports.

    RoNLI trains five runs per method and reports on the test set the run best on validation.
    Higher ``score_col`` = better. Ties go to the first such row in ``results``; rows whose score
    is missing are ignored, and a method with no scored run is an error. Methods keep the order
    of their first appearance; the original columns and index labels are kept.
    """
    _require_columns(results, [method_col, score_col])
    scores = _numeric(results, score_col)
    if results[method_col].isna().any():
        raise DataError("some rows have no method", field=method_col)
    chosen = []
    for method in pd.unique(results[method_col]):
        rows = np.flatnonzero((results[method_col] == method).to_numpy())
        values = scores.to_numpy()[rows]
        if np.all(np.isnan(values)):
            raise DataError(f"method {method!r} has no run with a validation score", field=score_col)
        chosen.append(rows[int(np.nanargmax(values))])  # nanargmax returns the first maximum
    return results.iloc[chosen]


def aggregate_runs(
    results: pd.DataFrame, method_col: str = "method", metrics: Sequence[str] = ("micro_f1", "macro_f1")
) -> pd.DataFrame:
    """Mean, std, min and max of each metric over the runs of each method, and n = number of runs.

    std is the sample standard deviation (ddof = 1; NaN for a single run). Missing values are
    skipped. Index: the methods in order of first appearance; columns ``{metric}_{stat}`` for
    each metric in order, then ``n``.
    """
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("metrics must name at least one column")
    _require_columns(results, [method_col, *metrics])
    numeric = pd.DataFrame({m: _numeric(results, m) for m in metrics})
    numeric[method_col] = results[method_col].to_numpy()
    grouped = numeric.groupby(method_col, sort=False)
    out = pd.DataFrame(index=pd.Index(pd.unique(results[method_col]), name=method_col))
    for metric in metrics:
        for stat in ("mean", "std", "min", "max"):
            out[f"{metric}_{stat}"] = getattr(grouped[metric], stat)()
    out["n"] = grouped.size().astype(np.int64)
    return out


def learning_curves(histories: Mapping[str, Sequence[Mapping]], metric: str = "dev_accuracy") -> pd.DataFrame:
    """Long frame of one metric per run and epoch: columns ``run``, ``epoch``, ``{metric}``.

    ``histories``: run name -> per-epoch records as in a run's ``history.json``
    (``{"epoch": 1, "train_loss": ..., "dev_accuracy": ...}``). The epoch is the record's
    ``epoch`` or, if absent, its 1-based position. Records without the metric (or None/NaN) are
    skipped, so a run without a dev set simply has no points.
    """
    rows = []
    for run, history in histories.items():
        for position, record in enumerate(history, start=1):
            if not isinstance(record, Mapping):
                raise DataError(f"run {run!r}: record {position} is not a mapping", field="histories")
            value = record.get(metric)
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            rows.append({"run": run, "epoch": int(record.get("epoch", position)), metric: float(value)})
    return pd.DataFrame(rows, columns=["run", "epoch", metric])


# --------------------------------------------------------------------------- comparisons


def per_example_diff(ids, gold, pred_a, pred_b) -> pd.DataFrame:
    """Compare two methods example by example: columns id, gold, pred_a, pred_b, outcome.

    outcome is one of :data:`OUTCOMES`: "both right", "only A right", "only B right",
    "both wrong" (right = prediction equals gold), as an ordered categorical so that
    ``value_counts()`` lists all four. Its discordant cells are what Cochran's Q / McNemar test.
    """
    ids, gold, pred_a, pred_b = (np.asarray(x) for x in (ids, gold, pred_a, pred_b))
    for name, arr in (("ids", ids), ("gold", gold), ("pred_a", pred_a), ("pred_b", pred_b)):
        if arr.ndim != 1:
            raise DataError(f"expected a 1-d sequence, got shape {arr.shape}", field=name)
    _same_length(ids=ids, gold=gold, pred_a=pred_a, pred_b=pred_b)
    right_a = pred_a == gold
    right_b = pred_b == gold
    outcome = np.select(
        [right_a & right_b, right_a & ~right_b, ~right_a & right_b],
        [BOTH_RIGHT, ONLY_A, ONLY_B],
        default=BOTH_WRONG,
    )
    return pd.DataFrame(
        {
            "id": ids,
            "gold": gold,
            "pred_a": pred_a,
            "pred_b": pred_b,
            "outcome": pd.Categorical(outcome, categories=list(OUTCOMES), ordered=True),
        }
    )


def results_matrix(
    results: pd.DataFrame, row: str = "train_set", col: str = "test_set", value: str = "accuracy"
) -> pd.DataFrame:
    """WaNLI-Table-3-shaped pivot: one row per ``row`` value, one column per ``col`` value.

    Rows and columns keep the order of their first appearance in ``results`` (not alphabetical);
    missing combinations are NaN. Two rows for the same (row, col) pair are an error: choose the
    run first (e.g. with :func:`best_on_validation`) or aggregate.
    """
    _require_columns(results, [row, col, value])
    dup = results.duplicated([row, col], keep="first")
    if dup.any():
        first = results[dup].iloc[0]
        raise DataError(
            f"more than one value for ({first[row]!r}, {first[col]!r}); expected one per pair", field=value
        )
    values = _numeric(results, value)
    frame = pd.DataFrame(
        {row: results[row].to_numpy(), col: results[col].to_numpy(), value: values.to_numpy()}
    )
    table = frame.pivot(index=row, columns=col, values=value)
    return table.reindex(index=pd.unique(results[row]), columns=pd.unique(results[col]))


def mark_best(frame: pd.DataFrame, higher_is_better: bool = True) -> pd.DataFrame:
    """Bool frame of the same shape: True where a cell is the best of its column (the bold cells).

    Best = the column maximum (minimum when ``higher_is_better`` is False); every cell equal to
    it is True (ties are all bold); NaN is never best, and a column that is all NaN or not
    numeric has no best cell.
    """
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(frame).__name__}", field="frame")
    best = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    for j in range(frame.shape[1]):
        column = frame.iloc[:, j]
        if not (pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)):
            continue
        target = column.max() if higher_is_better else column.min()
        if pd.notna(target):
            best.iloc[:, j] = (column == target).to_numpy()
    return best


def markdown_table(frame: pd.DataFrame, digits: int = 4, index: bool = False) -> str:
    """A GitHub markdown table (no extra dependency); floats rounded, NaN/None as an en dash."""
    if index:
        frame = frame.reset_index()

    def cell(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return "–"
        if isinstance(value, float | np.floating):
            return f"{value:.{digits}f}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
