"""A run at a glance, for the head of the Data map page: accuracy, epochs, seeds, how it recorded its map,
the region rule, and the dev set's confusion matrix at the final epoch.

Pure functions (:func:`summarise`, :func:`confusion_matrix`, :func:`summary_rows`) and their glue to a
run (:func:`run_summary`, :func:`dev_confusion`); no streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import entities


def _accuracy_keys(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """``dev_accuracy`` then every ``test_<k>_accuracy`` any epoch record holds, in k order."""
    keys = {k for record in history for k in record if k.endswith("_accuracy")}
    tests = sorted((k for k in keys if k.startswith("test_")), key=lambda k: int(k.split("_")[1]))
    return (["dev_accuracy"] if "dev_accuracy" in keys else []) + tests


def summarise(
    history: Sequence[Mapping[str, Any]],
    *,
    epochs_planned: int,
    record: str,
    record_points: int = 1,
    skip_epochs: int = 0,
    n_seeds: int = 1,
    region_rule: str = "",
    test_names: Sequence[str] = (),
) -> dict[str, Any]:
    """The summary of a run from its per-epoch ``history`` (``history.json`` records) and settings.

    Keys: ``epochs_done``, ``epochs_planned``, ``best_epoch`` (1-based, the epoch best on dev, first of
    ties; the last without a dev set; None before the first epoch), ``accuracy`` ({set name: {"last",
    "best"}}, "best" = the accuracy at ``best_epoch``, as the house reports test scores; the dev set's
    "best" is its maximum; a multi-label run's sets also have "exact_match", {"last", "best"}: the share of
    examples with every label right; a named-entity run's sets "entities", {"last", "best"}: the
    :func:`cartomap.scores.entities.entity_scores` of those epochs), ``n_seeds``, ``record``,
    ``record_points``, ``skip_epochs``, ``region_rule``.
    Test set k is named by ``test_names[k]`` (``test k`` without)."""
    history = list(history)
    dev = [h.get("dev_accuracy") for h in history]
    if not history:
        best = None
    elif any(v is None for v in dev):
        best = len(history) - 1
    else:
        best = int(np.argmax(dev))
    accuracy = {}
    for key in _accuracy_keys(history):
        if key == "dev_accuracy":
            name = "dev"
        else:
            k = int(key.split("_")[1])
            name = f"test: {test_names[k]}" if k < len(test_names) else f"test {k}"
        last = history[-1].get(key)
        at_best = history[best].get(key) if best is not None else None
        accuracy[name] = {"last": last, "best": at_best}
        exact = key.removesuffix("_accuracy") + "_exact_match"  # multi-label: every label right
        if any(exact in h for h in history):
            accuracy[name]["exact_match"] = {
                "last": history[-1].get(exact),
                "best": history[best].get(exact) if best is not None else None,
            }
        found = entities.scores_key(key.removesuffix("_accuracy"))  # named entities: whole-entity scores
        if any(found in h for h in history):
            accuracy[name]["entities"] = {
                "last": history[-1].get(found) or {},
                "best": (history[best].get(found) or {}) if best is not None else {},
            }
    return {
        "epochs_done": len(history),
        "epochs_planned": int(epochs_planned),
        "best_epoch": None if best is None else best + 1,
        "accuracy": accuracy,
        "n_seeds": int(n_seeds),
        "record": record,
        "record_points": int(record_points),
        "skip_epochs": int(skip_epochs),
        "region_rule": region_rule,
    }


def _pct(value) -> str:
    return "–" if value is None else f"{float(value):.1%}"


def summary_rows(summary: Mapping[str, Any]) -> pd.DataFrame:
    """The summary as a two-column table (what, value), every value a string: for ``st.dataframe``."""
    best = summary.get("best_epoch")
    rows = [("epochs", f"{summary['epochs_done']} of {summary['epochs_planned']}")]
    for name, acc in summary["accuracy"].items():
        rows.append((f"{name} accuracy, last epoch", _pct(acc["last"])))
        rows.append((f"{name} accuracy, best epoch ({best})", _pct(acc["best"])))
        if "exact_match" in acc:
            rows.append((f"{name} exact match, last epoch", _pct(acc["exact_match"]["last"])))
            rows.append((f"{name} exact match, best epoch ({best})", _pct(acc["exact_match"]["best"])))
        if "entities" in acc:
            rows += entity_rows(name, acc["entities"], best)
    rows.append(("seeds", str(summary["n_seeds"])))
    recording = summary["record"]
    if summary.get("record_points", 1) > 1:
        recording += f", {summary['record_points']} recordings an epoch"
    if summary.get("skip_epochs"):
        recording += f", map skips the first {summary['skip_epochs']} epoch(s)"
    rows.append(("recording", recording))
    if summary.get("region_rule"):
        rows.append(("regions", summary["region_rule"]))
    return pd.DataFrame(rows, columns=["what", "value"])


def entity_rows(name: str, found: Mapping[str, Mapping], best: int | None) -> list[tuple[str, str]]:
    """The summary rows of one set's entity scores: micro and macro F1 at the last and the best epoch, and
    each type's precision / recall / F1 (its gold entities) at the best epoch."""
    rows = []
    for when, label in (("last", "last epoch"), ("best", f"best epoch ({best})")):
        scores = found.get(when) or {}
        micro, macro = scores.get("micro", {}), scores.get("macro", {})
        rows.append(
            (
                f"{name} entity F1, micro / macro, {label}",
                f"{_pct(micro.get('f1'))} / {_pct(macro.get('f1'))}",
            )
        )
    scores = found.get("best") or {}
    for kind in [k for k in scores if k not in entities.AVERAGES]:
        row = scores[kind]
        rows.append(
            (
                f"{name} {kind}: precision / recall / F1, best epoch ({best})",
                f"{_pct(row.get('precision'))} / {_pct(row.get('recall'))} / {_pct(row.get('f1'))} "
                f"({row.get('support', 0):,} entities)",
            )
        )
    return rows


def summary_line(summary: Mapping[str, Any]) -> str:
    """The summary in one line: epochs, the dev accuracy at the last and best epoch, seeds, recording."""
    parts = [f"{summary['epochs_done']}/{summary['epochs_planned']} epochs"]
    dev = summary["accuracy"].get("dev")
    if dev is not None:
        parts.append(
            f"dev accuracy {_pct(dev['last'])} last, {_pct(dev['best'])} best (epoch {summary['best_epoch']})"
        )
        if "entities" in dev:  # named entities: the field's measure beside the per-word accuracy
            last = (dev["entities"].get("last") or {}).get("micro", {})
            parts.append(f"dev entity F1 {_pct(last.get('f1'))} last")
    parts.append(f"{summary['n_seeds']} seed{'s' if summary['n_seeds'] != 1 else ''}")
    parts.append(f"recorded: {summary['record']}")
    return " · ".join(parts)


def confusion_matrix(labels, logits, label_names: Sequence[str]) -> pd.DataFrame:
    """Counts of gold class (rows, "gold <name>") by predicted class (columns, "predicted <name>"),
    the prediction the argmax of ``logits`` [N, C]; every class of ``label_names`` has its row and column."""
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] != y.shape[0]:
        raise DataError(f"logits must be [{y.shape[0]}, classes], got {z.shape}", field="logits")
    n = max(len(label_names), z.shape[1], int(y.max()) + 1 if y.size else 0)
    names = [str(label_names[c]) if c < len(label_names) else str(c) for c in range(n)]
    counts = np.zeros((n, n), dtype=np.int64)
    np.add.at(counts, (y, z.argmax(axis=1)), 1)
    return pd.DataFrame(
        counts, index=pd.Index([f"gold {v}" for v in names]), columns=[f"predicted {v}" for v in names]
    )


def dev_confusion(run, epoch: int | None = None) -> pd.DataFrame | None:
    """:func:`confusion_matrix` of ``run``'s dev set at ``epoch`` (0-based; default its last recorded
    epoch), from its dev logits; None when the run has no dev set or no dev epoch yet."""
    frame = run.dev_examples()
    epochs = run.dynamics_epochs("dev")
    if frame is None or not epochs:
        return None
    epoch = epochs[-1] if epoch is None else epoch
    kind = run.task_kind
    # every example; every word (token runs); every (example, label), absent or present
    ids, labels, _ = kind.units(frame, run.label_names)
    logits = run.read_epoch("dev", epoch, ids)
    return confusion_matrix(labels, logits, kind.unit_classes(run.label_names))


def run_summary(run, *, n_seeds: int = 1, region_rule: str = "") -> dict[str, Any]:
    """:func:`summarise` of ``run`` (its history, settings and test set names)."""
    train = run.config.train
    return summarise(
        run.history(),
        epochs_planned=train.epochs,
        record=train.record,
        record_points=train.record_points,
        skip_epochs=train.skip_epochs,
        n_seeds=n_seeds,
        region_rule=region_rule,
        test_names=run.test_names,
    )
