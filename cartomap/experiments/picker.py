"""The dashboard's run picker: which runs it lists, in what order, under which labels, and its default.

Standalone runs come first (newest first), then the runs each experiment trained (its folds,
curriculum or seed runs), grouped under the experiment (newest experiment first, roles in the kind's
plan order) and labelled with it: ``pruning 'snli' › Model F2 · (id) · done · ...``. Which runs belong
to an experiment is its ``runs.json``; a seeds experiment's base run is the user's own run, not one of
its sub-runs. The default is the first listed run that has a data map (its metrics), else the first
finished one, else the first healthy one, else the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cartomap.errors import CartomapError
from cartomap.experiments import registry
from cartomap.experiments.store import Experiment
from cartomap.runs.progress import run_label
from cartomap.runs.state import State
from cartomap.runs.store import Run

GROUP_SEPARATOR = " › "


@dataclass(frozen=True)
class PickerRun:
    """One entry of the picker: the run, its label, and the experiment it belongs to ("" standalone)."""

    run: Run
    label: str
    experiment: str = ""


def _readable(call, default):
    try:
        return call()
    except (CartomapError, OSError, ValueError, KeyError, TypeError):
        return default


def experiment_runs(experiments: Iterable[Experiment]) -> dict[str, tuple[Experiment, str]]:
    """run id -> (experiment, role) of every run an experiment trained. ``experiments`` newest first: a
    run shared by two experiments is listed under the newer. A seeds experiment's base run stays out."""
    out: dict[str, tuple[Experiment, str]] = {}
    for exp in experiments:
        params = _readable(lambda e=exp: e.params, {})
        base = params.get("base_run") if isinstance(params, dict) else None
        for role, run_id in _readable(exp.run_ids, {}).items():
            if run_id != base:
                out.setdefault(run_id, (exp, role))
    return out


def group_label(exp: Experiment, role: str) -> str:
    """``pruning 'snli' › Model F2``: the experiment's kind and name, then the run's role in it."""
    kind = _readable(lambda: exp.kind, "experiment")
    name = _readable(lambda: exp.name, exp.id)
    role_text = _readable(lambda: registry.role_label(exp, role), role)
    return f"{kind} '{name}'{GROUP_SEPARATOR}{role_text}"


def _run_text(run: Run) -> str:
    return _readable(lambda: run_label(run.summary()), f"{run.id} · unreadable")


def picker_runs(runs: list[Run], experiments: list[Experiment]) -> list[PickerRun]:
    """The picker's entries in order (``runs`` and ``experiments`` newest first, as the stores list them)."""
    owner = experiment_runs(experiments)
    entries = [PickerRun(run, _run_text(run)) for run in runs if run.id not in owner]
    by_id = {run.id: run for run in runs}
    for exp in experiments:
        mine = [(role, by_id[rid]) for rid, (e, role) in owner.items() if e.id == exp.id and rid in by_id]
        order = lambda item, e=exp: _readable(lambda: registry.role_order(e, item[0]), (9, item[0]))  # noqa: E731
        for role, run in sorted(mine, key=order):
            entries.append(PickerRun(run, f"{group_label(exp, role)} · {_run_text(run)}", exp.id))
    return entries


def _state(run: Run) -> str:
    return _readable(lambda: run.status()["state"], State.UNKNOWN)


def default_run(entries: list[PickerRun]) -> str | None:
    """The run picked when none is chosen: the first entry with a data map (metrics), else the first
    finished one, else the first healthy one, else the first; None without entries."""
    healthy = [e.run for e in entries if not _readable(e.run.problems, ["unreadable"])]
    for candidates in (
        [r for r in healthy if _readable(r.has_metrics, False)],
        [r for r in healthy if _state(r) == State.DONE],
        healthy,
        [e.run for e in entries],
    ):
        if candidates:
            return candidates[0].id
    return None
