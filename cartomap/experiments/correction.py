"""Retrain after review: what the review of suspected label errors changed.

``correction``: from a finished base run and a decisions file (:mod:`cartomap.data.decisions`: one row
per queued example, keep / relabel / remove / unsure / unreviewed), three training sets made from the
base run's own copy of its data, each trained with the base run's config and the same seeds:

* ``original``: the training set unchanged. The base run's own seed is the base run itself (recorded
  for the role, never retrained, as in the seeds kind); other seeds reuse finished runs that are the base
  run but for their seed (:func:`cartomap.experiments.seeds.seed_siblings`), else train.
* ``pruned``: every queued example dropped, what blind pruning of the queue would do.
* ``corrected``: relabels applied, removals dropped, keep / unsure / unreviewed unchanged.

Every run is evaluated on the base run's own dev and test sets. The results: accuracy per role, set and
seed (``scores``), mean ± std over the seeds with the difference to ``original`` and a paired t-test
over the seeds (``accuracy``), the dev / test examples whose prediction changed from original to
corrected, seed by seed (``changed``: fixed, broken or still wrong) and the counts (``summary``). The
decisions are copied into the experiment (``decisions.parquet``) when it is made: it does not depend on
the file staying where it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.compare import dev_predictions
from cartomap.analysis.evaluation import predictions_on_test
from cartomap.config import DataConfig, OrderConfig, RunConfig
from cartomap.data import derived
from cartomap.data.dataset import TextDataset
from cartomap.data.decisions import apply_decisions, decision_counts, read_decisions
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError, RunError
from cartomap.experiments.seeds import seed_siblings
from cartomap.experiments.store import (
    Experiment,
    ExperimentStore,
    Section,
    base_run,
    check_run_count,
    grid_role,
    method_of,
)
from cartomap.io import file_stamp
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.scores.reports import markdown_table, paired_test
from cartomap.tasks import registry as task_kinds
from cartomap.tasks import support

KIND = "correction"
ORIGINAL, PRUNED, CORRECTED = "original", "pruned", "corrected"
ROLES = (ORIGINAL, PRUNED, CORRECTED)
ROLE_NAMES = {
    ORIGINAL: "original",
    PRUNED: "pruned (queue dropped)",
    CORRECTED: "corrected (review applied)",
}
DECISIONS_FILE = "review_decisions.parquet"  # the experiment folder's copy of the decisions, checked
SCORES, ACCURACY, CHANGED, SUMMARY = "scores", "accuracy", "changed", "summary"
FIXED, BROKEN, STILL_WRONG = "fixed", "broken", "still wrong"
CHANGES = (FIXED, BROKEN, STILL_WRONG)
REPORT_ROWS = 50  # changed predictions listed by `cartomap report` (all are in results/changed.parquet)


# --------------------------------------------------------------------------- parameters and data
def pick_seeds(base_seed: int, n_seeds: int = 3, seeds=None) -> tuple[int, ...]:
    """The base run's seed first, then ``seeds`` (duplicates dropped), else base + 1, base + 2, ... up to
    ``n_seeds`` in all. DataError for fewer than 1, or for more runs than an experiment may make (three
    per seed: original, pruned and corrected)."""
    if seeds:
        picked = [int(base_seed)] + [int(s) for s in seeds]
    else:
        if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or n_seeds < 1:
            raise DataError(f"expected a number of seeds >= 1, got {n_seeds!r}", field="seeds")
        check_run_count(
            len(ROLES) * int(n_seeds), f"{len(ROLES)} training sets x {int(n_seeds):,} seeds", "seeds"
        )
        picked = [int(base_seed) + k for k in range(int(n_seeds))]
    picked = list(dict.fromkeys(picked))
    check_run_count(len(ROLES) * len(picked), f"{len(ROLES)} training sets x {len(picked):,} seeds", "seeds")
    return tuple(picked)


def base_config(params: dict[str, Any]) -> RunConfig:
    return RunConfig.from_dict(params["base"])


def role_config(params: dict[str, Any], role: str, seed: int, data: DataConfig | None = None) -> RunConfig:
    """The base config (the run's own data) on ``data`` (default: its training set) with ``seed`` and no
    end-of-epoch checkpoints."""
    base = base_config(params)
    train = dataclasses.replace(base.train, seed=int(seed), save_checkpoints=False)
    name = params.get("base_name") or params["base_run"]
    return base.replace(data=data or base.data, train=train, name=f"{name} {role} seed {seed}")


def checkbase_run(run: Run) -> None:
    """RunError unless ``run`` can be retrained and has a set to be evaluated on; its task kind first."""
    support.CORRECTION.require(run.task_kind, location=f"run {run.id}")
    if run.state != State.DONE:
        raise RunError(f"run {run.id} is {run.state}; a retrain after review starts from a finished run")
    if not run.config.origin.kind.trains_here:
        raise RunError(
            f"run {run.id} was recorded by {run.config.origin.kind}, not cartomap's loop: it cannot be retrained"
        )
    if run.config.order != OrderConfig():
        raise RunError(
            f"run {run.id} trains with the order {run.config.order.name!r}; a retrain after review needs the "
            "standard shuffled order (a curriculum's scores do not cover a corrected training set)"
        )
    if "dev" not in run.data_sets() and not run.test_names:
        raise RunError(f"run {run.id} has no dev or test set: nothing to evaluate the retrained models on")


def check_sets(train: TextDataset, decisions: pd.DataFrame) -> None:
    """DataError when the pruned or the corrected training set keeps fewer than two classes."""
    sets = apply_decisions(train, decisions)
    for what, data in (("pruned", sets.pruned), ("corrected", sets.corrected)):
        if len(np.unique(data.labels)) < 2:
            raise DataError(
                f"the {what} training set keeps {len(data)} of {len(train)} examples and fewer than two "
                "classes: nothing to train on",
                field="decisions",
            )


def decisions_hash(decisions: pd.DataFrame) -> str:
    """sha256 of what the decisions do to the training set: the queued ids (pruned drops them all), the
    removed ones and each relabel's new label. Provenance columns (who decided, the queue's scores, notes)
    and the row order do not change it: the same correction is the same experiment."""
    changes = {"remove", "relabel"}
    decision = decisions["decision"].astype(str)
    effect = pd.DataFrame(
        {
            "id": decisions["id"].astype(str),
            "change": decision.where(decision.isin(changes), "queued"),
            "label": decisions["label"].astype(str).where(decision == "relabel", ""),
        }
    ).sort_values("id", kind="stable")
    return hashlib.sha256(effect.to_json(orient="records").encode("utf-8")).hexdigest()


def decisions_of(exp: Experiment) -> pd.DataFrame:
    """The experiment's copy of its decisions (RunError when it is lost)."""
    path = exp.path / DECISIONS_FILE
    if not path.exists():
        raise RunError(f"experiment {exp.id} has lost its decisions ({path}); make it again")
    frame = pd.read_parquet(path)
    frame["id"] = frame["id"].astype(str)
    return frame


_SETS: dict[tuple, dict[str, DataConfig]] = {}


def training_sets(exp: Experiment) -> dict[str, DataConfig]:
    """{role: DataConfig} of the three training sets; pruned and corrected saved as derived datasets under
    the experiment's cache (once per process for an experiment and unchanged files)."""
    params = exp.params
    base = base_config(params)
    key = (exp.id, file_stamp(base.data.path), file_stamp(exp.path / DECISIONS_FILE))
    if key not in _SETS:
        train = load_dataset(base.data)
        decisions = decisions_of(exp)
        sets = apply_decisions(train, decisions)
        name = base.data.name or "train"
        counts = decision_counts(decisions)
        pruned = derived.save_dataset(
            sets.pruned, params["cache"], name=f"{name} minus {counts['queued']} queued"
        )
        corrected = derived.save_dataset(sets.corrected, params["cache"], name=f"{name} corrected by review")
        if len(_SETS) >= 8:
            _SETS.clear()
        _SETS[key] = {ORIGINAL: base.data, PRUNED: pruned, CORRECTED: corrected}
    return _SETS[key]


# --------------------------------------------------------------------------- the analysis (pure)
def changed_predictions(
    before: pd.DataFrame, after: pd.DataFrame, label_names, set_name: str = "", seed: int | None = None
) -> pd.DataFrame:
    """The examples whose prediction differs between ``before`` and ``after`` (frames id, texts, gold,
    pred of the same examples): set, seed, id, texts, gold, before, after (label names) and change:
    fixed (wrong before, right after), broken (right before, wrong after) or still wrong."""
    b = before.assign(id=before["id"].astype(str)).set_index("id")
    a = after.assign(id=after["id"].astype(str)).set_index("id")
    if set(a.index) != set(b.index) or len(a) != len(b):
        raise DataError(f"{set_name or 'the set'}: the two models were evaluated on different examples")
    a = a.loc[b.index]
    if not np.array_equal(a["gold"].to_numpy(), b["gold"].to_numpy()):
        raise DataError(f"{set_name or 'the set'}: the two models' gold labels differ")
    gold, pred0, pred1 = (x.to_numpy(dtype=np.int64) for x in (b["gold"], b["pred"], a["pred"]))
    moved = pred0 != pred1
    texts = task_kinds.text_fields_in(b.columns)
    names = np.asarray([str(n) for n in label_names], dtype=object)
    out = pd.DataFrame({"set": set_name, "seed": seed, "id": b.index[moved].to_numpy()})
    for column in texts:
        out[column] = b[column].to_numpy()[moved]
    out["gold"] = names[gold[moved]]
    out["before"] = names[pred0[moved]]
    out["after"] = names[pred1[moved]]
    out["change"] = np.select(
        [pred1[moved] == gold[moved], pred0[moved] == gold[moved]], [FIXED, BROKEN], default=STILL_WRONG
    )
    return out


def accuracy_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per set and role (scores: role, seed, set, accuracy): mean and std (ddof 1) over the seeds, n, and
    against ``original`` seed by seed: delta (mean of the paired differences) and p_value (paired t-test,
    :func:`cartomap.scores.reports.paired_test`; None with fewer than 2 seeds)."""
    rows = []
    for set_name in pd.unique(scores["set"]):
        part = scores[scores["set"] == set_name]
        base = part[part["role"] == ORIGINAL].set_index("seed")["accuracy"]
        for role in ROLES:
            values = part[part["role"] == role].set_index("seed")["accuracy"]
            if values.empty:
                continue
            row = {
                "set": set_name,
                "role": role,
                "mean": float(values.mean()),
                "std": float(values.std(ddof=1)) if len(values) > 1 else float("nan"),
                "n_seeds": int(len(values)),
                "delta": None,
                "p_value": None,
            }
            if role != ORIGINAL:
                seeds = [s for s in values.index if s in base.index]
                diff = values.loc[seeds].to_numpy() - base.loc[seeds].to_numpy()
                row["delta"] = float(diff.mean()) if len(diff) else None
                if len(seeds) >= 2:
                    row["p_value"] = paired_test(base.loc[seeds], values.loc[seeds])["p_value"]
            rows.append(row)
    return pd.DataFrame(rows, columns=["set", "role", "mean", "std", "n_seeds", "delta", "p_value"])


def change_counts(changed: pd.DataFrame, sets) -> pd.DataFrame:
    """Per set: how many predictions were fixed, broken and still wrong (summed over the seeds)."""
    rows = []
    for set_name in sets:
        part = changed[changed["set"] == set_name]
        rows.append({"set": set_name, **{c: int((part["change"] == c).sum()) for c in CHANGES}})
    return pd.DataFrame(rows, columns=["set", *CHANGES])


# --------------------------------------------------------------------------- the kind
def eval_sets(run: Run) -> list[tuple[str, str]]:
    """(which, display name) of the sets the runs are evaluated on: dev (when the run has one), then
    its test sets."""
    out = [("dev", "dev")] if "dev" in run.data_sets() else []
    return out + [(f"test_{k}", f"test: {name}") for k, name in enumerate(run.test_names)]


def predictions(run: Run, which: str) -> pd.DataFrame:
    """id, texts, gold, pred of a run on its dev set or test set ``test_<k>`` at its best epoch."""
    if which == "dev":
        return dev_predictions(run)
    return predictions_on_test(run, int(which.removeprefix("test_")))


class CorrectionKind:
    """original, pruned and corrected training sets x the same seeds, compared on the base run's sets."""

    name = KIND
    seeded = True  # roles are "<training set>@seed<s>"

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = exp.params
        seeds = [int(s) for s in params["seeds"]]
        base = base_run(exp, store)
        first = grid_role(ORIGINAL, seeds[0])
        if exp.run_ids().get(first) != base.id:
            exp.record_run(first, base.id)  # the runner reuses it ("train or load")
        plan = [(first, base.config)]
        existing = {int(seed): run_id for seed, run_id in params.get("existing", {}).items()}
        for seed in seeds[1:]:
            run = store.find_id(existing[seed]) if seed in existing else None
            if run is not None:  # a finished run that is the base run but for its seed
                if exp.run_ids().get(grid_role(ORIGINAL, seed)) != run.id:
                    exp.record_run(grid_role(ORIGINAL, seed), run.id)
                plan.append((grid_role(ORIGINAL, seed), run.config))
            else:
                plan.append((grid_role(ORIGINAL, seed), role_config(params, ORIGINAL, seed)))
        data = training_sets(exp)
        for role in (PRUNED, CORRECTED):
            plan += [(grid_role(role, seed), role_config(params, role, seed, data[role])) for seed in seeds]
        return plan

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        for name, value in correction_results(exp, store).items():
            exp.write_result(name, value)  # summary last: it marks completion

    def role_label(self, role: str) -> str:
        method = method_of(role)
        if method is None:
            return role
        return f"{ROLE_NAMES.get(method, method)} · seed {role.rpartition('@seed')[2]}"

    def role_order(self, exp: Experiment, role: str) -> tuple:
        planned = [grid_role(r, int(s)) for r in ROLES for s in exp.params.get("seeds", [])]
        return (planned.index(role), "") if role in planned else (len(planned), role)

    def report(self, exp: Experiment, store: RunStore) -> str:
        return correction_report(exp)

    def sections(self, exp: Experiment) -> list[Section]:
        return correction_sections(exp)


def correction_results(exp: Experiment, store: RunStore) -> dict[str, Any]:
    """scores, accuracy, changed and summary (in that order) from the experiment's finished runs."""
    params = exp.params
    seeds = [int(s) for s in params["seeds"]]
    base = base_run(exp, store)
    sets = eval_sets(base)
    label_names = list(base.label_names)
    rows, preds = [], {}
    for role in ROLES:
        for seed in seeds:
            run = exp.run(grid_role(role, seed), store)
            if run is None or run.state != State.DONE:
                raise RunError(f"experiment {exp.id}: the {role} run of seed {seed} is not done")
            for which, set_name in sets:
                frame = predictions(run, which)
                preds[role, seed, which] = frame
                accuracy = float((frame["gold"] == frame["pred"]).mean()) if len(frame) else float("nan")
                rows.append(
                    {"role": role, "seed": seed, "set": set_name, "accuracy": accuracy, "run_id": run.id}
                )
    scores = pd.DataFrame(rows, columns=["role", "seed", "set", "accuracy", "run_id"])
    parts = [
        changed_predictions(preds[ORIGINAL, s, w], preds[CORRECTED, s, w], label_names, name, s)
        for w, name in sets
        for s in seeds
    ]
    changed = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    decisions = decisions_of(exp)
    train = len(base.examples(columns=("id",)))
    counts = decision_counts(decisions)
    summary = {
        "base_run": base.id,
        "base_name": params.get("base_name", ""),
        "seeds": seeds,
        "sets": [name for _, name in sets],
        "label_names": label_names,
        "decisions": counts,
        "n_train": {ORIGINAL: train, PRUNED: train - counts["queued"], CORRECTED: train - counts["removed"]},
        "dropped": {PRUNED: counts["queued"], CORRECTED: counts["removed"]},
        "relabelled": counts["relabelled"],
        "changes": change_counts(changed, [name for _, name in sets]).to_dict(orient="records"),
        "runs": exp.run_ids(),
    }
    return {SCORES: scores, ACCURACY: accuracy_table(scores), CHANGED: changed, SUMMARY: summary}


# --------------------------------------------------------------------------- reading the results
def _mean_std(mean, std) -> str:
    if mean is None or pd.isna(mean):
        return "–"
    return f"{mean:.4f}" if std is None or pd.isna(std) else f"{mean:.4f} ± {std:.4f}"


def mean_table(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Rows role (in plan order), one column per set: the mean accuracy over the seeds (numbers)."""
    frame = accuracy.pivot(index="role", columns="set", values="mean")
    frame = frame.reindex(index=[r for r in ROLES if r in frame.index], columns=pd.unique(accuracy["set"]))
    frame.index = [ROLE_NAMES[r] for r in frame.index]
    return frame.rename_axis("training set").reset_index()


def mean_std_table(accuracy: pd.DataFrame) -> pd.DataFrame:
    """As :func:`mean_table`, the cells as text "mean ± std"."""
    rows = []
    for role in ROLES:
        part = accuracy[accuracy["role"] == role]
        if part.empty:
            continue
        row = {"training set": ROLE_NAMES[role]}
        row.update({r["set"]: _mean_std(r["mean"], r["std"]) for r in part.to_dict(orient="records")})
        rows.append(row)
    return pd.DataFrame(rows)


def delta_table(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per set, pruned and corrected against original: Δ accuracy (mean over seeds) and the paired p."""
    part = accuracy[accuracy["role"] != ORIGINAL]
    return pd.DataFrame(
        {
            "set": part["set"].to_numpy(),
            "training set": [ROLE_NAMES[r] for r in part["role"]],
            "Δ accuracy vs original": part["delta"].to_numpy(dtype=float),
            "p (paired t-test over seeds)": part["p_value"].to_numpy(dtype=float),
        }
    )


def seed_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Rows (set, seed), one column per training set: the accuracy of each seed's run."""
    frame = scores.pivot_table(index=["set", "seed"], columns="role", values="accuracy", sort=False)
    frame = frame.reindex(columns=[r for r in ROLES if r in frame.columns])
    frame.columns = [ROLE_NAMES[r] for r in frame.columns]
    return frame.reset_index()


def counts_lines(summary: dict[str, Any]) -> list[str]:
    d = summary["decisions"]
    n = summary["n_train"]
    same = f" ({d['relabel_same']} to the same label, counted as keep)" if d.get("relabel_same") else ""
    return [
        f"{d['queued']} queued examples: keep {d['keep']}, relabel {d['relabel']}{same}, remove {d['remove']}, "
        f"unsure {d['unsure']}, unreviewed {d['unreviewed']}.",
        f"Training sets: original {n[ORIGINAL]} examples; pruned {n[PRUNED]} ({summary['dropped'][PRUNED]} "
        f"dropped); corrected {n[CORRECTED]} ({summary['dropped'][CORRECTED]} dropped, "
        f"{summary['relabelled']} relabelled).",
        f"Seeds: {', '.join(str(s) for s in summary['seeds'])}"
        + ("" if len(summary["seeds"]) > 1 else " (one seed: no significance test)")
        + ".",
    ]


def correction_report(exp: Experiment) -> str:
    summary = exp.result(SUMMARY)
    if not isinstance(summary, dict):
        raise RunError(f"experiment {exp.id} has no results yet (state: {exp.state})")
    accuracy, scores, changed = exp.result(ACCURACY), exp.result(SCORES), exp.result(CHANGED)
    out = [f"Retrain after review of run {summary['base_run']}", "", *counts_lines(summary), ""]
    out += ["### Accuracy (mean ± std over seeds)", "", markdown_table(mean_std_table(accuracy)), ""]
    out += ["### Against the original", "", markdown_table(delta_table(accuracy)), ""]
    out += ["### Per seed", "", markdown_table(seed_table(scores)), ""]
    out += ["### Predictions changed from original to corrected", ""]
    out += [markdown_table(pd.DataFrame(summary["changes"], columns=["set", *CHANGES])), ""]
    if changed is not None and len(changed):
        out.append(markdown_table(changed.head(REPORT_ROWS)))
        if len(changed) > REPORT_ROWS:
            out.append(f"\n… {len(changed) - REPORT_ROWS} more in {exp.results_dir / (CHANGED + '.parquet')}")
    else:
        out.append("No prediction changed.")
    return "\n".join(out)


def correction_sections(exp: Experiment) -> list[Section]:
    summary = exp.result(SUMMARY)
    if not isinstance(summary, dict):
        return []
    accuracy, scores, changed = exp.result(ACCURACY), exp.result(SCORES), exp.result(CHANGED)
    means = mean_table(accuracy)
    out = [
        Section(
            "Accuracy per training set, mean over seeds (" + " ".join(counts_lines(summary)) + ")",
            means,
            best_columns=tuple(c for c in means.columns if c != "training set"),
        ),
        Section("Mean ± std over seeds", mean_std_table(accuracy)),
        Section("Against the original: Δ accuracy and paired t-test over seeds", delta_table(accuracy)),
        Section("Accuracy per seed", seed_table(scores)),
        Section(
            "Changes of prediction from original to corrected (summed over seeds)",
            pd.DataFrame(summary["changes"], columns=["set", *CHANGES]),
        ),
    ]
    if changed is not None and len(changed):
        out.append(Section("Examples whose prediction changed (original → corrected, per seed)", changed))
    return out


# --------------------------------------------------------------------------- entry points
def correction_params(
    run: Run, seeds: tuple[int, ...], decisions: pd.DataFrame, cache: str
) -> dict[str, Any]:
    return {
        "base": run.own_config().to_dict(),
        "base_run": run.id,
        "base_name": run.config.name or "",
        "seeds": [int(s) for s in seeds],
        "decisions_sha256": decisions_hash(decisions),
        "cache": cache,
    }


def create_correction(
    store: ExperimentStore,
    run: Run,
    decisions_path: str | Path,
    n_seeds: int = 3,
    seeds=None,
    name: str = "",
) -> Experiment:
    """The retrain after review of a finished ``run`` with the decisions file at ``decisions_path`` (the
    existing experiment, or a new queued one holding a checked copy of the decisions). Seeds: ``n_seeds``
    in all, the run's own first, or the run's own and ``seeds``. Finished runs that are ``run`` but for
    their seed are reused for ``original``. RunError for a run that cannot be retrained, DataError (naming
    the file, row and column) for bad decisions; nothing is written then."""
    checkbase_run(run)
    picked = pick_seeds(run.config.train.seed, n_seeds, seeds)  # a count past the cap: before any reading
    train = load_dataset(run.data_config("train"))
    decisions = read_decisions(decisions_path, train)
    check_sets(train, decisions)
    siblings = seed_siblings(run, store.runs)
    existing = {str(s): siblings[s].id for s in picked[1:] if s in siblings}
    params = correction_params(run, picked, decisions, str(Path(store.root).resolve()))
    params["existing"] = existing
    label = name or f"review retrain of {run.config.name or run.id} ({Path(decisions_path).name})"
    exp = store.create(KIND, params, name=label, files={DECISIONS_FILE: decisions})
    if grid_role(ORIGINAL, picked[0]) not in exp.run_ids():
        exp.record_run(grid_role(ORIGINAL, picked[0]), run.id)
    for seed, run_id in existing.items():
        if grid_role(ORIGINAL, int(seed)) not in exp.run_ids():
            exp.record_run(grid_role(ORIGINAL, int(seed)), run_id)
    return exp


def corrections_of(run: Run, exp_store: ExperimentStore) -> list[Experiment]:
    """The retrain-after-review experiments whose base is ``run``, newest first."""
    out = []
    for exp in exp_store.list(KIND):
        try:
            if exp.params.get("base_run") == run.id:
                out.append(exp)
        except (OSError, ValueError, KeyError):
            continue
    return out
