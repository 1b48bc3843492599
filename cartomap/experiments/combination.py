"""Dataset combinations (WaNLI Table 3): train on A, A + B (augmentation) and A ◇ B (random
replacement), each evaluated on many test sets at once; the results table is shaped like Table 3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pandas as pd

from cartomap.analysis.evaluation import run_scores
from cartomap.config import NO_RECORDING, DataConfig, RunConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.experiments.store import Experiment, ExperimentStore, Section, check_run_count, grid_role
from cartomap.runs.store import RunStore
from cartomap.scores.reports import results_matrix
from cartomap.tasks import support

KIND = "combination"


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
        check_run_count(
            len(self.training_sets) * len(self.seeds),
            f"{len(self.training_sets)} training sets x {len(self.seeds):,} seeds",
            "seeds",
        )
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
    if s.mode == "A":
        return dataclasses.replace(s.a, name=s.name)
    a = load_dataset(s.a)
    b = load_dataset(s.b, label_names=a.label_names)
    combined = derived.augment(a, b) if s.mode == "A+B" else derived.replace_random(a, b, replace_seed)
    return derived.save_dataset(combined, cache, name=s.name)


class CombinationKind:
    name = KIND
    seeded = True  # roles are "<training set>@seed<s>"

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]:
        params = CombinationParams.from_params(exp.params)
        plan = []
        for s in params.training_sets:
            data = combined_data(s, params.cache, params.replace_seed)
            for seed in params.seeds:
                train = dataclasses.replace(
                    params.base.train, seed=seed, record=NO_RECORDING, save_checkpoints=False
                )
                config = params.base.replace(
                    data=data, train=train, tests=params.tests, name=f"{s.name} seed {seed}"
                )
                plan.append((grid_role(s.name, seed), config))
        return plan

    def finalize(self, exp: Experiment, store: RunStore) -> None:
        params = CombinationParams.from_params(exp.params)
        rows = []
        for s in params.training_sets:
            for seed in params.seeds:
                run = exp.run(grid_role(s.name, seed), store)
                for k in range(len(run.test_names)):
                    rows.append({"train_set": s.name, "seed": seed, "run_id": run.id, **run_scores(run, k)})
        table = pd.DataFrame(rows)
        mean = table.groupby(["train_set", "test_set"], sort=False, as_index=False)["accuracy"].mean()
        exp.write_result("runs", table)
        exp.write_result("table3", results_matrix(mean, value="accuracy").reset_index())

    def role_order(self, exp: Experiment, role: str) -> tuple:
        """The training sets in their given order, then the seeds."""
        names = [s["name"] for s in exp.params.get("training_sets", [])]
        planned = [grid_role(n, seed) for n in names for seed in exp.params.get("seeds", [0])]
        return (planned.index(role), "") if role in planned else (len(planned), role)

    def report(self, exp: Experiment, store: RunStore) -> str:
        from cartomap.scores.reports import markdown_table

        return markdown_table(exp.result("table3"))

    def sections(self, exp: Experiment) -> list[Section]:
        table3 = exp.result("table3")
        if not isinstance(table3, pd.DataFrame):
            return []
        title = "Accuracy per training set (rows) and test set (columns), mean over seeds; best in bold"
        return [Section(title, table3, best_columns=tuple(c for c in table3.columns if c != "train_set"))]


def create_combination(params: CombinationParams, store: ExperimentStore, name: str = "") -> Experiment:
    params.validate()
    for data in (*(d for s in params.training_sets for d in (s.a, s.b) if d is not None), *params.tests):
        require_kind(data)
    return store.create(KIND, params.to_params(), name=name)


def require_kind(data: DataConfig) -> None:
    """DataError when ``data``'s task kind has no examples with one label each (a combination's table is
    the accuracy on each test set); asked of the config alone, before anything is loaded."""
    support.COMBINATION.require(data.task_kind, data.path)
