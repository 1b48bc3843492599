"""Options shared by the commands: the data and column mapping, model and training, experiments."""

from __future__ import annotations

import argparse

from cartomap.config import (
    DEMO_DEV_OF,
    DEMO_TRAIN,
    RECORD_CHOICES,
    DataConfig,
    ExecutorConfig,
    ModelConfig,
    OrderConfig,
    RunConfig,
    TrainConfig,
    path_kind,
)
from cartomap.errors import DataError, RunError
from cartomap.io import read_json_file
from cartomap.tasks import registry as task_kinds


def column_list(text: str) -> tuple[str, ...]:
    """Comma-separated column names, each once; how many a task takes is its kind's to say (loading checks
    them against ``--task``, or takes one column for a single text and two for a pair)."""
    cols = tuple(c.strip() for c in text.split(",") if c.strip())
    if not cols or len(set(cols)) != len(cols):
        raise argparse.ArgumentTypeError(
            f"expected column names separated by commas, each once, e.g. {','.join(task_kinds.DEFAULT.text_fields)}"
        )
    return cols


def name_list(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


def detector_names() -> str:
    """The registered detectors' names, comma-separated, read from the registry when a parser is built
    (:data:`cartomap.scores.detectors.REGISTRY`): every help text that takes or scores detectors says this."""
    from cartomap.scores import detectors

    return ", ".join(detectors.REGISTRY)


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument(
        "--data",
        default=DEMO_TRAIN,
        help="training data: file, saved HF dataset folder, hf:NAME, demo:train (demo:ner_train: the NER "
        "demo), or run:RUN "
        "(a run's own copy of its training set; run:RUN:dev, run:RUN:test_0 for its other sets)",
    )
    g.add_argument(
        "--dev",
        default=None,
        help="dev data evaluated each epoch ('none' to skip; default demo:dev / demo:ner_dev for the demos; "
        "run:RUN:dev)",
    )
    add_column_arguments(g)
    g.add_argument("--dev-split", default=None)


def add_column_arguments(g) -> None:
    """How a file's columns map onto cartomap's fields (one definition for every command that reads data)."""
    g.add_argument("--format", default="auto", help="jsonl, csv, tsv, parquet, hf (default: from the suffix)")
    g.add_argument(
        "--task",
        choices=task_kinds.names(),
        default="",
        help="the task kind: "
        + "; ".join(f"{name}: {text}" for name, text in task_kinds.descriptions().items())
        + " (default: from the number of text columns, two a pair, one a single text)",
    )
    g.add_argument(
        "--text-columns",
        type=column_list,
        default=None,
        help="the file's text columns, comma-separated, in order (default: the task's own names, "
        f"{' or '.join(','.join(k.text_fields) for k in task_kinds.KINDS.values())})",
    )
    g.add_argument(
        "--label-column",
        default=None,
        help="default: the task's own (label; tags for token classification; labels, a list of label "
        "names per example, for multi-label)",
    )
    g.add_argument(
        "--label-separator",
        default=None,
        help="multi-label: the labels column holds one delimited string per example (a CSV cell such as "
        "'sports|politics'), split at this",
    )
    g.add_argument(
        "--label-columns",
        type=name_list,
        default=None,
        help="multi-label: one 0/1 column per label instead of a labels column, comma-separated (their "
        "names are the labels)",
    )
    g.add_argument(
        "--skip-blank-tokens",
        action="store_true",
        default=False,
        help="token data: drop tokens of only spaces with their tags (a data warning names their lines) "
        "instead of refusing the file",
    )
    g.add_argument("--id-column", default="id", help="generated from the content when absent")
    g.add_argument(
        "--label-names",
        type=name_list,
        default=None,
        help="class order, e.g. entailment,neutral,contradiction",
    )
    g.add_argument("--genre-column", default="genre")
    g.add_argument(
        "--votes-column",
        type=_optional_column,
        default=None,
        help="per-class vote counts: a mapping label -> count or a list of one count per class in label "
        "order (default: found by name, votes / label_count, before annotator labels; 'none' for none)",
    )
    g.add_argument(
        "--annotator-column",
        type=_optional_column,
        default=None,
        help="each annotator's label: a list of label names or indices, one per annotator (default: found "
        "by name, annotator_labels / original_labels; 'none' for none)",
    )
    g.add_argument(
        "--error-column",
        type=_optional_column,
        default=None,
        help="booleans marking known label errors (default: found by name, is_error / label_error; 'none' for none)",
    )
    g.add_argument("--split", default=None, help="split of a Hugging Face DatasetDict")


def _optional_column(text: str) -> str:
    """A column name; 'none' (or '') = no such column ("" in the DataConfig)."""
    return "" if text.strip().lower() in ("", "none") else text.strip()


def data_config(a: argparse.Namespace, path: str, split: str | None) -> DataConfig:
    """The --data/--dev column mapping options as a DataConfig for ``path``; ``run:RUN[:SET]`` reads a
    run's own copy of a data set (:meth:`cartomap.runs.store.RunStore.data_ref`), whose columns are known."""
    from cartomap.runs.store import RUN_REF, RunStore

    if path.startswith(RUN_REF):
        return RunStore(a.cache).data_ref(path)
    # The task named, else the one the file's suffix says (.conll), else the default: its own names are
    # the default columns.
    kind = task_kinds.kind(a.task) if a.task else (path_kind(path) or task_kinds.DEFAULT)
    return DataConfig(
        path=path,
        format=a.format,
        text_columns=a.text_columns or kind.text_fields,
        task=a.task,
        label_column=a.label_column or kind.label_field,
        id_column=a.id_column,
        label_names=a.label_names,
        genre_column=a.genre_column,
        split=split,
        votes_column=getattr(a, "votes_column", None),
        annotator_column=getattr(a, "annotator_column", None),
        error_column=getattr(a, "error_column", None),
        label_separator=getattr(a, "label_separator", None),
        label_columns=getattr(a, "label_columns", None) or None,
        skip_blank_tokens=bool(getattr(a, "skip_blank_tokens", None)),
    )


#: Config fields -> the option that sets them (one-line refusals name what the user typed).
OPTION_OF_FIELD = {
    "epochs": "--epochs",
    "batch_size": "--batch-size",
    "eval_batch_size": "--eval-batch-size",
    "learning_rate": "--lr",
    "weight_decay": "--weight-decay",
    "warmup_ratio": "--warmup-ratio",
    "max_grad_norm": "--max-grad-norm",
    "seed": "--seed",
    "early_stopping_patience": "--early-stopping",
    "record": "--record",
    "record_points": "--record-points",
    "skip_epochs": "--skip-epochs",
    "precision": "--precision",
    "max_length": "--max-length",
    "executor": "--executor",
    "cpus_per_run": "--cpus-per-run",
    "gpus_per_run": "--gpus-per-run",
    "retries": "--retries",
    "slurm_time_min": "--time-limit",
    "slurm_options": "--sbatch",
    "slurm_mem_gb": "--mem-per-run",
    "slurm_local": "--slurm-local",
    "connect_timeout_s": "--connect-timeout",
    "skip_blank_tokens": "--skip-blank-tokens",
    "seeds": "--seeds",  # how many runs an experiment makes (experiments.store.check_run_count)
    "folds": "--folds",
}


def option_error(err: DataError) -> DataError:
    """``err`` about a config field, reworded to name the command-line option that set it."""
    option = OPTION_OF_FIELD.get(err.field or "")
    if option is None or err.location:  # a file's value: the file and its field say where
        return err
    message = str(err).split(": ", 1)[1] if str(err).startswith("field ") else str(err)
    return DataError(f"{option}: {message}")


def read_config_file(path: str) -> RunConfig:
    """A RunConfig from ``--config FILE`` (a config.json of a run, or its RunConfig part); DataError naming
    the file when it is missing, not JSON, or holds values a config refuses."""
    payload = read_json_file(path, "a run config (a run folder's config or its RunConfig part)")
    if not isinstance(payload, dict):
        raise DataError(f"expected a JSON object, got {type(payload).__name__}", location=path)
    if isinstance(payload.get("config"), dict) and "versions" in payload:  # a run folder's config.json
        payload = payload["config"]
    unknown = sorted(set(payload) - set(RunConfig.__dataclass_fields__))
    if unknown or not payload:
        raise DataError(
            f"not a cartomap run config: unknown keys {unknown} (expected some of "
            f"{', '.join(RunConfig.__dataclass_fields__)})",
            location=path,
        )
    try:
        return RunConfig.from_dict(payload)
    except DataError as err:
        raise DataError(str(err), location=path) from None
    except (TypeError, ValueError, AttributeError) as err:
        raise DataError(f"not a cartomap run config ({err})", location=path) from None


def config_from_args(a: argparse.Namespace) -> RunConfig:
    try:
        return _config_from_args(a)
    except DataError as err:
        raise option_error(err) from None


def _config_from_args(a: argparse.Namespace) -> RunConfig:
    if a.config:
        return read_config_file(a.config)
    data = data_config(a, a.data, a.split)
    dev_path = a.dev if a.dev is not None else DEMO_DEV_OF.get(a.data, "none")
    dev = None if dev_path.lower() == "none" else data_config(a, dev_path, a.dev_split)
    train = TrainConfig(
        epochs=a.epochs,
        batch_size=a.batch_size,
        eval_batch_size=a.eval_batch_size,
        learning_rate=a.lr,
        weight_decay=a.weight_decay,
        warmup_ratio=a.warmup_ratio,
        max_grad_norm=a.max_grad_norm,
        seed=a.seed,
        group_by_length=a.group_by_length,
        early_stopping_patience=a.early_stopping,
        record=a.record,
        record_points=a.record_points,
        skip_epochs=a.skip_epochs,
        save_checkpoints=a.save_checkpoints,
        device=a.device,
        precision=a.precision,
        processes=launched_processes(),
    )
    tests = tuple(data_config(a, path, None) for path in a.test)
    fractions, steps = stage_options(a)
    order = OrderConfig(
        name=a.order,
        oversample=a.oversample,
        scores=a.scores or "",
        difficulty=getattr(a, "difficulty", "paper"),
        fractions=fractions,
        steps=steps,
        curriculum_share=a.curriculum_share,
    )
    return RunConfig(
        data=data,
        dev=dev,
        model=ModelConfig(a.model, a.max_length),
        train=train,
        order=order,
        tests=tests,
        name=a.name,
    )


def launched_processes() -> int:
    """How many processes torchrun / accelerate launch started for this command (WORLD_SIZE; 1 alone)."""
    import os

    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def add_schedule_arguments(g) -> None:
    """A curriculum's stages: a named schedule of the public code, or fractions and lengths by hand."""
    g.add_argument(
        "--schedule",
        default=None,
        help="named stages of an order: cart++ ronli-head (default: 60/80/100%%, 100/200/350 steps) or "
        "ronli-5f84fd3 (30/60/100%%, 175/350/525); cart ronli-head (default) or equal-thirds "
        "(docs/curricula.md)",
    )
    g.add_argument(
        "--fractions", type=float, nargs="+", default=None, help="stage unlock fractions, the last 1"
    )
    g.add_argument(
        "--steps", type=int, nargs="+", default=None, help="relative stage lengths, one per fraction"
    )


def stage_options(a: argparse.Namespace) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(fractions, steps) of the --schedule / --fractions / --steps options; () = the order's default."""
    fractions = tuple(getattr(a, "fractions", None) or ())
    steps = tuple(getattr(a, "steps", None) or ())
    name = getattr(a, "schedule", None)
    if name:
        if fractions or steps:
            raise RunError("give --schedule or --fractions/--steps, not both")
        from cartomap.training.curricula import schedule

        fractions, steps = schedule(a.order, name)
    return fractions, steps


def add_training_arguments(p: argparse.ArgumentParser) -> None:
    """Model, training and test-set options shared by `train` and the experiment commands."""
    g = p.add_argument_group("model and training")
    d = TrainConfig()
    g.add_argument(
        "--model", default="default", help="local folder or hub id (default: bundled all-MiniLM-L6-v2)"
    )
    g.add_argument("--max-length", type=int, default=ModelConfig().max_length)
    g.add_argument("--epochs", type=int, default=d.epochs)
    g.add_argument("--batch-size", type=int, default=d.batch_size)
    g.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size)
    g.add_argument("--lr", type=float, default=d.learning_rate)
    g.add_argument("--weight-decay", type=float, default=d.weight_decay)
    g.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio)
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm)
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument(
        "--no-group-by-length",
        dest="group_by_length",
        action="store_false",
        help="plain random batches (default: shuffled batches of similar length, less padding)",
    )
    g.add_argument(
        "--early-stopping", type=int, default=d.early_stopping_patience, help="patience in epochs (0 = off)"
    )
    g.add_argument("--record", choices=RECORD_CHOICES, default=d.record)
    g.add_argument(
        "--record-points",
        type=int,
        default=d.record_points,
        help="eval-mode recordings of the training set per epoch, evenly spaced (with --record eval/both)",
    )
    g.add_argument(
        "--skip-epochs",
        type=int,
        default=d.skip_epochs,
        help="the map's metrics leave out the first N epochs' recordings (all are still recorded)",
    )
    g.add_argument(
        "--no-checkpoints",
        dest="save_checkpoints",
        action="store_false",
        help="do not keep end-of-epoch weights (saves disk; WaNLI filtering needs them)",
    )
    g.add_argument("--device", default=d.device, help="auto, cpu, cuda, cuda:N, mps")
    g.add_argument("--precision", default=d.precision, help="auto, fp32, bf16, fp16")
    p.add_argument(
        "--test", action="append", default=[], help="a test set evaluated after every epoch (repeatable)"
    )


def experiment_options(p: argparse.ArgumentParser, func) -> None:
    p.add_argument("--name", default="", help="a label for the experiment")
    p.add_argument("--background", action="store_true", help="run as a background job and return")
    add_executor_arguments(p)
    p.set_defaults(
        func=func,
        config=None,
        order="shuffled",
        oversample=None,
        scores="",
        curriculum_share=0.5,
        schedule=None,
        fractions=None,
        steps=None,
    )


#: Executor options -> ExecutorConfig fields; all None unless given, so a resume keeps the saved ones.
EXECUTOR_OPTIONS = {
    "ray_address": "ray_address",
    "cpus_per_run": "cpus_per_run",
    "gpus_per_run": "gpus_per_run",
    "retries": "retries",
    "partition": "slurm_partition",
    "time_limit": "slurm_time_min",
    "sbatch": "slurm_options",
    "mem_per_run": "slurm_mem_gb",
    "slurm_local": "slurm_local",
    "connect_timeout": "connect_timeout_s",
}


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """Where an experiment's runs train: --executor and the options of Ray and SLURM."""
    g = p.add_argument_group("where the runs train")
    d = ExecutorConfig()
    from cartomap.executors import registry

    g.add_argument("--executor", choices=registry.names(), default=None, help=registry.help_text())
    g.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster to join: auto (the one `ray start` made here), HOST:6379 or ray://HOST:10001 "
        '(Ray Client: pip install "ray[client]"); default: $RAY_ADDRESS when set (its address and size are '
        "printed), else a local Ray started for this experiment (127.0.0.1, all GPUs of this machine)",
    )
    g.add_argument(
        "--connect-timeout",
        type=int,
        default=None,
        metavar="S",
        help=f"seconds the Ray cluster's address may take to answer (default {d.connect_timeout_s})",
    )
    g.add_argument(
        "--cpus-per-run", type=int, default=None, help=f"CPUs (threads) of one run (default {d.cpus_per_run})"
    )
    g.add_argument(
        "--gpus-per-run",
        type=int,
        default=None,
        help="GPUs of one run (default: Ray 1 if the cluster has GPUs; SLURM none: give it on a GPU partition)",
    )
    g.add_argument(
        "--retries",
        type=int,
        default=None,
        help=f"start a run again this often when its worker dies (default {d.retries}); it resumes",
    )
    g.add_argument("--partition", default=None, help="SLURM partition (default: the cluster's)")
    g.add_argument(
        "--time-limit",
        type=int,
        default=None,
        metavar="MIN",
        help=f"SLURM time limit per run (default {d.slurm_time_min})",
    )
    g.add_argument(
        "--sbatch",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="an extra sbatch option, e.g. --sbatch account=nlp --sbatch qos=high (repeatable)",
    )
    g.add_argument(
        "--mem-per-run",
        type=int,
        default=None,
        metavar="GB",
        help=f"SLURM memory per run, sbatch --mem (default {d.slurm_mem_gb} GB; 0 = the partition's default)",
    )
    g.add_argument(
        "--slurm-local",
        action="store_const",
        const=True,
        default=None,
        help="without a SLURM cluster: run the SLURM executor's jobs as processes of this machine "
        "(submitit's local executor; for trying it out). Without this, --executor slurm needs sbatch and srun",
    )


def executor_config(a: argparse.Namespace) -> ExecutorConfig | None:
    """The ExecutorConfig of the options (None when none was given: the experiment's saved one, else
    local). CartomapError when its package is missing, before anything is created."""
    from cartomap.executors.registry import check_available

    given = {
        field: getattr(a, option)
        for option, field in EXECUTOR_OPTIONS.items()
        if getattr(a, option, None) is not None
    }
    kind = getattr(a, "executor", None)
    if kind is None and not given:
        return None
    if kind is None:
        kind = (
            "ray"
            if {"ray_address", "connect_timeout_s"} & set(given)
            else "slurm"
            if {"slurm_partition", "slurm_time_min", "slurm_options", "slurm_mem_gb", "slurm_local"}
            & set(given)
            else None
        )
        if kind is None:
            raise RunError("--cpus-per-run, --gpus-per-run and --retries go with --executor ray or slurm")
    if "slurm_options" in given:
        given["slurm_options"] = tuple(given["slurm_options"])
    config = ExecutorConfig(kind=kind, **given)
    check_available(config)
    return config


def named_data(a: argparse.Namespace, path: str | None = None) -> DataConfig:
    """The training data an experiment command names, from its options alone (nothing is loaded):
    ``--config``'s, else ``path`` (default ``--data``) with the column options. What a command asks the
    task kind of before it asks for anything else (its test sets, an executor)."""
    try:
        if getattr(a, "config", None):
            return read_config_file(a.config).data
        return data_config(a, path or a.data, getattr(a, "split", None))
    except DataError as err:
        raise option_error(err) from None


def experiment_base(a: argparse.Namespace) -> RunConfig:
    """The base RunConfig of an experiment command (train options; order and record set per run)."""
    if not a.test:
        raise RunError("give at least one test set with --test")
    return config_from_args(a)
