"""The curriculum experiment (METHODS.md section 4, RoNLI): training orders x seeds.

``curriculum``: a grid of training orders x seeds on train / validation / test. One extra run,
``datamap``, trains the plain baseline with its dynamics recorded: its data map gives the
cartography orders their groups and difficulty scores. Every grid run reports the epoch best on
validation; per method the seed best on validation is reported (the paper's protocol), with
Cochran's Q over the methods and a Mann-Whitney U test between two of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.evaluation import predictions_on_test, run_scores
from cartomap.config import NO_RECORDING, ORDERS, DataConfig, OrderConfig, Record, RunConfig
from cartomap.errors import DataError
from cartomap.experiments.store import Experiment, ExperimentStore, Section, check_run_count, grid_role
from cartomap.runs.state import State
from cartomap.runs.store import RunStore
from cartomap.scores import ambiguity as ambiguity_scores
from cartomap.scores.reports import (
    aggregate_runs,
    best_on_validation,
    classification_table,
    significance_report,
)
from cartomap.tasks import support
from cartomap.training.curricula import needs_columns
from cartomap.training.orders import SCORE_COLUMNS

KIND = "curriculum"
DATAMAP = "datamap"  # the role of the data-map baseline
SCORE_NEEDS = set(SCORE_COLUMNS)  # a method needing any of these needs the data-map baseline


@dataclass(frozen=True)
class CurriculumParams:
    base: RunConfig  # data = training set, dev = validation set (needed: best-on-validation), tests = (test set, ...)
    methods: tuple[str, ...] = (
        "oversampled",
        "cart-stra++",
    )  # orders to compare (ORDERS); the paper's headline pair
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)  # five runs per method, as in the paper
    difficulty: str = "paper"  # Cart-CL++ score variant for the cart++ orders
    compare: tuple[str, str] | None = None  # the two methods of the Mann-Whitney test; default first and last
    datamap_epochs: int | None = (
        None  # epochs of the data-map baseline; None = as the grid (a map needs >= 2)
    )
    ambiguity: str = (
        ambiguity_scores.VARIABILITY
    )  # the score the cartography orders rank by where the papers use variability

    def to_params(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["base"] = self.base.to_dict()
        if d["datamap_epochs"] is None:
            d.pop("datamap_epochs")  # ids of experiments made before this option stay the same
        if d["ambiguity"] == ambiguity_scores.VARIABILITY:
            d.pop("ambiguity")  # likewise
        return d

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> CurriculumParams:
        compare = tuple(p["compare"]) if p.get("compare") else None
        return cls(
            base=RunConfig.from_dict(p["base"]),
            methods=tuple(p["methods"]),
            seeds=tuple(int(s) for s in p["seeds"]),
            difficulty=p.get("difficulty", "paper"),
            compare=compare,
            datamap_epochs=p.get("datamap_epochs"),
            ambiguity=p.get("ambiguity", ambiguity_scores.VARIABILITY),
        )

    def validate(self) -> None:
        unknown = [m for m in self.methods if m not in ORDERS]
        if unknown:
            raise DataError(f"unknown method(s) {unknown}; expected some of {list(ORDERS)}")
        if len(self.methods) < 1 or len(set(self.methods)) != len(self.methods):
            raise DataError("methods must be distinct and at least one")
        if not self.seeds:
            raise DataError("at least one seed is needed")
        check_run_count(
            len(self.methods) * len(self.seeds) + 1,
            f"{len(self.methods)} methods x {len(self.seeds):,} seeds + the data-map baseline",
            "seeds",
        )
        if self.base.dev is None:
            raise DataError("a curriculum experiment needs a validation set (dev) to pick the best run")
        if not self.base.tests:
            raise DataError("a curriculum experiment needs at least one test set")
        if (self.datamap_epochs or self.base.train.epochs) < 2 and any(
            _needs_scores(m, self.difficulty) for m in self.methods
        ):
            raise DataError(
                "the data-map baseline needs at least 2 epochs (variability is a spread over epochs); "
                "set datamap_epochs"
            )
        from cartomap.scores import ambiguity

        if self.ambiguity not in ambiguity.MAP_SCORES:
            raise DataError(
                f"unknown ambiguity score {self.ambiguity!r}; expected one of {', '.join(ambiguity.MAP_SCORES)}",
                field="ambiguity",
            )
        if self.compare and not set(self.compare) <= set(self.methods):
            raise DataError(f"compare {list(self.compare)} must name two of the methods {list(self.methods)}")


def method_config(params: CurriculumParams, method: str, seed: int, scores: str) -> RunConfig:
    """The grid run for (method, seed): no dynamics recorded, no checkpoints (only test logits matter)."""
    base = params.base
    train = dataclasses.replace(base.train, seed=seed, record=NO_RECORDING, save_checkpoints=False)
    order = OrderConfig(name=method, scores=scores, difficulty=params.difficulty, ambiguity=params.ambiguity)
    return base.replace(train=train, order=order, name=f"{method} seed {seed}")


def datamap_config(params: CurriculumParams) -> RunConfig:
    """The baseline whose data map defines the cartography groups (first seed, dynamics recorded)."""
    base = params.base
    epochs = params.datamap_epochs or base.train.epochs
    train = dataclasses.replace(
        base.train, seed=params.seeds[0], record=Record.TRAIN, save_checkpoints=False, epochs=epochs
    )
    return base.replace(train=train, order=OrderConfig(), name="data map baseline")


def _needs_scores(method: str, difficulty: str) -> bool:
    return bool(SCORE_NEEDS & set(needs_columns(OrderConfig(name=method, difficulty=difficulty))))


class CurriculumKind:
    name = KIND
    seeded = True  # roles are "<method>@seed<s>", plus the data-map baseline

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = CurriculumParams.from_params(exp.params)
        plan = [(DATAMAP, datamap_config(params))]
        datamap = exp.run(DATAMAP, store)
        scores = None
        if datamap and datamap.state == State.DONE:
            datamap.metrics(columns=("id", params.ambiguity))  # metrics older than the score: computed again
            scores = str(datamap.metrics_path())
        for method in params.methods:
            needs = _needs_scores(method, params.difficulty)
            if needs and scores is None:
                continue  # planned once the data map exists
            for seed in params.seeds:
                plan.append(
                    (role(method, seed), method_config(params, method, seed, scores if needs else ""))
                )
        return plan

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        for name, value in curriculum_results(exp, store).items():
            exp.write_result(name, value)

    def role_label(self, role: str) -> str:
        return "data-map baseline" if role == DATAMAP else role

    def role_order(self, exp: Experiment, role: str) -> tuple:
        """The data-map baseline, then methods x seeds in the order of the parameters."""
        params = exp.params
        planned = [DATAMAP] + [
            grid_role(m, s) for m in params.get("methods", []) for s in params.get("seeds", [])
        ]
        return (planned.index(role), "") if role in planned else (len(planned), role)

    def report(self, exp: Experiment, store: RunStore) -> str:
        return curriculum_report(exp)

    def sections(self, exp: Experiment) -> list[Section]:
        return curriculum_sections(exp)


def role(method: str, seed: int) -> str:
    return grid_role(method, seed)


def curriculum_results(exp: Experiment, store: RunStore) -> dict[str, Any]:
    """runs (every seed), best (per method), per_class, aggregate, curves, significance and summary."""
    params = CurriculumParams.from_params(exp.params)
    rows, runs = [], {}
    for method in params.methods:
        for seed in params.seeds:
            run = exp.run(role(method, seed), store)
            runs[(method, seed)] = run
            for k in range(len(run.test_names)):
                rows.append({"method": method, "seed": seed, "run_id": run.id, **run_scores(run, k)})
    table = pd.DataFrame(rows)
    first_test = table[table["test_set"] == table["test_set"].iloc[0]].reset_index(drop=True)
    best = best_on_validation(first_test, score_col="dev_accuracy").reset_index(drop=True)
    label_names = exp.run(DATAMAP, store).label_names
    per_class, correct, curves = [], {}, []
    for _, row in best.iterrows():
        run = runs[(row["method"], row["seed"])]
        pred = predictions_on_test(run, 0)
        correct[row["method"]] = pred["correct"].to_numpy()
        cls = classification_table(pred["gold"], pred["pred"], label_names)
        per_class.append(cls.rename_axis("class").reset_index().assign(method=row["method"]))
    for (method, seed), run in runs.items():
        for record in run.history():
            curves.append(
                {
                    "method": method,
                    "seed": seed,
                    "epoch": record["epoch"],
                    "dev_accuracy": record.get("dev_accuracy"),
                    "test_accuracy": record.get("test_0_accuracy"),
                    "train_loss": record.get("train_loss"),
                }
            )
    a, b = params.compare or (params.methods[0], params.methods[-1])
    significance = None
    if len(params.methods) >= 2:
        scores = {m: first_test.loc[first_test["method"] == m, "macro_f1"].tolist() for m in params.methods}
        significance = _jsonable(significance_report(correct, scores, a, b))
    summary = {
        "methods": list(params.methods),
        "seeds": list(params.seeds),
        "label_names": list(label_names),
        "test_sets": sorted(set(table["test_set"]), key=list(table["test_set"]).index),
        "best": best[["method", "seed", "run_id", "micro_f1", "macro_f1", "dev_accuracy"]].to_dict("records"),
    }
    return {
        "runs": table,
        "best": best,
        "per_class": pd.concat(per_class, ignore_index=True),
        "aggregate": aggregate_runs(first_test).reset_index(),
        "curves": pd.DataFrame(curves),
        "significance": significance or {},
        "summary": _jsonable(summary),
    }


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


# --------------------------------------------------------------------------- entry points
def require_kind(data: DataConfig) -> None:
    """DataError when ``data``'s task kind has no examples with one label each (a curriculum orders
    examples by their scores on their one label); asked of the config alone, before anything is loaded."""
    support.CURRICULUM.require(data.task_kind, data.path)


def create_curriculum(params: CurriculumParams, store: ExperimentStore, name: str = "") -> Experiment:
    params.validate()
    require_kind(params.base.data)
    return store.create(KIND, params.to_params(), name=name)


# --------------------------------------------------------------------------- reading the results
BEST_COLUMNS = ("method", "seed", "dev_accuracy", "accuracy", "micro_f1", "macro_f1", "epoch", "run_id")
SCORE_COLUMNS = ("dev_accuracy", "accuracy", "micro_f1", "macro_f1")


def has_seeds_to_compare(mann_whitney: dict[str, Any]) -> bool:
    """Whether a Mann-Whitney result compares two or more seeds of each method (with one seed a
    method U = 0 and p = 1 say nothing)."""
    return min(int(mann_whitney.get("n_a") or 0), int(mann_whitney.get("n_b") or 0)) >= 2


def curriculum_report(exp: Experiment) -> str:
    """Best run per method, the seeds' spread, F1 per class and the tests, as markdown."""
    from cartomap.scores.reports import markdown_table

    best = exp.result("best")
    cols = ["method", "seed", "epoch", "dev_accuracy", "accuracy", "micro_f1", "macro_f1", "run_id"]
    out = ["Best run on validation per method (test set: " + str(best["test_set"].iloc[0]) + ")", ""]
    out.append(markdown_table(best[cols]))
    out += ["", "All seeds (mean, std, min, max)", "", markdown_table(exp.result("aggregate"))]
    per_class = exp.result("per_class")
    wide = per_class.pivot_table(index="class", columns="method", values="f1", sort=False).reset_index()
    out += ["", "F1 per class (best run per method)", "", markdown_table(wide)]
    sig = exp.result("significance")
    if sig:
        q, mw = sig["cochran"], sig["mann_whitney"]
        out += [
            "",
            f"Cochran's Q over {len(sig['methods'])} methods: Q = {q['q']:.3f}, df = {q['df']}, "
            f"p = {q['p_value']:.4g}.",
            f"Mann-Whitney U ({sig['a']} vs {sig['b']}, macro F1 of every seed): U = {mw['u']}, "
            f"p = {mw['p_value']:.4g} (n = {mw['n_a']}, {mw['n_b']})."
            if has_seeds_to_compare(mw)
            else f"Mann-Whitney U ({sig['a']} vs {sig['b']}): needs two or more seeds per method "
            f"(n = {mw['n_a']}, {mw['n_b']}).",
        ]
    return "\n".join(out)


def significance_frame(significance: Mapping[str, Any]) -> pd.DataFrame:
    """A curriculum experiment's ``significance`` result as rows test, methods, statistic, df,
    p_value (lower = stronger evidence of a difference), n: Cochran's Q over all methods, over
    the compared pair, and the Mann-Whitney U test of the pair's per-seed scores."""
    if not significance:
        return pd.DataFrame(columns=["test", "methods", "statistic", "df", "p_value", "n"])
    a, b = significance.get("a"), significance.get("b")
    rows = []
    for key, name, methods in (
        ("cochran", "Cochran's Q", ", ".join(significance.get("methods", []))),
        ("cochran_pair", "Cochran's Q (pair)", f"{a}, {b}"),
    ):
        if key in significance:
            r = significance[key]
            rows.append(
                {
                    "test": name,
                    "methods": methods,
                    "statistic": r.get("q"),
                    "df": r.get("df"),
                    "p_value": r.get("p_value"),
                    "n": r.get("n_examples"),
                }
            )
    if "mann_whitney" in significance and has_seeds_to_compare(significance["mann_whitney"]):
        r = significance["mann_whitney"]
        rows.append(
            {
                "test": "Mann-Whitney U",
                "methods": f"{a}, {b}",
                "statistic": r.get("u"),
                "df": None,
                "p_value": r.get("p_value"),
                "n": f"{r.get('n_a')} + {r.get('n_b')}",
            }
        )
    frame = pd.DataFrame(rows)
    frame["n"] = frame["n"].astype(str)
    return frame


def curriculum_sections(exp: Experiment) -> list[Section]:
    out = []
    best = exp.result("best")
    if isinstance(best, pd.DataFrame):
        columns = [c for c in BEST_COLUMNS if c in best.columns]
        out.append(Section("Best run on validation per method", best[columns], best_columns=SCORE_COLUMNS))
    aggregate = exp.result("aggregate")
    if isinstance(aggregate, pd.DataFrame):
        out.append(Section("Over the seeds (mean, std, min, max)", aggregate))
    frame = significance_frame(exp.result("significance") or {})
    if not frame.empty:
        out.append(
            Section(
                "Significance (lower p = stronger evidence that the methods differ)",
                frame,
                formats={"statistic": "%.4f", "p_value": "%.4g"},
            )
        )
    return out
