"""A pruning experiment's analysis, pure (:mod:`cartomap.experiments.pruning`): out-of-fold and test
logits in, result frames out (:func:`analyse`); which examples another threshold or choice of categories
would prune (:func:`what_if`); the logits gathered from the fold and model runs; and the results as tables
and text (:func:`suspects_table`, :func:`named_matrix`, :func:`report_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from cartomap.errors import DataError, RunError
from cartomap.runs.store import Run
from cartomap.scores import detectors
from cartomap.scores.consensus import (
    DEFAULT_CATEGORIES,
    DEFAULT_SWEEP,
    DEFAULT_THRESHOLD,
    TYPE_NAMES,
    TYPE_ONLY_MODEL0,
    TYPE_ONLY_MODEL1,
    all_categories,
    category_label,
    confidence_change,
    mismatch_category,
    mismatch_matrix,
    mismatch_types,
    model_confidence,
    normalize_category,
    parse_category,
    predictions,
    resolve_categories,
    threshold_sweep,
)
from cartomap.scores.metrics import top_by_rank
from cartomap.tasks import registry as task_kinds

#: The roles of the models trained on the whole and on the pruned training set (their results say which).
MODEL0, MODEL1 = "model0", "model1"


def logits_columns(frame: pd.DataFrame) -> list[str]:
    cols = [c for c in frame.columns if re.fullmatch(r"logit_\d+", str(c))]
    return sorted(cols, key=lambda c: int(c.split("_")[1]))


def logits_of(frame: pd.DataFrame) -> np.ndarray:
    """The ``logit_0 .. logit_{C-1}`` columns as float64 [N, C]."""
    cols = logits_columns(frame)
    if len(cols) < 2:
        raise DataError("expected columns logit_0, logit_1, ... (one per class)", field="logits")
    return frame[cols].to_numpy(dtype=np.float64)


def scores_frame(ids, gold, logits, **columns) -> pd.DataFrame:
    """id, gold, any extra columns, logit_0 .. logit_{C-1}: the input of :func:`analyse`."""
    logits = np.asarray(logits, dtype=np.float64)
    frame = pd.DataFrame({"id": pd.Series(list(ids), dtype=str), "gold": np.asarray(gold, dtype=np.int64)})
    for name, values in columns.items():
        frame[name] = values
    for c in range(logits.shape[1]):
        frame[f"logit_{c}"] = logits[:, c]
    return frame


def held_out_scores(fold_runs: Sequence[Run], train_ids: Sequence[str]) -> pd.DataFrame:
    """OOF frame (id, gold, fold, logits) in training-set order from the fold runs' last epoch.

    RunError unless every training example was scored exactly once.
    """
    parts = []
    for f, run in enumerate(fold_runs):
        last = len(run.history()) - 1
        frame, logits = run.test_logits(0, epoch=last)
        parts.append(scores_frame(frame["id"], frame["label"], logits, fold=f))
    oof = pd.concat(parts, ignore_index=True)
    dup = oof["id"][oof["id"].duplicated()]
    if len(dup):
        raise RunError(f"example {dup.iloc[0]!r} was scored by more than one fold")
    oof = oof.set_index("id")
    missing = [i for i in train_ids if i not in oof.index]
    if missing or len(oof) != len(train_ids):
        raise RunError(f"{len(missing)} training examples have no held-out score (e.g. {missing[:1]})")
    return oof.loc[list(train_ids)].reset_index()


def test_scores(run: Run) -> pd.DataFrame:
    """A model's test-set frame (id, gold, logits) at its best epoch (the last without a dev set)."""
    frame, logits = run.test_logits(0)
    return scores_frame(frame["id"], frame["label"], logits)


def score(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus pred = argmax, category PXGY ("" when correct) and confidence |z[pred] - z[gold]|."""
    z = logits_of(frame)
    gold = frame["gold"].to_numpy()
    out = frame.copy()
    out["pred"] = predictions(z)
    out["category"] = mismatch_category(out["pred"].to_numpy(), gold)
    out["confidence"] = model_confidence(z, gold)
    return out


def _check_codes(categories: Iterable[str], n_classes: int) -> list[str]:
    """PXGY codes (already resolved), checked against the number of classes."""
    cats = sorted({normalize_category(c) for c in categories})
    for c in cats:
        pred, gold = parse_category(c)
        if max(pred, gold) >= n_classes:
            raise DataError(f"{c} names a class outside [0, {n_classes})", field="categories")
    return cats


class WhatIf(NamedTuple):
    mask: np.ndarray  # bool [N]: the suspects (would be pruned)
    count: int
    per_category: dict[str, int]


def what_if(
    oof: pd.DataFrame, categories: Iterable[str], threshold: float, label_names: Sequence[str] | None = None
) -> WhatIf:
    """Which OOF examples another setting would prune: category in ``categories`` and confidence > threshold.

    Pure and cheap (no retraining): ``oof`` is a scored OOF frame (or raw id/gold/logits). With
    ``label_names`` the categories may be named by label (:func:`resolve_category`); without, they are
    PXGY codes of the frame's class indices.
    """
    if "category" not in oof.columns or "confidence" not in oof.columns:
        oof = score(oof)
    n_classes = len(logits_columns(oof)) or 1 + int(oof["gold"].max())
    if label_names is not None:
        categories = resolve_categories(categories, label_names)
    cats = _check_codes(categories, n_classes)
    chosen = oof["category"].isin(cats).to_numpy()
    mask = chosen & (oof["confidence"].to_numpy(dtype=np.float64) > float(threshold))
    per = {c: int(np.sum(mask & (oof["category"].to_numpy() == c))) for c in cats}
    return WhatIf(mask, int(mask.sum()), per)


def _matrix_frame(pred, gold, n_classes: int) -> pd.DataFrame:
    """The mismatch matrix with its row names as a column "row" (P0, P1, ...), ready for Parquet."""
    return mismatch_matrix(pred, gold, n_classes).rename_axis("row").reset_index()


def sweep_frame(
    oof: pd.DataFrame, categories: Sequence[str], threshold: float, n_classes: int
) -> pd.DataFrame:
    """Counts above each threshold (0, 0.5, ..., 6 and the chosen one): every mismatch category,
    ``all`` (their sum) and ``chosen`` (the sum over ``categories``). Non-increasing in the threshold."""
    z, gold = logits_of(oof), oof["gold"].to_numpy()
    thresholds = sorted(set(DEFAULT_SWEEP) | {float(threshold)})
    every = threshold_sweep(z, gold, all_categories(n_classes), thresholds).rename(columns={"total": "all"})
    every["chosen"] = threshold_sweep(z, gold, list(categories), thresholds)["total"]
    return every


def _accuracy(frame: pd.DataFrame, pred: str) -> float:
    return float((frame[pred] == frame["gold"]).mean()) if len(frame) else float("nan")


def compare_models(
    test0: pd.DataFrame, test1: pd.DataFrame | None, categories: Sequence[str]
) -> pd.DataFrame:
    """Per test example: gold, pred0, conf0, category0 and (with Model 1) pred1, conf1, category1,
    change = conf1 - conf0, type (1 only Model 0 wrong, 2 only Model 1, 3 both, 0 neither) and
    type_chosen (the same, counting only mismatches of the chosen categories, as in the paper)."""
    s0 = score(test0)
    out = s0[["id", "gold"]].copy()
    out["pred0"], out["conf0"], out["category0"] = s0["pred"], s0["confidence"], s0["category"]
    if test1 is None:
        return out
    s1 = score(test1).set_index("id")
    if set(s1.index) != set(out["id"]) or len(s1) != len(out):
        raise DataError("Model 0 and Model 1 were evaluated on different test examples", field="test")
    s1 = s1.loc[out["id"]]
    if not np.array_equal(s1["gold"].to_numpy(), out["gold"].to_numpy()):
        raise DataError("Model 0 and Model 1 test sets have different gold labels", field="test")
    out["pred1"], out["conf1"], out["category1"] = (
        s1["pred"].to_numpy(),
        s1["confidence"].to_numpy(),
        s1["category"].to_numpy(),
    )
    gold = out["gold"].to_numpy()
    _, out["change"] = confidence_change(logits_of(test0), logits_of(s1.reset_index()), gold)
    out["type"] = mismatch_types(gold, out["pred0"].to_numpy(), out["pred1"].to_numpy())
    m0 = out["category0"].isin(list(categories)).to_numpy()
    m1 = out["category1"].isin(list(categories)).to_numpy()
    out["type_chosen"] = m0.astype(np.int64) * TYPE_ONLY_MODEL0 + m1.astype(np.int64) * TYPE_ONLY_MODEL1
    return out


def _type_counts(types: pd.Series) -> dict[str, int]:
    return {str(t): int((types == t).sum()) for t in TYPE_NAMES}


def analyse(
    oof: pd.DataFrame,
    test0: pd.DataFrame | None = None,
    test1: pd.DataFrame | None = None,
    *,
    categories: Iterable[str] = DEFAULT_CATEGORIES,
    threshold: float = DEFAULT_THRESHOLD,
    label_names: Sequence[str],
) -> dict[str, Any]:
    """Everything the experiment reports, from logits alone.

    ``oof``: id, gold, fold, logit_0..C-1 (the held-out scores of every training example);
    ``test0`` / ``test1``: id, gold, logits of Model 0 / Model 1 on the test set (either may be None).
    Suspect = OOF category in ``categories`` and confidence > ``threshold``; pruned_ids = the suspects' ids.
    Returns the result frames: oof, matrix, sweep, pruned_ids, test, test_matrix, summary.
    """
    n_classes = len(label_names)
    if len(logits_columns(oof)) != n_classes:
        raise DataError(f"expected {n_classes} logit columns (one per label name)", field="logits")
    cats = resolve_categories(categories, label_names)
    scored = score(oof)
    suspects = what_if(scored, cats, threshold)
    scored["suspect"] = suspects.mask
    pruned = scored.loc[suspects.mask, "id"].astype(str).tolist()
    summary: dict[str, Any] = {
        "label_names": list(label_names),
        "categories": cats,
        "category_names": [category_label(c, label_names) for c in cats],
        "threshold": float(threshold),
        "n_train": len(scored),
        "folds": int(scored["fold"].nunique()) if "fold" in scored else None,
        "oof_accuracy": _accuracy(scored, "pred"),
        "n_pruned": len(pruned),
        "pruned_by_category": suspects.per_category,
        "mismatches_by_category": {
            c: int((scored["category"] == c).sum()) for c in all_categories(n_classes)
        },
    }
    results: dict[str, Any] = {
        "oof": scored,
        "matrix": _matrix_frame(scored["pred"], scored["gold"], n_classes),
        "sweep": sweep_frame(scored, cats, threshold, n_classes),
        "pruned_ids": pruned,
        "summary": summary,
    }
    if test0 is not None:
        test = compare_models(test0, test1, cats)
        matrices = [_matrix_frame(test["pred0"], test["gold"], n_classes).assign(model=MODEL0)]
        summary.update(n_test=len(test), model0_test_accuracy=_accuracy(test, "pred0"))
        summary["model1_test_accuracy"] = None
        if test1 is not None:
            matrices.append(_matrix_frame(test["pred1"], test["gold"], n_classes).assign(model=MODEL1))
            summary["model1_test_accuracy"] = _accuracy(test, "pred1")
            summary["types"] = _type_counts(test["type"])
            summary["types_chosen"] = _type_counts(test["type_chosen"])
        results["test"] = test
        results["test_matrix"] = pd.concat(matrices, ignore_index=True)
    return results


def named_matrix(matrix: pd.DataFrame, label_names: Sequence[str]) -> pd.DataFrame:
    """A matrix indexed P0.. with columns G0.. renamed "P0 entailment" / "G0 entailment" (counts kept)."""
    out = matrix[[c for c in matrix.columns if re.fullmatch(r"G\d+", str(c))]].copy()
    out.index = [f"{r} {label_names[int(str(r)[1:])]}" for r in matrix.index]
    out.columns = [f"{c} {label_names[int(str(c)[1:])]}" for c in out.columns]
    out.index.name = "predicted \\ gold"
    return out


def suspects_table(
    oof: pd.DataFrame, examples: pd.DataFrame, label_names: Sequence[str], mask=None
) -> pd.DataFrame:
    """The suspects (``mask``, default the oof's ``suspect`` column) with their texts, most confident first:
    id, texts, gold, predicted, category, confidence, fold."""
    mask = oof["suspect"].to_numpy(dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    picked = oof.loc[mask]
    texts = task_kinds.text_fields_in(examples.columns)
    by_id = examples.assign(id=examples["id"].astype(str)).set_index("id")
    table = pd.DataFrame({"id": picked["id"].astype(str).to_numpy()})
    for col in texts:
        table[col] = by_id[col].reindex(table["id"]).to_numpy()
    names = np.asarray(label_names, dtype=object)
    table["gold"] = names[picked["gold"].to_numpy(dtype=np.int64)]
    table["predicted"] = names[picked["pred"].to_numpy(dtype=np.int64)]
    table["category"] = picked["category"].to_numpy()
    table["confidence"] = picked["confidence"].to_numpy(dtype=np.float64)
    if "fold" in picked:
        table["fold"] = picked["fold"].to_numpy()
    return table.sort_values("confidence", ascending=False, kind="stable").reset_index(drop=True)


def report_text(results: dict[str, Any]) -> str:
    """A plain-text report: the OOF mismatch matrix, the sweep and the Model 0 / Model 1 test accuracies."""
    s = results["summary"]
    names = s["label_names"]
    lines = [
        f"out-of-fold mismatch matrix ({s['n_train']} training examples, {s['folds']} folds; "
        f"rows predicted, columns gold):",
        named_matrix(results["matrix"], names).to_string(),
        "",
        "examples above each threshold (chosen = " + " + ".join(s["categories"]) + "):",
        results["sweep"].to_string(index=False),
        "",
        f"pruned: {s['n_pruned']} of {s['n_train']} ({', '.join(s.get('category_names') or s['categories'])} with confidence > "
        f"{s['threshold']:g})",
    ]
    if s.get("model0_test_accuracy") is not None:
        lines.append(f"test set {s.get('test_name') or ''} ({s['n_test']} examples):")
        lines.append(f"  Model 0 accuracy {s['model0_test_accuracy']:.4f}")
    if s.get("model1_test_accuracy") is not None:
        delta = s["model1_test_accuracy"] - s["model0_test_accuracy"]
        lines.append(f"  Model 1 accuracy {s['model1_test_accuracy']:.4f} ({delta:+.4f})")
        for key, title in (("types", "all mismatches"), ("types_chosen", "chosen categories")):
            counts = s.get(key) or {}
            lines.append(
                f"  test mismatch types ({title}): "
                + ", ".join(f"{TYPE_NAMES[int(t)]} {n}" for t, n in counts.items())
            )
    return "\n".join(lines)


def detector_inputs(oof: pd.DataFrame, model0: Run | None, folds: pd.DataFrame | None = None):
    """:class:`cartomap.scores.detectors.DetectorInputs` in the out-of-fold table's order: its logits, Model
    0's metrics (when they cover every example) and the fold models' in-sample table (``folds``, same order)."""
    metrics = None
    if model0 is not None and model0.has_metrics():
        m = model0.metrics().assign(id=lambda f: f["id"].astype(str)).drop_duplicates("id").set_index("id")
        ids = oof["id"].astype(str)
        if set(ids) <= set(m.index):
            metrics = m.loc[ids.tolist()].reset_index()
    return detectors.DetectorInputs(
        labels=oof["gold"].to_numpy(), oof_logits=logits_of(oof), metrics=metrics, folds=folds
    )


def detector_options(oof: pd.DataFrame, model0: Run | None, folds: pd.DataFrame | None = None) -> list[str]:
    """The detectors these inputs allow (:func:`cartomap.scores.detectors.available`)."""
    return detectors.available(detector_inputs(oof, model0, folds))


def ranked_suspects(
    name: str,
    oof: pd.DataFrame,
    model0: Run | None,
    examples: pd.DataFrame,
    names: Sequence[str],
    n: int,
    folds: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The ``n`` examples detector ``name`` scores highest (:func:`cartomap.scores.metrics.top_by_rank`),
    as the suspects table (:func:`suspects_table`) plus their score, highest first."""
    score = detectors.score(name, detector_inputs(oof, model0, folds))
    table = suspects_table(oof, examples, list(names), mask=top_by_rank(score, n))
    by_id = dict(zip(oof["id"].astype(str), score, strict=True))
    table.insert(len(table.columns), "score", [by_id[i] for i in table["id"].astype(str)])
    return table.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
