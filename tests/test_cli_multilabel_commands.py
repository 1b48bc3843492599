"""Every command on a multi-label run: it works per (example, label) or says in one line why it takes
examples with one label each, naming the kind, before it asks for anything else (test sets, embeddings,
decisions). The run is :mod:`multilabel_fixture`'s (3 texts, 2 labels, hand-set recordings; no training)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from multilabel_fixture import GOLD, GOLD_PROBS, NAMES, P_PRESENT, ROWS, make_multilabel_run

from cartomap.cli import main
from cartomap.curation.queue import load_queue, open_queue
from cartomap.tasks import support


@pytest.fixture()
def ml(cache, tmp_path):
    return make_multilabel_run(cache, tmp_path)


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "command, what",
    [
        (["prune", "--data", "run:{id}"], support.OUT_OF_FOLD.what),
        (["prune", "run:{id}", "--export", "{tmp}"], support.OUT_OF_FOLD.what),
        (["curriculum", "--data", "run:{id}"], "a curriculum of training orders works on examples with one"),
        (["combine", "--a", "run:{id}"], "a dataset combination (its table: the accuracy on each test set)"),
        (["combine", "--a", "demo:train", "--b", "run:{id}"], "a dataset combination"),
        (["retrain", "{id}"], support.CORRECTION.what),
        (["groups", "{id}"], support.GROUPS.what),
        (["artifacts", "run:{id}"], support.ARTIFACTS.what),
        (["generate", "{id}", "--batch", "b"], support.WANLI.what),
        (["filter", "{id}", "--batch", "b"], support.WANLI.what),
        (
            ["score-checkpoints", "{model}", "--data", "run:{id}"],
            "scoring checkpoints (one row of logits per",
        ),
        (["import-dynamics", "{tmp}", "--data", "run:{id}"], "importing reference dynamics (one row of"),
    ],
)
def test_a_command_of_one_label_per_example_refuses_a_multilabel_run_first(
    ml, cache, tmp_path, capsys, command, what, tiny_model
):
    """No test set, export folder, decisions or embeddings asked for first: the kind is the first refusal."""
    argv = [part.format(id=ml.id, tmp=tmp_path, model=tiny_model) for part in command]
    assert main(["--cache", str(cache), *argv]) == 2
    err = _error(capsys)
    assert what in err and "multilabel" in err
    assert not (ml.path / "embeddings.npy").exists()  # groups stopped before computing them


def test_a_subset_of_a_multilabel_set_is_drawn_at_random_with_its_label_sets(ml, cache, tmp_path, capsys):
    """No one class to stratify by: the rows are drawn at random; each keeps its label set by name."""
    out, rest = tmp_path / "sample.jsonl", tmp_path / "rest.jsonl"
    argv = ["subset", "--data", f"run:{ml.id}", "--n", "2", "--out", str(out), "--rest", str(rest)]
    assert main(["--cache", str(cache), *argv]) == 0
    rows = [json.loads(line) for p in (out, rest) for line in p.read_text(encoding="utf-8").splitlines()]
    assert sorted((r["id"], r["labels"], r["text"]) for r in rows) == sorted(
        (f"ex-{i}", r["labels"], r["text"]) for i, r in enumerate(ROWS)
    )
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2


# --------------------------------------------------------------------------- review queues
#: The fixture's confidence of each (example, label): the mean p(gold state) over its recordings.
CONF = GOLD_PROBS.mean(axis=0)


def _create(cache, run, *extra) -> int:
    return main(["--cache", str(cache), "review-queue", "create", run.id, *extra])


def test_a_detector_queues_a_multilabel_runs_example_label_units(ml, cache, capsys):
    """Every (example, label) is scored on its own: datamap_confidence = 1 - mean p(gold state), so the
    top 2 are the units of the lowest confidence; each card asks whether one label applies."""
    assert _create(cache, ml, "q", "--detector", "datamap_confidence", "--top", "2") == 0
    assert "2 (example, label) units" in capsys.readouterr().out
    items = load_queue(ml, "q")
    order = np.argsort(CONF.ravel(), kind="stable")[:2]
    assert items["id"].tolist() == [f"ex-{u // 2}#{u % 2}" for u in order]
    assert items["score"].tolist() == pytest.approx((1 - CONF.ravel()[order]).tolist(), abs=1e-6)
    for row in items.itertuples():
        i, j = int(row.example_id[3:]), int(row.label_index)
        assert row.label_name == NAMES[j] and row.text == ROWS[i]["text"]
        assert row.label_set == (", ".join(ROWS[i]["labels"]) or "(none)")
        assert row.gold == ("present" if GOLD[i, j] else "absent")
        assert row.predicted == ("present" if P_PRESENT[-1, i, j] > 0.5 else "absent")
        assert row.p_gold == pytest.approx(GOLD_PROBS[-1, i, j], abs=1e-5)
        assert list(row.p_gold_epochs) == pytest.approx(GOLD_PROBS[:, i, j].tolist(), abs=1e-5)
    assert open_queue(ml, "q").label_names == ("absent", "present")  # a relabel toggles the label


def test_a_queue_per_example_asks_about_each_examples_most_suspect_label(ml, cache, capsys):
    """``--per example``: each example once, as suspect as its most suspect label (the combined map's
    aggregation, its worst label), and its card about that label."""
    assert _create(cache, ml, "qe", "--detector", "datamap_confidence", "--per", "example") == 0
    assert "3 examples, each at its most suspect label" in capsys.readouterr().out
    items = load_queue(ml, "qe")
    worst = CONF.argmin(axis=1)
    order = np.argsort(CONF.min(axis=1), kind="stable")
    assert items["id"].tolist() == [f"ex-{i}#{worst[i]}" for i in order]
    assert items["score"].tolist() == pytest.approx((1 - CONF.min(axis=1)[order]).tolist(), abs=1e-6)
    assert items["queued_by"].iloc[0] == "detector:datamap_confidence per example (min over its labels)"


def test_an_example_selected_on_the_combined_map_is_queued_at_its_worst_label(ml, cache, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("ex-1\nex-0#0\n", encoding="utf-8")
    assert _create(cache, ml, "sel", "--ids", str(ids)) == 0
    assert load_queue(ml, "sel")["id"].tolist() == [f"ex-1#{CONF[1].argmin()}", "ex-0#0"]


def test_a_queue_per_example_is_for_multilabel_runs(ml):
    from cartomap.curation.sources import check_per
    from cartomap.errors import DataError
    from cartomap.tasks.sequence import PAIR

    pair_run = SimpleNamespace(id="r1", task_kind=PAIR)
    with pytest.raises(
        DataError,
        match=r"a queue per example is for multi-label runs \(an example of its labels\); run r1 is pair",
    ):
        check_per(pair_run, "example")
    with pytest.raises(DataError, match="unknown queue unit 'word'; expected one of unit, example"):
        check_per(ml, "word")


def test_relabel_toggles_a_label_and_remove_drops_its_text_in_the_corrected_set(ml, cache, tmp_path, capsys):
    assert _create(cache, ml, "q", "--detector", "datamap_confidence") == 0
    decide = ["--cache", str(cache), "review-queue", "decide", ml.id, "q", "--annotator", "ann"]
    # ex-0 has sports only: politics added, sports taken away; ex-2 removed
    assert main([*decide, "--item", "ex-0#0", "--decision", "relabel", "--label", "present"]) == 0
    assert main([*decide, "--item", "ex-0#1", "--decision", "relabel", "--label", "absent"]) == 0
    assert main([*decide, "--item", "ex-2#1", "--decision", "remove"]) == 0
    assert main([*decide, "--item", "ex-1#0", "--decision", "relabel", "--label", "sports"]) == 2
    assert "unknown label 'sports': expected one of absent, present" in capsys.readouterr().err
    out = tmp_path / "corrected.jsonl"
    assert main(["--cache", str(cache), "review-queue", "export", ml.id, "q", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["labels"], r["reviewed_labels"]) for r in rows] == [
        ("ex-0", ["politics"], 2),
        ("ex-1", ["politics", "sports"], 2),  # reviewed_labels: its labels the queue asked about
    ]
    # the queue goes to Label Studio with the label each card asks about and the two states to choose
    tasks = tmp_path / "tasks.json"
    assert main(["--cache", str(cache), "review-queue", "export", ml.id, "q", "--to", "labelstudio",
                 "--out", str(tasks)]) == 0  # fmt: skip
    first = json.loads(tasks.read_text(encoding="utf-8"))[0]["data"]
    assert first["label_name"] in NAMES and first["gold_label"] in ("absent", "present")
    assert '<Choice value="present"/>' in (tmp_path / "tasks.config.xml").read_text(encoding="utf-8")
