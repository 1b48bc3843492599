"""A run's truth report with what experiments add: its finished seeds experiment's per-example table and
the out-of-fold logits and the fold models' in-sample table of a pruning experiment on its data (:mod:`cartomap.analysis.truth` cannot look
for experiments itself). Used by ``cartomap truth`` and the Data map page."""

from __future__ import annotations

from cartomap.analysis.truth import truth_report
from cartomap.experiments.pruning import fold_table_of, oof_of_run
from cartomap.experiments.seeds import PER_EXAMPLE, done_seeds_of
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore


def truth_of(run, cache, n_boot: int = 1000, seed: int = 0) -> dict:
    """The truth report of ``run`` with its finished seeds experiment's table and the out-of-fold logits
    of a pruning experiment on its data, when it has them (shared with the Data map page)."""
    estore = ExperimentStore(cache)
    sources = {}
    seeds_exp = done_seeds_of(run, estore)
    seeds = seeds_exp.result(PER_EXAMPLE) if seeds_exp is not None else None
    if seeds is not None:
        sources["seeds experiment"] = seeds_exp.id
    rstore = RunStore(cache)
    found = oof_of_run(run, estore, rstore)
    oof = folds = None
    if found is not None:
        sources["pruning experiment"] = found[0].id
        oof = found[1]
        folds = fold_table_of(found[0], rstore, run.examples(columns=("id",))["id"].astype(str).tolist())
    return truth_report(
        run, seeds=seeds, oof_logits=oof, folds=folds, n_boot=n_boot, seed=seed, sources=sources
    )
