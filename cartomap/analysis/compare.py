"""Comparing finished runs: one table of scores, learning curves, per-class F1 and example diffs.

Pure functions over :class:`cartomap.runs.store.Run` handles (the Compare page lays them out):

* :func:`comparison_table`: one row per run with its setup (order, seed, train size, epochs) and
  its scores on one test set at the epoch best on validation (:func:`cartomap.analysis.evaluation.run_scores`);
  a run without that test set gets NaN scores.
* :func:`class_f1_frame`, :func:`curves_frame`: long frames for grouped bars and line charts
  (:func:`class_f1_figure`, :func:`curves_figure`).
* :func:`example_diff` / :func:`dev_diff`: two runs' predictions on the same examples, joined by
  example id, with the outcome of :func:`cartomap.scores.reports.per_example_diff`.
* :func:`experiment_runs`: the runs of an experiment labelled by their role ("cart-stra++@seed0"),
  optionally only the run best on validation per method; :func:`significance_frame` flattens a
  curriculum experiment's significance result.

``runs`` arguments are a mapping ``label -> Run`` (the label names the run in tables and legends)
or a sequence of runs (labelled with :func:`run_label`). Labels and run names go into plotly
legends HTML-escaped: plotly renders a subset of HTML in trace names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.evaluation import (
    entity_scores_at,
    predictions_on_test,
    run_chance_warning,
    run_class_table,
    run_scores,
    test_position,
    unit_predictions,
)
from cartomap.analysis.style import escape_text, palette_color
from cartomap.errors import DataError, RunError
from cartomap.runs.store import Run
from cartomap.scores import entities
from cartomap.scores.reports import OUTCOMES, mark_best, per_example_diff
from cartomap.tasks import registry as task_kinds

#: Score columns of :func:`comparison_table` (higher = better): the ones whose best is marked. The entity
#: columns (named-entity runs: F1 of whole entities, micro and macro) are there when a run has them.
SCORE_COLUMNS = (
    "dev_accuracy",
    "dev_entity_f1",
    "accuracy",
    "micro_f1",
    "macro_f1",
    "entity_f1",
    "entity_macro_f1",
)
ENTITY_COLUMNS = ("dev_entity_f1", "entity_f1", "entity_macro_f1")
#: Curves of :func:`curves_frame`: display name -> history key ("test ..." reads the chosen test set).
CURVES = {
    "dev accuracy": "dev_accuracy",
    "test accuracy": "test_accuracy",
    "dev entity F1": "dev_entity_f1",
    "test entity F1": "test_entity_f1",
    "train loss": "train_loss",
}
#: Direction of each curve: loss is better when lower.
CURVE_HIGHER_IS_BETTER = {
    "dev_accuracy": True,
    "test_accuracy": True,
    "dev_entity_f1": True,
    "test_entity_f1": True,
    "train_loss": False,
}
#: The curves read from the chosen test set: name -> the history key's suffix after ``test_<k>_``.
TEST_CURVES = {"test_accuracy": "accuracy", "test_entity_f1": "entity_f1"}


# --------------------------------------------------------------------------- labels
def run_label(run: Run) -> str:
    """One line naming a run: "name · order · seed s · id" (parts that are empty left out)."""
    config = run.info.get("config", {})
    parts = [
        config.get("name", ""),
        config.get("order", {}).get("name", ""),
        f"seed {config.get('train', {}).get('seed')}",
        run.id,
    ]
    return " · ".join(str(p) for p in parts if p)


def labelled(runs: Mapping[str, Run] | Sequence[Run]) -> dict[str, Run]:
    """``runs`` as ``{label: run}``: a mapping as given, a sequence labelled with :func:`run_label`."""
    if isinstance(runs, Mapping):
        return dict(runs)
    out: dict[str, Run] = {}
    for run in runs:
        label = run_label(run)
        out[label if label not in out else f"{label} ({len(out) + 1})"] = run
    return out


def test_names(runs: Mapping[str, Run] | Sequence[Run]) -> list[str]:
    """The union of the runs' test-set names, in order of first appearance."""
    names: list[str] = []
    for run in labelled(runs).values():
        names += [n for n in run.test_names if n not in names]
    return names


# --------------------------------------------------------------------------- the table
def _has_test(run: Run, test: int | str) -> bool:
    return 0 <= test < len(run.test_names) if isinstance(test, int) else test in run.test_names


def run_overview(run: Run) -> dict[str, Any]:
    """Setup of a run: id, name, order, seed, train_size, epochs (completed), best_epoch (1-based)
    and the dev accuracy at that epoch (None without a dev set or before the first epoch); a named-entity
    run's dev entity F1 (micro) at that epoch too (None for other runs)."""
    config = run.info.get("config", {})
    history = run.history()
    best = run.best_epoch()
    return {
        "id": run.id,
        "name": config.get("name", ""),
        "order": config.get("order", {}).get("name", "shuffled"),
        "seed": config.get("train", {}).get("seed"),
        "train_size": run.info.get("n_train"),
        "epochs": len(history),
        "best_epoch": None if best is None else best + 1,
        "dev_accuracy": None if best is None else history[best].get("dev_accuracy"),
        "dev_entity_f1": None if best is None else history[best].get(entities.f1_key("dev")),
    }


def comparison_table(runs: Mapping[str, Run] | Sequence[Run], test: int | str | None = 0) -> pd.DataFrame:
    """One row per run: run (label), id, name, order, seed, train_size, epochs, best_epoch,
    dev_accuracy, test_set, accuracy, micro_f1, macro_f1; when a run has them (named entities),
    dev_entity_f1 after dev_accuracy and entity_f1, entity_macro_f1 (F1 of whole entities) after macro_f1.

    Scores are :func:`cartomap.analysis.evaluation.run_scores` on ``test`` (a position or a name) at the
    epoch best on validation (a token run's accuracy and F1 are per word); higher = better. A run without
    that test set, or without a finished epoch, has NaN scores and an empty test_set. ``test=None`` leaves
    the test columns out.
    """
    rows = []
    scored = ("test_set", "accuracy", "micro_f1", "macro_f1", "entity_f1", "entity_macro_f1")
    for label, run in labelled(runs).items():
        row: dict[str, Any] = {"run": label, **run_overview(run)}
        if test is not None:
            row.update(dict.fromkeys(scored, np.nan), test_set=None)
            if _has_test(run, test) and row["best_epoch"] is not None:
                scores = run_scores(run, test)
                row.update({k: scores[k] for k in scored if k in scores})
        rows.append(row)
    columns = ["run", "id", "name", "order", "seed", "train_size", "epochs", "best_epoch", "dev_accuracy"]
    columns += ["dev_entity_f1"]
    if test is not None:
        columns += list(scored)
    table = pd.DataFrame(rows, columns=columns)
    for column in ("dev_accuracy", *ENTITY_COLUMNS):
        if column in table.columns:
            table[column] = pd.to_numeric(table[column], errors="coerce").astype(float)
    # the entity columns only where some run is scored on entities
    return table.drop(columns=[c for c in ENTITY_COLUMNS if c in table.columns and table[c].isna().all()])


def chance_warnings(runs: Mapping[str, Run] | Sequence[Run], table: pd.DataFrame) -> list[str]:
    """ "label: near chance ..." for each run of :func:`comparison_table` ``table`` whose score is near
    chance (:func:`cartomap.analysis.evaluation.run_chance_warning`): its test accuracy when the table
    has one, else its dev accuracy at the best epoch, else its final train-pass accuracy."""
    out = []
    by_label = labelled(runs)
    for row in table.to_dict("records"):
        run = by_label.get(row["run"])
        if run is None:
            continue
        accuracy, source = None, None
        test_set = row.get("test_set")
        if isinstance(test_set, str) and test_set in run.test_names and pd.notna(row.get("accuracy")):
            accuracy, source = float(row["accuracy"]), f"test_{run.test_names.index(test_set)}"
        elif pd.notna(row.get("dev_accuracy")):
            accuracy, source = float(row["dev_accuracy"]), "dev"
        warning = run_chance_warning(run, accuracy, source)
        if warning:
            out.append(f"{row['run']}: {warning}")
    return out


def best_marks(table: pd.DataFrame, columns: Sequence[str] = SCORE_COLUMNS) -> pd.DataFrame:
    """Bool frame over ``columns`` of ``table`` (those present): True at the best of each column
    (the maximum; ties all True; NaN never), as :func:`cartomap.scores.reports.mark_best`."""
    present = [c for c in columns if c in table.columns]
    return mark_best(table[present].apply(pd.to_numeric, errors="coerce"))


def _numeric_columns(table: pd.DataFrame) -> list[str]:
    return [
        c
        for c in table.columns
        if pd.api.types.is_numeric_dtype(table[c]) and not pd.api.types.is_bool_dtype(table[c])
    ]


def bold_css(table: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """CSS per cell of ``table``: "font-weight: bold" at the best of each of ``columns`` (see
    :func:`best_marks`; default: every numeric column), "" elsewhere."""
    marks = best_marks(table, _numeric_columns(table) if columns is None else columns)
    css = pd.DataFrame("", index=table.index, columns=table.columns)
    for column in marks.columns:
        css.loc[marks[column].to_numpy(), column] = "font-weight: bold"
    return css


def bold_best(table: pd.DataFrame, columns: Sequence[str] | None = None, digits: int = 4):
    """A pandas Styler of ``table`` with :func:`bold_css` applied and floats shown to ``digits``
    (NaN as "–"). Values stay text: the Styler adds only CSS, never markup from the data."""
    css = bold_css(table, columns)
    floats = [c for c in table.columns if pd.api.types.is_float_dtype(table[c])]
    # counts made float by a missing value (epochs, seeds) stay whole numbers
    whole = {c for c in floats if table[c].dropna().apply(float.is_integer).all() and c not in SCORE_COLUMNS}
    formats = {c: "{:.0f}" if c in whole else f"{{:.{digits}f}}" for c in floats}
    return table.style.apply(lambda _: css, axis=None).format(formats, na_rep="–")


# --------------------------------------------------------------------------- per class and curves
def class_f1_frame(runs: Mapping[str, Run] | Sequence[Run], test: int | str = 0) -> pd.DataFrame:
    """Long frame for grouped bars: run, class, precision, recall, f1, support, one row per
    (run, class) from :func:`cartomap.analysis.evaluation.run_class_table` (the micro and macro rows left
    out); a named-entity run's classes are its entity types, scored on whole entities
    (:func:`cartomap.scores.entities.entity_scores`). Runs without the test set or without a finished
    epoch have no rows. Higher = better."""
    parts = []
    for label, run in labelled(runs).items():
        best = run.best_epoch()
        if not _has_test(run, test) or best is None:
            continue
        found = entity_scores_at(run, f"test_{test_position(run, test)}", best)
        table = entities.entity_table(found) if found else run_class_table(run, test)
        table = table.drop(index=["micro", "macro"])
        parts.append(table.rename_axis("class").reset_index().assign(run=label))
    columns = ["run", "class", "precision", "recall", "f1", "support"]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]


def curves_frame(
    runs: Mapping[str, Run] | Sequence[Run], metric: str = "dev_accuracy", test: int | str = 0
) -> pd.DataFrame:
    """Long frame run, epoch (1-based), value of one per-epoch ``metric`` of every run's history.

    ``metric``: "dev_accuracy", "dev_entity_f1", "train_loss" (or any history key), or "test_accuracy"
    / "test_entity_f1", the value on ``test`` (a position or a name; history key ``test_<k>_accuracy``
    with k the test set's position in that run). Epochs without the value are skipped, so a run without
    a dev set (or without that test set, or without entities) has no points.
    """
    metric = CURVES.get(metric, metric)
    rows = []
    for label, run in labelled(runs).items():
        key = metric
        if metric in TEST_CURVES:
            if not _has_test(run, test):
                continue
            key = f"test_{test_position(run, test)}_{TEST_CURVES[metric]}"
        for position, record in enumerate(run.history(), start=1):
            value = record.get(key)
            if isinstance(value, int | float) and np.isfinite(value):
                rows.append(
                    {"run": label, "epoch": int(record.get("epoch", position)), "value": float(value)}
                )
    return pd.DataFrame(rows, columns=["run", "epoch", "value"])


def curve_names(runs: Mapping[str, Run] | Sequence[Run], test: int | str | None = 0) -> list[str]:
    """The names of :data:`CURVES` worth offering for ``runs``: the test curves only with a test set, the
    entity curves only when a run recorded them (named-entity runs)."""
    keys = {k for run in labelled(runs).values() for record in run.history() for k in record}
    names = []
    for name, metric in CURVES.items():
        if metric in TEST_CURVES and test is None:
            continue
        if metric.endswith(entities.F1_SUFFIX) and not any(k.endswith(entities.F1_SUFFIX) for k in keys):
            continue
        names.append(name)
    return names


def curves_figure(frame: pd.DataFrame, metric: str = "dev_accuracy", height: int = 380):
    """One plotly line per run of :func:`curves_frame` (colour = run), epochs on x."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (label, part) in enumerate(frame.groupby("run", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=part["epoch"],
                y=part["value"],
                mode="lines+markers",
                name=escape_text(label),
                line=dict(color=palette_color(i)),
            )
        )
    name = next((k for k, v in CURVES.items() if v == metric), metric)
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=50, r=10, t=30, b=40),
        xaxis=dict(title=dict(text="epoch"), dtick=1),
        yaxis=dict(title=dict(text=name)),
        showlegend=True,
        legend=dict(orientation="h", y=-0.25),
        hovermode="x unified",
    )
    return fig


def class_f1_figure(frame: pd.DataFrame, height: int = 360):
    """Grouped bars of :func:`class_f1_frame`: classes on x, one bar (colour) per run, F1 on y."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (label, part) in enumerate(frame.groupby("run", sort=False)):
        fig.add_trace(
            go.Bar(
                x=[escape_text(c) for c in part["class"]],
                y=part["f1"],
                name=escape_text(label),
                marker_color=palette_color(i),
                hovertemplate="%{x}: F1 %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        template="plotly_white",
        barmode="group",
        height=height,
        margin=dict(l=50, r=10, t=30, b=40),
        yaxis=dict(title=dict(text="F1"), range=[0, 1]),
        showlegend=True,  # which run a colour is, even with one run scored (plotly hides a lone legend)
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


# --------------------------------------------------------------------------- example diffs
def _label_names(run_a: Run, run_b: Run) -> tuple[str, ...]:
    if run_a.label_names != run_b.label_names:
        raise DataError(
            f"runs {run_a.id} and {run_b.id} have different classes: "
            f"{list(run_a.label_names)} and {list(run_b.label_names)}",
            field="label_names",
        )
    return run_a.label_names


def _join(pred_a: pd.DataFrame, pred_b: pd.DataFrame, label_names, what: str) -> pd.DataFrame:
    """Both prediction frames (id, texts, gold, pred) joined on id, with names and the outcome."""
    b = pred_b[["id", "gold", "pred"]].rename(columns={"gold": "gold_b", "pred": "pred_b"})
    joined = pred_a.rename(columns={"pred": "pred_a"}).merge(b, on="id", how="inner", sort=False)
    if joined.empty:
        raise DataError(f"the two runs share no example of {what}", field="test")
    differ = joined["gold"] != joined["gold_b"]
    if differ.any():
        raise DataError(
            f"{what}: example {joined['id'][differ].iloc[0]!r} has different gold labels in the two runs",
            field="test",
        )
    diff = per_example_diff(joined["id"], joined["gold"], joined["pred_a"], joined["pred_b"])
    names = dict(enumerate(label_names))
    out = joined[["id", *task_kinds.text_fields_in(joined.columns)]].copy()
    for column in ("gold", "pred_a", "pred_b"):
        out[column] = diff[column].map(names).to_numpy()
    out["outcome"] = diff["outcome"].to_numpy()
    return out.reset_index(drop=True)


def _test_name(run: Run, test: int | str) -> str:
    return run.test_names[test_position(run, test)]


def example_diff(run_a: Run, run_b: Run, test: int | str = 0) -> pd.DataFrame:
    """The two runs' predictions on a shared test set at their epochs best on validation.

    ``test``: a name, or a position in ``run_a``'s test sets (the same name is looked up in
    ``run_b``). Joined by example id (examples of both runs only). Columns: id, the texts (the task
    kind's text fields), gold, pred_a, pred_b (label names), outcome (one of
    :data:`cartomap.scores.reports.OUTCOMES`, an ordered categorical). A test set missing from either
    run, different classes or different gold labels for one id raise DataError.
    """
    if not _has_test(run_a, test):
        raise DataError(f"run {run_a.id} has no test set {test!r}; it has {run_a.test_names}", field="test")
    name = _test_name(run_a, test)
    if name not in run_b.test_names:
        raise DataError(
            f"test set {name!r} is not shared: run {run_b.id} has {run_b.test_names}", field="test"
        )
    label_names = _label_names(run_a, run_b)
    return _join(predictions_on_test(run_a, name), predictions_on_test(run_b, name), label_names, name)


def dev_predictions(run: Run, epoch: int | None = None) -> pd.DataFrame:
    """id, texts, gold, pred on the run's dev set at ``epoch`` (default: best on dev), from the
    dev logits recorded after every epoch (a token run's: a row per word)."""
    frame = run.dev_examples()
    epoch = run.best_epoch() if epoch is None else epoch
    if frame is None or epoch is None or epoch not in run.dynamics_epochs("dev"):
        raise RunError(f"run {run.id} has no recorded dev predictions")
    return unit_predictions(run, frame, "dev", epoch)


def dev_diff(run_a: Run, run_b: Run) -> pd.DataFrame:
    """:func:`example_diff` on the dev set the two runs share (each at its best epoch)."""
    label_names = _label_names(run_a, run_b)
    return _join(dev_predictions(run_a), dev_predictions(run_b), label_names, "the dev set")


def shares_dev(run_a: Run, run_b: Run) -> bool:
    """Whether both runs recorded dev predictions on the same dev set (same fingerprint)."""
    fp_a, fp_b = run_a.info.get("dev_fingerprint"), run_b.info.get("dev_fingerprint")
    return (
        bool(fp_a)
        and fp_a == fp_b
        and bool(run_a.dynamics_epochs("dev"))
        and bool(run_b.dynamics_epochs("dev"))
    )


def outcome_counts(diff: pd.DataFrame) -> dict[str, int]:
    """Number of examples per outcome, all four of :data:`cartomap.scores.reports.OUTCOMES` in order."""
    counts = diff["outcome"].value_counts()
    return {outcome: int(counts.get(outcome, 0)) for outcome in OUTCOMES}


# --------------------------------------------------------------------------- experiments
