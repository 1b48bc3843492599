"""A run's truth report with what experiments add: its finished seeds experiment's per-example table and
the out-of-fold logits of a pruning experiment on its data (:mod:`cartomap.analysis.truth` cannot look
for experiments itself). Used by ``cartomap truth``, the Data map page and review queues (``detector_extras``)."""

from __future__ import annotations

from cartomap.analysis.truth import truth_report
from cartomap.experiments.pruning import oof_of_run
from cartomap.experiments.seeds import PER_EXAMPLE, done_seeds_of
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore


def detector_extras(run, cache) -> tuple[object, object, dict[str, str]]:
    """(out-of-fold logits [N, C] of a pruning experiment on ``run``'s data, its finished seeds
    experiment's per-example table, {what: experiment id}); each None when absent. What the label-error
    detectors can score beyond the run's own dynamics (the truth report, review queues)."""
    estore = ExperimentStore(cache)
    sources = {}
    seeds_exp = done_seeds_of(run, estore)
    seeds = seeds_exp.result(PER_EXAMPLE) if seeds_exp is not None else None
    if seeds is not None:
        sources["seeds experiment"] = seeds_exp.id
    found = oof_of_run(run, estore, RunStore(cache))
    oof = None
    if found is not None:
        sources["pruning experiment"] = found[0].id
        oof = found[1]
    return oof, seeds, sources


def truth_of(run, cache, n_boot: int = 1000, seed: int = 0) -> dict:
    """The truth report of ``run`` with its finished seeds experiment's table and the out-of-fold logits
    of a pruning experiment on its data, when it has them (shared with the Data map page)."""
    oof, seeds, sources = detector_extras(run, cache)
    return truth_report(run, seeds=seeds, oof_logits=oof, n_boot=n_boot, seed=seed, sources=sources)
