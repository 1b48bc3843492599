"""Out-of-fold word probabilities of a token run: k fold models, folds split by sentence.

The experiment kind ``token_folds`` (:mod:`cartomap.experiments.registry`): the base config's training set
(a token data set: sentences of tagged words) is cut into k folds of whole sentences (shuffled, seeded);
``fold_0`` .. ``fold_{k-1}`` each train on the other k - 1 folds (training pass recorded: the fold models'
in-sample table, :func:`cartomap.experiments.pruning.fold_table_of`) and score their held-out fold as
their only test set, word by word. Every word is scored once, by the one model that never saw its
sentence: the out-of-fold (OOF) logits of ``results/oof`` (``id`` = the word's unit id ``<sentence
id>#<k>``, ``gold``, ``fold``, ``logit_0`` ..), in the training set's word order.

What cleanlab's token classification is built on (:mod:`cartomap.scores.token_quality`; the detectors
``cleanlab_token_issue``, ``cleanlab_sentence_quality``, ``cleanlab_sentence_softmin`` of
:mod:`cartomap.scores.detectors`); a run finds them by its training fingerprint (:func:`oof_of_run`).
Unlike the pruning experiment there is no Model 1: what to do with a suspect word (relabel it, drop its
sentence) is a review's decision (``cartomap review-queue create --detector cleanlab_token_issue``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import DERIVED_FOLDER, DataConfig, ExecutorConfig, RunConfig, check_seed
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError, RunError
from cartomap.experiments.launch import start_experiment
from cartomap.experiments.pruning_analysis import logits_of, scores_frame
from cartomap.experiments.store import Experiment, ExperimentStore, Section, check_run_count
from cartomap.io import atomic_write_parquet
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.scores import swaps as swap_tables
from cartomap.scores.token_quality import sentence_keys

KIND = "token_folds"
HELD_OUT = "test_0"  # each fold run's held-out fold is its only test set


def fold_role(f: int) -> str:
    return f"fold_{f}"


@dataclass(frozen=True)
class TokenFoldsParams:
    """What a token k-fold experiment computes (its id is their hash)."""

    base: RunConfig = field(default_factory=RunConfig)  # model, training; data = the token training set
    folds: int = 5
    fold_seed: int = 0
    cache: str = ""  # where the folds' data sets go (<cache>/datasets/); "" = the store's root

    def __post_init__(self) -> None:
        if isinstance(self.folds, bool) or int(self.folds) != self.folds or self.folds < 2:
            raise DataError(f"expected an integer >= 2, got {self.folds!r}", field="folds")
        object.__setattr__(self, "folds", int(self.folds))
        check_seed("fold_seed", self.fold_seed)
        check_run_count(self.folds, f"{self.folds:,} folds", "folds")

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(),
            "folds": self.folds,
            "fold_seed": int(self.fold_seed),
            "cache": str(self.cache),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TokenFoldsParams:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        kwargs["base"] = RunConfig.from_dict(d["base"])
        return cls(**kwargs)


def sentence_folds(n_sentences: int, k: int, seed: int = 0) -> np.ndarray:
    """fold[i] in [0, k) of every sentence: scikit-learn's KFold over the sentences, shuffled by ``seed``
    (every word of a sentence in its sentence's fold). DataError with fewer sentences than folds."""
    from sklearn.model_selection import KFold

    if n_sentences < k:
        raise DataError(f"{k} folds need at least {k} sentences, got {n_sentences}", field="folds")
    out = np.empty(n_sentences, dtype=np.int64)
    for f, (_, held) in enumerate(KFold(k, shuffle=True, random_state=seed).split(np.arange(n_sentences))):
        out[held] = f
    return out


def save_sentences(dataset: TextDataset, cache: str | Path, name: str = "") -> DataConfig:
    """A token data set saved as Parquet under ``<cache>/datasets/<fingerprint[:16]>.parquet`` (once), tags
    by name, and its DataConfig (the token kind's texts and tags)."""
    kind = dataset.task_kind
    path = Path(cache) / DERIVED_FOLDER / f"{dataset.fingerprint()[:16]}.parquet"
    if not path.exists():
        frame = dataset.frame.copy()
        frame[kind.label_field] = [kind.gold_names(v, dataset.label_names) for v in frame[kind.label_field]]
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(path, frame, texts=True)
    return DataConfig(
        path=str(path),
        format="parquet",
        text_columns=dataset.text_columns,
        label_column=kind.label_field,
        id_column="id",
        label_names=tuple(dataset.label_names),
        genre_column=None,
        name=name,
        task=kind.name,
    )


def fold_config(params: TokenFoldsParams, train: DataConfig, held: DataConfig, f: int) -> RunConfig:
    """Train on ``train`` (its training pass recorded), score ``held`` after every epoch; no dev, no
    checkpoints."""
    cfg = dataclasses.replace(params.base.train, record="train", save_checkpoints=False)
    return params.base.replace(data=train, dev=None, tests=(held,), train=cfg, name=f"token folds: fold {f}")


def load_training_set(params: TokenFoldsParams) -> TextDataset:
    """The training set; DataError unless its examples are sentences of words."""
    train = load_dataset(params.base.data)
    if not train.task_kind.unit.sentences:
        raise DataError(
            f"{train.source}: out-of-fold word probabilities need a token data set (sentences of tagged "
            f"words), this is a {train.task_kind.name} one: use `cartomap prune` for it",
            field="data",
        )
    sentence_folds(len(train), params.folds, params.fold_seed)
    return train


def fold_configs(params: TokenFoldsParams, train: TextDataset, cache: str | Path) -> list[RunConfig]:
    """The k fold runs' configs (each side of each fold saved as a derived data set)."""
    folds = sentence_folds(len(train), params.folds, params.fold_seed)
    out = []
    for f in range(params.folds):
        kept = save_sentences(train.subset(folds != f), cache, name=f"fold {f} train")
        held = save_sentences(train.subset(folds == f), cache, name=f"fold {f}")
        out.append(fold_config(params, kept, held, f))
    return out


def held_out_words(fold_runs: list[Run], unit_ids: list[str]) -> pd.DataFrame:
    """OOF frame (id, gold, fold, logit_0 ..) of every word in ``unit_ids`` order, from each fold run's
    held-out set at its last epoch. RunError unless every word was scored exactly once."""
    parts = []
    for f, run in enumerate(fold_runs):
        ids, gold = run.unit_labels(HELD_OUT)
        logits = run.read_epoch(HELD_OUT, len(run.history()) - 1, ids)
        parts.append(scores_frame(ids, gold, logits, fold=f))
    oof = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["id"])
    if oof["id"].duplicated().any():
        raise RunError(f"word {oof['id'][oof['id'].duplicated()].iloc[0]!r} was scored by more than one fold")
    oof = oof.set_index("id")
    missing = [i for i in unit_ids if i not in oof.index]
    if missing or len(oof) != len(unit_ids):
        raise RunError(f"{len(missing)} words have no held-out score (e.g. {missing[:1]})")
    return oof.loc[list(unit_ids)].reset_index()


def _cache(params: TokenFoldsParams, store: RunStore) -> str:
    return params.cache or str(store.root)


class TokenFoldsKind:
    """k fold models of whole sentences; results: the out-of-fold word logits and their swaps table."""

    name = KIND

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = TokenFoldsParams.from_dict(exp.params)
        train = load_training_set(params)
        return [(fold_role(f), c) for f, c in enumerate(fold_configs(params, train, _cache(params, store)))]

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        params = TokenFoldsParams.from_dict(exp.params)
        train = load_training_set(params)
        runs = [exp.run(fold_role(f), store) for f in range(params.folds)]
        if any(r is None or r.state != State.DONE for r in runs):
            raise RunError(f"experiment {exp.id}: not every fold run is done")
        unit_ids, gold, _ = train.task_kind.units(train.frame, train.label_names)
        oof = held_out_words(runs, unit_ids)
        pred = logits_of(oof).argmax(axis=1)
        exp.write_result("oof", oof)
        exp.write_result("swaps", oof_swaps(oof, train))
        summary = {
            "experiment": exp.id,
            "train_fingerprint": train.fingerprint(),
            "n_sentences": len(train),
            "n_words": len(unit_ids),
            "folds": params.folds,
            "oof_word_accuracy": float(np.mean(pred == np.asarray(gold))),
            "n_disagree": int(np.sum(pred != np.asarray(gold))),
            "fold_accuracy": [r.history()[-1].get("test_0_accuracy") for r in runs],
            "run_ids": exp.run_ids(),
        }
        exp.write_result("summary", summary)

    def role_label(self, role: str) -> str:
        return f"Model F{role.split('_', 1)[1]}" if role.startswith("fold_") else role

    def role_order(self, exp: Experiment, role: str) -> tuple:
        return (0, int(role[5:])) if role.startswith("fold_") and role[5:].isdigit() else (1, 0)

    def report(self, exp: Experiment, store: RunStore) -> str:
        return report_text(exp.result("summary"), exp.result("swaps"))

    def sections(self, exp: Experiment) -> list[Section]:
        s = exp.result("summary")
        if s is None:
            return []
        rows = [{"fold": f, "held-out word accuracy": a} for f, a in enumerate(s["fold_accuracy"])]
        title = f"{s['folds']} folds of {s['n_sentences']:,} sentences: out-of-fold word accuracy"
        return [Section(title, pd.DataFrame(rows), best_columns=("held-out word accuracy",))]


def oof_swaps(oof: pd.DataFrame, train: TextDataset) -> pd.DataFrame:
    """The recurring gold -> out-of-fold predicted tag swaps of the training set (:mod:`cartomap.scores.swaps`)."""
    texts = swap_tables.word_texts(
        train.frame["id"].astype(str), train.frame[train.text_columns[0]], oof["id"]
    )
    keys = sentence_keys(oof["id"])
    pred = logits_of(oof).argmax(axis=1)
    return swap_tables.swap_table(texts, oof["gold"].to_numpy(), pred, keys, train.label_names)


def report_text(summary: dict | None, swaps: pd.DataFrame | None) -> str:
    """The results as markdown: the out-of-fold accuracy and the most frequent swaps."""
    if summary is None:
        return "no results yet"
    lines = [
        f"# Out-of-fold word probabilities ({summary['folds']} folds by sentence)",
        "",
        f"{summary['n_words']:,} words of {summary['n_sentences']:,} sentences; out-of-fold word accuracy "
        f"{summary['oof_word_accuracy']:.3f}; {summary['n_disagree']:,} words whose out-of-fold prediction is "
        "not their gold tag.",
        "",
        "Detectors: cleanlab_token_issue, cleanlab_sentence_quality, cleanlab_sentence_softmin (and the "
        "other out-of-fold ones), e.g. `cartomap review-queue create RUN NAME --detector cleanlab_token_issue`.",
    ]
    if swaps is not None and len(swaps):
        lines += [
            "",
            "## Recurring swaps (gold → out-of-fold prediction)",
            "",
            swap_tables.to_markdown(swaps),
        ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- starting, finding
def create_token_folds(params: TokenFoldsParams, store: ExperimentStore, name: str = "") -> Experiment:
    """Check the data, then the experiment for ``params`` (existing or new, not started)."""
    if not params.cache:
        params = dataclasses.replace(params, cache=str(Path(store.root).resolve()))
    load_training_set(params)
    return store.create(KIND, params.to_dict(), name=name)


def start_token_folds(
    params: TokenFoldsParams,
    store: ExperimentStore,
    name: str = "",
    executor: ExecutorConfig | None = None,
    by: str | None = None,
) -> Experiment:
    """:func:`create_token_folds`, then run it as a background job (unless done or already running)."""
    exp = create_token_folds(params, store, name)
    return start_experiment(exp, store, executor, **({"by": by} if by else {}))


def folds_of_run(run: Run, exp_store: ExperimentStore) -> list[Experiment]:
    """The finished token k-fold experiments on ``run``'s training set (equal fingerprints), newest first."""
    fingerprint = run.info.get("train_fingerprint")
    found = []
    for exp in exp_store.list(KIND):
        try:
            summary = exp.result("summary") if exp.state == State.DONE else None
        except (OSError, ValueError, KeyError):
            continue
        if summary is not None and summary.get("train_fingerprint") == fingerprint:
            found.append(exp)
    return found


def _data_path(exp: Experiment) -> str | None:
    """The path of the training data an experiment's parameters name (``base.data.path``); None when they
    name none (parameters of an older or damaged experiment)."""
    try:
        return str(exp.params["base"]["data"]["path"])
    except (KeyError, TypeError, OSError, ValueError):
        return None


def experiments_of_run(run: Run, exp_store: ExperimentStore) -> list[Experiment]:
    """The token k-fold experiments on ``run``'s training set, in the store's order (newest first): the
    finished ones found by its training fingerprint (:func:`folds_of_run`), the others (queued, running,
    failed, cancelled) by the path of the run's own copy of its data, which the Prune labels page starts
    them on."""
    done = {e.id for e in folds_of_run(run, exp_store)}
    path = str(run.data_config().path)
    return [exp for exp in exp_store.list(KIND) if exp.id in done or _data_path(exp) == path]


def oof_of_run(run: Run, exp_store: ExperimentStore) -> tuple[Experiment, np.ndarray] | None:
    """The newest finished token k-fold experiment on ``run``'s training set and its out-of-fold word
    logits [M, C] in the order of ``run``'s words; None when there is none (or it misses a word)."""
    try:
        ids = run.unit_labels("train", labels=False)[0]
    except (OSError, ValueError, RunError):
        return None
    for exp in folds_of_run(run, exp_store):
        oof = exp.result("oof")
        if oof is None:
            continue
        by_id = oof.assign(id=oof["id"].astype(str)).drop_duplicates("id").set_index("id")
        if set(ids) <= set(by_id.index):
            return exp, logits_of(by_id.loc[ids].reset_index())
    return None


#: Where the predictions of a swap table come from: the k folds' when there are any, only theirs, the run's.
SWAP_SOURCES = ("auto", "oof", "last")


def swaps_of_run(
    run: Run, exp_store: ExperimentStore, source: str = "auto", min_count: int = 1
) -> tuple[pd.DataFrame, str, Experiment | None]:
    """(the recurring swap table of ``run``'s words, what predicted them, the k-fold experiment whose
    out-of-fold predictions they are or None): ``source`` "auto" takes the newest finished k folds that
    cover every word (:func:`oof_of_run`) and else the run's last recording, "oof" only the folds
    (RunError with the command that makes them), "last" only the last recording."""
    from cartomap.analysis.swaps import run_swaps

    if source not in SWAP_SOURCES:
        raise RunError(f"swap predictions {source!r}: expected one of {', '.join(SWAP_SOURCES)}")
    found = oof_of_run(run, exp_store) if source != "last" else None
    if source == "oof" and found is None:
        raise RunError(
            f"run {run.id} has no out-of-fold word probabilities: make them with `{command_for(run)}`"
        )
    table, what = run_swaps(run, found[1] if found else None, min_count=min_count)
    return table, what, found[0] if found else None


def suspects_table(
    run: Run, oof_logits, top: int = 50, detector: str = "cleanlab_token_issue"
) -> pd.DataFrame:
    """The ``top`` words of ``run`` that ``detector`` (a detector of out-of-fold word probabilities grouped
    by sentence) finds most suspect: id, word, gold, out-of-fold prediction and p(gold), score (higher =
    more suspect), most suspect first."""
    from cartomap.analysis.swaps import word_texts
    from cartomap.scores import detectors
    from cartomap.scores.metrics import softmax

    ids, gold = run.unit_labels("train")
    z = np.asarray(oof_logits, dtype=np.float64)
    inputs = detectors.DetectorInputs(labels=gold, oof_logits=z, sentences=sentence_keys(ids))
    scores = detectors.score(detector, inputs)
    order = np.argsort(-scores, kind="stable")[:top]
    names = list(run.label_names)
    p = softmax(z[order], axis=1)
    return pd.DataFrame(
        {
            "id": [ids[i] for i in order],
            "word": word_texts(run, [ids[i] for i in order]),
            "gold": [names[gold[i]] for i in order],
            "predicted": [names[int(k)] for k in z[order].argmax(axis=1)],
            "p_gold": p[np.arange(len(order)), gold[order]],
            "score": scores[order],
        }
    )


def command_for(run: Run, folds: int = 5) -> str:
    """The command that makes a run's out-of-fold word probabilities."""
    return f"cartomap prune --data run:{run.id} --folds {folds}"
