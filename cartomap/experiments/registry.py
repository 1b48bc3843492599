"""Experiment kinds: the plug-in contract and the registry of the built-in kinds.

A *kind* is a small plug-in (in the spirit of Hugging Face ``evaluate``'s modules). Two methods
are required, the rest have defaults here, so callers never switch on a kind's name::

    class MyKind:
        name = "my-kind"
        def planned_runs(self, exp, store) -> list[tuple[str, RunConfig]]:
            "every run that can be defined now, given the finished ones (role, config)"
        def finalize(self, exp, store) -> None:
            "write results/ once every planned run is done"
        # optional
        seeded = False                         # roles are "<method>@seed<s>" (best-on-validation applies)
        def role_label(self, role) -> str      # what a person reads ("Model F3" for "fold_3")
        def role_order(self, exp, role)        # sort key of a role (the plan's order)
        def report(self, exp, store) -> str    # the results as markdown (`cartomap report`)
        def sections(self, exp) -> list[Section]   # result tables the Compare page shows

Built-in kinds: pruning, curriculum, combination, seeds, correction (retrain after review), token_folds
(out-of-fold word probabilities of a token data set).
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from cartomap import plugins
from cartomap.analysis.compare import run_overview
from cartomap.config import RunConfig
from cartomap.errors import RunError
from cartomap.experiments import combination, correction, curriculum, pruning, seeds, token_folds
from cartomap.experiments.store import Experiment, ExperimentStore, Section, method_of
from cartomap.runs.store import Run, RunStore
from cartomap.scores.reports import best_on_validation


@runtime_checkable
class ExperimentKind(Protocol):
    name: str

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]: ...

    def finalize(self, exp: Experiment, store: RunStore) -> None: ...


KINDS: dict[str, ExperimentKind] = plugins.Registry(plugins.EXPERIMENT_KINDS, ExperimentKind)  # + plug-ins


def register(kind: ExperimentKind) -> ExperimentKind:
    """Add (or replace) a kind; returns it."""
    KINDS[kind.name] = kind
    return kind


for _kind in (
    pruning.PruningKind(),
    curriculum.CurriculumKind(),
    combination.CombinationKind(),
    seeds.SeedsKind(),
    correction.CorrectionKind(),
    token_folds.TokenFoldsKind(),
):
    register(_kind)
KINDS.register = register


def kind_of(name: str) -> ExperimentKind:
    if name not in KINDS:
        raise RunError(f"unknown experiment kind {name!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[name]


def create(store: ExperimentStore, kind: str, params: dict[str, Any], name: str = "") -> Experiment:
    """The experiment of a known ``kind`` with ``params`` (the existing one, or a new queued one)."""
    kind_of(kind)
    return store.create(kind, params, name=name)


def is_seeded(exp: Experiment) -> bool:
    """Whether the experiment's roles form a method x seed grid (so "best on validation" applies)."""
    return bool(getattr(kind_of(exp.kind), "seeded", False))


def role_label(exp: Experiment, role: str | None) -> str:
    """A role as a person reads it (the kind's words; the role itself by default)."""
    if not role:
        return ""
    label = getattr(kind_of(exp.kind), "role_label", None)
    return label(role) if label else role


def role_order(exp: Experiment, role: str) -> tuple:
    """Sort key of a role: the kind's plan order; by name by default."""
    order = getattr(kind_of(exp.kind), "role_order", None)
    return order(exp, role) if order else (0, role)


def sorted_roles(exp: Experiment, roles) -> list[str]:
    return sorted(roles, key=lambda role: role_order(exp, role))


def report(exp: Experiment, store: RunStore) -> str:
    """A finished experiment's results as markdown: a heading, then the kind's report (its summary
    result as JSON when the kind has none)."""
    head = f"## Experiment {exp.id} ({exp.kind}) {exp.spec.get('name', '')}".rstrip()
    write = getattr(kind_of(exp.kind), "report", None)
    body = write(exp, store) if write else json.dumps(exp.result("summary"), indent=2, default=str)
    return f"{head}\n\n{body}"


def sections(exp: Experiment) -> list[Section]:
    """The result tables of a finished experiment (none by default)."""
    show = getattr(kind_of(exp.kind), "sections", None)
    return list(show(exp)) if show else []


def experiment_runs(exp: Experiment, run_store: RunStore, best_only: bool = False) -> dict[str, Run]:
    """The experiment's runs as ``{"<experiment name>: <role>": run}`` in the kind's role order.

    ``best_only`` (seeded kinds): per method (the part of a role "method@seed<s>" before "@seed")
    only the run with the highest dev accuracy at its best epoch (first of ties, as
    :func:`cartomap.scores.reports.best_on_validation`); roles that are no grid run (the data-map
    baseline) are left out. Runs deleted from the store, and runs without a finished epoch when
    ``best_only``, are skipped.
    """
    runs: dict[str, Run] = {}
    ids = exp.run_ids()
    for role in sorted_roles(exp, ids):
        run = run_store.find_id(ids[role])
        if run is not None:
            runs[role] = run
    if best_only and is_seeded(exp):
        rows = [
            {"method": method_of(role), "role": role, "dev_accuracy": run_overview(run)["dev_accuracy"]}
            for role, run in runs.items()
            if method_of(role) is not None
        ]
        frame = pd.DataFrame(rows, columns=["method", "role", "dev_accuracy"])
        frame["dev_accuracy"] = pd.to_numeric(frame["dev_accuracy"], errors="coerce")
        frame = frame.dropna(subset=["dev_accuracy"])
        keep = set(best_on_validation(frame, "method", "dev_accuracy")["role"]) if len(frame) else set()
        runs = {role: run for role, run in runs.items() if role in keep}
    return {f"{exp.name}: {role}": run for role, run in runs.items()}
