"""Pure logic behind the Experiments page (curricula and dataset combinations); no Streamlit here.

* :func:`parse_seeds`, :func:`parse_test_sets`, :func:`data_config`: form text -> values;
* :func:`build_curriculum_params`, :func:`build_combination_params`: form values -> validated
  experiment parameters (raise :class:`CartomapError` / :class:`DataError` with a message for the user);
* :func:`find_baseline`, :func:`plan_preview`: the stages an order would train on, from the data map
  of a finished baseline run on the same training set;
* :func:`build_executor_config`: the executor form (local, Ray, SLURM) -> a checked ExecutorConfig;
* :func:`experiment_progress`, :func:`runs_progress_table`, :func:`mean_std_table`,
  :func:`significance_sentences`, :func:`marked_matrix`: what the page shows of a running or
  finished experiment.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import (
    DEMO_DEV,
    DEMO_TRAIN,
    DataConfig,
    ExecutorConfig,
    ModelConfig,
    OrderConfig,
    RunConfig,
    TrainConfig,
)
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.executors.registry import check_available
from cartomap.experiments import registry
from cartomap.experiments.combination import CombinationParams, TrainingSet, training_set_names
from cartomap.experiments.curriculum import CurriculumParams, has_seeds_to_compare
from cartomap.experiments.store import MAX_RUNS, check_run_count
from cartomap.runs.progress import describe_progress
from cartomap.runs.state import State, derive_state
from cartomap.runs.store import Run, RunStore
from cartomap.tasks import registry as task_kinds
from cartomap.training.forms import check_device, check_model, check_training_numbers

#: One line per training order (config.ORDERS), for the method picker.
ORDER_DESCRIPTIONS: dict[str, str] = {
    "shuffled": "standard training: all examples, a new random order every epoch",
    "oversampled": "shuffled, minority classes repeated max_count // count times (RoNLI baseline)",
    "e2l": "only the easy-to-learn group of a baseline data map",
    "ambiguous": "only the ambiguous group",
    "h2l": "only the hard-to-learn group",
    "e2l+ambiguous": "easy-to-learn and ambiguous together",
    "length": "Length-CL: shorter texts first, then all data",
    "sts": "STS-CL: most similar pairs first (the two texts by a sentence encoder), then all data",
    "cart": "Cart-CL: easy, then ambiguous, then hard, then all data",
    "cart++": "Cart-CL++: sorted by the Cart-CL++ difficulty score, then all data",
    "cart-stra++": "Cart-Stra-CL++: the Cart-CL++ score, every stage stratified by class",
}
DEFAULT_METHODS = ("oversampled", "cart-stra++")  # the paper's headline pair
DEFAULT_SEEDS = "0-4"  # five runs per method, as in RoNLI
MODES = ("A", "A+B", "A◇B")  # WaNLI Table 3: A alone, augmentation, random replacement
MODE_DESCRIPTIONS = {
    "A": "A alone",
    "A+B": "A + B: B added to A (augmentation)",
    "A◇B": "A ◇ B: random examples of A replaced by B (same size as A)",
}
MAX_SEEDS = MAX_RUNS  # every seed makes at least one run: the cap of an experiment's runs is the most
ALPHA = 0.05  # significance level of the sentences in significance_sentences


# --------------------------------------------------------------------------- form text -> values
def parse_seeds(text: str) -> tuple[int, ...]:
    """'0-4' -> (0, 1, 2, 3, 4); '0, 2, 5-6' -> (0, 2, 5, 6). Repeats are dropped, order kept.

    Seeds are non-negative whole numbers; at most MAX_SEEDS of them.
    """
    seeds: list[int] = []
    for part in re.split(r"[,\s]+", (text or "").strip()):
        if not part:
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if match is None:
            raise DataError(
                f"{part!r} is not a seed (a whole number >= 0) or a range like 0-4", field="seeds"
            )
        low, high = int(match[1]), int(match[2] or match[1])
        if high < low:
            raise DataError(f"range {part!r} runs backwards; write it low-high", field="seeds")
        check_run_count(high - low + 1, f"range {part!r} ({high - low + 1:,} seeds)", "seeds")
        seeds.extend(s for s in range(low, high + 1) if s not in seeds)
    if not seeds:
        raise DataError("give at least one seed, e.g. 0-4", field="seeds")
    check_run_count(len(seeds), f"{len(seeds):,} seeds", "seeds")
    return tuple(seeds)


def parse_test_sets(text: str) -> list[tuple[str, str]]:
    """One test set per line: 'PATH' or 'NAME = PATH' -> [(name or '', path)]. Blank lines and
    lines starting with '#' are skipped. The name becomes the results table's column."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, path = line.partition("=")
        name, path = (name.strip(), path.strip()) if sep else ("", line)
        if not path:
            raise DataError(f"test set line {line!r} has a name but no path", field="test sets")
        out.append((name, path))
    return out


def data_config(
    path: str,
    *,
    text_columns: Sequence[str] = task_kinds.DEFAULT.text_fields,
    label_column: str = "label",
    id_column: str = "id",
    label_names: Sequence[str] | None = None,
    format: str = "auto",
    name: str = "",
) -> DataConfig:
    """The DataConfig of one dataset of the form: the bundled demo sets keep their own columns."""
    path = (path or "").strip()
    if not path:
        raise DataError("a dataset path is empty: enter one, or pick the bundled demo")
    names = tuple(label_names) if label_names else None
    if path in (DEMO_TRAIN, DEMO_DEV):
        return DataConfig(path=path, label_names=names, name=name)
    text = tuple(c for c in text_columns if c)
    if len(text) not in (1, 2) or len(set(text)) != len(text):
        raise DataError(f"choose one text column or two different ones, got {list(text)}", location=path)
    if not label_column or label_column in text:
        raise DataError(f"the label column {label_column!r} must be set and not a text column", location=path)
    return DataConfig(
        path=path,
        format=format or "auto",
        text_columns=text,
        label_column=label_column,
        id_column=id_column or "",
        label_names=names,
        name=name,
    )


def _base_config(
    *,
    train: DataConfig,
    dev: DataConfig | None,
    tests: Sequence[DataConfig],
    model: str,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    max_length: int,
    device: str,
) -> RunConfig:
    check_training_numbers(epochs, batch_size, max_length, learning_rate)
    return RunConfig(
        data=train,
        dev=dev,
        tests=tuple(tests),
        model=ModelConfig(name_or_path=check_model(model), max_length=int(max_length)),
        train=TrainConfig(
            epochs=int(epochs),
            batch_size=int(batch_size),
            learning_rate=float(learning_rate),
            device=check_device(device),
        ),
    )


def model_form_config(
    values: dict[str, Any],
    *,
    train: DataConfig,
    dev: DataConfig | None = None,
    tests: Sequence[DataConfig] = (),
) -> RunConfig:
    """The RunConfig of ``train`` (and ``dev``, ``tests``) with the model form's ``values`` (model,
    max_length, epochs, batch_size, learning_rate, seed, device), checked as every experiment form's
    (:func:`_base_config`); an experiment's runs keep no checkpoints."""
    base = _base_config(
        train=train,
        dev=dev,
        tests=tests,
        model=values["model"],
        epochs=values["epochs"],
        batch_size=values["batch_size"],
        learning_rate=values["learning_rate"],
        max_length=values["max_length"],
        device=values["device"],
    )
    return base.replace(
        train=dataclasses.replace(base.train, seed=int(values["seed"]), save_checkpoints=False)
    )


def build_curriculum_params(
    *,
    train: DataConfig,
    dev: DataConfig | None,
    tests: Sequence[DataConfig],
    methods: Sequence[str],
    seeds: Sequence[int],
    difficulty: str = "paper",
    compare: Sequence[str] | None = None,
    datamap_epochs: int | None = None,
    ambiguity: str = CurriculumParams.ambiguity,
    model: str = "default",
    epochs: int = TrainConfig.epochs,
    batch_size: int = TrainConfig.batch_size,
    learning_rate: float = TrainConfig.learning_rate,
    max_length: int = ModelConfig.max_length,
    device: str = "auto",
) -> CurriculumParams:
    """Validated :class:`CurriculumParams` from the form (raises CartomapError / DataError).

    ``compare``: the two methods of the Mann-Whitney test; ignored with a single method. ``ambiguity``: the
    ambiguity score the cartography orders use where the papers use variability (theirs by default).
    """
    if not tests:
        raise DataError("a curriculum experiment needs at least one test set: add one line under Test sets")
    if dev is None:
        raise DataError("a curriculum experiment needs a validation set: it picks the best epoch and seed")
    if not methods:
        raise DataError("choose at least one method")
    pair = None
    if len(methods) >= 2 and compare:
        pair = tuple(compare)
        if len(pair) != 2 or pair[0] == pair[1]:
            raise DataError(f"the Mann-Whitney test compares two different methods, got {list(pair)}")
    base = _base_config(
        train=train,
        dev=dev,
        tests=tests,
        model=model,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_length=max_length,
        device=device,
    )
    params = CurriculumParams(
        base=base,
        methods=tuple(methods),
        seeds=tuple(int(s) for s in seeds),
        difficulty=difficulty,
        compare=pair,
        datamap_epochs=datamap_epochs,
        ambiguity=ambiguity,
    )
    params.validate()
    return params


def build_combination_params(
    *,
    a: DataConfig,
    b: DataConfig | None,
    modes: Sequence[str],
    tests: Sequence[DataConfig],
    seeds: Sequence[int],
    cache: str,
    a_name: str = "A",
    b_name: str = "B",
    dev: DataConfig | None = None,
    model: str = "default",
    epochs: int = TrainConfig.epochs,
    batch_size: int = TrainConfig.batch_size,
    learning_rate: float = TrainConfig.learning_rate,
    max_length: int = ModelConfig.max_length,
    device: str = "auto",
) -> CombinationParams:
    """Validated :class:`CombinationParams` (one training set per mode) from the form."""
    a_name, b_name = (a_name or "").strip(), (b_name or "").strip()
    if not modes:
        raise DataError("choose at least one training set (A, A+B or A◇B)")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise DataError(f"unknown mode(s) {unknown}; expected some of {list(MODES)}")
    if not a_name or (b is not None and not b_name):
        raise DataError("give datasets A and B a name: they label the rows of the results table")
    if b is not None and a_name == b_name:
        raise DataError(f"datasets A and B have the same name {a_name!r}: give them different ones")
    if any(m != "A" for m in modes) and b is None:
        raise DataError("A+B and A◇B need a dataset B")
    if not tests:
        raise DataError("a combination experiment needs at least one test set: add one line under Test sets")
    names = training_set_names(a_name, b_name)
    sets = tuple(TrainingSet(names[m], a, b if m != "A" else None, m) for m in MODES if m in modes)
    base = _base_config(
        train=a,
        dev=dev,
        tests=tests,
        model=model,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_length=max_length,
        device=device,
    )
    params = CombinationParams(
        base=base,
        training_sets=sets,
        tests=tuple(tests),
        seeds=tuple(int(s) for s in seeds),
        cache=str(cache),
    )
    params.validate()
    return params


def check_data(base: RunConfig, extra: Iterable[DataConfig] = ()) -> None:
    """Load every dataset of an experiment once (raises DataError naming the file): the training,
    validation and test sets of ``base``, and ``extra`` (read with the training set's classes)."""
    from cartomap.data.loading import load_dataset
    from cartomap.training.prepare import load_data

    train, _dev, _tests = load_data(base)
    for config in extra:
        load_dataset(config, label_names=train.label_names)


# --------------------------------------------------------------------------- stage preview
def find_baseline(store: RunStore, train_fingerprint: str) -> Run | None:
    """The newest finished run on the training set with this fingerprint that has a data map
    (its metrics file); runs in the plain shuffled order first. None when there is none."""
    found = []
    for run in store.list():
        try:
            if run.info.get("train_fingerprint") != train_fingerprint:
                continue
            if run.state != State.DONE or not run.has_metrics():
                continue
            plain = run.info["config"].get("order", {}).get("name", "shuffled") == "shuffled"
        except (OSError, ValueError, KeyError, RunError):  # a run folder being written, deleted or damaged
            continue
        found.append((not plain, run))
    return min(found, key=lambda pair: pair[0])[1] if found else None


def _aligned(ids: pd.Series, frame: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    indexed = frame.set_index(frame["id"].astype(str))
    missing = ids[~ids.isin(indexed.index)]
    if len(missing):
        raise DataError(
            f"{what} has no row for {len(missing)} training example(s), e.g. id {missing.iloc[0]!r}: "
            "it must come from a run on the same training set"
        )
    return pd.DataFrame({c: indexed.loc[ids, c].to_numpy(dtype=np.float64) for c in columns})


def plan_preview(
    order: OrderConfig,
    examples: pd.DataFrame,
    *,
    batch_size: int,
    epochs: int,
    seed: int,
    label_names: Sequence[str] | None = None,
    metrics: pd.DataFrame | None = None,
    lengths: np.ndarray | None = None,
    similarity: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Plan.stage_table() of ``order`` on ``examples`` (columns id, label = class index).

    ``metrics`` (id, confidence, variability, correctness: a baseline's metrics) feeds the
    cartography orders, ``lengths`` (tokens per row) the length order and ``similarity`` (id,
    similarity) the sts order. One row per stage: name, start_step, n_steps, pool_size, unique_rows
    and the count of every class in the pool. Raises DataError when a needed input is missing.
    """
    from cartomap.training.curricula import needs_columns, training_plan

    ids = examples["id"].astype(str).reset_index(drop=True)
    table = pd.DataFrame(index=range(len(examples)))
    needed = needs_columns(order)
    score_columns = [c for c in ("confidence", "variability", "correctness", "correct_count") if c in needed]
    if score_columns and metrics is not None:
        table[score_columns] = _aligned(ids, metrics, score_columns, "the baseline's data map")
    if "length" in needed and lengths is not None:
        table["length"] = np.asarray(lengths, dtype=np.float64)
    if "similarity" in needed and similarity is not None:
        table["similarity"] = _aligned(ids, similarity, ["similarity"], "the similarity file")["similarity"]
    labels = examples["label"].to_numpy(dtype=np.int64)
    plan = training_plan(order, labels, int(batch_size), int(epochs), int(seed), table=table)
    return plan.stage_table(label_names)


def token_lengths(examples: pd.DataFrame, model: str, max_length: int) -> np.ndarray:
    """Tokens per row as training counts them (the model's tokenizer, truncated at ``max_length``)."""
    from cartomap.training.batching import tokenize
    from cartomap.training.models import load_tokenizer

    encoded = tokenize(load_tokenizer(model), examples, int(max_length))
    return np.array([len(ids) for ids in encoded["input_ids"]], dtype=np.int64)


# --------------------------------------------------------------------------- where the runs train
def build_executor_config(
    kind: str = "local",
    ray_address: str = "",
    cpus_per_run: int = 1,
    gpus_per_run: int | None = None,
    slurm_partition: str = "",
    slurm_time_min: int = 240,
    sbatch: str = "",
    slurm_mem_gb: int = 16,
    slurm_local: bool = False,
) -> ExecutorConfig:
    """The executor form's values as a checked ExecutorConfig. ``gpus_per_run`` None or < 0 = automatic;
    ``sbatch``: extra sbatch options separated by commas or spaces ("account=nlp, qos=high" or
    "--account=nlp --qos=high"). DataError naming the field, CartomapError when the package is missing."""
    gpus = None if gpus_per_run is None or int(gpus_per_run) < 0 else int(gpus_per_run)
    config = ExecutorConfig(
        kind=kind,
        ray_address=ray_address.strip() if kind == "ray" else "",
        cpus_per_run=int(cpus_per_run),
        gpus_per_run=gpus,
        slurm_partition=slurm_partition.strip() if kind == "slurm" else "",
        slurm_time_min=int(slurm_time_min),
        slurm_options=tuple(re.split(r"[,\s]+", sbatch.strip()))
        if kind == "slurm" and sbatch.strip()
        else (),
        slurm_mem_gb=int(slurm_mem_gb),
        slurm_local=bool(slurm_local) and kind == "slurm",
    )
    check_available(config)
    return config


# --------------------------------------------------------------------------- what the page shows
def runs_progress_table(exp, runs: RunStore) -> pd.DataFrame:
    """One row per role of an experiment, in the kind's order: the run, its state, epoch / step / loss /
    time left, and the worker training it (host:pid; the Ray and SLURM executors train several at once)."""
    rows = []
    for role, run_id in sorted(exp.run_ids().items(), key=lambda item: registry.role_order(exp, item[0])):
        try:
            status = runs.get(run_id).status()
            view = describe_progress(status)
        except (CartomapError, OSError, ValueError):
            status, view = {}, {"state": "missing", "epoch": "–", "step": "–", "loss": "–", "time_left": "–"}
        host, pid = status.get("worker_host"), status.get("worker_pid")
        rows.append(
            {
                "model": registry.role_label(exp, role),
                "run": run_id,
                "state": view["state"],
                "epoch": view["epoch"],
                "step": view["step"],
                "loss": view["loss"],
                "time left": view["time_left"] if view["state"] == State.RUNNING else "–",
                "worker": f"{host}:{pid}" if host else "this job",
            }
        )
    return pd.DataFrame(rows)


def experiment_progress(
    exp_status: dict[str, Any], run_status: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Display values of an experiment's progress: state, runs "done/planned", fraction of runs done
    (0..1), the role being trained and its run's epoch / step / loss (from the run's status)."""
    state = derive_state(exp_status)
    done, planned = exp_status.get("runs_done"), exp_status.get("runs_planned")
    fraction = (
        1.0 if state == State.DONE else (min(1.0, done / planned) if planned and done is not None else 0.0)
    )
    run = describe_progress(run_status) if run_status else None
    return {
        "state": state,
        "phase": exp_status.get("phase") or state,
        "runs": f"{done if done is not None else 0}/{planned if planned is not None else '?'}",
        "fraction": float(fraction),
        "role": exp_status.get("role") or "–",
        "run_id": exp_status.get("run_id") or "",
        "epoch": run["epoch"] if run else "–",
        "step": run["step"] if run else "–",
        "loss": run["loss"] if run else "–",
        "run_fraction": run["fraction"] if run else 0.0,
        "error": exp_status.get("error"),
    }


def _mean_std(mean: float, std: float, digits: int) -> str:
    if mean is None or pd.isna(mean):
        return "–"
    spread = "–" if std is None or pd.isna(std) else f"{std:.{digits}f}"
    return f"{mean:.{digits}f} ± {spread}"


def mean_std_table(
    aggregate: pd.DataFrame, metrics: Sequence[str] = ("micro_f1", "macro_f1"), digits: int = 3
) -> pd.DataFrame:
    """One row per method: "mean ± std" over the seeds of every metric (std '–' for one seed), and n.

    ``aggregate``: the experiment's aggregate result (columns method, {metric}_mean, {metric}_std, n).
    """
    rows = []
    for _, row in aggregate.iterrows():
        out = {"method": row["method"]}
        for metric in metrics:
            out[f"{metric} (mean ± std)"] = _mean_std(row[f"{metric}_mean"], row[f"{metric}_std"], digits)
        out["seeds"] = int(row["n"])
        rows.append(out)
    return pd.DataFrame(rows)


def _p(value: Any) -> str:
    return "undefined" if value is None or pd.isna(value) else f"{value:.4g}"


def _verdict(p_value: Any, alpha: float) -> str:
    if p_value is None or pd.isna(p_value):
        return "cannot be judged"
    return f"significant at α = {alpha}" if p_value < alpha else f"not significant at α = {alpha}"


def significance_sentences(sig: dict[str, Any], alpha: float = ALPHA) -> list[str]:
    """The curriculum experiment's significance result in words (plain text, no markdown).

    Cochran's Q over all methods (H0: equally accurate on the test examples), the same for the
    compared pair, and the Mann-Whitney U between the two methods' per-seed macro F1 (two-sided).
    Lower p = stronger evidence of a difference. Empty for fewer than two methods.
    """
    if not sig:
        return []
    q, pair, mw = sig["cochran"], sig.get("cochran_pair"), sig["mann_whitney"]
    methods = ", ".join(sig["methods"])
    a, b = sig["a"], sig["b"]
    lines = [
        f"Cochran's Q over the {len(sig['methods'])} methods ({methods}) on the {sig['n_examples']} test "
        f"examples (best run per method): Q = {q['q']:.3f}, df = {q['df']}, p = {_p(q['p_value'])}; "
        f"{q['n_discordant']} examples are right for some methods and wrong for others. "
        f"The difference in accuracy is {_verdict(q['p_value'], alpha)}."
    ]
    if pair is not None and len(sig["methods"]) > 2:
        lines.append(
            f"{a} vs {b} alone (Cochran's Q with two methods, i.e. McNemar): Q = {pair['q']:.3f}, "
            f"p = {_p(pair['p_value'])}: {_verdict(pair['p_value'], alpha)}."
        )
    if not has_seeds_to_compare(mw):
        lines.append(
            f"Mann-Whitney U between the macro F1 of every seed of {a} and of {b} needs two or more "
            f"seeds per method (here n = {mw['n_a']} and {mw['n_b']}): start the experiment with more seeds."
        )
        return lines
    lines.append(
        f"Mann-Whitney U between the macro F1 of every seed of {a} (mean {sig['mean_score_a']:.3f}, "
        f"n = {mw['n_a']}) and of {b} (mean {sig['mean_score_b']:.3f}, n = {mw['n_b']}): U = {mw['u']:g}, "
        f"p = {_p(mw['p_value'])} (two-sided): {_verdict(mw['p_value'], alpha)}."
    )
    return lines


def marked_matrix(
    table: pd.DataFrame, index: str = "train_set", digits: int = 3, mark: str = " ★"
) -> pd.DataFrame:
    """Table 3 as text: every score with ``digits`` decimals, the best of each column (ties all)
    followed by ``mark``; '–' for a missing value. ``index`` names the column of row labels."""
    from cartomap.scores.reports import mark_best

    values = table.set_index(index) if index in table.columns else table
    values = values.apply(pd.to_numeric, errors="coerce")
    best = mark_best(values)
    text = values.map(lambda v: "–" if pd.isna(v) else f"{v:.{digits}f}")
    text = text.where(~best, text + mark)
    return text.reset_index()
