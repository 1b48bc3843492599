"""The k-fold consensus pruning experiment (cartomap/experiments/pruning.py): the pure analysis on handmade logits
with planted label errors, and one end-to-end experiment on a tiny random BERT (folds=3, 1 epoch)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

import cartomap.training.loop
from cartomap import cli
from cartomap.analysis.pruning_figures import change_scatter, confidence_histogram
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.experiments.pruning import (
    KIND,
    PruningParams,
    export_pruned,
    fold_role,
    fold_table_of,
    load_results,
    model0_config,
    pruned_jsonl_bytes,
    pruned_training_set,
    write_results,
)
from cartomap.experiments.pruning_analysis import (
    MODEL0,
    MODEL1,
    analyse,
    named_matrix,
    report_text,
    scores_frame,
    suspects_table,
    what_if,
)
from cartomap.experiments.registry import kind_of
from cartomap.experiments.runner import run_experiment
from cartomap.experiments.store import ExperimentStore
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import RunStore
from cartomap.scores.consensus import all_categories, category_label
from cartomap.scores.metrics import compute_metrics

LABELS = ("entailment", "neutral", "contradiction")
N_TRAIN = 60


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DataConfig(path="demo:dev"))


# --------------------------------------------------------------------------- planted label errors
def planted(demo):
    """60 real demo pairs; 12 neutral pairs relabelled entailment (planted P1G0 errors) and logits of a
    'model' that sees through 8 of them confidently (conf 4) and 4 weakly (conf 1). Also 5 confident
    P0G2 and 3 confident P2G0 mismatches (other categories), everything else predicted correctly."""
    data = demo.subset(np.arange(N_TRAIN))
    true = data.labels
    gold = true.copy()
    neutral = np.flatnonzero(true == 1)[:12]
    contradiction = np.flatnonzero(true == 2)[:5]
    entailment = np.flatnonzero(true == 0)[:3]
    gold[neutral] = 0
    z = np.zeros((N_TRAIN, 3))
    z[np.arange(N_TRAIN), gold] = 2.0  # correct, margin 2
    for i in neutral[:8]:
        z[i] = [-1.0, 3.0, 0.0]  # P1G0, confidence 4
    for i in neutral[8:]:
        z[i] = [0.0, 1.0, -1.0]  # P1G0, confidence 1
    for i in contradiction:
        z[i] = [4.0, 0.0, 0.0]  # P0G2, confidence 4
    for i in entailment:
        z[i] = [0.0, 0.0, 5.0]  # P2G0, confidence 5
    ids = [str(i) for i in data.ids]
    oof = scores_frame(ids, gold, z, fold=np.arange(N_TRAIN) % 3)
    frame = data.frame.copy()
    frame["label"] = gold
    return (
        oof,
        frame,
        {
            "confident": [ids[i] for i in neutral[:8]],
            "weak": [ids[i] for i in neutral[8:]],
            "p0g2": [ids[i] for i in contradiction],
            "p2g0": [ids[i] for i in entailment],
        },
    )


def handmade_tests():
    """10 test examples, all gold entailment. Model 0 predicts [1,1,1,0,0,0,2,0,0,0], Model 1 [1,0,0,1,1,0,2,0,0,0]."""
    gold = np.zeros(10, dtype=int)
    z0, z1 = np.zeros((10, 3)), np.zeros((10, 3))
    for z, pred in ((z0, [1, 1, 1, 0, 0, 0, 2, 0, 0, 0]), (z1, [1, 0, 0, 1, 1, 0, 2, 0, 0, 0])):
        z[np.arange(10), pred] = 1.0
    z1[0, 1] = 3.5  # Model 1 more sure of the first mismatch: conf 1 -> 3.5
    ids = [f"t{i}" for i in range(10)]
    return scores_frame(ids, gold, z0), scores_frame(ids, gold, z1)


def test_analysis_finds_exactly_the_confident_planted_errors(demo):
    oof, _, truth = planted(demo)
    results = analyse(oof, categories=["P1G0"], threshold=2.0, label_names=LABELS)
    matrix = results["matrix"].set_index("row")
    assert matrix.loc["P1", "G0"] == 12
    assert matrix.loc["P0", "G2"] == 5 and matrix.loc["P2", "G0"] == 3
    off_diagonal = matrix.to_numpy().sum() - np.trace(matrix.to_numpy())
    assert off_diagonal == 20 and matrix.to_numpy().sum() == N_TRAIN
    assert sorted(results["pruned_ids"]) == sorted(truth["confident"])
    scored = results["oof"]
    assert scored.loc[scored["suspect"], "id"].tolist() == results["pruned_ids"]
    assert np.allclose(scored.set_index("id").loc[truth["weak"], "confidence"], 1.0)
    summary = results["summary"]
    assert summary["n_pruned"] == 8 and summary["n_train"] == N_TRAIN and summary["folds"] == 3
    assert summary["pruned_by_category"] == {"P1G0": 8}
    assert summary["mismatches_by_category"]["P1G0"] == 12
    assert summary["oof_accuracy"] == pytest.approx(40 / 60)
    assert "test" not in results


def test_pruned_set_lacks_exactly_the_suspects(demo):
    oof, frame, truth = planted(demo)
    results = analyse(oof, categories=["P1G0"], threshold=2.0, label_names=LABELS)
    data = load_dataset(DataConfig(path="demo:dev")).subset(np.arange(N_TRAIN))
    pruned = derived.without_ids(data, results["pruned_ids"])
    assert set(data.ids) - set(pruned.ids) == set(truth["confident"])
    assert len(pruned) == N_TRAIN - 8


def test_other_categories_and_thresholds(demo):
    oof, _, truth = planted(demo)
    both = analyse(oof, categories=["P2G0", "p1g0"], threshold=2.0, label_names=LABELS)
    assert sorted(both["pruned_ids"]) == sorted(truth["confident"] + truth["p2g0"])
    assert both["summary"]["categories"] == ["P1G0", "P2G0"]
    loose = what_if(oof, ["P1G0"], 0.5)
    assert loose.count == 12 and loose.per_category == {"P1G0": 12}
    strict = what_if(both["oof"], ["P1G0"], 4.0)  # strictly above: conf 4 is not pruned
    assert strict.count == 0
    everything = what_if(oof, all_categories(3), 2.0)
    assert everything.count == 16
    with pytest.raises(DataError, match="categories"):
        analyse(oof, categories=["P3G0"], threshold=2.0, label_names=LABELS)
    with pytest.raises(DataError, match="not a mismatch"):
        what_if(oof, ["P1G1"], 2.0)


def test_named_category_selects_the_same_examples_in_any_class_order(demo):
    oof, _, truth = planted(demo)
    standard = what_if(oof, ["P1G0"], 2.0)
    # the same data with the classes ordered contradiction, entailment, neutral: class k of the standard
    # order is class ORDER.index(LABELS[k]) here, and the logit columns move with it
    order = ("contradiction", "entailment", "neutral")
    new_index = np.array([order.index(name) for name in LABELS])
    reordered = oof[["id", "fold"]].copy()
    reordered["gold"] = new_index[oof["gold"].to_numpy()]
    for k in range(3):
        reordered[f"logit_{new_index[k]}"] = oof[f"logit_{k}"].to_numpy()
    reordered = reordered[["id", "gold", "fold", "logit_0", "logit_1", "logit_2"]]
    named = what_if(reordered, ["P:neutral G:entailment"], 2.0, label_names=order)
    np.testing.assert_array_equal(named.mask, standard.mask)
    assert sorted(oof.loc[named.mask, "id"]) == sorted(truth["confident"])
    assert named.per_category == {"P2G1": 8}  # its code in this order
    results = analyse(reordered, categories=["P:neutral G:entailment"], threshold=2.0, label_names=order)
    assert sorted(results["pruned_ids"]) == sorted(truth["confident"])
    assert results["summary"]["category_names"] == ["P:neutral G:entailment"]
    # the shorthand would mean "predicted entailment, gold contradiction" here: refused, with the named form
    with pytest.raises(DataError, match=r"P1G0 is NLI shorthand.*'P:entailment G:contradiction'"):
        analyse(reordered, categories=["P1G0"], threshold=2.0, label_names=order)
    with pytest.raises(DataError, match="no class 'maybe'"):
        what_if(reordered, ["P:maybe G:entailment"], 2.0, label_names=order)
    # in the NLI order both spellings are the same category
    assert what_if(oof, ["P:neutral, G:entailment"], 2.0, label_names=LABELS).per_category == {"P1G0": 8}
    assert PruningParams(categories=("P:neutral  G:entailment",)).categories == ("P:neutral G:entailment",)


def test_sweep_counts_every_category_and_the_chosen_ones(demo):
    oof, _, _ = planted(demo)
    sweep = analyse(oof, categories=["P1G0"], threshold=2.25, label_names=LABELS)["sweep"]
    assert list(sweep.columns) == ["threshold", *all_categories(3), "all", "chosen"]
    assert 2.25 in sweep["threshold"].tolist() and sweep["threshold"].is_monotonic_increasing
    row = sweep.set_index("threshold").loc[2.0]
    assert (row["P1G0"], row["P0G2"], row["P2G0"], row["all"], row["chosen"]) == (8, 5, 3, 16, 8)
    zero = sweep.set_index("threshold").loc[0.0]
    assert (zero["all"], zero["chosen"]) == (20, 12)
    assert (np.diff(sweep["all"]) <= 0).all() and (np.diff(sweep["chosen"]) <= 0).all()


def test_model0_model1_comparison_types_and_change():
    oof = scores_frame(["a", "b", "c"], [0, 1, 2], np.eye(3), fold=[0, 1, 2])
    test0, test1 = handmade_tests()
    results = analyse(oof, test0, test1, categories=["P1G0"], threshold=2.0, label_names=LABELS)
    test = results["test"]
    assert test["type"].tolist() == [3, 1, 1, 2, 2, 0, 3, 0, 0, 0]
    assert test["type_chosen"].tolist() == [3, 1, 1, 2, 2, 0, 0, 0, 0, 0]  # P2G0 is not chosen
    assert test.loc[0, "conf0"] == pytest.approx(1.0) and test.loc[0, "change"] == pytest.approx(2.5)
    s = results["summary"]
    assert s["model0_test_accuracy"] == pytest.approx(0.6) and s["model1_test_accuracy"] == pytest.approx(0.6)
    assert s["types"] == {"1": 2, "2": 2, "3": 2} and s["types_chosen"] == {"1": 2, "2": 2, "3": 1}
    tm = results["test_matrix"].set_index(["model", "row"])
    assert tm.loc[(MODEL0, "P1"), "G0"] == 3 and tm.loc[(MODEL1, "P1"), "G0"] == 3
    assert tm.loc[(MODEL0, "P0"), "G0"] == 6
    # Model 1 alone: no types; a different test set is refused
    only0 = analyse(oof, test0, None, categories=["P1G0"], label_names=LABELS)
    assert only0["summary"]["model1_test_accuracy"] is None and "type" not in only0["test"]
    with pytest.raises(DataError, match="different test examples"):
        analyse(oof, test0, test1.iloc[:5], label_names=LABELS)


def test_figures_escape_label_names_and_pruning_keeps_two_classes(demo, tmp_path):
    oof, _, _ = planted(demo)
    scored = analyse(oof, label_names=LABELS)["oof"]
    fig = confidence_histogram(scored, ("<b>yes</b>", "neutral", "no"), 2.0)
    names = [t.name for t in fig.data]
    assert any("&lt;b&gt;yes&lt;/b&gt;" in n for n in names) and not any("<b>" in n for n in names)
    data = demo.subset(np.arange(N_TRAIN))
    keep_one_class = [i for i, y in zip(data.ids, data.labels, strict=True) if y != 0]
    with pytest.raises(DataError, match="fewer than two classes"):
        pruned_training_set(data, keep_one_class, tmp_path)
    config = pruned_training_set(data, keep_one_class[:5], tmp_path)
    assert len(load_dataset(config)) == N_TRAIN - 5


def test_params_validate_and_round_trip():
    base = RunConfig(dev=None, tests=(DataConfig(path="demo:dev"),))
    params = PruningParams(base=base, folds=3, categories=("p2g0", "P1G0", "P1G0"), threshold=4)
    assert params.categories == ("P1G0", "P2G0") and params.threshold == 4.0
    assert PruningParams.from_dict(json.loads(json.dumps(params.to_dict()))) == params
    for bad, field in (
        (dict(folds=1), "folds"),
        (dict(categories=("P1G1",)), "categories"),
        (dict(categories=()), "categories"),
        (dict(threshold=-1.0), "threshold"),
        (dict(base=RunConfig(dev=None)), "tests"),
    ):
        with pytest.raises(DataError, match=field):
            PruningParams(**{"base": base, **bad})
    assert category_label("P1G0", LABELS) == "P:neutral G:entailment (P1G0)"
    assert category_label("P1G0", ("b", "a", "c")) == "P:a G:b"  # no shorthand outside the NLI order


def make_finished_experiment(cache: Path, demo, with_model1: bool = True):
    """A done pruning experiment without training: Model 0 is a synthetic run on the 60 planted pairs
    (with data-map metrics), the results come from :func:`analyse` on the handmade logits."""
    oof, frame, truth = planted(demo)
    data = demo.subset(np.arange(N_TRAIN))
    data = type(data)(frame=frame, label_names=data.label_names, source="planted")
    train_cfg = derived.save_dataset(data, cache, name="planted")
    test_ds = demo.subset(np.arange(300, 310))
    test_cfg = derived.save_dataset(test_ds, cache, name="held out")
    base = RunConfig(data=train_cfg, dev=None, tests=(test_cfg,), train=TrainConfig(epochs=2, record="train"))
    params = PruningParams(base=base, folds=3, cache=str(cache))
    store = ExperimentStore(cache)
    exp = store.create(KIND, params.to_dict(), name="planted")
    run = store.runs.create(model0_config(params), data, None, (test_ds,))
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, N_TRAIN, 3)).astype(np.float32)
    for e in range(2):
        run.write_epoch("train", e, data.ids, logits[e])
    atomic_write_parquet(run.path / "metrics.parquet", compute_metrics(logits, data.labels, data.ids))
    run.set_status(state="done")
    exp.record_run(MODEL0, run.id)
    test0, test1 = handmade_tests()
    test0["id"] = test1["id"] = [str(i) for i in test_ds.ids]
    results = analyse(
        oof, test0, test1 if with_model1 else None, categories=["P1G0"], threshold=2.0, label_names=LABELS
    )
    results["summary"].update(experiment=exp.id, test_name="held out", run_ids=exp.run_ids())
    results["summary"]["fold_accuracy"] = [0.5, 0.6, 0.7]
    write_results(exp, results)
    exp.set_status(state="done", phase="done", runs_done=5, runs_planned=5)
    return exp, truth


def test_results_reload_export_and_report(tmp_path, demo):
    cache = tmp_path / "cache"
    exp, truth = make_finished_experiment(cache, demo)
    results = load_results(exp)
    assert list(results["matrix"].index) == ["P0", "P1", "P2"] and results["matrix"].loc["P1", "G0"] == 12
    assert sorted(results["pruned_ids"]) == sorted(truth["confident"])
    named = named_matrix(results["matrix"], LABELS)
    assert named.loc["P1 neutral", "G0 entailment"] == 12

    table = suspects_table(results["oof"], RunStore(cache).get(exp.run_ids()[MODEL0]).examples(), LABELS)
    assert sorted(table["id"]) == sorted(truth["confident"])
    assert {"premise", "hypothesis"} <= set(table.columns) and table["premise"].notna().all()
    assert set(table["gold"]) == {"entailment"} and set(table["predicted"]) == {"neutral"}

    out = tmp_path / "export"
    data_path, ids_path = export_pruned(exp, RunStore(cache), out)
    rows = [json.loads(line) for line in data_path.read_text().splitlines()]
    assert len(rows) == N_TRAIN - 8 and not {r["id"] for r in rows} & set(truth["confident"])
    assert {r["label"] for r in rows} <= set(LABELS)
    assert ids_path.read_text().split() == results["pruned_ids"]
    with pytest.raises(DataError, match="exists already"):
        export_pruned(exp, RunStore(cache), out)
    export_pruned(exp, RunStore(cache), out, overwrite=True)
    assert pruned_jsonl_bytes(exp, RunStore(cache)) == data_path.read_bytes()

    text = report_text(results)
    assert "P1 neutral" in text and "Model 0 accuracy 0.6000" in text and "Model 1 accuracy" in text
    assert "pruned: 8 of 60" in text
    assert len(confidence_histogram(results["oof"], LABELS, 2.0).data) == 3
    assert len(change_scatter(results["test"]).data) == 3


# --------------------------------------------------------------------------- end to end (tiny model)
TRAIN_ROWS, TEST_ROWS = np.arange(0, 120), np.arange(300, 340)
CATEGORIES = ("P1G0", "P2G0")  # gold entailment only: a collapsed tiny model never prunes a whole class away


def _write_jsonl(dataset, path: Path) -> str:
    derived.to_frame(dataset).to_json(path, orient="records", lines=True, force_ascii=False)
    return str(path)


def _prune_args(cache, train, test, tiny_model, *extra):
    return [
        "--cache", str(cache), "prune", train, "--test", test, "--folds", "3", "--threshold", "0",
        "--categories", *CATEGORIES, "--model", tiny_model, "--max-length", "48", "--epochs", "1",
        "--batch-size", "32", "--lr", "1e-3", "--warmup-ratio", "0", "--device", "cpu", "--no-checkpoints",
        *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def e2e(tiny_model, tmp_path_factory, demo):
    """`cartomap prune` in the foreground: threshold 0 prunes every OOF mismatch of CATEGORIES."""
    tmp = tmp_path_factory.mktemp("prune-e2e")
    cache = tmp / "cache"
    train = _write_jsonl(demo.subset(TRAIN_ROWS), tmp / "train.jsonl")
    test = _write_jsonl(demo.subset(TEST_ROWS), tmp / "test.jsonl")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(_prune_args(cache, train, test, tiny_model, "--export", str(tmp / "export")))
    store = ExperimentStore(cache)
    (exp,) = store.list(KIND)
    return {
        "code": code,
        "out": out.getvalue(),
        "store": store,
        "exp": exp,
        "tmp": tmp,
        "train": train,
        "test": test,
    }


def test_end_to_end_roles_coverage_and_results(e2e, demo):
    assert e2e["code"] == 0, e2e["out"]
    exp, store = e2e["exp"], e2e["store"]
    assert exp.state == "done" and kind_of(exp.kind).name == KIND
    roles = exp.run_ids()
    assert set(roles) == {MODEL0, MODEL1, *(fold_role(f) for f in range(3))}
    assert exp.status()["runs_done"] == exp.status()["runs_planned"] == 5
    runs = {role: store.runs.get(rid) for role, rid in roles.items()}
    train_ids = [str(i) for i in demo.subset(TRAIN_ROWS).ids]

    # every training example is scored once, by the fold that did not train on it
    results = load_results(exp)
    oof = results["oof"]
    assert sorted(oof["id"]) == sorted(train_ids) and not oof["id"].duplicated().any()
    for f in range(3):
        run = runs[fold_role(f)]
        held = set(run.test_examples(0)["id"].astype(str))
        trained_on = set(run.examples()["id"].astype(str))
        assert held == set(oof.loc[oof["fold"] == f, "id"]) and not held & trained_on
        assert held | trained_on == set(train_ids)
        assert run.config.dev is None and run.config.train.record == "train"  # in-sample dynamics come free
        assert not (run.path / "checkpoints").exists()
        assert set(run.metrics()["id"].astype(str)) == trained_on  # the fold's in-sample data map
        _, logits = run.test_logits(0)
        part = oof[oof["fold"] == f].set_index("id").loc[run.test_examples(0)["id"].astype(str)]
        assert np.allclose(part[["logit_0", "logit_1", "logit_2"]].to_numpy(), logits, atol=1e-5)
    # every example is in the training part of k - 1 = 2 fold models: their in-sample means
    folds_table = fold_table_of(exp, store.runs, train_ids)
    assert folds_table["id"].tolist() == list(train_ids) and (folds_table["fold_models"] == 2).all()
    f0 = runs[fold_role(0)].metrics().set_index("id")["confidence"]
    f1 = runs[fold_role(1)].metrics().set_index("id")["confidence"]
    held2 = set(oof.loc[oof["fold"] == 2, "id"])
    some = next(i for i in train_ids if i in held2)  # trained on by folds 0 and 1
    row = folds_table.set_index("id").loc[some]
    assert row["fold_confidence"] == pytest.approx((f0[some] + f1[some]) / 2)
    # Model 0 has a data map; Model 1 trained on train minus the pruned ids (every mismatch of CATEGORIES)
    assert (runs[MODEL0].path / "metrics.parquet").exists() and runs[MODEL0].config.train.record == "train"
    pruned = set(results["pruned_ids"])
    assert pruned == set(oof.loc[oof["category"].isin(CATEGORIES), "id"]) and pruned
    assert set(runs[MODEL1].examples()["id"].astype(str)) == set(train_ids) - pruned
    assert set(runs[MODEL0].examples()["id"].astype(str)) == set(train_ids)

    s = results["summary"]
    assert s["n_pruned"] == len(pruned) and s["n_test"] == len(TEST_ROWS) and s["run_ids"] == roles
    acc0 = runs[MODEL0].history()[-1]["test_0_accuracy"]
    assert s["model0_test_accuracy"] == pytest.approx(acc0)
    assert len(s["fold_accuracy"]) == 3
    for name in ("oof", "matrix", "sweep", "test", "test_matrix"):
        assert (exp.results_dir / f"{name}.parquet").exists(), name
    assert (exp.results_dir / "pruned_ids.json").exists() and (exp.results_dir / "summary.json").exists()
    # the CLI printed progress per run, the matrix, the sweep and both accuracies; and exported
    out = e2e["out"]
    assert out.count("fold_") >= 3 and "model1" in out
    assert "P1 neutral" in out and "Model 0 accuracy" in out and "Model 1 accuracy" in out
    exported = (e2e["tmp"] / "export" / "removed_ids.txt").read_text().split()
    assert set(exported) == pruned


def test_resume_trains_nothing_and_new_threshold_reuses_model0_and_folds(e2e, monkeypatch, tiny_model):
    exp, store = e2e["exp"], e2e["store"]
    before = exp.run_ids()
    trained = []
    real = cartomap.training.loop.train_run
    monkeypatch.setattr(
        cartomap.training.loop, "train_run", lambda run, **kw: trained.append(run.id) or real(run, **kw)
    )
    run_experiment(exp, store)  # resume: everything is done
    assert trained == [] and exp.state == "done" and exp.run_ids() == before

    # only the threshold changes: Model 0 and the folds are shared, Model 1 alone is trained
    oof = load_results(exp)["oof"]
    wrong = np.sort(oof.loc[oof["category"].isin(CATEGORIES), "confidence"].to_numpy())
    threshold = float(wrong[len(wrong) // 2])
    params = PruningParams.from_dict(exp.params).replace(threshold=threshold)
    second = store.create(KIND, params.to_dict())
    run_experiment(second, store)
    assert second.state == "done"
    roles = second.run_ids()
    assert {r: roles[r] for r in before if r != MODEL1} == {r: before[r] for r in before if r != MODEL1}
    assert trained == [roles[MODEL1]] and roles[MODEL1] != before[MODEL1]
    expected = set(oof.loc[oof["category"].isin(CATEGORIES) & (oof["confidence"] > threshold), "id"])
    assert set(load_results(second)["pruned_ids"]) == expected
    assert len(store.runs.get(roles[MODEL1]).examples()) == len(TRAIN_ROWS) - len(expected)

    # nothing above the threshold: Model 1 is Model 0, nothing is trained
    trained.clear()
    third = store.create(KIND, params.replace(threshold=1e6).to_dict())
    run_experiment(third, store)
    assert trained == [] and third.run_ids()[MODEL1] == third.run_ids()[MODEL0]
    assert load_results(third)["summary"]["n_pruned"] == 0


def test_cli_refuses_bad_input_before_creating_anything(e2e, tiny_model, capsys):
    cache = e2e["tmp"] / "other-cache"
    args = _prune_args(cache, e2e["train"], e2e["test"], tiny_model)
    code = cli.main([*args, "--folds", "50"])
    assert code == 2 and "k=50" in capsys.readouterr().err
    code = cli.main([*args, "--categories", "P9G0"])
    assert code == 2 and "categories" in capsys.readouterr().err
    # --export into a folder that holds a pruned_train.jsonl: refused before hours of training
    export = e2e["tmp"] / "mine"
    export.mkdir()
    (export / "pruned_train.jsonl").write_text("mine\n")
    assert cli.main([*args, "--export", str(export)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pruned_train.jsonl exists; pass --force to replace" in err
    assert (export / "pruned_train.jsonl").read_text() == "mine\n"
    assert not (cache / "experiments").exists()
