"""Retrain after review (the correction kind): decisions files checked (file, row, column named), the
three training sets on a hand-checkable fixture, the changed-predictions table and the accuracy table on
fixed predictions, the paired test, and `cartomap retrain` end to end with the tiny BERT (the base run
reused, the decisions copied into the experiment, `cartomap report`, the Compare page's sections)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap import cli
from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data import derived
from cartomap.data.dataset import TextDataset
from cartomap.data.decisions import apply_decisions, check_decisions, decision_counts, read_decisions
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError, RunError
from cartomap.experiments import registry
from cartomap.experiments.correction import (
    CHANGED,
    DECISIONS_FILE,
    KIND,
    SUMMARY,
    accuracy_table,
    changed_predictions,
    create_correction,
)
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.store import RunStore
from cartomap.scores.reports import paired_test
from cartomap.training.loop import train_or_load

NAMES = ("entailment", "neutral", "contradiction")


def six() -> TextDataset:
    """Six pairs a..f with labels 0 1 2 0 1 2."""
    frame = pd.DataFrame(
        {
            "id": list("abcdef"),
            "premise": [f"p{i}" for i in range(6)],
            "hypothesis": [f"h{i}" for i in range(6)],
            "label": [0, 1, 2, 0, 1, 2],
        }
    )
    return TextDataset(frame=frame, label_names=NAMES, source="six")


def decisions_frame(**changes) -> pd.DataFrame:
    rows = [
        {"id": "a", "decision": "relabel", "label": "neutral", "original_label": "entailment"},
        {"id": "b", "decision": "remove", "label": "neutral", "original_label": "neutral"},
        {"id": "c", "decision": "keep", "label": "contradiction", "original_label": "contradiction"},
    ]
    return pd.DataFrame(rows).assign(**changes) if changes else pd.DataFrame(rows)


# --------------------------------------------------------------------------- the three training sets
def test_original_pruned_and_corrected_on_six_examples():
    decisions = check_decisions(decisions_frame(), six())
    sets = apply_decisions(six(), decisions)
    assert len(sets.original) == 6 and sets.original.labels.tolist() == [0, 1, 2, 0, 1, 2]
    assert sets.pruned.ids == ["d", "e", "f"] and sets.pruned.labels.tolist() == [0, 1, 2]
    assert sets.corrected.ids == ["a", "c", "d", "e", "f"]
    assert sets.corrected.labels.tolist() == [1, 2, 0, 1, 2]  # a relabelled entailment -> neutral
    assert sets.corrected.frame["premise"].tolist() == ["p0", "p2", "p3", "p4", "p5"]
    counts = decision_counts(decisions)
    assert counts["queued"] == 3 and counts["relabelled"] == 1 and counts["removed"] == 1
    assert counts["keep"] == 1 and counts["relabel_same"] == 0


def test_relabel_to_the_same_label_counts_as_keep_and_unsure_changes_nothing():
    frame = pd.DataFrame(
        [
            {"id": "a", "decision": "relabel", "label": "entailment"},
            {"id": "d", "decision": "unsure", "label": "neutral"},  # only a relabel changes a label
            {"id": "e", "decision": "unreviewed", "label": None},
        ]
    )
    decisions = check_decisions(frame, six())
    assert decisions["effect"].tolist() == ["unchanged"] * 3
    assert decisions["label"].tolist() == ["entailment", "entailment", "neutral"]
    sets = apply_decisions(six(), decisions)
    assert sets.corrected.ids == list("abcdef") and sets.corrected.labels.tolist() == [0, 1, 2, 0, 1, 2]
    assert sets.pruned.ids == ["b", "c", "f"]
    counts = decision_counts(decisions)
    assert counts["relabel"] == 1 and counts["relabel_same"] == 1 and counts["relabelled"] == 0


# --------------------------------------------------------------------------- bad decisions files
@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"id": ["a", "b", "zz"]}, "row 3: field 'id': unknown id 'zz'"),
        ({"id": ["a", "b", "a"]}, "row 3: field 'id': duplicate id 'a' (also on row 1)"),
        ({"decision": ["relabel", "delete", "keep"]}, "row 2: field 'decision': unknown decision 'delete'"),
        (
            {"label": ["neutrl", "neutral", "contradiction"]},
            "row 1: field 'label': unknown label name 'neutrl'",
        ),
        ({"label": [None, "neutral", "contradiction"]}, "row 1: field 'label': a relabel without a label"),
        (
            {"original_label": ["neutral", "neutral", "contradiction"]},
            "row 1: field 'original_label': original_label 'neutral', but example 'a' has label 'entailment'",
        ),
    ],
)
def test_bad_rows_name_file_row_and_column(tmp_path, changes, needle):
    path = tmp_path / "decisions.parquet"
    decisions_frame(**changes).to_parquet(path)
    with pytest.raises(DataError) as err:
        read_decisions(path, six())
    assert str(err.value).startswith(str(path))
    assert needle in str(err.value)


def test_csv_and_jsonl_errors_name_the_line(tmp_path):
    csv = tmp_path / "d.csv"
    decisions_frame(decision=["relabel", "remove", "maybe"]).to_csv(csv, index=False)
    with pytest.raises(DataError, match=r"d\.csv: line 4: field 'decision': unknown decision 'maybe'"):
        read_decisions(csv, six())
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in decisions_frame(id=["a", "q", "c"]).to_dict("records")))
    with pytest.raises(DataError, match=r"d\.jsonl: line 2: field 'id': unknown id 'q'"):
        read_decisions(jsonl, six())


def test_missing_column_and_unknown_format(tmp_path):
    path = tmp_path / "d.csv"
    decisions_frame().drop(columns=["decision"]).to_csv(path, index=False)
    with pytest.raises(DataError, match="missing column 'decision'"):
        read_decisions(path, six())
    decisions_frame().iloc[:0].to_parquet(tmp_path / "empty.parquet")
    with pytest.raises(DataError, match=r"empty\.parquet: no rows; expected one row per queued example"):
        read_decisions(tmp_path / "empty.parquet", six())
    with pytest.raises(DataError, match=r"expected \.parquet, \.jsonl or \.csv"):
        read_decisions(tmp_path / "d.xlsx", six())


def test_good_files_read_alike_in_every_format(tmp_path):
    frame = decisions_frame(decided_by=["ann1", "ann2", None], score=[3.5, 2.0, 1.0])
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_parquet(tmp_path / "d.parquet")
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in frame.to_dict("records")) + "\n")
    read = [read_decisions(tmp_path / f"d.{ext}", six()) for ext in ("csv", "parquet", "jsonl")]
    for other in read[1:]:
        pd.testing.assert_frame_equal(read[0], other)
    assert read[0]["effect"].tolist() == ["relabelled", "removed", "unchanged"]
    assert read[0]["score"].tolist() == [3.5, 2.0, 1.0]


# --------------------------------------------------------------------------- the analysis on fixed predictions
def _preds(pred) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": ["x", "y", "z", "w"], "text": list("XYZW"), "gold": [0, 1, 2, 0], "pred": pred}
    )


def test_changed_predictions_fixed_broken_still_wrong():
    before, after = _preds([1, 1, 0, 0]), _preds([0, 2, 1, 0])  # x fixed, y broken, z still wrong, w same
    table = changed_predictions(before, after.iloc[::-1], NAMES, "dev", 7)  # row order of after is free
    assert table["id"].tolist() == ["x", "y", "z"]
    assert table["text"].tolist() == ["X", "Y", "Z"]
    assert table["gold"].tolist() == ["entailment", "neutral", "contradiction"]
    assert table["before"].tolist() == ["neutral", "neutral", "entailment"]
    assert table["after"].tolist() == ["entailment", "contradiction", "neutral"]
    assert table["change"].tolist() == ["fixed", "broken", "still wrong"]
    assert set(table["set"]) == {"dev"} and set(table["seed"]) == {7}
    assert changed_predictions(before, before, NAMES).empty
    with pytest.raises(DataError, match="different examples"):
        changed_predictions(before, after.iloc[:3], NAMES)


def test_accuracy_table_mean_std_delta_and_paired_p():
    scores = pd.DataFrame(
        {
            "role": ["original"] * 3 + ["corrected"] * 3,
            "seed": [1, 2, 3] * 2,
            "set": "test",
            "accuracy": [0.50, 0.60, 0.70, 0.60, 0.65, 0.90],
        }
    )
    table = accuracy_table(scores).set_index("role")
    assert table.loc["original", "mean"] == pytest.approx(0.6)
    assert table.loc["original", "std"] == pytest.approx(0.1)
    assert table.loc["corrected", "delta"] == pytest.approx((0.1 + 0.05 + 0.2) / 3)
    expected = paired_test([0.5, 0.6, 0.7], [0.6, 0.65, 0.9])
    assert table.loc["corrected", "p_value"] == pytest.approx(expected["p_value"])
    one = accuracy_table(scores[scores["seed"] == 1]).set_index("role")
    assert one.loc["corrected", "delta"] == pytest.approx(0.1) and one.loc["corrected", "p_value"] is None


def test_paired_test_hand_computed():
    # d = 0.1, 0.05, 0.2: mean 0.11667, sd 0.07638, t = mean / (sd / sqrt 3) = 2.6458, df 2
    out = paired_test([0.5, 0.6, 0.7], [0.6, 0.65, 0.9])
    assert out["mean_diff"] == pytest.approx(0.116667, abs=1e-6)
    assert out["t"] == pytest.approx(2.6458, abs=1e-4)
    assert out["p_value"] == pytest.approx(0.1181, abs=1e-3)
    assert paired_test([1, 2], [1, 2])["p_value"] == 1.0
    assert paired_test([1, 2], [2, 3])["p_value"] is None  # a constant shift: no spread to test
    with pytest.raises(DataError, match="at least 2 pairs"):
        paired_test([1], [2])
    with pytest.raises(DataError, match="one value of b per value of a"):
        paired_test([1, 2], [2, 3, 4])


# --------------------------------------------------------------------------- end to end with the tiny BERT
def call(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main([str(a) for a in args])
    return code, out.getvalue()


def base_run(cache: Path, tiny_model: str):
    demo = load_dataset(DataConfig(path="demo:dev"))
    train = derived.save_dataset(demo.subset(np.arange(0, 60)), cache, name="train 60")
    dev = derived.save_dataset(demo.subset(np.arange(200, 230)), cache, name="dev 30")
    test = derived.save_dataset(demo.subset(np.arange(300, 330)), cache, name="test 30")
    config = RunConfig(
        data=train,
        dev=dev,
        tests=(test,),
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(
            epochs=2, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0, record="none", seed=7
        ),
        name="base",
    )
    return train_or_load(config, RunStore(cache))


@pytest.fixture(scope="module")
def retrained(tmp_path_factory, tiny_model):
    folder = tmp_path_factory.mktemp("retrain")
    cache = folder / "cache"
    run = base_run(cache, tiny_model)
    stamp = run.history_path.stat().st_mtime_ns
    examples = run.examples()
    ids, names = examples["id"].astype(str).tolist(), run.label_names
    labels = [names[i] for i in examples["label"]]
    new = names[(names.index(labels[0]) + 1) % 3]
    rows = [
        {"id": ids[0], "decision": "relabel", "label": new, "original_label": labels[0]},
        {"id": ids[1], "decision": "remove", "label": labels[1], "original_label": labels[1]},
        {"id": ids[2], "decision": "keep", "label": labels[2], "original_label": labels[2]},
        {"id": ids[3], "decision": "unsure", "label": labels[3], "original_label": labels[3]},
    ]
    source = folder / "decisions.csv"
    pd.DataFrame(rows).to_csv(source, index=False)
    code, out = call("--cache", cache, "retrain", "base", "--decisions", source, "--seeds", "2")
    assert code == 0, out
    source.unlink()  # the experiment holds its own copy
    store = ExperimentStore(cache)
    (exp,) = store.list(KIND)
    return {"cache": cache, "store": store, "exp": exp, "base": run, "out": out, "stamp": stamp, "ids": ids}


def test_retrain_trains_three_sets_with_the_same_seeds(retrained):
    exp, store, base = retrained["exp"], retrained["store"], retrained["base"]
    ids = retrained["ids"]
    assert exp.state == "done" and exp.params["seeds"] == [7, 8]
    runs = {role: store.runs.get(run_id) for role, run_id in exp.run_ids().items()}
    assert set(runs) == {f"{r}@seed{s}" for r in ("original", "pruned", "corrected") for s in (7, 8)}
    assert runs["original@seed7"].id == base.id  # the base run itself, not trained again
    assert base.history_path.stat().st_mtime_ns == retrained["stamp"]
    assert len({run.id for run in runs.values()}) == 6
    for role, run in runs.items():
        assert run.config.train.seed == int(role.rpartition("@seed")[2])
        assert run.info["dev_fingerprint"] == base.info["dev_fingerprint"]
        assert [t["fingerprint"] for t in run.info["tests"]] == [t["fingerprint"] for t in base.info["tests"]]
        assert run.config.model == base.config.model and run.config.train.epochs == 2
    pruned = runs["pruned@seed8"].examples()["id"].astype(str).tolist()
    assert len(pruned) == 56 and not set(ids[:4]) & set(pruned)
    corrected = runs["corrected@seed8"].examples()
    assert len(corrected) == 59 and ids[1] not in set(corrected["id"])
    by_id = corrected.assign(id=corrected["id"].astype(str)).set_index("id")["label"]
    original = base.examples().assign(id=lambda f: f["id"].astype(str)).set_index("id")["label"]
    assert by_id[ids[0]] == (original[ids[0]] + 1) % 3 and by_id[ids[2]] == original[ids[2]]
    # derived datasets live in the store (portable runs), not beside the decisions file
    assert Path(runs["corrected@seed7"].config.data.path).parent == retrained["cache"].resolve() / "datasets"


def test_results_equal_a_recomputation_from_the_runs(retrained):
    from cartomap.analysis.compare import dev_predictions

    exp, store = retrained["exp"], retrained["store"]
    summary = exp.result(SUMMARY)
    assert summary["decisions"]["queued"] == 4 and summary["relabelled"] == 1
    assert summary["n_train"] == {"original": 60, "pruned": 56, "corrected": 59}
    assert summary["sets"] == ["dev", "test: test 30"]
    scores = exp.result("scores")
    assert len(scores) == 3 * 2 * 2
    for seed in (7, 8):
        before = dev_predictions(exp.run(f"original@seed{seed}", store.runs))
        after = dev_predictions(exp.run(f"corrected@seed{seed}", store.runs))
        row = scores[(scores["role"] == "corrected") & (scores["seed"] == seed) & (scores["set"] == "dev")]
        assert row["accuracy"].item() == pytest.approx((after["gold"] == after["pred"]).mean())
        changed = exp.result(CHANGED)
        mine = changed[(changed["set"] == "dev") & (changed["seed"] == seed)]
        assert len(mine) == int((before["pred"].to_numpy() != after["pred"].to_numpy()).sum())
    copy = pd.read_parquet(exp.path / DECISIONS_FILE)
    assert copy["decision"].tolist() == ["relabel", "remove", "keep", "unsure"]


def test_the_experiment_needs_no_decisions_file_once_made(retrained):
    from cartomap.experiments import correction

    exp, store = retrained["exp"], retrained["store"]
    correction._SETS.clear()  # plan from the experiment's copy, not from memory (the source is deleted)
    plan = dict(registry.kind_of(KIND).planned_runs(exp, store.runs))
    assert plan["corrected@seed8"] == store.runs.get(exp.run_ids()["corrected@seed8"]).config
    registry.kind_of(KIND).finalize(exp, store.runs)
    assert exp.result(SUMMARY)["n_train"]["corrected"] == 59


def test_runs_of_the_base_config_with_other_seeds_are_reused(retrained, tiny_model):
    base = retrained["base"]
    train = dataclasses.replace(base.config.train, seed=9)
    sibling = train_or_load(base.config.replace(train=train, name="base seed 9"), retrained["store"].runs)
    copy = retrained["exp"].path / DECISIONS_FILE
    exp = create_correction(retrained["store"], base, copy, seeds=[9])
    try:
        assert exp.params["seeds"] == [7, 9] and exp.params["existing"] == {"9": sibling.id}
        assert exp.run_ids() == {"original@seed7": base.id, "original@seed9": sibling.id}
        plan = dict(registry.kind_of(KIND).planned_runs(exp, retrained["store"].runs))
        assert plan["original@seed9"] == sibling.config and plan["original@seed7"] == base.config
        assert plan["pruned@seed9"].train.seed == 9
    finally:
        retrained["store"].delete(exp.id)
        retrained["store"].runs.delete(sibling.id)


def test_report_and_compare_sections(retrained):
    code, out = call("--cache", retrained["cache"], "report", retrained["exp"].id)
    assert code == 0, out
    assert "4 queued examples: keep 1, relabel 1, remove 1, unsure 1, unreviewed 0." in out
    assert "pruned 56 (4 dropped); corrected 59 (1 dropped, 1 relabelled)" in out
    assert "### Accuracy (mean ± std over seeds)" in out and "| corrected (review applied) |" in out
    assert "p (paired t-test over seeds)" in out
    assert "### Predictions changed from original to corrected" in out
    sections = registry.sections(retrained["exp"])
    titles = [s.title for s in sections]
    assert titles[0].startswith("Accuracy per training set")
    assert list(sections[0].table["training set"]) == [
        "original",
        "pruned (queue dropped)",
        "corrected (review applied)",
    ]
    assert registry.role_label(retrained["exp"], "pruned@seed8") == "pruned (queue dropped) · seed 8"
    roles = registry.sorted_roles(retrained["exp"], retrained["exp"].run_ids())
    assert roles[:2] == ["original@seed7", "original@seed8"] and roles[-1] == "corrected@seed8"


def test_the_same_retrain_is_the_same_experiment_and_bad_input_creates_nothing(retrained, tmp_path):
    store, base = retrained["store"], retrained["base"]
    bad = tmp_path / "bad.csv"
    pd.DataFrame([{"id": "nope", "decision": "keep"}]).to_csv(bad, index=False)
    before = len(store.list())
    code, out = call("--cache", retrained["cache"], "retrain", "base", "--decisions", bad)
    assert code == 2 and "bad.csv: line 2: field 'id': unknown id 'nope'" in out
    assert len(store.list()) == before
    copy = pd.read_parquet(retrained["exp"].path / DECISIONS_FILE)
    again = tmp_path / "again.parquet"
    copy[["id", "decision", "label", "original_label"]].to_parquet(again)
    assert create_correction(store, base, again, n_seeds=2).id == retrained["exp"].id


def test_retrain_from_a_review_queue_is_the_same_experiment(retrained):
    """``--queue NAME`` takes the decisions of the run's review queue: the same decisions as the file's
    are the same experiment."""
    from cartomap.curation import queue, sources

    base, ids = retrained["base"], retrained["ids"]
    names = base.label_names
    labels = [names[i] for i in base.examples()["label"]]
    queue.create_queue(base, "fix", sources.from_selection(base, ids[:4]), per_item=1)
    db = queue.open_queue(base, "fix")
    db.record("ann", ids[0], "relabel", names[(names.index(labels[0]) + 1) % 3])
    db.record("ann", ids[1], "remove")
    db.record("ann", ids[2], "keep")
    db.record("ann", ids[3], "unsure")
    code, out = call("--cache", retrained["cache"], "retrain", "base", "--queue", "fix", "--seeds", "2")
    assert code == 0, out
    assert retrained["exp"].id in out
    code, out = call("--cache", retrained["cache"], "retrain", "base", "--queue", "nope")
    assert code == 2 and "nope" in out


def test_a_run_that_is_not_done_is_refused(retrained, tmp_path):
    run = retrained["base"]
    run.set_status(state="failed")
    try:
        with pytest.raises(RunError, match="starts from a finished run"):
            create_correction(retrained["store"], run, tmp_path / "x.csv")
    finally:
        run.set_status(state="done")


# --------------------------------------------------------------------------- every kind
@pytest.mark.parametrize("name", sorted(registry.KINDS))
def test_every_kind_follows_the_contract(name, tmp_path):
    kind = registry.KINDS[name]
    assert kind.name == name
    assert callable(kind.planned_runs) and callable(kind.finalize)
    exp = ExperimentStore(tmp_path).create(name, {"seeds": [0]}, name="empty")
    assert registry.role_label(exp, "") == ""
    assert isinstance(registry.role_label(exp, "someone@seed0"), str)
    assert isinstance(registry.role_order(exp, "someone@seed0"), tuple)
    assert registry.sections(exp) == []  # no results yet: nothing to show, no error
