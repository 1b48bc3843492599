"""The seeds experiment end to end with the tiny BERT: `cartomap seeds` through the local executor and
through Ray (the same runs and results), the base run reused (not retrained), results that equal a
recomputation from the runs' metrics, `show`'s Seeds block, `report`, and export's seeds.parquet."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap import cli
from cartomap.analysis.datamap import with_regions
from cartomap.errors import DataError, RunError
from cartomap.experiments import registry
from cartomap.experiments.seeds import (
    KIND,
    PER_EXAMPLE,
    PER_EXAMPLE_EVAL,
    SUMMARY,
    create_seeds,
    done_seeds_of,
    pick_seeds,
    seeds_of,
)
from cartomap.experiments.store import ExperimentStore
from cartomap.scores.stability import seed_table, stability_summary

SEEDS = (42, 43, 44)


def call(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([str(a) for a in args])
    return code, out.getvalue()


def train_base(cache: Path, tiny_model: str) -> None:
    code, out = call(
        "--cache", cache, "train", "--data", "demo:dev", "--dev", "none", "--model", tiny_model,
        "--epochs", "2", "--batch-size", "32", "--lr", "1e-3", "--max-length", "32", "--record", "both",
        "--device", "cpu", "--quiet", "--name", "tiny",
    )  # fmt: skip
    assert code == 0, out


def outcome(cache: Path) -> dict:
    store = ExperimentStore(cache)
    (exp,) = store.list(KIND)
    runs = {role: store.runs.get(run_id) for role, run_id in exp.run_ids().items()}
    return {"store": store, "exp": exp, "runs": runs, "base": store.runs.get("tiny")}


@pytest.fixture(scope="module")
def local(tmp_path_factory, tiny_model):
    cache = tmp_path_factory.mktemp("seeds-local") / "cache"
    train_base(cache, tiny_model)
    base = ExperimentStore(cache).runs.get("tiny")
    stamps = {p.name: p.stat().st_mtime_ns for p in (base.metrics_path(), base.history_path)}
    code, out = call("--cache", cache, "seeds", "tiny", "--seeds", "3", "--executor", "local")
    assert code == 0, out
    return {**outcome(cache), "cache": cache, "out": out, "stamps": stamps}


def test_base_run_is_reused_and_seeds_train_its_config(local):
    exp, runs, base = local["exp"], local["runs"], local["base"]
    assert exp.state == "done" and exp.params["seeds"] == list(SEEDS)
    assert exp.params["base_run"] == base.id
    assert set(runs) == {f"seed{s}" for s in SEEDS}
    assert runs["seed42"].id == base.id  # the same run: not trained again
    assert {p.name: p.stat().st_mtime_ns for p in (base.metrics_path(), base.history_path)} == local["stamps"]
    assert len(local["store"].runs.list()) == 3
    own = base.own_config()
    for seed in SEEDS[1:]:
        config = runs[f"seed{seed}"].config
        assert config.train.seed == seed and not config.train.save_checkpoints
        assert config.name == f"tiny seed {seed}"
        assert config.data == own.data  # the base run's own copy of its data
        assert config.replace(train=own.train, name=own.name) == own  # nothing else differs
        assert runs[f"seed{seed}"].state == "done"
    assert seeds_of(base, local["store"]).id == exp.id == done_seeds_of(base, local["store"]).id
    # the same experiment again: found, nothing new
    assert create_seeds(local["store"], base, n_seeds=3).id == exp.id


def test_results_equal_a_recomputation_from_the_runs(local):
    exp, runs = local["exp"], local["runs"]
    frames = {s: with_regions(runs[f"seed{s}"].metrics()) for s in SEEDS}
    table = exp.result(PER_EXAMPLE)
    expected = seed_table(frames)
    pd.testing.assert_frame_equal(table.reset_index(drop=True), expected, check_dtype=False)
    assert len(table) == 400 and table["region_votes"].str.endswith("/3").all()
    for m in ("confidence", "variability", "correctness"):
        assert {f"{m}@seed{s}" for s in SEEDS} | {m, f"{m}_mean", f"{m}_std"} <= set(table.columns)
    summary = exp.result(SUMMARY)
    recomputed = stability_summary(frames)
    for key in ("n_seeds", "seeds", "n_examples"):
        assert summary[key] == recomputed[key]
    for key in ("region_agreement", "stable_share"):
        assert summary[key] == pytest.approx(recomputed[key])
    for m, rho in recomputed["spearman"].items():
        assert summary["spearman"][m] == pytest.approx(rho, nan_ok=True)
    assert summary["stable_share"] == pytest.approx(table["stable"].mean())
    assert summary["runs"] == {str(s): runs[f"seed{s}"].id for s in SEEDS}
    # record both: the eval-mode recordings get the same
    evals = {s: with_regions(runs[f"seed{s}"].metrics("eval")) for s in SEEDS}
    assert summary["eval"]["region_agreement"] == pytest.approx(stability_summary(evals)["region_agreement"])
    assert len(exp.result(PER_EXAMPLE_EVAL)) == 400


def test_cli_prints_the_summary_and_report(local, capsys):
    out = local["out"]
    assert "seeds 42, 43, 44" in out and "mean pairwise Spearman" in out and "region agreement" in out
    code = cli.main(["--cache", str(local["cache"]), "report", local["exp"].id])
    assert code == 0
    report = capsys.readouterr().out
    assert "Stability of the map over 3 seeds" in report and "Spearman-Brown" in report
    titles = [s.title for s in registry.sections(local["exp"])]
    assert titles and "Regions over the seeds" in titles
    assert registry.role_label(local["exp"], "seed43") == "seed 43"


def test_show_has_a_seeds_block(local, capsys):
    assert cli.main(["--cache", str(local["cache"]), "show", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "Seeds: 3 seeds (42, 43, 44)" in out
    assert "Spearman between seeds: confidence" in out and "variability" in out
    assert "region agreement" in out and "same region in all 3 seeds" in out


def test_export_writes_seeds_parquet_and_refuses_to_overwrite(local, tmp_path, capsys):
    out = tmp_path / "model"
    assert cli.main(["--cache", str(local["cache"]), "export", "tiny", "--out", str(out)]) == 0
    table = pd.read_parquet(out / "seeds.parquet")
    assert len(table) == 400
    expected = {"id", "label", "region", "region_majority", "region_agreement", "region_votes", "stable"}
    expected |= {
        f"{m}@seed{s}" for m in ("confidence", "variability", "correctness", "region") for s in SEEDS
    }
    expected |= {
        f"{m}_{w}" for m in ("confidence", "variability", "correctness", "aum") for w in ("mean", "std")
    }
    assert expected <= set(table.columns)
    assert (out / "td_metrics.jsonl").exists()
    capsys.readouterr()
    assert cli.main(["--cache", str(local["cache"]), "export", "tiny", "--out", str(out)]) != 0
    assert "seeds.parquet" in capsys.readouterr().err
    assert cli.main(["--cache", str(local["cache"]), "export", "tiny", "--out", str(out), "--force"]) == 0


@pytest.mark.slow  # a local Ray
def test_ray_gives_the_same_runs_and_results(ray_session, local, tiny_model, tmp_path):
    cache = tmp_path / "cache"
    train_base(cache, tiny_model)
    code, out = call(
        "--cache", cache, "seeds", "tiny", "--seeds", "3", "--executor", "ray", "--cpus-per-run", "1"
    )
    assert code == 0, out
    ray = outcome(cache)
    assert ray["base"].id == local["base"].id and ray["runs"]["seed42"].id == ray["base"].id

    def signature(run, root: Path) -> str:
        content = {"config": run.config.identity(), "train": run.info["train_fingerprint"]}
        return json.dumps(content, sort_keys=True, default=str).replace(str(Path(root).resolve()), "<store>")

    for seed in SEEDS:
        a, b = local["runs"][f"seed{seed}"], ray["runs"][f"seed{seed}"]
        assert signature(a, local["cache"]) == signature(b, cache)
        ma, mb = a.metrics(), b.metrics()
        assert ma["id"].tolist() == mb["id"].tolist()
        for m in ("confidence", "variability", "correctness"):
            assert np.abs(ma[m].to_numpy() - mb[m].to_numpy()).max() < 1e-4, (seed, m)
    sa, sb = local["exp"].result(SUMMARY), ray["exp"].result(SUMMARY)
    for m in ("confidence", "variability"):
        assert sa["spearman"][m] == pytest.approx(sb["spearman"][m], abs=1e-3)
    assert sa["region_agreement"] == pytest.approx(sb["region_agreement"], abs=0.01)


def test_seed_picking_and_refusals(local):
    assert pick_seeds(42, 3) == (42, 43, 44)
    assert pick_seeds(42, seeds=(1, 42, 2, 2)) == (42, 1, 2)
    with pytest.raises(DataError, match="at least 2 seeds"):
        pick_seeds(7, 1)
    base = local["base"]
    store = local["store"]
    # another set of seeds is another experiment; seeds_of gives the newest
    other = create_seeds(store, base, seeds=(5,))
    assert other.params["seeds"] == [42, 5] and seeds_of(base, store).id == other.id
    assert done_seeds_of(base, store).id == local["exp"].id  # the newest finished one
    store.delete(other.id)
    seed_run = local["runs"]["seed43"]
    seed_run_state = seed_run.status()
    try:
        seed_run.set_status(state="running")
        with pytest.raises(RunError, match="finished run"):
            create_seeds(store, seed_run)
    finally:
        seed_run.set_status(**{k: v for k, v in seed_run_state.items() if k != "updated_at"})


def test_runs_trained_with_other_seeds_make_a_seeds_experiment_without_training(tmp_path, tiny_model):
    """`cartomap seeds RUN --with`: the runs a user already trained with other seeds (their own script)
    are compared as they are; a run of another config is refused."""
    cache = tmp_path / "cache"
    common = [
        "--cache", cache, "train", "--data", "demo:dev", "--dev", "none", "--model", tiny_model,
        "--epochs", "2", "--batch-size", "32", "--lr", "1e-3", "--max-length", "32", "--device", "cpu", "--quiet",
    ]  # fmt: skip
    for seed in (5, 6):
        assert call(*common, "--seed", seed, "--name", f"s{seed}")[0] == 0
    assert call(*common, "--seed", 7, "--epochs", "3", "--name", "other")[0] == 0
    store = ExperimentStore(cache)
    base = store.runs.get("s5")
    from cartomap.experiments.seeds import create_seeds_from_runs, seed_siblings

    assert list(seed_siblings(base, store.runs)) == [5, 6]  # the 3-epoch run is another config
    with pytest.raises(DataError, match="not run"):
        create_seeds_from_runs(store, base, [store.runs.get("other")])
    runs_before = {r.id for r in store.runs.list()}
    code, out = call("--cache", cache, "seeds", "s5", "--with")
    assert code == 0, out
    assert {r.id for r in store.runs.list()} == runs_before  # nothing trained
    (exp,) = store.list(KIND)
    assert exp.run_ids() == {"seed5": base.id, "seed6": store.runs.get("s6").id}
    frames = {s: with_regions(store.runs.get(f"s{s}").metrics()) for s in (5, 6)}
    assert exp.result(SUMMARY)["spearman"]["variability"] == pytest.approx(
        stability_summary(frames)["spearman"]["variability"]
    )


def test_a_trainers_seed_settings_do_not_tell_siblings_apart():
    from cartomap.config import OriginConfig, RunConfig, TrainConfig
    from cartomap.experiments.seeds import _without_seed

    class FakeRun:
        def __init__(self, seed, lr=1e-3):
            settings = json.dumps({"seed": seed, "data_seed": seed, "learning_rate": lr}, sort_keys=True)
            self.config = RunConfig(
                train=TrainConfig(seed=seed), origin=OriginConfig(kind="trainer", settings=settings)
            )
            self.info = {"train_fingerprint": "a", "dev_fingerprint": None, "tests": []}

    assert _without_seed(FakeRun(1)) == _without_seed(FakeRun(2))
    assert _without_seed(FakeRun(1)) != _without_seed(FakeRun(1, lr=2e-3))
