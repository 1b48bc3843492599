"""Find and prune suspected label errors: the k-fold consensus experiment (METHODS.md section 3).

The experiment of the SNLI cleaning paper as an experiment kind (:mod:`cartomap.experiments.registry`):

* ``model0``: the base config on the full training set (record "train", so it also has a data
  map), evaluated on the test set.
* ``fold_0`` .. ``fold_{k-1}``: trained on the other k-1 stratified folds, scoring the held-out fold
  (its only test set). Every training example is scored once, by the one model that did not see it:
  the out-of-fold (OOF) logits.
* ``model1`` (once every fold is done): the base config on the training set minus the suspects,
  i.e. the OOF mismatches of the chosen categories (``PXGY``: predicted X, gold Y) whose model
  confidence |z[pred] - z[gold]| exceeds the threshold; evaluated on the same test set.

Every run is an ordinary run, so identical configs are shared: a second experiment that changes only
the threshold or the categories reuses Model 0 and the folds and trains Model 1 alone.

The analysis is the pure :func:`analyse` (OOF and test logits in, result frames out); the kind's
``finalize`` only gathers the logits from the runs and writes what :func:`analyse` returns.
Helpers for the page and the CLI: :func:`start_pruning`, :func:`create_pruning`,
:func:`load_results`, :func:`what_if`, :func:`suspects_table`, :func:`export_pruned`,
:func:`report_text` and two plotly figures. No Streamlit here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from cartomap.config import DEMO_DEV, DataConfig, ExecutorConfig, OrderConfig, RunConfig
from cartomap.data import derived
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError, RunError
from cartomap.experiments.launch import start_experiment
from cartomap.experiments.store import Experiment, ExperimentStore, Section
from cartomap.io import atomic_write_bytes, file_stamp
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore, run_id_for
from cartomap.scores import detectors
from cartomap.scores.consensus import (
    DEFAULT_CATEGORIES,
    DEFAULT_SWEEP,
    DEFAULT_THRESHOLD,
    TYPE_BOTH,
    TYPE_ONLY_MODEL0,
    TYPE_ONLY_MODEL1,
    confidence_change,
    mismatch_category,
    mismatch_matrix,
    mismatch_types,
    model_confidence,
    predictions,
    stratified_folds,
    threshold_sweep,
)
from cartomap.tasks import registry as task_kinds

KIND = "pruning"
MODEL0, MODEL1 = "model0", "model1"
#: Names of the Model 0 / Model 1 mismatch types on the test set (cartomap.scores.consensus.mismatch_types).
TYPE_NAMES = {
    TYPE_ONLY_MODEL0: "Type 1: only Model 0",
    TYPE_ONLY_MODEL1: "Type 2: only Model 1",
    TYPE_BOTH: "Type 3: both",
}
PRUNED_FILE, REMOVED_FILE = "pruned_train.jsonl", "removed_ids.txt"
_CATEGORY = re.compile(r"^P(\d+)G(\d+)$")
#: A category named by its labels: "P:neutral G:entailment" (a comma may separate the two parts).
_NAMED_CATEGORY = re.compile(r"^P:\s*(?P<pred>.+?)\s*[\s,]\s*G:\s*(?P<gold>.+?)\s*$")
#: The class order in which the shorthand PXGY means what the NLI papers say (P1G0: predicted neutral, gold
#: entailment); with any other order the shorthand is refused and categories are named by label.
NLI_ORDER: tuple[str, ...] = ("entailment", "neutral", "contradiction")


def fold_role(f: int) -> str:
    return f"fold_{f}"


# --------------------------------------------------------------------------- parameters
def _default_base() -> RunConfig:
    return RunConfig(dev=None, tests=(DataConfig(path=DEMO_DEV),))


def category_name(pred: int, gold: int, label_names: Sequence[str]) -> str:
    """(1, 0) with NLI labels -> "P:neutral G:entailment": a mismatch category named by its labels."""
    return f"P:{label_names[pred]} G:{label_names[gold]}"


def normalize_category(text: str) -> str:
    """A category as given, in canonical spelling: "P1G0" (shorthand) or "P:neutral G:entailment" (named).
    DataError for anything else, or for a correct prediction."""
    text = str(text).strip()
    named = _NAMED_CATEGORY.match(text)
    if named:
        if named["pred"] == named["gold"]:
            raise DataError(f"{text!r} is a correct prediction, not a mismatch", field="categories")
        return f"P:{named['pred']} G:{named['gold']}"
    pred, gold = parse_category(text)
    return f"P{pred}G{gold}"


def resolve_category(text: str, label_names: Sequence[str]) -> str:
    """The PXGY code of a category for classes ``label_names``.

    A named category ("P:neutral G:entailment") is looked up by label; the shorthand PXGY is accepted
    only when the classes are in the NLI order entailment, neutral, contradiction, where P1G0 means
    "predicted neutral, gold entailment" as in the papers. In any other order it would silently mean
    something else, so it is refused with the named form to use instead."""
    names = [str(n) for n in label_names]
    canonical = normalize_category(text)
    named = _NAMED_CATEGORY.match(canonical)
    if named:
        unknown = [n for n in (named["pred"], named["gold"]) if n not in names]
        if unknown:
            raise DataError(
                f"{canonical!r}: no class {unknown[0]!r}; the classes are {names}", field="categories"
            )
        return f"P{names.index(named['pred'])}G{names.index(named['gold'])}"
    pred, gold = parse_category(canonical)
    if max(pred, gold) >= len(names):
        raise DataError(f"{canonical} names a class outside [0, {len(names)})", field="categories")
    if tuple(names) != NLI_ORDER:
        raise DataError(
            f"{canonical} is NLI shorthand for the class order {', '.join(NLI_ORDER)}; these classes are "
            f"{', '.join(names)}, so name the category by its labels, e.g. "
            f"{category_name(pred, gold, names)!r} (predicted {names[pred]}, gold {names[gold]})",
            field="categories",
        )
    return canonical


def resolve_categories(categories: Iterable[str], label_names: Sequence[str]) -> list[str]:
    """:func:`resolve_category` of each, as sorted distinct PXGY codes."""
    return sorted({resolve_category(c, label_names) for c in categories})


def parse_category(text: str) -> tuple[int, int]:
    """``"P1G0"`` -> (1, 0): (predicted class, gold class). DataError unless PXGY with X != Y."""
    match = _CATEGORY.match(str(text).strip().upper())
    if not match:
        raise DataError(
            f"{text!r} is not a mismatch category: expected 'P:<predicted label> G:<gold label>' "
            "(e.g. 'P:neutral G:entailment') or the NLI shorthand PXGY (e.g. P1G0)",
            field="categories",
        )
    pred, gold = int(match[1]), int(match[2])
    if pred == gold:
        raise DataError(
            f"{text!r}: P{pred}G{gold} is a correct prediction, not a mismatch", field="categories"
        )
    return pred, gold


def all_categories(n_classes: int) -> list[str]:
    """Every mismatch category PXGY (X != Y), ordered by X then Y: P0G1, P0G2, P1G0, ..."""
    return [f"P{x}G{y}" for x in range(n_classes) for y in range(n_classes) if x != y]


@dataclass(frozen=True)
class PruningParams:
    """What a pruning experiment computes. Saved as the experiment's params (its id is their hash)."""

    base: RunConfig = field(
        default_factory=_default_base
    )  # model, training, data = the training set, tests = (the test set,); dev optional
    folds: int = 10  # paper: 10 (train on 9 folds, score the 10th)
    fold_seed: int = 0  # StratifiedKFold shuffle seed
    categories: tuple[str, ...] = DEFAULT_CATEGORIES  # paper: P1G0 (predicted neutral, gold entailment)
    threshold: float = (
        DEFAULT_THRESHOLD  # paper: 2.0 (4.0 suggested as stricter); prune confidence > threshold
    )
    train_model1: bool = True  # retrain on the pruned set and compare on the test set
    cache: str = ""  # where derived datasets go (<cache>/datasets/); "" = the experiment store's root

    def __post_init__(self) -> None:
        if isinstance(self.folds, bool) or int(self.folds) != self.folds or self.folds < 2:
            raise DataError(f"expected an integer >= 2, got {self.folds!r}", field="folds")
        cats = [self.categories] if isinstance(self.categories, str) else list(self.categories)
        if not cats:
            raise DataError("choose at least one mismatch category (e.g. P1G0)", field="categories")
        # a canonical spelling and order: the same choice is the same experiment
        object.__setattr__(self, "categories", tuple(sorted({normalize_category(c) for c in cats})))
        object.__setattr__(self, "folds", int(self.folds))
        threshold = float(self.threshold)
        if not math.isfinite(threshold) or threshold < 0:
            raise DataError(f"expected a finite number >= 0, got {self.threshold!r}", field="threshold")
        object.__setattr__(self, "threshold", threshold)
        if len(self.base.tests) != 1:
            raise DataError(
                f"the experiment needs exactly one test set (base.tests), got {len(self.base.tests)}",
                field="tests",
            )
        if self.base.order != OrderConfig():
            raise DataError(
                "the folds and Models 0 and 1 train with the standard shuffled order; "
                f"got order {self.base.order.name!r}",
                field="order",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(),
            "folds": self.folds,
            "fold_seed": int(self.fold_seed),
            "categories": list(self.categories),
            "threshold": self.threshold,
            "train_model1": bool(self.train_model1),
            "cache": str(self.cache),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PruningParams:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        kwargs["base"] = RunConfig.from_dict(d["base"])
        if "categories" in kwargs:
            kwargs["categories"] = tuple(kwargs["categories"])
        return cls(**kwargs)

    def replace(self, **changes) -> PruningParams:
        return dataclasses.replace(self, **changes)


# --------------------------------------------------------------------------- run configs
def model0_config(params: PruningParams) -> RunConfig:
    """The base config on the full training set, recording the training pass (data map, AUM)."""
    train = dataclasses.replace(params.base.train, record="train")
    return params.base.replace(train=train, name="pruning: model 0")


def fold_config(params: PruningParams, fold_train: DataConfig, held_out: DataConfig, f: int) -> RunConfig:
    """Train on ``fold_train``, score ``held_out`` after every epoch; no dev set, no checkpoints.

    The training pass is recorded (its logits are computed anyway, so it costs no extra passes): every
    example is in the training part of k - 1 fold models, whose in-sample dynamics averaged over those
    models are a multi-model signal at the compute of the out-of-fold logits (``fold_in_sample``)."""
    train = dataclasses.replace(params.base.train, record="train", save_checkpoints=False)
    return params.base.replace(
        data=fold_train, dev=None, tests=(held_out,), train=train, name=f"pruning: fold {f}"
    )


def model1_config(params: PruningParams, pruned_train: DataConfig) -> RunConfig:
    """Model 0's config on the pruned training set."""
    return model0_config(params).replace(data=pruned_train, name="pruning: model 1")


def _cache(params: PruningParams, store: RunStore) -> str:
    return params.cache or str(store.root)


_TRAINING_SETS: dict[tuple, TextDataset] = {}  # the last training set loaded, by config and file stamp
_PLANS: dict[tuple, list] = {}  # fold plans, by training set, folds, seed, base config and cache


def load_training_set(params: PruningParams) -> TextDataset:
    """The training set, loaded once per process while its file is unchanged: the runner asks the
    experiment for its runs after every finished run, and a 550k-pair set takes seconds to load."""
    key = (
        json.dumps(dataclasses.asdict(params.base.data), sort_keys=True, default=str),
        file_stamp(params.base.data.path),
    )
    if key not in _TRAINING_SETS:
        _TRAINING_SETS.clear()  # one at a time: a full-size set is hundreds of MB
        _TRAINING_SETS[key] = load_dataset(params.base.data)
    return _TRAINING_SETS[key]


@dataclass(frozen=True)
class Fold:
    """A fold run: its config and the fingerprints of its two sides (what its run id is made of)."""

    config: RunConfig
    train_fingerprint: str
    held_out_fingerprint: str


def fold_plan(params: PruningParams, train: TextDataset, cache: str | Path) -> list[Fold]:
    """The k fold runs: stratified folds of the gold labels, each side saved as a derived dataset.

    Made once per process for a training set and settings (20 subsets of a 550k-pair set are not
    cut, fingerprinted and saved again on every pass of the runner)."""
    key = (
        train.fingerprint(),
        params.folds,
        params.fold_seed,
        str(cache),
        json.dumps(params.base.to_dict(), default=str),
    )
    if key in _PLANS:
        return _PLANS[key]
    folds = stratified_folds(train.labels, params.folds, params.fold_seed)
    plan = []
    for f in range(params.folds):
        kept, held = train.subset(folds != f), train.subset(folds == f)
        kept_cfg = derived.save_dataset(kept, cache, name=f"fold {f} train")
        held_cfg = derived.save_dataset(held, cache, name=f"fold {f}")
        plan.append(Fold(fold_config(params, kept_cfg, held_cfg, f), kept.fingerprint(), held.fingerprint()))
    if len(_PLANS) >= 8:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _done_fold_runs(exp: Experiment, plan: list[Fold], store: RunStore) -> list[Run] | None:
    """The finished fold runs in fold order, or None while any is missing or unfinished.

    Looked up by config and data (so folds trained by another experiment count at once), else by role.
    """
    runs = []
    for f, fold in enumerate(plan):
        run_id = run_id_for(fold.config, fold.train_fingerprint, None, (fold.held_out_fingerprint,))
        run = store.find_id(run_id) or exp.run(fold_role(f), store)
        if run is None or run.state != State.DONE:
            return None
        runs.append(run)
    return runs


# --------------------------------------------------------------------------- logits from runs
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


# --------------------------------------------------------------------------- the analysis (pure)
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


# --------------------------------------------------------------------------- the experiment kind
def pruned_training_set(train: TextDataset, pruned_ids, cache) -> DataConfig:
    """``train`` minus ``pruned_ids``, saved as a derived dataset (DataError if under two classes are left)."""
    kept = derived.without_ids(train, pruned_ids)
    if len(np.unique(kept.labels)) < 2:
        raise DataError(
            f"pruning {len(train) - len(kept)} of {len(train)} examples leaves fewer than two classes "
            "to train Model 1 on: raise the threshold or choose fewer categories",
            field="threshold",
        )
    return derived.save_dataset(kept, cache, name=f"train minus {len(train) - len(kept)} suspects")


class PruningKind:
    """Model 0, k fold models, then Model 1 on the training set minus the OOF suspects."""

    name = KIND

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = PruningParams.from_dict(exp.params)
        cache = _cache(params, store)
        train = load_training_set(params)
        plan = fold_plan(params, train, cache)
        planned = [(MODEL0, model0_config(params))]
        planned += [(fold_role(f), fold.config) for f, fold in enumerate(plan)]
        fold_runs = _done_fold_runs(exp, plan, store)
        if params.train_model1 and fold_runs is not None:
            oof = held_out_scores(fold_runs, [str(i) for i in train.ids])
            chosen = what_if(oof, params.categories, params.threshold, label_names=train.label_names)
            pruned = oof.loc[chosen.mask, "id"].tolist()
            # nothing to prune: Model 1 would be Model 0 again, so it is Model 0's run
            config = (
                model1_config(params, pruned_training_set(train, pruned, cache))
                if pruned
                else model0_config(params)
            )
            planned.append((MODEL1, config))
        return planned

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        params = PruningParams.from_dict(exp.params)
        train = load_training_set(params)
        plan = fold_plan(params, train, _cache(params, store))
        fold_runs = _done_fold_runs(exp, plan, store)
        if fold_runs is None:
            raise RunError(f"experiment {exp.id}: not every fold run is done")
        model0 = exp.run(MODEL0, store)
        model1 = exp.run(MODEL1, store) if params.train_model1 else None
        if params.train_model1 and (model1 is None or model1.state != State.DONE):
            raise RunError(f"experiment {exp.id}: Model 1 was not trained")
        oof = held_out_scores(fold_runs, [str(i) for i in train.ids])
        results = analyse(
            oof,
            test_scores(model0),
            test_scores(model1) if model1 is not None else None,
            categories=params.categories,
            threshold=params.threshold,
            label_names=train.label_names,
        )
        summary = results["summary"]
        summary["experiment"] = exp.id
        summary["test_name"] = model0.test_names[0] if model0.test_names else ""
        summary["run_ids"] = exp.run_ids()
        summary["fold_accuracy"] = [r.history()[-1].get("test_0_accuracy") for r in fold_runs]
        write_results(exp, results)

    def role_label(self, role: str) -> str:
        return role_name(role)

    def role_order(self, exp: Experiment, role: str) -> tuple:
        """Model 0 first, then the folds by number, then Model 1."""
        if role.startswith("fold_") and role[5:].isdigit():
            return (1, int(role[5:]))
        return ({MODEL0: 0, MODEL1: 2}.get(role, 3), 0)

    def report(self, exp: Experiment, store: RunStore) -> str:
        return report_text(load_results(exp))

    def sections(self, exp: Experiment) -> list[Section]:
        results = load_results(exp)
        if results is None:
            return []
        s = results["summary"]
        rows = [
            {
                "model": "Model 0",
                "test accuracy": s.get("model0_test_accuracy"),
                "training examples": s["n_train"],
            }
        ]
        if s.get("model1_test_accuracy") is not None:
            rows.append(
                {
                    "model": "Model 1",
                    "test accuracy": s["model1_test_accuracy"],
                    "training examples": s["n_train"] - s["n_pruned"],
                }
            )
        chosen = ", ".join(s.get("category_names") or s["categories"])
        title = f"Pruned {s['n_pruned']} of {s['n_train']} ({chosen} above {s['threshold']:g})"
        return [Section(title, pd.DataFrame(rows), best_columns=("test accuracy",))]


def role_name(role: str | None) -> str:
    """model0 -> "Model 0", fold_3 -> "Model F3" (the paper's names), model1 -> "Model 1"."""
    if not role:
        return ""
    if role.startswith("fold_"):
        return f"Model F{role.split('_', 1)[1]}"
    return {MODEL0: "Model 0", MODEL1: "Model 1"}.get(role, role)


# --------------------------------------------------------------------------- results on disk
RESULT_NAMES = ("oof", "matrix", "sweep", "pruned_ids", "test", "test_matrix", "summary")


def write_results(exp: Experiment, results: dict[str, Any]) -> None:
    """Write the frames of :func:`analyse` to the experiment's results/ (summary last: it marks completion)."""
    for name in RESULT_NAMES[:-1]:
        if name in results:
            exp.write_result(name, results[name])
    exp.write_result("summary", results["summary"])


def load_results(exp: Experiment) -> dict[str, Any] | None:
    """The written results (None before the experiment finished): oof, matrix (index P0..), sweep,
    pruned_ids (list), test and test_matrix (None without a test comparison), summary (dict)."""
    summary = exp.result("summary")
    if summary is None:
        return None
    out: dict[str, Any] = {name: exp.result(name) for name in RESULT_NAMES}
    out["summary"] = summary
    out["matrix"] = out["matrix"].set_index("row")
    if out["test_matrix"] is not None:
        out["test_matrix"] = out["test_matrix"].set_index("row")
    return out


# --------------------------------------------------------------------------- display helpers (pure)
def category_label(category: str, label_names: Sequence[str]) -> str:
    """A PXGY code by its labels: "P1G0" -> "P:neutral G:entailment", with the shorthand added where it
    means that (classes in the NLI order): "P:neutral G:entailment (P1G0)"."""
    pred, gold = parse_category(category)
    if max(pred, gold) >= len(label_names):
        return category
    name = category_name(pred, gold, label_names)
    return f"{name} ({category})" if tuple(str(n) for n in label_names) == NLI_ORDER else name


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


def confidence_histogram(
    oof: pd.DataFrame, label_names: Sequence[str], threshold: float | None = None, categories=None
):
    """Plotly histogram of model confidence of the OOF mismatches, one colour per category
    (only ``categories`` when given), with the threshold as a dashed line. Higher = more suspect."""
    import plotly.graph_objects as go

    from cartomap.analysis.style import escape  # label names are data: plotly renders tags in trace names

    wrong = oof[oof["category"] != ""]
    cats = sorted(wrong["category"].unique()) if categories is None else list(categories)
    fig = go.Figure()
    for c in cats:
        values = wrong.loc[wrong["category"] == c, "confidence"]
        name = escape([category_label(c, label_names)])[0]
        fig.add_trace(go.Histogram(x=values, name=name, opacity=0.65, nbinsx=40))
    fig.update_layout(
        barmode="overlay",
        xaxis_title="model confidence |z[pred] − z[gold]|",
        yaxis_title="examples",
        legend_title="category",
        margin={"t": 30, "b": 40},
    )
    if threshold is not None:
        fig.add_vline(x=float(threshold), line_dash="dash", annotation_text=f"threshold {threshold:g}")
    return fig


def change_scatter(test: pd.DataFrame, column: str = "type"):
    """Plotly scatter of the test mismatches: x = Model 0's confidence, y = change (Model 1 − Model 0),
    colour = mismatch type (``column``: "type" or "type_chosen")."""
    import plotly.graph_objects as go

    from cartomap.analysis.style import escape

    fig = go.Figure()
    for t, name in TYPE_NAMES.items():
        part = test[test[column] == t]
        fig.add_trace(
            go.Scattergl(
                x=part["conf0"],
                y=part["change"],
                mode="markers",
                name=f"{name} ({len(part)})",
                hovertext=escape(part["id"].astype(str)),
                hovertemplate="%{hovertext}<br>Model 0 %{x:.2f} · change %{y:+.2f}<extra></extra>",
                marker={"size": 6, "opacity": 0.7},
            )
        )
    fig.add_hline(y=0, line_color="grey", line_width=1)
    fig.update_layout(
        xaxis_title="Model 0 confidence",
        yaxis_title="change in confidence (Model 1 − Model 0)",
        margin={"t": 30, "b": 40},
    )
    return fig


# --------------------------------------------------------------------------- starting and exporting
def check_data(params: PruningParams) -> TextDataset:
    """Load the training and test sets and check the folds and categories fit them (DataError if not)."""
    train = load_training_set(params)
    task_kinds.require_per_example(train.task_kind, "pruning suspected label errors", train.source)
    for t in params.base.tests:
        load_dataset(t, label_names=train.label_names)
    if params.base.dev is not None:
        load_dataset(params.base.dev, label_names=train.label_names)
    resolve_categories(params.categories, train.label_names)
    stratified_folds(train.labels, params.folds, params.fold_seed)
    return train


def create_pruning(params: PruningParams, store: ExperimentStore, name: str = "") -> Experiment:
    """Check the data, then return the experiment for ``params`` (existing or new, not started).

    An empty ``params.cache`` becomes the store's root (absolute), where the derived datasets go.
    """
    if not params.cache:
        params = params.replace(cache=str(Path(store.root).resolve()))
    check_data(params)
    return store.create(KIND, params.to_dict(), name=name)


def start_pruning(
    params: PruningParams,
    store: ExperimentStore,
    name: str = "",
    executor: ExecutorConfig | None = None,
    by: str | None = None,
) -> Experiment:
    """:func:`create_pruning`, then run it as a background job (unless done or already running),
    its runs trained by ``executor`` (None: the one saved with the experiment, else local); ``by``: the
    person who started it."""
    return start_experiment(
        create_pruning(params, store, name), store, executor, **({"by": by} if by else {})
    )


def params_of(exp: Experiment) -> PruningParams:
    return PruningParams.from_dict(exp.params)


def pruned_frame(exp: Experiment, store: RunStore) -> pd.DataFrame:
    """Model 0's training examples minus the pruned ids, labels as strings (order kept)."""
    results = load_results(exp)
    if results is None:
        raise RunError(f"experiment {exp.id} has no results yet (state: {exp.state})")
    model0 = exp.run(MODEL0, store)
    if model0 is None:
        raise RunError(f"experiment {exp.id} has no Model 0 run")
    examples = model0.examples()
    drop = set(map(str, results["pruned_ids"]))
    kept = examples[~examples["id"].astype(str).isin(drop)].reset_index(drop=True)
    names = model0.label_names
    return kept.assign(label=[names[int(i)] for i in kept["label"]])


def pruned_jsonl_bytes(exp: Experiment, store: RunStore) -> bytes:
    """The pruned training set as JSON Lines (one object per example, string labels)."""
    frame = pruned_frame(exp, store).astype(object).where(lambda f: f.notna(), None)
    lines = [json.dumps(row, ensure_ascii=False, default=str) for row in frame.to_dict(orient="records")]
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def removed_ids_bytes(exp: Experiment) -> bytes:
    """The pruned ids, one per line."""
    results = load_results(exp)
    if results is None:
        raise RunError(f"experiment {exp.id} has no results yet (state: {exp.state})")
    return "".join(f"{i}\n" for i in results["pruned_ids"]).encode("utf-8")


def export_pruned(
    exp: Experiment, run_store: RunStore, out_dir: str | Path, overwrite: bool = False
) -> tuple[Path, Path]:
    """Write ``pruned_train.jsonl`` and ``removed_ids.txt`` into ``out_dir`` (each atomically).

    Existing files are replaced only with ``overwrite=True`` (else DataError, nothing written).
    """
    out = Path(out_dir)
    data_path, ids_path = out / PRUNED_FILE, out / REMOVED_FILE
    existing = [str(p) for p in (data_path, ids_path) if p.exists()]
    if existing and not overwrite:
        raise DataError(f"{', '.join(existing)} exists already: choose another folder or allow overwriting")
    data, ids = pruned_jsonl_bytes(exp, run_store), removed_ids_bytes(exp)
    atomic_write_bytes(data_path, data)
    atomic_write_bytes(ids_path, ids)
    return data_path, ids_path


# --------------------------------------------------------------------------- a run's out-of-fold scores
def fold_table_of(exp: Experiment, run_store: RunStore, ids: Sequence[str]) -> pd.DataFrame | None:
    """The fold models' in-sample signal of ``exp`` (:func:`cartomap.scores.detectors.fold_table`) for
    ``ids``: the mean confidence and AUM of every example over the fold runs that trained on it. None
    when no fold run has a data map (folds of experiments made before fold models recorded their
    training pass)."""
    frames = []
    f = 0
    while True:
        try:
            run = exp.run(fold_role(f), run_store)
        except (OSError, ValueError, KeyError, RunError):
            run = None
        if run is None:
            break
        try:
            if run.state == State.DONE and run.has_metrics():
                frames.append(run.metrics(columns=("id", "confidence", "aum")))
        except (OSError, ValueError, RunError):
            pass
        f += 1
    if not frames:
        return None
    return detectors.fold_table(frames, ids)


def oof_of_run(
    run: Run, exp_store: ExperimentStore, run_store: RunStore
) -> tuple[Experiment, np.ndarray] | None:
    """The newest finished pruning experiment whose training data is ``run``'s (Model 0 trained on the same
    examples: equal training fingerprints) and its out-of-fold logits [N, C] in ``run``'s example order;
    None when there is none (or its OOF frame does not cover every example of the run)."""
    try:
        fingerprint = run.info.get("train_fingerprint")
        ids = run.examples(columns=("id",))["id"].astype(str).tolist()
    except (OSError, ValueError, RunError):
        return None
    for exp in exp_store.list(KIND):
        try:
            if exp.state != State.DONE:
                continue
            model0 = exp.run(MODEL0, run_store)
            if model0 is None or model0.info.get("train_fingerprint") != fingerprint:
                continue
            oof = exp.result("oof")
        except (OSError, ValueError, KeyError, RunError):
            continue
        if oof is None:
            continue
        by_id = oof.assign(id=oof["id"].astype(str)).drop_duplicates("id").set_index("id")
        if not set(ids) <= set(by_id.index):
            continue
        return exp, logits_of(by_id.loc[ids].reset_index())
    return None


def pruning_of_run(run: Run, exp_store: ExperimentStore, run_store: RunStore) -> list[Experiment]:
    """The finished pruning experiments whose Model 0 trained on ``run``'s examples (equal training
    fingerprints), newest first: the ones whose suspects are examples of ``run``."""
    fingerprint = run.info.get("train_fingerprint")
    found = []
    for exp in exp_store.list(KIND):
        try:
            if exp.state != State.DONE or load_results(exp) is None:
                continue
            model0 = exp.run(MODEL0, run_store)
        except (OSError, ValueError, KeyError, RunError):
            continue
        if model0 is not None and model0.info.get("train_fingerprint") == fingerprint:
            found.append(exp)
    return found


def suspects_of(exp: Experiment, run: Run, run_store: RunStore) -> pd.DataFrame:
    """The OOF frame of pruning experiment ``exp`` (its ``suspect`` and ``confidence`` columns), checked
    to be about ``run``'s examples; RunError otherwise."""
    if exp.kind != KIND:
        raise RunError(f"experiment {exp.id} is a {exp.kind} experiment, not a pruning one")
    results = load_results(exp)
    if results is None:
        raise RunError(f"pruning experiment {exp.id} has no results yet (state: {exp.state})")
    model0 = exp.run(MODEL0, run_store)
    if model0 is None or model0.info.get("train_fingerprint") != run.info.get("train_fingerprint"):
        raise RunError(f"pruning experiment {exp.id} was not trained on the examples of run {run.id}")
    return results["oof"]
