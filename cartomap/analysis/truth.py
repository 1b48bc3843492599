"""The truth report of a run: how the data map and every detector agree with human judgement.

For a run whose data has votes (or annotator labels) or a known-error column
(:mod:`cartomap.data.annotations`):

* ``spearman``: Spearman's rho of every data-map metric (confidence, the ambiguity scores, correctness and
  every other numeric score column of the run's unit, :func:`metric_columns`: AUM, EL2N, forgetfulness,
  ...; and, given a seeds experiment's per-example table, ``<metric>_mean`` and ``<metric>_std``) with the
  human entropy (bits), with a bootstrap 95 % interval;
* ``detectors``: AP, AUROC and precision@k (k = 50, 100, 1 % of N) of every registered detector
  (:mod:`cartomap.scores.detectors`) serving the run's unit that the run can feed, for each target:
  ``gold_disagrees`` (gold != the human majority) and ``is_error`` (the known-error column), with
  bootstrap 95 % intervals;
* ``unavailable``: every registered detector serving the run's unit that it cannot feed yet (the reference,
  cleanlab's, without a pruning experiment's out-of-fold probabilities), what it needs and the command
  that makes it (:data:`HOW_TO_GET`).

The caller passes what analysis cannot find itself: the seeds experiment's table (``seeds``), a
pruning experiment's out-of-fold logits in the run's example order (``oof_logits``) and its fold
models' in-sample table (``folds``, :func:`cartomap.scores.detectors.fold_table`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import MAIN_METRICS
from cartomap.data.annotations import ERROR_COLUMN, vote_columns
from cartomap.errors import RunError
from cartomap.scores import ambiguity, detectors
from cartomap.scores import truth as stats
from cartomap.scores.columns import score_columns
from cartomap.scores.stability import SUMMARY_METRICS
from cartomap.tasks.units import Unit


def metric_columns(unit=Unit.EXAMPLE) -> tuple[str, ...]:
    """Data-map metric columns correlated with the human entropy, in order: confidence, every ambiguity
    score on ``unit``'s map (:func:`cartomap.scores.ambiguity.map_scores`), correctness, then the unit's
    other score columns (:func:`cartomap.scores.columns.score_columns`: what its detectors read), asked of
    the registries when called; the report leaves out those a run's metrics lack or hold as flags."""
    first = ("confidence", *ambiguity.map_scores(unit), "correctness")
    return (*first, *(c for c in score_columns(unit) if c not in first))


#: :func:`metric_columns` of the built-in scores (when the module is loaded).
METRICS: tuple[str, ...] = metric_columns()
#: Seed-table metrics whose mean and spread are correlated too (those a seeds table summarises).
SEED_METRICS: tuple[str, ...] = SUMMARY_METRICS
TARGETS = {"gold_disagrees": "gold ≠ human majority", ERROR_COLUMN: "known error"}
#: The detector the literature measures the others against (cleanlab's self-confidence, Northcutt et
#: al., 2021), named first among the ones a run cannot feed.
REFERENCE_DETECTOR = "cleanlab_self_confidence"
#: What each kind of detector input a run may lack is (the truth report names it for every detector it
#: leaves out; the caller may add the command that makes it, :func:`truth_report`'s ``commands``).
HOW_TO_GET = {
    detectors.OOF: "out-of-fold probabilities (k fold models that never trained on the example: a finished "
    "pruning experiment on the run's data)",
    detectors.FOLDS: "the fold models' own dynamics (a finished pruning experiment on the run's data)",
    detectors.SEEDS: "a finished seeds experiment of the run",
    detectors.EMBEDDINGS: "the run's embeddings",
    detectors.DYNAMICS: "metric columns the run's metrics lack",
    detectors.SENTENCES: "a token run's words grouped by sentence (token runs only)",
}
HUMAN_READ = (
    "id",
    "label",
    "human_n",
    "human_entropy",
    "human_majority",
    "human_majority_share",
    "gold_disagrees",
)


def has_human_judgement(run) -> bool:
    """Whether the run's examples carry votes (their human columns) or a known-error column."""
    try:
        columns = run.examples(columns=("gold_disagrees", ERROR_COLUMN)).columns
    except (OSError, ValueError):
        return False
    return any(c in columns for c in TARGETS)


def human_examples(run) -> pd.DataFrame:
    """The run's examples' id, label, vote counts, human columns and known errors (those it has)."""
    names = list(run.label_names)
    return run.examples(columns=(*HUMAN_READ, *vote_columns(names), ERROR_COLUMN))


def _aligned(table: pd.DataFrame | None, ids: list[str], what: str) -> pd.DataFrame | None:
    if table is None:
        return None
    by_id = table.assign(id=table["id"].astype(str)).drop_duplicates("id").set_index("id")
    missing = [i for i in ids if i not in by_id.index]
    if missing:
        raise RunError(f"the {what} lacks {len(missing)} of the run's examples (e.g. {missing[0]!r})")
    return by_id.loc[ids].reset_index()


def run_embeddings(run, ids: list[str]):
    """The run's [CLS] embeddings in ``ids`` order (for the neighbour detector), or None: when it has none,
    they do not cover every example, or the run is larger than
    :data:`cartomap.scores.detectors.MAX_KNN_EXAMPLES` (the exact k-NN would take too long)."""
    from cartomap.training.embeddings import load_embeddings

    if len(ids) > detectors.MAX_KNN_EXAMPLES:
        return None
    try:
        found = load_embeddings(run)
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    emb_ids, vectors = found
    pos = {str(i): k for k, i in enumerate(emb_ids)}
    if not all(i in pos for i in ids):
        return None
    return np.asarray(vectors)[[pos[i] for i in ids]]


def truth_report(
    run,
    seeds: pd.DataFrame | None = None,
    oof_logits=None,
    folds: pd.DataFrame | None = None,
    n_boot: int = stats.N_BOOT,
    seed: int = 0,
    ks: Sequence[int] | None = None,
    sources: dict[str, Any] | None = None,
    commands: dict[str, str] | None = None,
    source: str = MAIN_METRICS,
) -> dict[str, Any]:
    """The report (JSON-ready dict: ``run``, ``n``, ``targets`` {name: errors}, ``entropy``, ``spearman``
    rows, ``detectors`` rows, ``unavailable`` rows, ``n_boot``, ``seed``, ``ks``, ``sources``, ``view``).
    RunError when the run's data has neither votes nor a known-error column. ``commands``: {input kind:
    the command that makes it for this run}, told beside each detector left out for want of it.
    ``source``: the metrics file the map's metrics and the dynamics detectors read
    (:meth:`cartomap.runs.store.Run.metrics`; the run's main one by default), named in ``view``
    ({"metrics", "recording", "label"})."""
    examples = human_examples(run)
    ids = examples["id"].astype(str).tolist()
    targets = {t: examples[t].to_numpy(dtype=bool) for t in TARGETS if t in examples.columns}
    if not targets:
        raise RunError(
            f"run {run.id} has no human judgement: its data had no votes, annotator labels or known-error "
            "column (see --votes-column / --error-column)"
        )
    n = len(ids)
    # Votes may cover some examples only: the human target and the entropy are judged on those.
    voted = (
        examples["human_n"].to_numpy(dtype=np.int64) > 0
        if "human_n" in examples.columns
        else np.ones(n, dtype=bool)
    )
    masks = {t: (voted if t == "gold_disagrees" else np.ones(n, dtype=bool)) for t in targets}
    ks = list(ks) if ks is not None else stats.default_ks(int(max(m.sum() for m in masks.values())))
    metrics = _aligned(run.metrics(source), ids, "metrics file")
    seed_table = _aligned(seeds, ids, "seeds table")
    fold_table = _aligned(folds, ids, "fold table")
    labels = examples["label"].to_numpy(dtype=np.int64)
    report: dict[str, Any] = {
        "run": run.id,
        "n": n,
        "targets": {t: int(v[masks[t]].sum()) for t, v in targets.items()},
        "judged": {t: int(masks[t].sum()) for t in targets},
        "n_boot": int(n_boot),
        "seed": int(seed),
        "ks": ks,
        "sources": dict(sources or {}),
        "view": {
            "metrics": source,
            "recording": run.recorded_source(source),
            "label": run.view_label(source),
        },
        "spearman": [],
        "detectors": [],
    }
    if "human_entropy" in examples.columns:
        entropy = examples["human_entropy"].to_numpy(dtype=np.float64)
        report["entropy"] = {
            "mean": float(np.nanmean(entropy[voted])) if voted.any() else float("nan"),
            "no_majority": int((examples["human_majority"].to_numpy()[voted] == -1).sum()),
        }
        columns = [
            (m, metrics[m])
            for m in metric_columns(run.task_kind.unit)
            if m in metrics.columns and not pd.api.types.is_bool_dtype(metrics[m])
        ]
        if seed_table is not None:
            for m in SEED_METRICS:
                for suffix in ("_mean", "_std"):
                    if f"{m}{suffix}" in seed_table.columns:
                        columns.append((f"{m}{suffix} (seeds)", seed_table[f"{m}{suffix}"]))
        if fold_table is not None:  # in-sample over the k - 1 fold models that trained on each example
            for m, column in zip(detectors.FOLD_INPUTS, detectors.FOLD_COLUMNS, strict=False):
                columns.append((f"{m} (fold models)", fold_table[column]))
        for name, values in columns:
            row = stats.spearman_row(values.to_numpy(dtype=np.float64)[voted], entropy[voted], n_boot, seed)
            report["spearman"].append({"metric": name, **row})
    inputs = detectors.DetectorInputs(
        labels=labels,
        metrics=metrics,
        oof_logits=oof_logits,
        seeds=seed_table,
        folds=fold_table,
        embeddings=run_embeddings(run, ids),
        unit=run.task_kind.unit,
    )
    scores = detectors.score_all(inputs)
    report["unavailable"] = unavailable_rows(detectors.unavailable(inputs), n, commands or {})
    for target, truth in targets.items():
        mask = masks[target]
        for name in scores.columns:
            row = stats.ranking_row(truth[mask], scores[name].to_numpy()[mask], ks, n_boot, seed)
            report["detectors"].append({"target": target, "detector": name, **row})
    return report


def unavailable_rows(missing: dict[str, list[str]], n: int, commands: dict[str, str]) -> list[dict[str, str]]:
    """One row per detector the report leaves out (the reference detector first): ``detector``,
    ``title``, ``needs`` (what it lacks, :data:`HOW_TO_GET`), ``command`` (what makes it, from
    ``commands`` {input kind: command}; "" when nothing does)."""
    rows = []
    for name, kinds in sorted(missing.items(), key=lambda item: item[0] != REFERENCE_DETECTOR):
        needs, made_by = [], []
        for kind in kinds:
            what, command = HOW_TO_GET[kind], commands.get(kind, "")
            if kind == detectors.EMBEDDINGS and n > detectors.MAX_KNN_EXAMPLES:
                what, command = (
                    f"embeddings of at most {detectors.MAX_KNN_EXAMPLES:,} examples (the exact neighbour "
                    f"search over {n:,} would take too long here)",
                    "",
                )
            needs.append(what)
            if command and command not in made_by:
                made_by.append(command)
        rows.append(
            {
                "detector": name,
                "title": detectors.get(name).title,
                "needs": "; and ".join(needs),
                "command": " and ".join(made_by),
            }
        )
    return rows


def unavailable_frame(report: dict) -> pd.DataFrame:
    """The detectors the report leaves out: detector, what it needs, the command that makes it."""
    rows = report.get("unavailable") or []
    return pd.DataFrame(rows, columns=["detector", "title", "needs", "command"])


def _num(value, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _ci(row: dict, key: str) -> str:
    return f"{_num(row[key])} [{_num(row[key + '_low'])}, {_num(row[key + '_high'])}]"


def spearman_frame(report: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "metric": r["metric"],
                "spearman with entropy": r["spearman"],
                "low": r["low"],
                "high": r["high"],
                "n": r["n"],
            }
            for r in report["spearman"]
        ]
    )


def detector_frame(report: dict, target: str) -> pd.DataFrame:
    """One row per detector for ``target`` (by its title, :func:`cartomap.scores.detectors.title`): AP,
    AUROC, P@k and their intervals, best AP first."""
    rows = [
        {**r, "detector": detectors.title(r["detector"])}
        for r in report["detectors"]
        if r["target"] == target
    ]
    frame = pd.DataFrame(rows).drop(columns=["target"], errors="ignore")
    return (
        frame.sort_values("ap", ascending=False, kind="stable").reset_index(drop=True)
        if len(frame)
        else frame
    )


def truth_markdown(report: dict) -> str:
    """The report as markdown tables (values with [2.5 %, 97.5 %] bootstrap intervals)."""
    lines = [f"# Human judgement: run {report['run']} ({report['n']:,} examples)", ""]
    view = report.get("view") or {}
    if view:
        lines += [
            f"Map metrics and dynamics detectors from the {view.get('label')} ({view.get('recording')} dynamics).",
            "",
        ]
    sources = report.get("sources") or {}
    if sources:
        lines += ["Also from: " + ", ".join(f"{k} {v}" for k, v in sources.items()), ""]
    boot = f"{report['n_boot']:,} bootstrap resamples of the examples (seed {report['seed']}), 95 % intervals"
    if report.get("spearman"):
        ent = report["entropy"]
        lines += [
            f"## Data-map metrics vs human entropy (bits; mean {_num(ent['mean'])}, {ent['no_majority']} ties)",
            "",
            "| metric | Spearman ρ | 95 % interval | n |",
            "|---|---|---|---|",
        ]
        for r in report["spearman"]:
            lines.append(
                f"| {r['metric']} | {_num(r['spearman'])} | [{_num(r['low'])}, {_num(r['high'])}] | {r['n']:,} |"
            )
        lines += ["", boot, ""]
    for target, n_err in report["targets"].items():
        ks = report["ks"]
        judged = (report.get("judged") or {}).get(target, report["n"])
        lines += [
            f"## Detectors for “{TARGETS[target]}” ({n_err:,} of {judged:,}"
            + (f" examples with votes, of {report['n']:,}" if judged != report["n"] else "")
            + ")",
            "",
            "| detector | AP | AUROC | " + " | ".join(f"P@{k}" for k in ks) + " |",
            "|---|---|---|" + "---|" * len(ks),
        ]
        for r in detector_frame(report, target).to_dict(orient="records"):
            cells = [_ci(r, "ap"), _ci(r, "auroc"), *(_ci(r, f"p@{k}") for k in ks)]
            lines.append(f"| {r['detector']} | " + " | ".join(cells) + " |")
        lines += ["", f"Higher = better detector; chance AP = {n_err / max(1, judged):.3f}. {boot}.", ""]
    missing = report.get("unavailable") or []
    if missing:
        lines += ["## Detectors this run cannot feed yet", ""]
        for r in missing:
            reference = " (the reference detector)" if r["detector"] == REFERENCE_DETECTOR else ""
            get = f": run `{r['command']}`, then this report again" if r["command"] else ""
            lines.append(f"- {r['detector']}{reference}, {r['title']}: needs {r['needs']}{get}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def truth_json(report: dict) -> str:
    """The report as JSON (NaN as null)."""

    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, (np.integer, np.floating)):
            return clean(value.item())
        return value

    return json.dumps(clean(report), indent=2, ensure_ascii=False)
