"""A run's truth report with what experiments add: its finished seeds experiment's per-example table and
the out-of-fold logits and the fold models' in-sample table of a pruning experiment on its data
(:mod:`cartomap.analysis.truth` cannot look for experiments itself). Used by ``cartomap truth``, the
Data map page and review queues (``detector_extras``)."""

from __future__ import annotations

from typing import Any, NamedTuple

from cartomap.analysis.truth import truth_report
from cartomap.config import Source
from cartomap.experiments import token_folds
from cartomap.experiments.pruning import fold_table_of, oof_of_run
from cartomap.experiments.seeds import PER_EXAMPLE, PER_EXAMPLE_EVAL, done_seeds_of
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore
from cartomap.scores import detectors
from cartomap.scores.consensus import NLI_ORDER


class DetectorExtras(NamedTuple):
    """What the label-error detectors can score beyond a run's own dynamics; each None when absent."""

    oof: Any  # out-of-fold logits [N, C] of a pruning experiment on the run's data, in example order
    seeds: Any  # the finished seeds experiment's per-example table
    folds: Any  # that pruning experiment's fold models' in-sample table (detectors.fold_table)
    sources: dict[str, str]  # {what: experiment id}


def detector_extras(run, cache, source: str = Source.TRAIN) -> DetectorExtras:
    """The extras of ``run`` (the truth report, review queues); ``source``: the metrics file the report is
    about, whose seeds table (the eval-mode pass's for ``"eval"``) the seed detectors read."""
    estore = ExperimentStore(cache)
    sources = {}
    seeds_exp = done_seeds_of(run, estore)
    which = PER_EXAMPLE_EVAL if source == Source.EVAL else PER_EXAMPLE
    seeds = seeds_exp.result(which) if seeds_exp is not None else None
    if seeds is not None:
        sources["seeds experiment"] = f"{seeds_exp.id} ({run.view_label(source)})"
    rstore = RunStore(cache)
    sentences = run.task_kind.unit.sentences
    found = token_folds.oof_of_run(run, estore) if sentences else oof_of_run(run, estore, rstore)
    oof = folds = None
    if found is not None:
        sources["token k-fold experiment" if sentences else "pruning experiment"] = found[0].id
        oof = found[1]
        ids = run.unit_labels("train", labels=False)[0]
        folds = fold_table_of(found[0], rstore, ids)
    return DetectorExtras(oof, seeds, folds, sources)


def prune_command(run) -> str:
    """The command of a pruning experiment on ``run``'s data (its out-of-fold probabilities and fold
    models feed the detectors that need them): its own copy of the data, tested on its first test set,
    else its dev set, else its training set (pruning needs one test set; the detectors do not)."""
    sets = run.data_sets()
    test = "test_0" if "test_0" in sets else "dev" if "dev" in sets else None
    command = f"cartomap prune --data run:{run.id} --test run:{run.id}{':' + test if test else ''}"
    command += " --folds 10 --no-model1"
    if tuple(run.label_names) != NLI_ORDER:  # the default category is NLI shorthand
        command += f' --categories "P:{run.label_names[1]} G:{run.label_names[0]}"'
    return command


def input_commands(run) -> dict[str, str]:
    """{detector input kind: the command that makes it for ``run``} (:func:`truth_of`; a token run's
    out-of-fold inputs come from k folds of its sentences, :mod:`cartomap.experiments.token_folds`)."""
    prune = token_folds.command_for(run) if run.task_kind.unit.sentences else prune_command(run)
    return {
        detectors.OOF: prune,
        detectors.FOLDS: prune,
        detectors.SEEDS: f"cartomap seeds {run.id}",
        detectors.EMBEDDINGS: f"cartomap embed {run.id}",
    }


def truth_of(run, cache, n_boot: int = 1000, seed: int = 0, source: str = Source.TRAIN) -> dict:
    """The truth report of ``run`` with its detector extras, when it has them, and the commands that make
    those it lacks (shared with the Data map page); ``source``: the metrics file it is about
    (:meth:`cartomap.runs.store.Run.metrics_source`)."""
    extra = detector_extras(run, cache, source)
    return truth_report(
        run,
        seeds=extra.seeds,
        oof_logits=extra.oof,
        folds=extra.folds,
        n_boot=n_boot,
        seed=seed,
        sources=extra.sources,
        commands=input_commands(run),
        source=source,
    )
