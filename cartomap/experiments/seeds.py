"""The seeds experiment: train a finished run again with other seeds and measure how sure its map is.

``seeds``: the base run's config (its own copy of the data, :meth:`Run.own_config`) trained once per
seed. The base run's own seed is the first; its role resolves to the base run itself (recorded for the
role before anything trains, so it is reused, never retrained), the other seeds train the base config
with only ``seed`` changed (and no end-of-epoch checkpoints: only the dynamics matter here). The
results are the per-example table over the seeds (:func:`cartomap.scores.stability.seed_table`: mean
map, spreads, majority region and agreement) and the summary
(:func:`cartomap.scores.stability.stability_summary`: pairwise Spearman per metric, region agreement,
stable share, Spearman-Brown reliability of the mean map).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pandas as pd

from cartomap.analysis.datamap import with_regions
from cartomap.config import RunConfig, Source, recorded_sources
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.experiments.store import Experiment, ExperimentStore, Section, base_run, check_run_count
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.scores import ambiguity
from cartomap.scores.stability import SUMMARY_METRICS, seed_table, stability_summary
from cartomap.tasks import registry as task_kinds

KIND = "seeds"
PER_EXAMPLE = "per_example"  # results/per_example.parquet: seed_table of the main metrics
PER_EXAMPLE_EVAL = "per_example_eval"  # the same for the eval-mode metrics, when the runs recorded both
SUMMARY = "summary"  # results/summary.json
ROLE_PREFIX = "seed"
METRIC_LABELS = {
    "confidence": "confidence",
    **{name: score.label for name, score in ambiguity.SCORES.items()},
    "correctness": "correctness",
    "aum": "AUM",
}


def role(seed: int) -> str:
    """The role of one seed's run: "seed43"."""
    return f"{ROLE_PREFIX}{int(seed)}"


def seed_of(role_name: str) -> int | None:
    digits = role_name.removeprefix(ROLE_PREFIX)
    return int(digits) if role_name.startswith(ROLE_PREFIX) and digits.lstrip("-").isdigit() else None


def pick_seeds(base_seed: int, n_seeds: int = 3, seeds=None) -> tuple[int, ...]:
    """The seeds of the experiment, the base run's own first: ``seeds`` as given (duplicates dropped),
    else ``base_seed``, base_seed + 1, base_seed + 2, ... up to ``n_seeds`` in all. DataError for fewer
    than 2 seeds (nothing to compare), or more than an experiment may make (a run each)."""
    if seeds:
        picked = [int(base_seed)] + [int(s) for s in seeds]
    else:
        check_run_count(int(n_seeds), f"{int(n_seeds):,} seeds", "seeds")  # before the list is built
        picked = [int(base_seed) + k for k in range(max(int(n_seeds), 0))]
    out = tuple(dict.fromkeys(picked))
    check_run_count(len(out), f"{len(out):,} seeds", "seeds")
    if len(out) < 2:
        raise DataError(
            f"a seeds experiment needs at least 2 seeds (the run's own is {base_seed})", field="seeds"
        )
    return out


def base_config(params: dict[str, Any]) -> RunConfig:
    return RunConfig.from_dict(params["base"])


def seed_config(params: dict[str, Any], seed: int) -> RunConfig:
    """The run of an extra seed: the base config (the run's own data) with ``seed`` and no checkpoints."""
    base = base_config(params)
    train = dataclasses.replace(base.train, seed=int(seed), save_checkpoints=False)
    name = params.get("base_name") or params["base_run"]
    return base.replace(train=train, name=f"{name} seed {seed}")


class SeedsKind:
    name = KIND

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = exp.params
        seeds = [int(s) for s in params["seeds"]]
        base = base_run(exp, store)
        if exp.run_ids().get(role(seeds[0])) != base.id:
            exp.record_run(role(seeds[0]), base.id)  # the runner then reuses it ("train or load")
        plan = [(role(seeds[0]), base.config)]  # exactly its config: the same run
        existing = {int(seed): run_id for seed, run_id in params.get("existing", {}).items()}
        for seed in seeds[1:]:
            if seed in existing:  # a finished run of the same config with this seed (any origin)
                run = store.find_id(existing[seed])
                if run is None:
                    raise RunError(
                        f"run {existing[seed]} (seed {seed}) of experiment {exp.id} is no longer in the store"
                    )
                if exp.run_ids().get(role(seed)) != run.id:
                    exp.record_run(role(seed), run.id)
                plan.append((role(seed), run.config))
            else:
                plan.append((role(seed), seed_config(params, seed)))
        return plan

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        for name, value in seeds_results(exp, store).items():
            exp.write_result(name, value)

    def role_label(self, role_name: str) -> str:
        seed = seed_of(role_name)
        return role_name if seed is None else f"seed {seed}"

    def role_order(self, exp: Experiment, role_name: str) -> tuple:
        planned = [role(s) for s in exp.params.get("seeds", [])]
        return (planned.index(role_name), "") if role_name in planned else (len(planned), role_name)

    def report(self, exp: Experiment, store: RunStore) -> str:
        return seeds_report(exp)

    def sections(self, exp: Experiment) -> list[Section]:
        return seeds_sections(exp)


def seed_runs(exp: Experiment, store: RunStore) -> dict[int, Run]:
    """{seed: run} of the experiment's recorded runs, in its seed order (seeds without a run left out)."""
    out = {}
    for seed in exp.params["seeds"]:
        run = exp.run(role(seed), store)
        if run is not None:
            out[int(seed)] = run
    return out


def seeds_results(exp: Experiment, store: RunStore) -> dict[str, Any]:
    """per_example (seed_table of every seed's main metrics, regions by the base run's default rule, its
    kind's: :meth:`Run.region_rule`, as its map draws them), summary
    (stability_summary, with the seeds' run ids, and the same for the eval-mode metrics under "eval"
    when every run recorded them too) and per_example_eval then."""
    runs = seed_runs(exp, store)
    rule = next(iter(runs.values())).region_rule() if runs else None
    frames = {seed: with_regions(run.metrics(), rule) for seed, run in runs.items()}
    summary = stability_summary(frames)
    summary["base_run"] = exp.params["base_run"]
    summary["runs"] = {str(seed): run.id for seed, run in runs.items()}
    train = base_config(exp.params).train
    summary["record"] = train.record
    if runs:
        summary["view"] = next(iter(runs.values())).view_label()
    if runs:  # what a row of the map is: an example, a word, an (example, label)
        summary["units"] = next(iter(runs.values())).task_kind.unit.plural()
    out: dict[str, Any] = {PER_EXAMPLE: seed_table(frames)}
    if all(run.has_metrics(Source.EVAL) for run in runs.values()):
        evals = {seed: with_regions(run.metrics(Source.EVAL), rule) for seed, run in runs.items()}
        summary[Source.EVAL] = stability_summary(evals)
        summary[Source.EVAL]["view"] = train.view_label(Source.EVAL)
        summary[Source.EVAL]["units"] = summary.get("units")
        out[PER_EXAMPLE_EVAL] = seed_table(evals)
    out[SUMMARY] = summary
    return out


# --------------------------------------------------------------------------- reading the results


def _ordered(values: dict[str, Any]) -> list[tuple[str, Any]]:
    """A summary's {metric: value} in the order confidence, variability, correctness, aum (JSON sorts keys)."""
    order = [m for m in SUMMARY_METRICS if m in values] + sorted(set(values) - set(SUMMARY_METRICS))
    return [(m, values[m]) for m in order]


def summary_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Rows metric, mean pairwise Spearman (higher = the seeds rank the examples alike) and the
    Spearman-Brown reliability of the k-seed mean."""
    k = summary.get("n_seeds")
    rows = [
        {
            "metric": METRIC_LABELS.get(m, m),
            "mean pairwise Spearman": rho,
            f"reliability of the {k}-seed mean (Spearman-Brown)": summary.get("spearman_brown", {}).get(m),
        }
        for m, rho in _ordered(summary.get("spearman", {}))
    ]
    return pd.DataFrame(rows)


def region_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Rows measure, value: pairwise region agreement (over every unit, and leaving out the units easy in
    both seeds of a pair when the summary has it) and the share of units stable in every seed."""
    units = summary.get("units", task_kinds.DEFAULT.unit.plural())
    rows = [
        {"measure": "region agreement (mean over pairs of seeds)", "value": summary.get("region_agreement")}
    ]
    if "region_agreement_not_easy" in summary:  # summaries written before it lack it
        rows.append(
            {
                "measure": f"region agreement leaving out the {units} easy-to-learn in both seeds of a pair",
                "value": summary.get("region_agreement_not_easy"),
            }
        )
    rows.append(
        {"measure": f"{units} in the same region in every seed", "value": summary.get("stable_share")}
    )
    return pd.DataFrame(rows)


def rule_words(summary: dict[str, Any]) -> str:
    """How the summary's regions were drawn, in words: "by threshold on variability" (summaries written
    before the rule was kept: ranked on their axis)."""
    rule = summary.get("regions") or {}
    axis = rule.get("axis") or summary.get("axis", "variability")  # before axes: variability's regions
    method = "ranked by" if rule.get("method", "rank") == "rank" else f"by {rule['method']} on"
    return f"{method} {METRIC_LABELS.get(axis, axis)}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary in a few plain lines (``cartomap show``, ``cartomap seeds``)."""

    def num(value) -> str:
        return "–" if value is None else f"{value:.2f}"

    k = summary.get("n_seeds")
    spearman = summary.get("spearman", {})
    brown = summary.get("spearman_brown", {})
    lines = [
        f"recordings: {summary.get('view', 'the runs main metrics (not named when they were summarised)')}; "
        f"regions {rule_words(summary)}",
        "Spearman between seeds: "
        + ", ".join(f"{METRIC_LABELS.get(m, m)} {num(r)}" for m, r in _ordered(spearman)),
        f"region agreement {num(summary.get('region_agreement'))}"
        + (
            f" (leaving out those easy in both seeds: {num(summary['region_agreement_not_easy'])})"
            if "region_agreement_not_easy" in summary
            else ""
        )
        + f" · same region in all {k} seeds {num(summary.get('stable_share'))}",
        f"reliability of the {k}-seed mean map (Spearman-Brown): "
        + ", ".join(f"{METRIC_LABELS.get(m, m)} {num(r)}" for m, r in _ordered(brown)),
    ]
    return lines


def seeds_report(exp: Experiment) -> str:
    from cartomap.scores.reports import markdown_table

    summary = exp.result(SUMMARY) or {}
    out = [_heading(summary, "")]
    out += ["", markdown_table(summary_table(summary)), "", markdown_table(region_table(summary))]
    if summary.get(Source.EVAL):
        out += ["", _heading(summary[Source.EVAL], " (eval-mode recordings)"), ""]
        out += [
            markdown_table(summary_table(summary[Source.EVAL])),
            "",
            markdown_table(region_table(summary[Source.EVAL])),
        ]
    return "\n".join(out)


def _heading(summary: dict[str, Any], what: str) -> str:
    seeds = ", ".join(str(s) for s in summary.get("seeds", []))
    units = summary.get("units", task_kinds.DEFAULT.unit.plural())  # summaries written before the field
    return f"Stability of the map over {summary.get('n_seeds')} seeds ({seeds}){what}, {summary.get('n_examples')} {units}"


def seeds_sections(exp: Experiment) -> list[Section]:
    summary = exp.result(SUMMARY)
    if not isinstance(summary, dict):
        return []
    out = [
        Section(_heading(summary, "") + ": higher = more stable", summary_table(summary)),
        Section("Regions over the seeds", region_table(summary)),
    ]
    evals = summary.get(Source.EVAL)
    if evals:
        out.append(Section(_heading(evals, " (eval-mode recordings)"), summary_table(evals)))
        out.append(Section("Regions over the seeds (eval-mode recordings)", region_table(evals)))
    return out


# --------------------------------------------------------------------------- entry points


def seeds_params(run: Run, seeds: tuple[int, ...]) -> dict[str, Any]:
    return {
        "base": run.own_config().to_dict(),
        "base_run": run.id,
        "base_name": run.config.name or "",
        "seeds": [int(s) for s in seeds],
    }


def create_seeds(
    store: ExperimentStore, run: Run, n_seeds: int = 3, seeds=None, name: str = ""
) -> Experiment:
    """The seeds experiment of a finished ``run`` (the existing one, or a new queued one): ``n_seeds``
    seeds in all, the run's own first, then own + 1, own + 2, ...; or the run's own and ``seeds``.
    RunError for a run that is not done or recorded no dynamics."""
    if run.state != State.DONE:
        raise RunError(f"run {run.id} is {run.state}; a seeds experiment starts from a finished run")
    if not recorded_sources(run.config.train.record) or not run.has_metrics():
        raise RunError(f"run {run.id} recorded no training dynamics: there is no map to repeat")
    if not run.config.origin.kind.trains_here:
        raise RunError(
            f"run {run.id} was recorded by {run.config.origin.kind}, not cartomap's loop: it cannot be retrained"
        )
    picked = pick_seeds(run.config.train.seed, n_seeds, seeds)
    exp = store.create(KIND, seeds_params(run, picked), name=name or f"seeds of {run.config.name or run.id}")
    if role(picked[0]) not in exp.run_ids():
        exp.record_run(role(picked[0]), run.id)
    return exp


def _without_seed(run: Run) -> tuple[dict, tuple]:
    """What makes ``run`` the run it is, but for its seed: the config identity without ``train.seed`` (and
    a Trainer's ``seed`` / ``data_seed`` among its recorded settings) and the data fingerprints."""
    identity = run.config.identity()
    identity["train"].pop("seed", None)
    origin = identity.get("origin")
    if origin and origin.get("settings"):
        settings = json.loads(origin["settings"])
        for key in ("seed", "data_seed"):
            settings.pop(key, None)
        origin["settings"] = json.dumps(settings, sort_keys=True)
    info = run.info
    data = (info.get("train_fingerprint"), info.get("dev_fingerprint"))
    data += tuple(t.get("fingerprint") for t in info.get("tests", []))
    return identity, data


def seed_siblings(run: Run, run_store: RunStore) -> dict[int, Run]:
    """{seed: run} of the finished runs in the store that are ``run`` but for their seed (same config
    otherwise, same data), ``run`` itself included: runs a user trained with several seeds (their own
    Trainer script with DataMapCallback, ``cartomap train --seed``) make a seeds experiment without any
    training (:func:`create_seeds_from_runs`)."""
    target = _without_seed(run)
    out = {}
    for other in run_store.list():
        try:
            if other.id != run.id and (other.state != State.DONE or _without_seed(other) != target):
                continue
        except (CartomapError, OSError, ValueError):
            continue  # a damaged run is nobody's sibling
        out.setdefault(int(other.config.train.seed), other)
    out[int(run.config.train.seed)] = run
    return dict(sorted(out.items()))


def other_seeds(run: Run, run_store: RunStore) -> dict[int, Run]:
    """:func:`seed_siblings` but ``run`` itself: the other seeds' runs (a review queue's seed votes)."""
    return {seed: other for seed, other in seed_siblings(run, run_store).items() if other.id != run.id}


def create_seeds_from_runs(store: ExperimentStore, run: Run, others: list[Run], name: str = "") -> Experiment:
    """A seeds experiment over finished runs that are ``run`` but for their seed (any origin: nothing is
    trained); DataError when one of ``others`` differs in more than its seed or shares a seed."""
    if run.state != State.DONE or not run.has_metrics():
        raise RunError(
            f"run {run.id} is {run.state}; a seeds experiment starts from a finished run with a map"
        )
    target = _without_seed(run)
    existing: dict[int, str] = {}
    for other in others:
        if other.state != State.DONE or _without_seed(other) != target:
            raise DataError(
                f"run {other.id} is not run {run.id} trained with another seed (its config or data differ, "
                "or it is not done)",
                field="runs",
            )
        seed = int(other.config.train.seed)
        if seed == int(run.config.train.seed) or seed in existing:
            raise DataError(f"two of the runs have seed {seed}", field="runs")
        existing[seed] = other.id
    picked = (int(run.config.train.seed), *existing)
    params = seeds_params(run, picked) | {"existing": {str(k): v for k, v in existing.items()}}
    exp = store.create(KIND, params, name=name or f"seeds of {run.config.name or run.id}")
    for seed, run_id in [(picked[0], run.id), *existing.items()]:
        if role(seed) not in exp.run_ids():
            exp.record_run(role(seed), run_id)
    return exp


def seeds_of(run: Run, exp_store: ExperimentStore) -> Experiment | None:
    """The newest seeds experiment (done or not) whose base is ``run``; None when there is none."""
    for exp in exp_store.list(KIND):
        try:
            if exp.params.get("base_run") == run.id:
                return exp
        except (OSError, ValueError, KeyError):
            continue
    return None


def done_seeds_of(run: Run, exp_store: ExperimentStore) -> Experiment | None:
    """The newest finished seeds experiment (with its results) whose base is ``run``; else None."""
    for exp in exp_store.list(KIND):
        try:
            if exp.params.get("base_run") != run.id or exp.state != State.DONE:
                continue
        except (OSError, ValueError, KeyError):
            continue
        if isinstance(exp.result(SUMMARY), dict):
            return exp
    return None
