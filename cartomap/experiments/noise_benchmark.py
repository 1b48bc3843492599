"""Label-noise benchmark: which suspect score finds planted label flips best?

Take a clean labelled sample, flip an exact fraction of its labels (:func:`cartomap.scores.noise.flip_labels`,
symmetric or asymmetric), then score every example with each method and measure how well the
score ranks the flipped examples first:

* ``kfold_margin``: out-of-fold margin max_{k != y} z_k - z_y of k-fold models (METHODS.md section 3)
* ``datamap_confidence``: 1 - data-map confidence of Model 0 (trained on the whole noisy set)
* ``aum``: -AUM of Model 0's training dynamics
* ``cleanlab_quality``: 1 - cleanlab label-quality score of the out-of-fold probabilities
* ``fold_aum``: -AUM of the k fold models' own training passes, averaged over the k - 1 that trained
  on the example (in sample; no extra training)
* ``rank_oof_folds``: the rank mean of ``kfold_margin`` and ``fold_aum`` (the same k trainings as
  ``cleanlab_quality``)
* ``rank_oof_model0``: the rank mean of ``kfold_margin`` and ``aum`` (k + 1 trainings)
* ``cleanlab_issues``: cleanlab ``find_label_issues`` (a set, not a ranking)
* ``consensus``: the cleaning paper's rule on the out-of-fold logits: every mismatch category,
  model confidence > threshold (a set)

Rankings are scored with precision@k, recall@k (k = number of flips) and average precision; sets
with their precision, recall and size. Every model goes through :func:`cartomap.training.loop.train_or_load`
and the run store, so a rerun reloads finished runs and a killed benchmark resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from cartomap.config import DataConfig, ModelConfig, Record, RunConfig, TrainConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.derived import save_dataset
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.experiments.store import check_run_count
from cartomap.io import atomic_write_json, atomic_write_parquet
from cartomap.runs.state import State
from cartomap.runs.store import RunStore
from cartomap.scores import consensus, detectors, noise
from cartomap.scores.metrics import softmax
from cartomap.tasks import registry as task_kinds
from cartomap.tasks import support
from cartomap.training.loop import train_or_load
from cartomap.training.prepare import prepare_run

DEFAULT_DATA = "demo:train"  # the bundled demo (balanced, 3,198 pairs); --data for other sets

# Method names, in table order. The first four are rankings, the last two sets.
KFOLD_MARGIN = "kfold_margin"
DATAMAP_CONFIDENCE = "datamap_confidence"
AUM = "aum"
CLEANLAB_QUALITY = "cleanlab_quality"
FOLD_AUM = "fold_aum"
RANK_OOF_FOLDS = "rank_oof_folds"
RANK_OOF_MODEL0 = "rank_oof_model0"
CLEANLAB_ISSUES = "cleanlab_issues"
CONSENSUS = "consensus"
RANKING_METHODS = (
    KFOLD_MARGIN,
    DATAMAP_CONFIDENCE,
    AUM,
    CLEANLAB_QUALITY,
    FOLD_AUM,
    RANK_OOF_FOLDS,
    RANK_OOF_MODEL0,
)
#: The registered detector (:mod:`cartomap.scores.detectors`) behind each ranking method.
DETECTOR_OF = {
    KFOLD_MARGIN: "oof_margin",
    DATAMAP_CONFIDENCE: "datamap_confidence",
    AUM: "aum",
    CLEANLAB_QUALITY: "cleanlab_self_confidence",
    FOLD_AUM: "fold_aum",
    RANK_OOF_FOLDS: "rank_oof_folds",
    RANK_OOF_MODEL0: "rank_oof_dynamics",
}
SET_METHODS = (CLEANLAB_ISSUES, CONSENSUS)
METHODS = RANKING_METHODS + SET_METHODS

TABLE_COLUMNS = (
    "setting",
    "rate",
    "method",
    "n",
    "k",
    "precision_at_k",
    "recall_at_k",
    "average_precision",
    "n_selected",
    "precision",
    "recall",
)


@dataclass(frozen=True)
class NoiseBenchmarkConfig:
    """What to corrupt, how, and how the detectors are trained."""

    data: str = DEFAULT_DATA  # clean labelled dataset (any cartomap DataConfig path; demo:dev for tests)
    n: int = 2000  # class-balanced sample size (n // C per class, the remainder to the first classes)
    seed: int = 0  # seed of the sample, of the flips and of the fold assignment
    rates: tuple[float, ...] = (0.1,)  # fractions of labels flipped (exactly round(rate * n))
    settings: tuple[str, ...] = (noise.SYMMETRIC, noise.ASYMMETRIC)  # flip modes (cartomap.scores.noise)
    pairs: tuple[tuple[int, int], ...] = (
        noise.DEFAULT_PAIRS
    )  # asymmetric (from, to): NLI neutral <-> entailment
    folds: int = 5  # k of the k-fold out-of-fold logits; the paper uses 10, 5 halves the CPU cost
    epochs: int = 2  # epochs of Model 0 and of every fold model (the paper: 3 with ELECTRA-small)
    model: str = "default"  # encoder (ModelConfig name_or_path): all-MiniLM-L6-v2
    max_length: int = 64  # tokens per pair: SNLI pairs are short (see the truncation rate it reports)
    batch_size: int = 32
    learning_rate: float = 1e-4  # the project's MiniLM default (TrainConfig)
    threshold: float = consensus.DEFAULT_THRESHOLD  # consensus rule: model confidence above this (2.0)
    task: str = ""  # the data's task kind ("": the one its file's suffix or columns imply, a pair by default)

    def key(self) -> dict:
        """The config as plain JSON types (tuples become lists); ``task`` left out when "" (results saved
        before the field keep their key)."""
        key = json.loads(json.dumps(dataclasses.asdict(self)))
        if not self.task:
            key.pop("task")
        return key

    def data_config(self) -> DataConfig:
        """The data as a DataConfig: in the named kind's own columns when ``task`` is given, checked to
        be a kind the benchmark serves (one label per example: :data:`cartomap.tasks.support.NOISE_BENCHMARK`)
        before anything is read."""
        if not self.task:
            config = DataConfig(path=self.data)
        else:
            kind = task_kinds.kind(self.task)
            config = DataConfig(
                path=self.data, task=self.task, text_columns=kind.text_fields, label_column=kind.label_field
            )
        support.NOISE_BENCHMARK.require(config.task_kind, self.data)
        return config


Echo = Callable[[str], None]


# --------------------------------------------------------------------------- data


def class_balanced_sample(dataset: TextDataset, n: int, seed: int = 0) -> TextDataset:
    """Exactly ``n`` rows: n // C of every class (the first n % C classes get one more), order kept.

    Drawn without replacement by ``np.random.default_rng(seed)``; DataError when a class is too small.
    """
    classes = np.arange(dataset.num_labels)
    if n < len(classes):
        raise DataError(f"n must be at least the number of classes ({len(classes)}), got {n}", field="n")
    want = [n // len(classes) + (c < n % len(classes)) for c in classes]
    labels = dataset.labels
    rng = np.random.default_rng(seed)
    picked = []
    for c, m in zip(classes, want, strict=True):
        members = np.flatnonzero(labels == c)
        if members.size < m:
            raise DataError(
                f"a class-balanced sample of {n} needs {m} examples of {dataset.label_names[c]!r}, "
                f"{dataset.source} has {members.size}",
                field="n",
            )
        picked.append(rng.choice(members, size=m, replace=False))
    return dataset.subset(np.sort(np.concatenate(picked)))


def with_labels(dataset: TextDataset, labels: np.ndarray, source: str) -> TextDataset:
    """``dataset`` with its labels replaced (same ids and texts)."""
    frame = dataset.frame.copy()
    frame["label"] = np.asarray(labels, dtype=np.int64)
    return TextDataset(frame=frame, label_names=dataset.label_names, source=source)


def truncation_rate(dataset: TextDataset, model: str, max_length: int) -> float:
    """Fraction of examples whose full tokenization (pair with special tokens) exceeds ``max_length``."""
    from cartomap.training.batching import texts_of
    from cartomap.training.models import load_tokenizer

    tokenizer = load_tokenizer(model)
    first, second = texts_of(dataset.frame, dataset.task_kind, tokenizer=tokenizer)
    lengths = [len(ids) for ids in tokenizer(first, second, truncation=False)["input_ids"]]
    return float(np.mean(np.asarray(lengths) > max_length)) if lengths else 0.0


# --------------------------------------------------------------------------- scoring (pure)


def _set_row(selected: np.ndarray, flipped: np.ndarray) -> dict:
    """precision = |S ∩ F| / |S| (NaN for an empty set), recall = |S ∩ F| / |F|, n_selected = |S|."""
    hits = int(np.sum(selected & flipped))
    n_sel, n_flip = int(selected.sum()), int(flipped.sum())
    return {
        "n_selected": n_sel,
        "precision": hits / n_sel if n_sel else float("nan"),
        "recall": hits / n_flip if n_flip else float("nan"),
    }


def score_methods(
    noisy_labels,
    flipped,
    oof_logits,
    confidence,
    aum_values,
    threshold: float = consensus.DEFAULT_THRESHOLD,
    folds: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per method (:data:`METHODS`) for one noisy dataset.

    ``oof_logits`` [N, C] are out-of-fold raw logits; ``confidence`` and ``aum_values`` [N] come from
    Model 0's training dynamics; ``folds`` is the fold models' in-sample table
    (:func:`cartomap.scores.detectors.fold_table`; without it the methods that need it are left out).
    Every input is aligned with ``noisy_labels``. Rankings get
    ``precision_at_k``, ``recall_at_k``, ``average_precision`` (:func:`cartomap.scores.noise.ranking_report`,
    k = number flipped); sets get ``n_selected``, ``precision``, ``recall``. Higher = better detector.
    """
    y = np.asarray(noisy_labels, dtype=np.int64)
    f = np.asarray(flipped, dtype=bool)
    z = np.asarray(oof_logits, dtype=np.float64)
    if f.shape != y.shape or z.shape[:1] != y.shape:
        raise DataError(
            f"noisy_labels {y.shape}, flipped {f.shape} and oof_logits {z.shape} must have one row per example",
            field="flipped",
        )
    probs = softmax(z, axis=1)
    inputs = detectors.DetectorInputs(
        labels=y, metrics={"confidence": confidence, "aum": aum_values}, oof_logits=z, folds=folds
    )
    rankings = {
        method: detectors.score(name, inputs)
        for method, name in DETECTOR_OF.items()
        if detectors.get(name).is_available(inputs)
    }
    sets = {
        CLEANLAB_ISSUES: noise.cleanlab_issues(probs, y),
        CONSENSUS: consensus.select_suspects(z, y, categories=None, threshold=threshold),
    }
    rows = []
    for method, scores in rankings.items():
        report = noise.ranking_report(scores, f)
        keep = ("n", "k", "precision_at_k", "recall_at_k", "average_precision")
        rows.append({"method": method, **{key: report[key] for key in keep}})
    for method, selected in sets.items():
        rows.append({"method": method, "n": int(y.size), "k": int(f.sum()), **_set_row(selected, f)})
    return pd.DataFrame(rows).reindex(columns=[c for c in TABLE_COLUMNS if c not in ("setting", "rate")])


# --------------------------------------------------------------------------- training


def run_config(cfg: NoiseBenchmarkConfig, data: DataConfig, record: str, tests=()) -> RunConfig:
    """A benchmark run: no dev set, no checkpoints, the config's encoder and hyperparameters."""
    return RunConfig(
        data=data,
        dev=None,
        model=ModelConfig(cfg.model, max_length=cfg.max_length),
        train=TrainConfig(
            epochs=cfg.epochs,
            batch_size=cfg.batch_size,
            learning_rate=cfg.learning_rate,
            record=record,
            save_checkpoints=False,
        ),
        tests=tuple(tests),
    )


def _train(config: RunConfig, store: RunStore, what: str, echo: Echo):
    t0 = time.time()
    ready = prepare_run(config, store).state == State.DONE
    run = train_or_load(config, store)
    echo(f"  {what}: run {run.id} {'reloaded' if ready else f'trained in {time.time() - t0:.0f} s'}")
    return run


def model0_metrics(
    noisy: TextDataset, cfg: NoiseBenchmarkConfig, cache: Path, store: RunStore, echo: Echo
) -> pd.DataFrame:
    """Model 0 on the whole noisy set (training pass recorded): its metrics table, rows in dataset order."""
    data = save_dataset(noisy, cache, name=f"{noisy.source} (all)")
    run = _train(run_config(cfg, data, record=Record.TRAIN), store, "Model 0", echo)
    return run.metrics().set_index("id").loc[[str(i) for i in noisy.ids]].reset_index()


def out_of_fold_logits(
    noisy: TextDataset, folds: np.ndarray, cfg: NoiseBenchmarkConfig, cache: Path, store: RunStore, echo: Echo
) -> tuple[np.ndarray, pd.DataFrame]:
    """Logits [N, C] of every example by the model trained on the other folds, at its last epoch, and the
    fold models' in-sample table (their recorded training passes, :func:`detectors.fold_table`)."""
    out = np.full((len(noisy), noisy.num_labels), np.nan, dtype=np.float64)
    frames = []
    position = {str(i): p for p, i in enumerate(noisy.ids)}
    for f in range(int(folds.max()) + 1):
        train = save_dataset(noisy.subset(folds != f), cache, name=f"{noisy.source} fold {f} train")
        held = save_dataset(noisy.subset(folds == f), cache, name=f"{noisy.source} fold {f} held out")
        run = _train(
            run_config(cfg, train, record=Record.TRAIN, tests=[held]),
            store,
            f"fold {f + 1}/{folds.max() + 1}",
            echo,
        )
        frames.append(run.metrics(columns=("id", *detectors.FOLD_INPUTS)))
        frame, logits = run.test_logits(0, epoch=len(run.history()) - 1)
        rows = [position[str(i)] for i in frame["id"]]
        out[rows] = logits
    if np.isnan(out).any():
        raise RuntimeError("out-of-fold logits are missing for some examples")  # folds must cover every row
    return out, detectors.fold_table(frames, [str(i) for i in noisy.ids])


# --------------------------------------------------------------------------- the benchmark


def config_hash(cfg: NoiseBenchmarkConfig, fingerprint: str) -> str:
    """sha256 of the config and of the clean sample's fingerprint, first 12 hex digits."""
    payload = json.dumps({"config": cfg.key(), "data": fingerprint}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


class SettingModels(NamedTuple):
    """What one noisy set's models give, every array aligned with ``noisy_labels``."""

    noisy_labels: np.ndarray  # [N] the labels after flipping
    flipped: np.ndarray  # [N] bool, the planted flips
    metrics: pd.DataFrame  # Model 0's metrics table (confidence, aum, el2n, forgetfulness, ...)
    oof: np.ndarray  # [N, C] out-of-fold raw logits
    folds: pd.DataFrame  # the fold models' in-sample table (detectors.fold_table)

    def inputs(self) -> detectors.DetectorInputs:
        """The detectors' inputs (:mod:`cartomap.scores.detectors`) of this noisy set."""
        return detectors.DetectorInputs(
            labels=self.noisy_labels, metrics=self.metrics, oof_logits=self.oof, folds=self.folds
        )


def setting_models(
    clean: TextDataset,
    setting: str,
    rate: float,
    cfg: NoiseBenchmarkConfig,
    cache: Path,
    store: RunStore,
    echo: Echo,
) -> SettingModels:
    """Flip ``rate`` of the labels of ``clean`` in mode ``setting`` and train (or reload) Model 0 and the
    fold models on the noisy set (``bench/fit_detector.py`` fits :func:`detectors.rank_logistic` on these)."""
    noisy_labels, flipped = noise.flip_labels(
        clean.labels, rate, clean.num_labels, mode=setting, pairs=cfg.pairs, seed=cfg.seed
    )
    name = f"noise {setting} {rate:g} seed {cfg.seed}"
    noisy = with_labels(clean, noisy_labels, name)
    echo(f"{name}: {int(flipped.sum())} of {len(noisy)} labels flipped")
    metrics = model0_metrics(noisy, cfg, cache, store, echo)
    folds = consensus.stratified_folds(noisy_labels, k=cfg.folds, seed=cfg.seed)
    oof, fold_in_sample = out_of_fold_logits(noisy, folds, cfg, cache, store, echo)
    return SettingModels(noisy_labels, flipped, metrics, oof, fold_in_sample)


def score_setting(
    models: SettingModels, clean_labels, setting: str, rate: float, threshold: float
) -> tuple[pd.DataFrame, dict]:
    """Every method scored on one noisy set's models (:func:`setting_models`): (rows of the table,
    diagnostics, with the out-of-fold accuracy against ``clean_labels``)."""
    noisy_labels, flipped, oof = models.noisy_labels, models.flipped, models.oof
    conf = models.metrics["confidence"].to_numpy(np.float64)
    aum_values = models.metrics["aum"].to_numpy(np.float64)
    rows = score_methods(
        noisy_labels, flipped, oof, conf, aum_values, threshold=threshold, folds=models.folds
    )
    rows.insert(0, "rate", float(rate))
    rows.insert(0, "setting", setting)
    pred = oof.argmax(1)
    diag = {
        "setting": setting,
        "rate": float(rate),
        "n_flipped": int(flipped.sum()),
        "oof_accuracy_clean": float(np.mean(pred == np.asarray(clean_labels))),
        "oof_accuracy_noisy": float(np.mean(pred == noisy_labels)),
        "model0_mean_confidence": float(np.mean(conf)),
    }
    return rows, diag


def run_noise_benchmark(cfg: NoiseBenchmarkConfig, cache: str | Path, echo: Echo = print) -> pd.DataFrame:
    """Run (or reload) every model of the benchmark and return the table (:data:`TABLE_COLUMNS`).

    One row per setting x rate x method. Saves it to ``<cache>/noise_benchmark/<hash>.parquet``
    with a ``.json`` of diagnostics beside it (truncation rate, accuracies; also in ``table.attrs``).
    """
    cache = Path(cache)
    store = RunStore(cache)
    check_run_count(
        len(cfg.settings) * len(cfg.rates) * (int(cfg.folds) + 1),
        f"{len(cfg.settings)} settings x {len(cfg.rates)} rates x ({int(cfg.folds):,} folds + Model 0)",
        "folds",
    )
    for setting in cfg.settings:
        if setting not in (noise.SYMMETRIC, noise.ASYMMETRIC):
            raise DataError(
                f"setting must be {noise.SYMMETRIC!r} or {noise.ASYMMETRIC!r}, got {setting!r}",
                field="settings",
            )
    clean = class_balanced_sample(load_dataset(cfg.data_config()), cfg.n, seed=cfg.seed)
    digest = config_hash(cfg, clean.fingerprint())
    trunc = truncation_rate(clean, cfg.model, cfg.max_length)
    echo(
        f"noise benchmark {digest}: {len(clean)} examples of {cfg.data} "
        f"({', '.join(f'{n} {int(c)}' for n, c in zip(clean.label_names, np.bincount(clean.labels), strict=True))}); "
        f"{trunc:.2%} of pairs longer than max_length {cfg.max_length}"
    )
    diagnostics = {
        "config": cfg.key(),
        "hash": digest,
        "n": len(clean),
        "truncation_rate": trunc,
        "settings": [],
    }
    parts = []
    start = time.time()
    for setting in cfg.settings:
        for rate in cfg.rates:
            models = setting_models(clean, setting, rate, cfg, cache, store, echo)
            rows, diag = score_setting(models, clean.labels, setting, rate, cfg.threshold)
            echo(
                f"  out-of-fold accuracy {diag['oof_accuracy_clean']:.3f} on the clean labels, "
                f"{diag['oof_accuracy_noisy']:.3f} on the noisy ones"
            )
            parts.append(rows)
            diagnostics["settings"].append(diag)
    diagnostics["seconds"] = round(time.time() - start, 1)
    table = pd.concat(parts, ignore_index=True).reindex(columns=list(TABLE_COLUMNS))
    folder = cache / "noise_benchmark"
    atomic_write_parquet(folder / f"{digest}.parquet", table)
    atomic_write_json(folder / f"{digest}.json", diagnostics)
    table.attrs["diagnostics"] = diagnostics
    table.attrs["path"] = str(folder / f"{digest}.parquet")
    return table


# --------------------------------------------------------------------------- report


def _cell(column: str, value) -> str:
    if isinstance(value, str):
        return value
    if pd.isna(value):
        return "–"  # not applicable to this method
    if column == "rate":
        return f"{value:g}"
    if column in ("n", "k", "n_selected"):
        return f"{int(value):,}"
    return f"{value:.3f}"


def to_markdown(table: pd.DataFrame, columns: Sequence[str] = TABLE_COLUMNS) -> str:
    """The table as a GitHub markdown table; NaN (not applicable) as an en dash."""
    header = "| " + " | ".join(columns) + " |"
    align = "|" + "|".join("---" if c in ("setting", "method") else "---:" for c in columns) + "|"
    lines = [header, align]
    for row in table[list(columns)].itertuples(index=False):
        lines.append("| " + " | ".join(_cell(c, v) for c, v in zip(columns, row, strict=True)) + " |")
    return "\n".join(lines)
