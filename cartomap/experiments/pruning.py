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

The analysis is the pure :func:`cartomap.experiments.pruning_analysis.analyse` (OOF and test logits in,
result frames out; with :func:`~cartomap.experiments.pruning_analysis.what_if`, the suspects table and the
report text); the kind's ``finalize`` only gathers the logits from the runs and writes what it returns.
Helpers for the page and the CLI here: :func:`start_pruning`, :func:`create_pruning`,
:func:`load_results`, :func:`export_pruned`; the mismatch categories by name are
:mod:`cartomap.scores.consensus`'s, the figures :mod:`cartomap.analysis.pruning_figures`. No Streamlit here.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import DEMO_DEV, DataConfig, ExecutorConfig, OrderConfig, Record, RunConfig, check_seed
from cartomap.data import derived
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError, RunError
from cartomap.experiments.launch import start_experiment
from cartomap.experiments.pruning_analysis import (
    MODEL0,
    MODEL1,
    analyse,
    held_out_scores,
    logits_of,
    report_text,
    test_scores,
    what_if,
)
from cartomap.experiments.store import Experiment, ExperimentStore, Section, check_run_count
from cartomap.io import atomic_write_bytes, file_stamp
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore, run_id_for
from cartomap.scores import detectors
from cartomap.scores.consensus import (
    DEFAULT_CATEGORIES,
    DEFAULT_THRESHOLD,
    normalize_category,
    resolve_categories,
    stratified_folds,
)
from cartomap.tasks import support

KIND = "pruning"
PRUNED_FILE, REMOVED_FILE = "pruned_train.jsonl", "removed_ids.txt"


def fold_role(f: int) -> str:
    return f"fold_{f}"


# --------------------------------------------------------------------------- parameters
def _default_base() -> RunConfig:
    return RunConfig(dev=None, tests=(DataConfig(path=DEMO_DEV),))


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
        check_seed("fold_seed", self.fold_seed)
        models = " + Models 0 and 1" if self.train_model1 else " + Model 0"
        check_run_count(self.folds + 1 + bool(self.train_model1), f"{self.folds:,} folds{models}", "folds")
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
    train = dataclasses.replace(params.base.train, record=Record.TRAIN)
    return params.base.replace(train=train, name="pruning: model 0")


def fold_config(params: PruningParams, fold_train: DataConfig, held_out: DataConfig, f: int) -> RunConfig:
    """Train on ``fold_train``, score ``held_out`` after every epoch; no dev set, no checkpoints.

    The training pass is recorded (its logits are computed anyway, so it costs no extra passes): every
    example is in the training part of k - 1 fold models, whose in-sample dynamics averaged over those
    models are a multi-model signal at the compute of the out-of-fold logits (``fold_in_sample``)."""
    train = dataclasses.replace(params.base.train, record=Record.TRAIN, save_checkpoints=False)
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


# --------------------------------------------------------------------------- starting and exporting
def require_kind(kind, location: str | None = None) -> None:
    """DataError when task ``kind`` has no examples with one label each (consensus pruning compares each
    example's one gold label with its out-of-fold prediction); the CLI asks it of the config's kind before
    anything else, :func:`check_data` of the loaded set."""
    support.PRUNING.require(kind, location)


def check_data(params: PruningParams) -> TextDataset:
    """Load the training and test sets and check the folds and categories fit them (DataError if not)."""
    train = load_training_set(params)
    if train.task_kind.unit.sentences:
        raise DataError(
            "pruning suspected label errors works on examples with one label each; on token data "
            "`cartomap prune --data DATA --folds K` without --test makes the out-of-fold word probabilities "
            "of k folds of its sentences (experiments.token_folds) for the cleanlab token detectors",
            location=train.source,
            field="task",
        )
    require_kind(train.task_kind, train.source)
    for t in params.base.tests:
        load_dataset(t, label_names=train.label_names)
    if params.base.dev is not None:
        load_dataset(params.base.dev, label_names=train.label_names)
    resolve_categories(params.categories, train.label_names)
    try:
        stratified_folds(train.labels, params.folds, params.fold_seed)
    except DataError as err:  # too many folds for the training set: the count of folds is what to change
        message = str(err).removeprefix(f"field {err.field!r}: ")
        raise DataError(f"{message} ({train.source})", field="folds") from None
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
                frames.append(run.metrics(columns=("id", *detectors.FOLD_INPUTS)))
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
