"""Experiment kinds of METHODS.md section 4 and the WaNLI Table 3: curricula and dataset combinations.

``curriculum``: a grid of training orders x seeds on train / validation / test. One extra run,
``datamap``, trains the plain baseline with its dynamics recorded: its data map gives the
cartography orders their groups and difficulty scores. Every grid run reports the epoch best on
validation; per method the seed best on validation is reported (the paper's protocol), with
Cochran's Q over the methods and a Mann-Whitney U test between two of them.

``combination``: training sets A, A + B (augmentation) and A ◇ B (random replacement), each
evaluated on many test sets at once; the results table is shaped like the WaNLI paper's Table 3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .config import DataConfig, OrderConfig, RunConfig
from .curricula import needs_columns
from .errors import DataError
from .evaluation import predictions_on_test, run_scores
from .experiments import Experiment, ExperimentStore, register, start_experiment
from .reports import (
    aggregate_runs,
    best_on_validation,
    classification_table,
    results_matrix,
    significance_report,
)
from .store import RunStore

SCORE_NEEDS = {"confidence", "variability", "correctness"}


# --------------------------------------------------------------------------- curricula
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

    def to_params(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["base"] = self.base.to_dict()
        if d["datamap_epochs"] is None:
            d.pop("datamap_epochs")  # ids of experiments made before this option stay the same
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
        )

    def validate(self) -> None:
        from .config import ORDERS

        unknown = [m for m in self.methods if m not in ORDERS]
        if unknown:
            raise DataError(f"unknown method(s) {unknown}; expected some of {list(ORDERS)}")
        if len(self.methods) < 1 or len(set(self.methods)) != len(self.methods):
            raise DataError("methods must be distinct and at least one")
        if not self.seeds:
            raise DataError("at least one seed is needed")
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
        if self.compare and not set(self.compare) <= set(self.methods):
            raise DataError(f"compare {list(self.compare)} must name two of the methods {list(self.methods)}")


def method_config(params: CurriculumParams, method: str, seed: int, scores: str) -> RunConfig:
    """The grid run for (method, seed): no dynamics recorded, no checkpoints (only test logits matter)."""
    base = params.base
    train = dataclasses.replace(base.train, seed=seed, record="none", save_checkpoints=False)
    order = OrderConfig(name=method, scores=scores, difficulty=params.difficulty)
    return base.replace(train=train, order=order, name=f"{method} seed {seed}")


def datamap_config(params: CurriculumParams) -> RunConfig:
    """The baseline whose data map defines the cartography groups (first seed, dynamics recorded)."""
    base = params.base
    epochs = params.datamap_epochs or base.train.epochs
    train = dataclasses.replace(
        base.train, seed=params.seeds[0], record="train", save_checkpoints=False, epochs=epochs
    )
    return base.replace(train=train, order=OrderConfig(), name="data map baseline")


def _needs_scores(method: str, difficulty: str) -> bool:
    return bool(SCORE_NEEDS & set(needs_columns(OrderConfig(name=method, difficulty=difficulty))))


class CurriculumKind:
    name = "curriculum"

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = CurriculumParams.from_params(exp.params)
        plan = [("datamap", datamap_config(params))]
        datamap = exp.run("datamap", store)
        scores = str(datamap.path / "metrics.parquet") if datamap and datamap.state == "done" else None
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


def role(method: str, seed: int) -> str:
    return f"{method}@seed{seed}"


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
    label_names = exp.run("datamap", store).label_names
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


# --------------------------------------------------------------------------- dataset combinations
@dataclass(frozen=True)
class TrainingSet:
    name: str  # row label of the results table, e.g. "MNLI", "MNLI + WANLI", "MNLI ◇ WANLI"
    a: DataConfig
    b: DataConfig | None = None
    mode: str = "A"  # "A" (A alone), "A+B" (augmentation) or "A◇B" (random replacement)


@dataclass(frozen=True)
class CombinationParams:
    base: (
        RunConfig  # model and training settings; base.data is ignored, base.dev used for best-epoch selection
    )
    training_sets: tuple[TrainingSet, ...] = ()
    tests: tuple[DataConfig, ...] = ()  # every run is evaluated on all of them
    seeds: tuple[int, ...] = (0,)
    replace_seed: int = 0  # which examples of A the random replacement drops
    cache: str = "cache"  # where the combined datasets are written

    def to_params(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["base"] = self.base.to_dict()
        return d

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> CombinationParams:
        def data(d):
            return RunConfig.from_dict({"data": d}).data if d else None

        sets = tuple(
            TrainingSet(name=s["name"], a=data(s["a"]), b=data(s.get("b")), mode=s.get("mode", "A"))
            for s in p["training_sets"]
        )
        return cls(
            base=RunConfig.from_dict(p["base"]),
            training_sets=sets,
            tests=tuple(data(t) for t in p["tests"]),
            seeds=tuple(p.get("seeds", (0,))),
            replace_seed=int(p.get("replace_seed", 0)),
            cache=p.get("cache", "cache"),
        )

    def validate(self) -> None:
        if not self.training_sets:
            raise DataError("at least one training set is needed")
        if not self.tests:
            raise DataError("at least one test set is needed")
        for s in self.training_sets:
            if s.mode not in ("A", "A+B", "A◇B"):
                raise DataError(f"training set {s.name!r}: mode {s.mode!r}; expected A, A+B or A◇B")
            if s.mode != "A" and s.b is None:
                raise DataError(f"training set {s.name!r}: mode {s.mode} needs a dataset B")


def training_set_names(a_name: str, b_name: str) -> dict[str, str]:
    """Row names of Table 3 per mode: 'A', 'A + B', 'A ◇ B' with the datasets' names."""
    return {"A": a_name, "A+B": f"{a_name} + {b_name}", "A◇B": f"{a_name} ◇ {b_name}"}


def combined_data(s: TrainingSet, cache: str, replace_seed: int) -> DataConfig:
    """The DataConfig of a training set: A itself, or A + B / A ◇ B saved as a derived dataset."""
    from . import derived
    from .data import load_dataset

    if s.mode == "A":
        return dataclasses.replace(s.a, name=s.name)
    a = load_dataset(s.a)
    b = load_dataset(s.b, label_names=a.label_names)
    combined = derived.augment(a, b) if s.mode == "A+B" else derived.replace_random(a, b, replace_seed)
    return derived.save_dataset(combined, cache, name=s.name)


class CombinationKind:
    name = "combination"

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = CombinationParams.from_params(exp.params)
        plan = []
        for s in params.training_sets:
            data = combined_data(s, params.cache, params.replace_seed)
            for seed in params.seeds:
                train = dataclasses.replace(
                    params.base.train, seed=seed, record="none", save_checkpoints=False
                )
                config = params.base.replace(
                    data=data, train=train, tests=params.tests, name=f"{s.name} seed {seed}"
                )
                plan.append((f"{s.name}@seed{seed}", config))
        return plan

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        params = CombinationParams.from_params(exp.params)
        rows = []
        for s in params.training_sets:
            for seed in params.seeds:
                run = exp.run(f"{s.name}@seed{seed}", store)
                for k in range(len(run.test_names)):
                    rows.append({"train_set": s.name, "seed": seed, "run_id": run.id, **run_scores(run, k)})
        table = pd.DataFrame(rows)
        mean = table.groupby(["train_set", "test_set"], sort=False, as_index=False)["accuracy"].mean()
        exp.write_result("runs", table)
        exp.write_result("table3", results_matrix(mean, value="accuracy").reset_index())


register(CurriculumKind())
register(CombinationKind())


# --------------------------------------------------------------------------- entry points
def create_curriculum(params: CurriculumParams, store: ExperimentStore, name: str = "") -> Experiment:
    params.validate()
    return store.create("curriculum", params.to_params(), name=name)


def create_combination(params: CombinationParams, store: ExperimentStore, name: str = "") -> Experiment:
    params.validate()
    return store.create("combination", params.to_params(), name=name)


def start(exp: Experiment, store: ExperimentStore) -> Experiment:
    return start_experiment(exp, store)
