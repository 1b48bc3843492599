"""Experiments: ``cartomap prune``, ``curriculum``, ``combine``, ``seeds``, ``retrain``, ``experiment``,
``report``, ``noise-benchmark``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

from cartomap.cli.options import (
    add_data_arguments,
    add_executor_arguments,
    add_training_arguments,
    data_config,
    detector_names,
    executor_config,
    experiment_base,
    experiment_options,
    named_data,
)
from cartomap.cli.printing import printable, printable_frame
from cartomap.cli.team import acting
from cartomap.config import DEMO_TRAIN, ORDERS
from cartomap.errors import RunError
from cartomap.runs import cpu
from cartomap.runs.state import State
from cartomap.tasks import support


def cmd_experiment(a: argparse.Namespace) -> int:
    from cartomap.experiments.launch import start_experiment
    from cartomap.experiments.store import ExperimentStore

    store = ExperimentStore(a.cache)
    if a.action == "list":
        table = store.table()
        print(printable_frame(table).to_string(index=False) if len(table) else "no experiments")
        return 0
    if not a.experiment:
        raise RunError(f"`cartomap experiment {a.action}` needs an experiment id")
    exp = store.get(a.experiment)
    if a.action == "show":
        show_experiment(exp, store, as_json=a.json)
        return 0
    if a.action == "cancel":
        exp.request_cancel()
        print(f"asked experiment {exp.id} to stop")
        return 0
    if a.action == "delete":
        outcome = store.delete(exp.id)
        deleted, kept = outcome["deleted"], outcome["kept"]
        print(
            f"deleted experiment {exp.id} and {len(deleted)} of its runs"
            + (f": {', '.join(deleted)}" if deleted else "")
        )
        for run_id, why in kept.items():
            print(f"kept run {run_id}: {why}")
        return 0
    executor = executor_config(a)
    saved = executor or exp.executor()
    if saved is not None:  # the saved executor's package and cluster, before the job starts
        from cartomap.executors.registry import check_available

        check_available(saved)
    if a.action == "start":
        start_experiment(exp, store, executor, by=acting(a))
        print(f"experiment {exp.id} started in the background: {exp.job_log_path}")
        return 0
    # running this command again continues the experiment: a training of it may restart as the load changes
    cpu.allow_restart(
        before=lambda: exp.set_status(state=State.QUEUED, pid=os.getpid(), queued_at=time.time())
    )
    return run_in_foreground(exp, store, as_job=a.job, executor=executor)


def show_experiment(exp, store, as_json: bool = False) -> None:
    """The experiment's state, and each role's run with its state and progress (epoch k/E, step,
    loss, time left, worker) from the runs' own status: right while another process trains them."""
    from cartomap.experiments.forms import runs_progress_table

    status = exp.status()
    table = runs_progress_table(exp, store.runs)
    if as_json:
        progress = table.to_dict(orient="records")
        print(
            json.dumps(
                {"spec": exp.spec, "status": status, "runs": exp.run_ids(), "progress": progress}, indent=2
            )
        )
        return
    executor = exp.executor()
    print(
        f"experiment {printable(exp.label)}: {status.get('state')}, {status.get('phase') or ''}".rstrip(", ")
    )
    if executor is not None:
        where = f" ({executor.ray_address})" if executor.kind == "ray" and executor.ray_address else ""
        print(f"executor: {executor.kind}{where}")
    if status.get("error"):
        print(f"error: {printable(status['error'])}")
    if len(table):
        print(printable_frame(table).to_string(index=False))
    else:
        print("no runs planned yet")


def run_in_foreground(exp, store, as_job: bool = False, executor=None) -> int:
    from cartomap.experiments.runner import run_experiment

    print(f"experiment {exp.id} ({exp.kind}): {exp.path}", flush=True)
    run_experiment(exp, store, as_job=as_job, echo=lambda msg: print(msg, flush=True), executor=executor)
    state = exp.state
    print(f"experiment {exp.id} {state}")
    return 0 if state == State.DONE else 3


def add_noise_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the label-noise benchmark (`cartomap noise-benchmark`, bench/bench_noise.py)."""
    p.add_argument(
        "--data",
        default=None,
        help="clean labelled dataset (default: demo:train, the bundled demo; any data path or hf: set)",
    )
    p.add_argument(
        "--task",
        default=None,
        help="the data's task kind, its columns the kind's own (default: the kind its suffix or columns imply)",
    )
    p.add_argument("--n", type=int, default=2000, help="class-balanced sample size")
    p.add_argument("--rates", type=float, nargs="+", default=[0.1], help="fractions of labels flipped")
    p.add_argument(
        "--settings", nargs="+", default=["symmetric", "asymmetric"], choices=("symmetric", "asymmetric")
    )
    p.add_argument("--folds", type=int, default=5, help="k of the out-of-fold logits")
    p.add_argument("--epochs", type=int, default=2, help="epochs of Model 0 and of every fold model")
    p.add_argument(
        "--model", default="default", help="encoder: default (all-MiniLM-L6-v2), a folder or hub id"
    )
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threshold", type=float, default=2.0, help="consensus rule: model confidence above this")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, the flips and the folds")


def noise_config(a: argparse.Namespace):
    """The NoiseBenchmarkConfig of parsed :func:`add_noise_arguments` options."""
    from cartomap.experiments.noise_benchmark import DEFAULT_DATA, NoiseBenchmarkConfig

    return NoiseBenchmarkConfig(
        data=a.data or DEFAULT_DATA,
        n=a.n,
        seed=a.seed,
        rates=tuple(a.rates),
        settings=tuple(a.settings),
        folds=a.folds,
        epochs=a.epochs,
        model=a.model,
        max_length=a.max_length,
        batch_size=a.batch_size,
        learning_rate=a.lr,
        threshold=a.threshold,
        task=a.task or "",
    )


def cmd_noise_benchmark(a: argparse.Namespace) -> int:
    """Label-noise benchmark: plant label flips and score suspect-ranking methods."""
    from cartomap.experiments.noise_benchmark import run_noise_benchmark, to_markdown

    cfg = noise_config(a)
    table = run_noise_benchmark(cfg, a.cache)
    print(to_markdown(table) if a.markdown else printable_frame(table.round(4)).to_string(index=False))
    print(f"saved to {table.attrs['path']}")
    return 0


def start_or_run(exp, store, background: bool, executor=None, by: str | None = None) -> int:
    from cartomap.executors.base import ExecutorUnavailable
    from cartomap.experiments.launch import start_experiment

    if background:
        start_experiment(exp, store, executor, by=by)
        print(
            f"experiment {exp.id} started in the background; follow it with `cartomap experiment show {exp.id}`"
        )
        return 0
    fresh = not exp.log_path.exists()  # made by this command: it never ran
    try:
        code = run_in_foreground(exp, store, executor=executor)
    except ExecutorUnavailable as err:
        if not fresh:
            raise
        store.delete(exp.id)  # nothing ran: the same command later makes it again
        raise ExecutorUnavailable(f"{err} (experiment {exp.id} not kept)") from None
    if code == 0:
        from cartomap.experiments import registry  # scipy, sklearn, plotly: only when a report is printed

        print(registry.report(exp, store.runs))
    return code


def cmd_curriculum(a: argparse.Namespace) -> int:
    from cartomap.experiments.curriculum import CurriculumParams, create_curriculum, require_kind
    from cartomap.experiments.store import ExperimentStore

    require_kind(named_data(a))  # its kind before its test sets
    executor = executor_config(a)  # a missing package stops here, before anything is created
    store = ExperimentStore(a.cache)
    params = CurriculumParams(
        base=experiment_base(a),
        methods=tuple(a.methods),
        seeds=tuple(a.seeds),
        difficulty=a.difficulty,
        compare=tuple(a.compare) if a.compare else None,
        datamap_epochs=a.datamap_epochs,
        ambiguity=a.ambiguity,
    )
    return start_or_run(
        create_curriculum(params, store, name=a.name), store, a.background, executor, by=acting(a)
    )


def cmd_combine(a: argparse.Namespace) -> int:
    from cartomap.experiments.combination import (
        CombinationParams,
        TrainingSet,
        create_combination,
        require_kind,
        training_set_names,
    )
    from cartomap.experiments.store import ExperimentStore

    for path in (a.a, a.b):  # their kind before the test sets
        if path:
            require_kind(named_data(a, path))
    executor = executor_config(a)
    store = ExperimentStore(a.cache)
    base = experiment_base(a)
    data_a = dataclasses.replace(data_config(a, a.a, None), name=a.a_name)
    data_b = data_config(a, a.b, None) if a.b else None
    names = training_set_names(a.a_name, a.b_name)
    sets = tuple(TrainingSet(names[m], data_a, data_b if m != "A" else None, m) for m in a.modes)
    params = CombinationParams(
        base=base, training_sets=sets, tests=base.tests, seeds=tuple(a.seeds), cache=str(store.root)
    )
    return start_or_run(
        create_combination(params, store, name=a.name), store, a.background, executor, by=acting(a)
    )


def seed_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected seeds like 1,2,3, got {text!r}") from err


def cmd_seeds(a: argparse.Namespace) -> int:
    """Train a finished run again with other seeds and say how stable its data map is."""
    from cartomap.experiments.seeds import create_seeds, create_seeds_from_runs, seed_siblings
    from cartomap.experiments.store import ExperimentStore

    executor = executor_config(a)
    store = ExperimentStore(a.cache)
    run = store.runs.get(a.run)
    if a.with_runs is not None:  # runs the user already trained with other seeds: nothing to train
        others = [store.runs.get(r) for r in a.with_runs] if a.with_runs else None
        if others is None:
            others = [r for seed, r in seed_siblings(run, store.runs).items() if r.id != run.id]
            if not others:
                raise RunError(f"no finished run in the store is run {run.id} with another seed")
        exp = create_seeds_from_runs(store, run, others, name=a.name)
    else:
        exp = create_seeds(store, run, n_seeds=a.seeds, seeds=a.seed_list, name=a.name)
    seeds = ", ".join(str(s) for s in exp.params["seeds"])
    print(f"run {run.id} with seeds {seeds} (seed {exp.params['seeds'][0]} is the run itself)")
    return start_or_run(exp, store, a.background, executor, by=acting(a))


def cmd_retrain(a: argparse.Namespace) -> int:
    """Retrain a finished run on its training set as it was, pruned of the review queue and corrected by the
    review's decisions, with the same seeds: what the review changed."""
    from cartomap.experiments.correction import checkbase_run, create_correction, pick_seeds
    from cartomap.experiments.store import ExperimentStore

    executor = executor_config(a)
    store = ExperimentStore(a.cache)
    run = store.runs.get(a.run)
    checkbase_run(run)  # its kind first; before a review queue's decisions are written
    if not (a.decisions or a.queue):
        raise RunError("give the review's decisions: --decisions FILE or --queue NAME")
    pick_seeds(run.config.train.seed, a.seeds, a.seed_list)  # so is the count of runs
    decisions = a.decisions
    if a.queue:
        from cartomap.curation.corrected import write_corrected

        decisions = write_corrected(run, a.queue)["decisions_path"]
    exp = create_correction(store, run, decisions, n_seeds=a.seeds, seeds=a.seed_list, name=a.name)
    seeds = ", ".join(str(s) for s in exp.params["seeds"])
    print(f"run {run.id}: original, pruned and corrected with seeds {seeds} (experiment {exp.id})")
    return start_or_run(exp, store, a.background, executor, by=acting(a))


def cmd_report(a: argparse.Namespace) -> int:
    from cartomap.experiments import registry
    from cartomap.experiments.store import ExperimentStore

    store = ExperimentStore(a.cache)
    exp = store.get(a.experiment)
    if exp.state != State.DONE:
        raise RunError(f"experiment {exp.id} is {exp.state}; a report needs a finished experiment")
    print(registry.report(exp, store.runs))
    return 0


def cmd_prune(a: argparse.Namespace) -> int:
    """The k-fold consensus pruning experiment (the label-noise cleaning study): Model 0, k folds, Model 1 on the pruned set."""
    from cartomap.experiments.pruning import (
        PRUNED_FILE,
        REMOVED_FILE,
        PruningParams,
        create_pruning,
        export_pruned,
    )
    from cartomap.experiments.store import ExperimentStore
    from cartomap.io import refuse_overwrite

    if a.train:
        if a.data not in (DEMO_TRAIN, a.train):
            raise RunError("give the training set once: TRAIN or --data")
        a.data = a.train
    data = named_data(a)
    support.OUT_OF_FOLD.require(data.task_kind, data.path)  # before the test sets and the export folder
    if a.export and data.task_kind.unit.per_example:  # before hours of training, not after
        refuse_overwrite([Path(a.export) / PRUNED_FILE, Path(a.export) / REMOVED_FILE], a.overwrite)
    if a.dev is None:
        a.dev = "none"  # no demo dev set by default: it is often the test set, and it picks Model 0's epoch
    executor = executor_config(a)
    store = ExperimentStore(a.cache)
    if not a.config and not a.test and _is_token_data(a):
        return _token_folds(a, store, executor)
    params = PruningParams(
        base=experiment_base(a),
        folds=a.folds,
        fold_seed=a.fold_seed,
        categories=tuple(a.categories),
        threshold=a.threshold,
        train_model1=a.model1,
    )
    exp = create_pruning(params, store, name=a.name)
    code = start_or_run(exp, store, a.background, executor, by=acting(a))
    if code == 0 and a.export and not a.background:
        data_path, ids_path = export_pruned(exp, store.runs, a.export, overwrite=a.overwrite)
        print(f"wrote {data_path} and {ids_path}")
    elif a.export and a.background:
        print(f"export later with `cartomap prune ... --export {a.export}` once experiment {exp.id} is done")
    return code


def _is_token_data(a: argparse.Namespace) -> bool:
    """Whether the training data of ``cartomap prune`` is a token data set (sentences of tagged words)."""
    from cartomap.cli.options import config_from_args

    return bool(config_from_args(a).data.task_kind.unit.sentences)


def _token_folds(a: argparse.Namespace, store, executor) -> int:
    """``cartomap prune`` on token data: the out-of-fold word probabilities of k folds of its sentences
    (:mod:`cartomap.experiments.token_folds`); no Model 1, no categories (say so when they were asked for)."""
    from cartomap.cli.options import config_from_args
    from cartomap.experiments.token_folds import TokenFoldsParams, create_token_folds

    if a.export or a.categories != ["P1G0"]:
        raise RunError(
            "token data: `cartomap prune` makes the out-of-fold word probabilities of k folds of the "
            "sentences (for the cleanlab token detectors and `cartomap swaps`); it prunes nothing, so "
            "--categories and --export do not apply"
        )
    params = TokenFoldsParams(base=config_from_args(a), folds=a.folds, fold_seed=a.fold_seed)
    exp = create_token_folds(params, store, name=a.name)
    print(f"token data: {a.folds} folds by sentence, out-of-fold word probabilities (experiment {exp.id})")
    return start_or_run(exp, store, a.background, executor, by=acting(a))


def add_commands(sub) -> None:
    """Every command of this module, in the order `cartomap --help` lists them."""
    _add_curriculum(sub)
    _add_combine(sub)
    _add_seeds(sub)
    _add_retrain(sub)

    rp = sub.add_parser("report", help="print a finished experiment's results as markdown")
    rp.add_argument("experiment")
    rp.set_defaults(func=cmd_report)

    pr = sub.add_parser(
        "prune",
        help="find and prune suspected label errors: the k-fold consensus experiment (token data: the "
        "out-of-fold word probabilities of k folds of its sentences, no --test needed)",
    )
    pr.add_argument("train", nargs="?", default=None, metavar="TRAIN", help="training data (same as --data)")
    add_data_arguments(pr)
    add_training_arguments(pr)
    pg = pr.add_argument_group("pruning")
    pg.add_argument("--folds", type=int, default=10, help="k of the k-fold split (paper: 10)")
    pg.add_argument("--fold-seed", type=int, default=0)
    pg.add_argument(
        "--categories",
        nargs="+",
        default=["P1G0"],
        help="mismatch categories to prune, by label: 'P:neutral G:entailment' (predicted neutral, gold "
        "entailment: the paper's); the shorthand P1G0 only for classes in the order entailment, neutral, "
        "contradiction",
    )
    pg.add_argument(
        "--threshold",
        type=float,
        default=2.0,
        help="prune model confidence above this (paper: 2.0; 4.0 stricter)",
    )
    pg.add_argument(
        "--no-model1", dest="model1", action="store_false", help="do not retrain on the pruned set"
    )
    pg.add_argument(
        "--export", default=None, metavar="DIR", help="write pruned_train.jsonl and removed_ids.txt"
    )
    pg.add_argument(
        "--force",
        "--overwrite",
        dest="overwrite",
        action="store_true",
        help="replace files in the --export folder",
    )
    experiment_options(pr, cmd_prune)
    pr.set_defaults(difficulty="paper")

    ex = sub.add_parser("experiment", help="list, show, run (resume), cancel or delete experiments")
    ex.add_argument("action", choices=("list", "show", "run", "start", "cancel", "delete"))
    ex.add_argument("experiment", nargs="?", help="experiment id, id prefix or name")
    ex.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    add_executor_arguments(ex)
    ex.add_argument("--json", action="store_true", help="show: spec, status, runs and their progress as JSON")
    ex.set_defaults(func=cmd_experiment)

    nb = sub.add_parser(
        "noise-benchmark",
        help="plant label flips and measure how well each method finds them",
        description="Plant label flips and measure how well each method finds them: ranking methods, each "
        f"one of the registered detectors ({detector_names()}), cleanlab's issues and the consensus rule.",
    )
    add_noise_arguments(nb)
    nb.add_argument("--markdown", action="store_true", help="print the table as markdown")
    nb.set_defaults(func=cmd_noise_benchmark)


def _add_curriculum(sub) -> None:
    """The `curriculum` command's parser and options."""
    from cartomap.scores import ambiguity

    cu = sub.add_parser("curriculum", help="compare training orders x seeds (cartography curricula)")
    add_data_arguments(cu)
    add_training_arguments(cu)
    cu.add_argument("--methods", nargs="+", choices=ORDERS, default=["oversampled", "cart-stra++"])
    cu.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    cu.add_argument("--difficulty", choices=("paper", "code"), default="paper", help="Cart-CL++ score")
    cu.add_argument(
        "--ambiguity",
        default=ambiguity.VARIABILITY,
        help="the ambiguity score the cartography orders use where the papers use variability (the A group, "
        "Cart-CL++'s v): variability (the default, the papers'), mean_entropy, gold_bernoulli, margin_gap",
    )
    cu.add_argument("--compare", nargs=2, default=None, help="the two methods of the Mann-Whitney test")
    cu.add_argument(
        "--datamap-epochs", type=int, default=None, help="epochs of the data-map baseline (default: --epochs)"
    )
    experiment_options(cu, cmd_curriculum)


def _add_combine(sub) -> None:
    """The `combine` command's parser and options."""
    co = sub.add_parser("combine", help="train on A, A + B, A ◇ B and evaluate on many test sets (Table 3)")
    add_data_arguments(co)
    add_training_arguments(co)
    co.add_argument("--a", required=True, help="dataset A")
    co.add_argument("--b", default=None, help="dataset B")
    co.add_argument("--a-name", default="A")
    co.add_argument("--b-name", default="B")
    co.add_argument("--modes", nargs="+", choices=("A", "A+B", "A◇B"), default=["A", "A+B", "A◇B"])
    co.add_argument("--seeds", nargs="+", type=int, default=[0])
    experiment_options(co, cmd_combine)


def _add_seeds(sub) -> None:
    """The `seeds` command's parser and options."""
    se = sub.add_parser(
        "seeds", help="train a finished run with other seeds: how stable its data map is (the mean map)"
    )
    se.add_argument("run", help="the finished run (id, id prefix or name)")
    se.add_argument(
        "--seeds", type=int, default=3, help="seeds in all, the run's own included (own, own + 1, ...)"
    )
    se.add_argument(
        "--seed-list", type=seed_list, default=None, help="the seeds to add to the run's own: 1,2,3"
    )
    se.add_argument(
        "--with",
        dest="with_runs",
        nargs="*",
        default=None,
        metavar="RUN",
        help="finished runs of the same config with other seeds (your own Trainer script run with several "
        "seeds, say) to compare instead of training; without a RUN: every such run in the store",
    )
    se.add_argument("--name", default="", help="a label for the experiment")
    se.add_argument("--background", action="store_true", help="run as a background job and return")
    add_executor_arguments(se)
    se.set_defaults(func=cmd_seeds)


def _add_retrain(sub) -> None:
    """The `retrain` command's parser and options."""
    rt = sub.add_parser(
        "retrain",
        help="retrain a finished run after a review of suspected label errors: original, pruned and "
        "corrected training sets with the same seeds",
    )
    rt.add_argument("run", help="the finished base run (id, id prefix or name)")
    given = rt.add_mutually_exclusive_group()  # one is needed: asked after the run's kind (cmd_retrain)
    given.add_argument(
        "--decisions",
        metavar="FILE",
        help="the review's decisions (.parquet, .jsonl or .csv): id, decision (keep, relabel, remove, unsure, "
        "unreviewed), label, original_label, ...; copied into the experiment",
    )
    given.add_argument(
        "--queue",
        metavar="NAME",
        help="the decisions of the run's review queue NAME (cartomap review-queue), as they stand now",
    )
    rt.add_argument(
        "--seeds", type=int, default=3, help="seeds in all, the run's own included (own, own + 1, ...)"
    )
    rt.add_argument(
        "--seed-list", type=seed_list, default=None, help="the seeds to add to the run's own: 1,2,3"
    )
    rt.add_argument("--name", default="", help="a label for the experiment")
    rt.add_argument("--background", action="store_true", help="run as a background job and return")
    add_executor_arguments(rt)
    rt.set_defaults(func=cmd_retrain)
