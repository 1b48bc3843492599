"""Review queues of suspects (cartomap.curation) on a tiny hand-made finished run: sources, cards,
assignment of k annotators, aggregation, the corrected set and its run: reference, concurrency,
Label Studio round trip and the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from curation_fixture import LABELS, make_run
from test_pruning import make_finished_experiment

from cartomap.cli import main
from cartomap.config import DataConfig
from cartomap.curation import aggregate, corrected, exchange, queue, sources
from cartomap.curation.store import QueueDB
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.experiments.pruning import pruning_of_run, suspects_of
from cartomap.experiments.store import ExperimentStore
from cartomap.runs import sqlite as sqlite_store
from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def run(cache):
    return make_run(cache)


# --------------------------------------------------------------------------- sources and cards
def test_detector_queue_is_its_top_k_in_score_order_with_cards(run):
    assert {"aum", "datamap_confidence"} <= set(sources.available_detectors(run))
    cand = sources.from_detector(run, "aum", 3)
    # the fixture's belief in gold: e1 -2, n1 -1, c1 -0.5 are the three lowest
    assert cand.ids == ("e1", "n1", "c1") and cand.queued_by == "detector:aum"
    assert cand.scores[0] > cand.scores[1] > cand.scores[2]
    items = queue.create_queue(run, "aum3", cand)
    assert items["id"].tolist() == ["e1", "n1", "c1"] and items["position"].tolist() == [0, 1, 2]
    e1 = items.iloc[0]
    assert e1["gold"] == "entailment" and e1["predicted"] == "neutral"
    # epoch 1 logits of e1: [-2/3, 0.5, 0] -> p(entailment) = e^(-2/3) / (e^(-2/3) + e^0.5 + 1)
    p1 = np.exp(-2 / 3) / (np.exp(-2 / 3) + np.exp(0.5) + 1)
    assert np.isclose(e1["p_gold_epochs"][0], p1) and len(e1["p_gold_epochs"]) == 3
    assert np.isclose(e1["p_gold"], e1["p_gold_epochs"][-1])
    assert list(e1["votes"]) == [1, 0, 2]  # contradiction, contradiction, entailment
    assert set(e1["neighbour_ids"][:2]) == {"e0", "e2"} and e1["neighbour_ids"][2] == "n0"
    assert list(e1["neighbour_labels"][:3]) == ["entailment", "entailment", "neutral"]
    assert "<b>bold</b>" in e1["premise"]  # kept as data, never rendered
    assert queue.list_queues(run) == ["aum3"]
    card = queue.item_card(run, "aum3", "e1")
    assert card["neighbours"]["id"].tolist()[2] == "n0" and "premise" in card["neighbours"].columns


def test_group_selection_and_pruning_sources(run):
    group = sources.from_group(run, "lasso")
    assert group.ids == ("c1", "n2", "e0") and group.queued_by == "group:lasso"  # no score: its own order
    assert all(np.isnan(s) for s in group.scores)
    picked = sources.from_selection(run, ["n0", "c0"], scores=[0.1, 0.9])
    assert picked.ids == ("c0", "n0") and picked.queued_by == "selection"
    oof = pd.DataFrame(
        {"id": ["e0", "e1", "n1"], "suspect": [False, True, True], "confidence": [5.0, 2.0, 3.5]}
    )
    pruning = sources.from_suspects(run, oof, "exp123")
    assert pruning.ids == ("n1", "e1") and pruning.queued_by == "pruning:exp123"
    assert pruning.scores == (3.5, 2.0)
    for name, cand in (("g", group), ("p", pruning)):
        assert queue.create_queue(run, name, cand)["queued_by"].unique().tolist() == [cand.queued_by]
    assert queue.list_queues(run) == ["g", "p"]


def test_bad_sources_and_names_are_clear_errors(run, cache):
    with pytest.raises(DataError, match="no oof inputs for detector 'oof_margin'"):
        sources.from_detector(run, "oof_margin", 3)
    with pytest.raises(DataError, match="unknown detector"):
        sources.from_detector(run, "nope", 3)
    with pytest.raises(CartomapError, match="not examples of run"):
        sources.from_selection(run, ["e0", "zz"])
    with pytest.raises(CartomapError, match="no group named"):
        sources.from_group(run, "missing")
    with pytest.raises(CartomapError, match="queue name"):
        queue.create_queue(run, "../x", sources.from_group(run, "lasso"))
    queue.create_queue(run, "q", sources.from_group(run, "lasso"))
    with pytest.raises(CartomapError, match="already"):
        queue.create_queue(run, "q", sources.from_group(run, "lasso"))
    with pytest.raises(CartomapError, match="its queues: q"):
        queue.open_queue(run, "other")
    run.set_status(state="running")
    with pytest.raises(RunError, match="not finished"):
        queue.create_queue(run, "q2", sources.from_group(run, "lasso"))


def test_a_run_without_dynamics_or_embeddings_still_queues(cache):
    run = make_run(cache, embeddings=False)
    for path in (run.path / "dynamics").rglob("*.parquet"):
        path.unlink()
    items = queue.create_queue(run, "plain", sources.from_group(run, "lasso"))
    assert items["predicted"].isna().all() and all(len(x) == 0 for x in items["neighbour_ids"])


# --------------------------------------------------------------------------- assignment and aggregation
def test_assignment_gives_each_item_k_annotators(run):
    queue.create_queue(run, "k2", sources.from_detector(run, "aum", 3), per_item=2)
    db = queue.open_queue(run, "k2")
    assert db.per_item == 2 and db.next_items("A", 5) == ["e1", "n1", "c1"]
    db.record("A", "e1", "keep")
    assert db.next_items("A") == ["n1"]  # A decided e1
    assert db.next_items("B") == ["e1"]  # e1 has 1 < k decisions
    db.record("B", "e1", "remove")
    assert db.next_items("C") == ["n1"]  # e1 is full (k = 2)
    db.record("C", "n1", "unsure")
    p = db.progress()
    assert (p["items"], p["complete"], p["partial"], p["undecided"]) == (3, 1, 1, 1)
    assert p["by_annotator"] == {"A": 1, "B": 1, "C": 1}
    db.set_per_item(1)
    assert db.progress()["complete"] == 2 and db.next_items("D", 5) == ["c1"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], ("unreviewed", None)),
        (["unsure"], ("unsure", None)),
        (["unsure", "unsure"], ("unsure", None)),
        (["keep", "keep", "remove"], ("keep", None)),
        (["keep", "remove"], ("unsure", None)),  # a tie
        (["unsure", "remove"], ("remove", None)),  # unsure is no vote
        (["relabel:neutral", "relabel:neutral", "keep"], ("relabel", "neutral")),
        (["relabel:neutral", "relabel:contradiction"], ("unsure", None)),  # different classes disagree
        (["keep", "remove", "remove", "relabel:neutral"], ("remove", None)),  # a plurality
    ],
)
def test_final_decision_rule(values, expected):
    assert aggregate.final_decision(values) == expected


def test_latest_decision_counts_relabel_to_gold_is_keep_and_validation(run):
    queue.create_queue(run, "q", sources.from_detector(run, "aum", 2))
    db = queue.open_queue(run, "q")
    db.record("A", "e1", "remove")
    db.record("A", "e1", "relabel", "neutral", note="  clearly   neutral ")  # a changed mind
    db.record("B", "e1", "relabel", "neutral")
    db.record("A", "n1", "relabel", "neutral")  # gold is neutral: a keep
    assert db.decision_of("A", "n1")["decision"] == "keep"
    assert db.decision_of("A", "e1") == {"decision": "relabel", "label": "neutral", "note": "clearly neutral"}
    assert len(db.history()) == 4  # append-only
    table = corrected.decisions(run, "q")
    assert tuple(table.columns) == aggregate.DECISION_COLUMNS
    e1, n1 = table.iloc[0], table.iloc[1]
    assert (e1["decision"], e1["label"], e1["original_label"], e1["decided_by"], e1["n_annotators"]) == (
        "relabel",
        "neutral",
        "entailment",
        "A,B",
        2,
    )
    assert (n1["decision"], n1["label"], n1["n_annotators"]) == ("keep", "neutral", 1)
    for bad, match in (
        (("A", "e1", "relabel"), "needs the new label"),
        (("A", "e1", "relabel", "happy"), "unknown label"),
        (("A", "e1", "maybe"), "unknown decision"),
        (("", "e1", "keep"), "needs a name"),
        (("A", "zz", "keep"), "no item 'zz'"),
    ):
        with pytest.raises(CartomapError, match=match):
            db.record(*bad)
    assert len(db.history()) == 4


def test_an_annotator_undoes_any_of_their_own_decisions_and_the_store_stays_append_only(run):
    queue.create_queue(run, "q", sources.from_detector(run, "aum", 3), per_item=2)
    db = queue.open_queue(run, "q")
    db.record("A", "e1", "remove")
    db.record("A", "e1", "relabel", "neutral")  # a changed mind
    db.record("A", "n1", "keep")
    db.record("A", "c1", "remove")
    db.record("B", "e1", "remove")
    db.record("B", "n1", "keep")
    assert db.next_items("A", 5) == []
    # undo an older decision (n1, not the last): the item is A's to decide again, first in A's queue
    assert db.undo("A", "n1") == 3
    assert db.decision_of("A", "n1") is None and db.next_items("A", 5) == ["n1"]
    assert db.last_decided("A") == "c1"
    # undo the changed mind on e1: A's decision is again the one before it
    db.undo("A", "e1")
    assert db.decision_of("A", "e1")["decision"] == "remove"
    assert db.decisions_of("A")["item_id"].tolist() == ["c1", "e1"]  # most recent first
    # aggregation, progress and agreement read the live decisions
    table = corrected.decisions(run, "q").set_index("id")
    assert table.loc["e1", "decision"] == "remove" and table.loc["e1", "decided_by"] == "A,B"
    assert table.loc["n1", "decided_by"] == "B" and table.loc["n1", "n_annotators"] == 1
    assert db.progress()["by_annotator"] == {"A": 2, "B": 2}
    assert set(db.long_table()["item"][db.long_table()["annotator"] == "A"]) == {"e1", "c1"}
    # append-only: nothing deleted, the undone rows are marked
    history = db.history()
    assert len(history) == 6 and history["undone"].tolist() == [False, True, True, False, False, False]
    # only one's own decisions; nothing left to undo is one clear error
    with pytest.raises(CartomapError, match="C has no decision on 'e1'"):
        db.undo("C", "e1")
    db.undo("A", "e1")
    with pytest.raises(CartomapError, match="A has no decision on 'e1'"):
        db.undo("A", "e1")
    assert db.decision_of("B", "e1")["decision"] == "remove"  # B's untouched
    assert db.undone() == {2, 1, 3}


def test_a_queue_database_made_before_undo_opens_and_undoes(run, tmp_path):
    """A review.sqlite written by an earlier version (no undos table, no view) gets them on opening."""
    queue.create_queue(run, "old", sources.from_detector(run, "aum", 2), per_item=1)
    path = queue.db_path(run, "old")
    QueueDB(path).record("A", "e1", "keep")
    with sqlite3.connect(path) as con:
        con.execute("DROP VIEW live_decisions")
        con.execute("DROP TABLE undos")
    db = QueueDB(path)
    assert db.decision_of("A", "e1")["decision"] == "keep"
    db.undo("A", "e1")
    assert db.next_items("A", 2) == ["e1", "n1"]


def test_guidelines_set_when_the_queue_is_made_and_edited_by_its_creator_only(run):
    text = "Relabel only when sure.\r\nRemove pairs that make no sense.  "
    queue.create_queue(run, "g", sources.from_group(run, "lasso"), by="Alice", guidelines=text)
    db = queue.open_queue(run, "g")
    assert db.guidelines == "Relabel only when sure.\nRemove pairs that make no sense."
    assert db.creator() == "Alice" and db.may_edit_guidelines("alice") and not db.may_edit_guidelines("Bob")
    with pytest.raises(CartomapError, match="only Alice, who made review queue 'g', can edit its guidelines"):
        db.set_guidelines("mine now", by="Bob")
    with pytest.raises(CartomapError, match="only Alice"):
        db.set_guidelines("anonymous", by=None)
    assert db.set_guidelines("  Keep when unsure. ", by="alice") == "Keep when unsure."
    assert db.guidelines == "Keep when unsure."
    assert [(w["what"], w["by"]) for w in db.writes()] == [
        ("created", "Alice"),
        ("guidelines", "Alice"),
        ("guidelines", "alice"),
    ]
    # a queue made without a team: no one is known to have made it, so whoever edits may
    queue.create_queue(run, "solo", sources.from_group(run, "lasso"))
    solo = queue.open_queue(run, "solo")
    assert solo.guidelines == "" and solo.creator() is None and solo.may_edit_guidelines(None)
    assert solo.set_guidelines("Be quick.") == "Be quick."
    # too long: refused before anything is made
    with pytest.raises(CartomapError, match="guidelines have at most 20,000 characters"):
        queue.create_queue(run, "long", sources.from_group(run, "lasso"), guidelines="x" * 20_001)
    assert "long" not in queue.list_queues(run) and not run.review_queue_dir("long").exists()
    # the Argilla dataset carries them
    options = exchange.argilla_options(run, "g")
    assert options["guidelines"] == "Keep when unsure."
    assert exchange.argilla_options(run, "solo")["guidelines"] == "Be quick."


def test_agreement_statistics(run):
    queue.create_queue(run, "q", sources.from_detector(run, "aum", 4))
    db = queue.open_queue(run, "q")
    for item, a, b in (("e1", "keep", "keep"), ("n1", "remove", "remove"), ("c1", "keep", "remove")):
        db.record("A", item, a)
        db.record("B", item, b)
    stats = aggregate.agreement(db.long_table())
    # Fleiss by hand: P = (1 + 1 + 0) / 3; p_keep = p_remove = 1/2 -> Pe = 1/2; kappa = (2/3 - 1/2) / (1/2)
    assert np.isclose(stats["summary"]["fleiss_kappa"], 1 / 3)
    assert set(stats["annotators"]["annotator"]) == {"A", "B"}
    assert aggregate.counts(corrected.decisions(run, "q")) == {
        "keep": 1,
        "relabel": 0,
        "remove": 1,
        "unsure": 1,
        "unreviewed": 1,
    }


# --------------------------------------------------------------------------- the corrected set
def test_corrected_set_and_its_run_reference(run, cache, tmp_path):
    queue.create_queue(run, "fix", sources.from_detector(run, "aum", 3), per_item=1)
    db = queue.open_queue(run, "fix")
    db.record("A", "e1", "relabel", "contradiction")
    db.record("A", "n1", "remove")
    db.record("A", "c1", "unsure")
    with pytest.raises(RunError, match="review-queue export"):
        RunStore(cache).data_ref(f"run:{run.id}:corrected/fix")
    result = corrected.export_corrected(
        run, "fix", tmp_path / "fixed.jsonl", tmp_path / "decisions.parquet", overwrite=False
    )
    assert result["ref"] == f"run:{run.id}:corrected/fix"
    assert (result["examples"], result["corrected"], result["relabelled"], result["removed"]) == (8, 7, 1, 1)
    config = RunStore(cache).data_ref(result["ref"])
    data = load_dataset(config)
    labels = dict(zip(data.ids, (LABELS[k] for k in data.labels), strict=True))
    assert "n1" not in labels and labels["e1"] == "contradiction" and labels["c1"] == "contradiction"
    assert labels["e0"] == "entailment" and len(labels) == 7
    assert "corrected/fix" in RunStore(cache).get(run.id).data_sets()
    exported = load_dataset(DataConfig(path=str(tmp_path / "fixed.jsonl"), label_names=LABELS))
    assert exported.ids == data.ids and list(exported.labels) == list(data.labels)
    rows = [json.loads(line) for line in (tmp_path / "fixed.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    assert by_id["e1"]["review_decision"] == "relabel" and by_id["e1"]["original_label"] == "entailment"
    assert by_id["e0"]["review_decision"] == "not queued" and by_id["e0"]["original_label"] == "entailment"
    table = pd.read_parquet(tmp_path / "decisions.parquet")
    assert list(table.columns) == list(aggregate.DECISION_COLUMNS)
    assert table["decision"].tolist() == ["relabel", "remove", "unsure"]
    assert table["queued_by"].unique().tolist() == ["detector:aum"]
    with pytest.raises(CartomapError, match="exists"):
        corrected.export_corrected(run, "fix", tmp_path / "fixed.jsonl")
    with pytest.raises(CartomapError, match="cannot tell the format"):
        corrected.export_corrected(run, "fix", tmp_path / "fixed.txt")


# --------------------------------------------------------------------------- concurrency
DECIDE = """
import sys, time
from pathlib import Path
from cartomap.curation.store import QueueDB
path, who, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
while not go.exists():
    time.sleep(0.001)
db = QueueDB(path)
for k in range(n):
    db.record(who, f"i{k:03d}", "relabel" if k % 2 else "keep", "neutral" if k % 2 else None)
"""


def _items(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": [f"i{k:03d}" for k in range(n)], "position": range(n), "score": 1.0, "gold": "entailment"}
    )


def test_processes_deciding_at_once_lose_nothing(tmp_path):
    path = tmp_path / "review.sqlite"
    QueueDB(path, label_names=LABELS, per_item=3).load_items(_items(60))
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", DECIDE, str(path), f"ann{k}", "60", str(go)])
        for k in range(3)
    ]
    time.sleep(1.0)
    go.touch()
    patience.wait_progressing(procs, [tmp_path], what="the deciding processes")
    assert [p.returncode for p in procs] == [0, 0, 0]
    db = QueueDB(path)
    history = db.history()
    assert len(history) == 180 and history["id"].is_unique
    assert history.groupby("annotator").size().to_dict() == {"ann0": 60, "ann1": 60, "ann2": 60}
    assert db.progress()["complete"] == 60


def test_threads_deciding_at_once_lose_nothing(tmp_path):
    path = tmp_path / "review.sqlite"
    QueueDB(path, label_names=LABELS, per_item=4).load_items(_items(25))
    errors = []

    def work(who: str) -> None:
        try:
            for k in range(25):
                QueueDB(path).record(who, f"i{k:03d}", "remove")
        except Exception as err:  # noqa: BLE001 - any failure fails the test below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(f"t{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    patience.wait_progressing(threads, [tmp_path], what="the deciding threads")
    assert not errors and len(QueueDB(path).history()) == 100


def test_a_locked_database_is_retried_until_the_lock_goes(tmp_path, monkeypatch):
    path = tmp_path / "review.sqlite"
    QueueDB(path, label_names=LABELS).load_items(_items(2))
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 50)  # give up waiting quickly: retry instead
    holder = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
    timer = threading.Timer(0.6, lambda: holder.execute("COMMIT"))
    start = time.monotonic()
    timer.start()
    try:
        ids = QueueDB(path).record_many([("A", "i000", "keep", None, "")], origin="cli")
    finally:
        timer.join()
        holder.close()
    assert time.monotonic() - start >= 0.5 and len(ids) == 1
    assert QueueDB(path).history()["origin"].tolist() == ["cli"]
    calls = []

    def always_locked():
        calls.append(1)
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError):
        sqlite_store.retry_busy(always_locked, seconds=0.05)
    assert len(calls) > 1
    with pytest.raises(sqlite3.OperationalError, match="no such table"):  # other errors: no retry
        sqlite_store.retry_busy(lambda: (_ for _ in ()).throw(sqlite3.OperationalError("no such table")))


# --------------------------------------------------------------------------- interchange
def test_label_studio_round_trip(run, tmp_path):
    queue.create_queue(run, "ls", sources.from_detector(run, "aum", 2))
    tasks_path, config_path = exchange.export_queue(run, "ls", tmp_path / "tasks.json", "labelstudio")
    tasks = json.loads(tasks_path.read_text())
    assert [t["data"]["item_id"] for t in tasks] == ["e1", "n1"] and config_path.exists()
    assert tasks[0]["data"]["gold_label"] == "entailment" and tasks[0]["data"]["prediction"] == "neutral"

    def annotation(user, decision, new_label=None):
        result = [
            {
                "from_name": "decision",
                "to_name": "premise",
                "type": "choices",
                "value": {"choices": [decision]},
            }
        ]
        if new_label:
            result.append(
                {
                    "from_name": "new_label",
                    "to_name": "premise",
                    "type": "choices",
                    "value": {"choices": [new_label]},
                }
            )
        return {"completed_by": user, "result": result}

    tasks[0]["annotations"] = [
        annotation("ann", "relabel", "neutral"),
        annotation("bob", "relabel", "neutral"),
    ]
    tasks[1]["annotations"] = [annotation("ann", "remove")]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks))
    assert exchange.import_decisions(run, "ls", export, "labelstudio") == 3
    db = queue.open_queue(run, "ls")
    assert set(db.history()["origin"]) == {"labelstudio"}
    table = corrected.decisions(run, "ls")
    assert table["decision"].tolist() == ["relabel", "remove"] and table["label"].tolist()[0] == "neutral"
    tasks[1]["data"]["item_id"] = "zz"
    export.write_text(json.dumps(tasks))
    with pytest.raises(CartomapError, match="not in queue"):
        exchange.import_decisions(run, "ls", export, "labelstudio")
    assert len(db.history()) == 3  # nothing of the bad file recorded


def test_argilla_round_trip_and_an_uploaded_export(run, tmp_path):
    queue.create_queue(run, "ar", sources.from_group(run, "lasso"))  # c1, n2, e0
    (folder,) = exchange.export_queue(run, "ar", tmp_path / "argilla", "argilla")
    records = json.loads((folder / "records.json").read_text())
    assert [r["id"] for r in records] == ["c1", "n2", "e0"]
    records[0]["responses"] = {
        "decision": [
            {"value": "relabel", "user_id": "u1", "status": "submitted"},
            {"value": "keep", "user_id": "u2", "status": "draft"},  # not submitted: left out
        ],
        "new_label": [{"value": "neutral", "user_id": "u1", "status": "submitted"}],
    }
    records[1]["responses"] = {"decision": [{"value": "relabel", "user_id": "u2", "status": "submitted"}]}
    (folder / "records.json").write_text(json.dumps(records))
    assert exchange.import_decisions(run, "ar", folder, "argilla") == 2
    db = queue.open_queue(run, "ar")
    assert db.decision_of("u1", "c1")["label"] == "neutral" and db.decision_of("u2", "c1") is None
    assert db.decision_of("u2", "n2")["decision"] == "unsure"  # a relabel without a new label
    assert "without a new label" in db.decision_of("u2", "n2")["note"]
    assert exchange.import_upload(run, "ar", json.dumps(records).encode(), "argilla", "records.json") == 2
    assert len(db.history()) == 4 and db.decision_of("u1", "c1")["label"] == "neutral"  # same outcome
    with pytest.raises(CartomapError, match="not a JSON file"):
        exchange.import_upload(run, "ar", b"{nope", "labelstudio", "bad.json")


def test_cli_argilla_export_a_json_path_writes_a_file_a_folder_path_a_folder(run, cache, tmp_path, capsys):
    queue.create_queue(run, "ar", sources.from_group(run, "lasso"), per_item=2)
    base = ["--cache", str(cache), "review-queue", "export", run.id, "ar", "--to", "argilla"]
    out = tmp_path / "argilla.json"
    assert main([*base, "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "argilla.settings.json").is_file()
    assert f"wrote {out}, {tmp_path / 'argilla.settings.json'}" in capsys.readouterr().out
    assert [r["id"] for r in json.loads(out.read_text())] == ["c1", "n2", "e0"]
    settings = json.loads((tmp_path / "argilla.settings.json").read_text())
    assert settings["distribution"]["min_submitted"] == 2  # the queue's k
    assert main([*base, "--out", str(out)]) == 2
    assert "exists already" in capsys.readouterr().err
    assert main([*base, "--out", str(out), "--force"]) == 0
    folder = tmp_path / "argilla-folder"
    assert main([*base, "--out", str(folder)]) == 0
    assert (folder / "records.json").is_file() and (folder / ".argilla" / "settings.json").is_file()
    assert json.loads((folder / "records.json").read_text()) == json.loads(out.read_text())
    # the records file comes back in
    records = json.loads(out.read_text())
    records[0]["responses"] = {"decision": [{"value": "remove", "user_id": "u1", "status": "submitted"}]}
    out.write_text(json.dumps(records))
    assert (
        main(["--cache", str(cache), "review-queue", "import", run.id, "ar", str(out), "--tool", "argilla"])
        == 0
    )
    assert queue.open_queue(run, "ar").decision_of("u1", "c1")["decision"] == "remove"


# --------------------------------------------------------------------------- the command line
def test_cli_review_queue(run, cache, tmp_path, capsys):
    base = ["--cache", str(cache), "review-queue"]
    assert main([*base, "create", run.id, "cli", "--detector", "aum", "--top", "2", "--per-item", "1"]) == 0
    assert "2 examples (detector:aum)" in capsys.readouterr().out
    assert main([*base, "next", run.id, "cli", "--annotator", "ann", "--n", "5"]) == 0
    assert capsys.readouterr().out.split() == ["e1", "n1"]
    assert (
        main([*base, "decide", run.id, "cli", "--annotator", "ann", "--item", "e1", "--decision", "remove"])
        == 0
    )
    assert (
        main([*base, "decide", run.id, "cli", "--annotator", "ann", "--item", "e1", "--decision", "relabel"])
        == 2
    )
    assert "--decision relabel needs --label" in capsys.readouterr().err
    assert main([*base, "show", run.id, "cli"]) == 0
    assert "remove 1" in capsys.readouterr().out
    assert main([*base, "undo", run.id, "cli", "--annotator", "ann", "--item", "e1"]) == 0
    assert "their decision now: no decision" in capsys.readouterr().out
    assert main([*base, "undo", run.id, "cli", "--annotator", "ann", "--item", "e1"]) == 2
    assert "ann has no decision on 'e1' to undo" in capsys.readouterr().err
    assert (
        main([*base, "decide", run.id, "cli", "--annotator", "ann", "--item", "e1", "--decision", "remove"])
        == 0
    )
    out = tmp_path / "fixed.csv"
    assert (
        main([*base, "export", run.id, "cli", "--out", str(out), "--decisions", str(tmp_path / "d.jsonl")])
        == 0
    )
    assert f"--data run:{run.id}:corrected/cli" in capsys.readouterr().out
    assert len(pd.read_csv(out)) == 7
    assert main([*base, "export", run.id, "cli", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main([*base, "create", run.id, "bad name", "--group", "lasso"]) == 2
    assert main([*base, "list", run.id]) == 0
    assert "cli: 2 examples" in capsys.readouterr().out


def test_cartomap_train_on_the_corrected_set(run, cache, tiny_model, capsys):
    queue.create_queue(run, "fix", sources.from_detector(run, "aum", 2), per_item=1)
    db = queue.open_queue(run, "fix")
    db.record("A", "e1", "relabel", "neutral")
    db.record("A", "n1", "remove")
    corrected.write_corrected(run, "fix")
    args = [
        "--cache", str(cache), "train", "--data", f"run:{run.id}:corrected/fix", "--epochs", "1",
        "--model", tiny_model, "--max-length", "32", "--batch-size", "8", "--quiet",
    ]  # fmt: skip
    assert main(args) == 0
    (trained,) = [r for r in RunStore(cache).list() if r.id != run.id]
    assert trained.config.data.path == str(run.corrected_path("fix").resolve())
    examples = trained.examples()
    assert "n1" not in set(examples["id"]) and len(examples) == 7
    assert int(examples.set_index("id").loc["e1", "label"]) == LABELS.index("neutral")


def test_pruning_experiment_suspects_queue_on_the_cli(tmp_path, capsys):
    cache = tmp_path / "pcache"
    exp, truth = make_finished_experiment(cache, load_dataset(DataConfig(path="demo:dev")))
    model0 = RunStore(cache).get(exp.run_ids()["model0"])
    assert [e.id for e in pruning_of_run(model0, ExperimentStore(cache), RunStore(cache))] == [exp.id]
    args = ["--cache", str(cache), "review-queue", "create", model0.id, "pr", "--pruning", exp.id]
    assert main(args) == 0
    items = queue.load_queue(model0, "pr")
    assert sorted(items["id"]) == sorted(truth["confident"])
    assert set(items["queued_by"]) == {f"pruning:{exp.id}"}
    assert items["score"].is_monotonic_decreasing and (items["score"] > 2.0).all()  # confidence > threshold
    other = make_run(tmp_path / "other")
    assert (
        main(
            ["--cache", str(tmp_path / "other"), "review-queue", "create", other.id, "x", "--pruning", exp.id]
        )
        == 2
    )
    capsys.readouterr()
    with pytest.raises(RunError, match="not trained on the examples"):
        suspects_of(exp, other, RunStore(cache))


def test_a_half_made_queue_is_made_again_but_decisions_are_never_dropped(run):
    queue.create_queue(run, "half", sources.from_group(run, "lasso"))
    queue.queue_path(run, "half").unlink()  # creation stopped before the queue file
    assert queue.list_queues(run) == []
    queue.create_queue(run, "half", sources.from_group(run, "lasso"))
    queue.open_queue(run, "half").record("A", "c1", "keep")
    queue.queue_path(run, "half").unlink()  # lost by hand, with a decision in the store
    with pytest.raises(CartomapError, match="holds decisions"):
        queue.create_queue(run, "half", sources.from_group(run, "lasso"))
    assert len(QueueDB(queue.db_path(run, "half")).history()) == 1


def test_cards_carry_p_gold_of_the_runs_other_seeds(run, cache, capsys):
    """A run trained again with another seed (same data and config): the CLI's queue finds it and every
    card has its p(gold) curve next to the run's own; the page's chart has one column per seed."""
    import dataclasses

    from cartomap.io import atomic_write_parquet
    from cartomap.scores.metrics import compute_metrics, softmax

    data = load_dataset(run.config.data)
    config = run.config.replace(train=dataclasses.replace(run.config.train, seed=7))
    other = RunStore(cache).create(config, data, None)
    labels = np.asarray(data.labels)
    logits = []
    for e in range(3):
        z = np.zeros((len(labels), 3), dtype=np.float32)
        z[np.arange(len(labels)), labels] = 1.0 + e  # this seed learns every gold label
        other.write_epoch("train", e, data.ids, z)
        logits.append(z)
    atomic_write_parquet(other.metrics_path(), compute_metrics(np.stack(logits), labels, data.ids))
    other.set_status(state="done", progress=1.0)

    assert main(["--cache", str(cache), "review-queue", "create", run.id, "seeded", "--detector", "aum"]) == 0
    capsys.readouterr()
    card = queue.item_card(run, "seeded", "e1")
    assert list(card["seed_list"]) == [7]
    k = list(data.ids).index("e1")
    expected = [float(softmax(z[k : k + 1], axis=1)[0, labels[k]]) for z in logits]
    np.testing.assert_allclose(list(card["p_gold_seeds"][0]), expected, rtol=1e-5)
    chart = queue.gold_curves(card)
    assert list(chart.columns) == ["this run", "seed 7"] and list(chart.index) == [1, 2, 3]
    np.testing.assert_allclose(chart["this run"], list(card["p_gold_epochs"]))
    # without other seeds: one column
    plain = queue.create_queue(run, "plain", sources.from_group(run, "lasso"))
    assert "p_gold_seeds" not in plain.columns
    assert list(queue.gold_curves(queue.item_card(run, "plain", "c1")).columns) == ["this run"]


def test_a_queue_of_the_ambiguous_examples_only_on_a_chosen_axis(run, cache, capsys):
    """`--region ambiguous --ambiguity SCORE`: a detector's top k found among the examples in that region
    of the run's map (ranked on that score), and any other source restricted to them."""
    from cartomap.scores.metrics import RegionRule

    metrics = run.metrics()
    for axis in ("variability", "mean_entropy"):
        rule = RegionRule(axis=axis)
        ambiguous = set(metrics["id"][rule.regions(metrics) == "ambiguous"])
        cand = sources.from_detector(run, "aum", 2, region="ambiguous", rule=rule)
        scores = sources.from_detector(run, "aum", 8)
        expected = [i for i in scores.ids if i in ambiguous][:2]
        assert list(cand.ids) == expected and cand.queued_by == f"detector:aum in ambiguous by {axis}"
    entropy = RegionRule(axis="mean_entropy")
    inside = [
        i for i in ("c1", "n2", "e0") if i in set(metrics["id"][entropy.regions(metrics) == "ambiguous"])
    ]
    if inside:
        assert (
            list(sources.in_region(run, sources.from_group(run, "lasso"), "ambiguous", entropy).ids) == inside
        )
    else:
        with pytest.raises(CartomapError, match="none of the 3 examples is ambiguous by mean entropy"):
            sources.in_region(run, sources.from_group(run, "lasso"), "ambiguous", entropy)
    base = ["--cache", str(cache), "review-queue", "create", run.id]
    assert (
        main(
            [
                *base,
                "amb",
                "--detector",
                "aum",
                "--top",
                "2",
                "--region",
                "ambiguous",
                "--ambiguity",
                "mean_entropy",
            ]
        )
        == 0
    )
    assert "in ambiguous by mean_entropy" in capsys.readouterr().out
    with pytest.raises(DataError, match="unknown region 'odd'"):
        sources.region_ids(run, "odd")


def test_an_item_never_takes_more_than_k_annotators(tmp_path):
    """Two per item: a third annotator is refused in one line, also in a batch and with threads racing;
    one who decided may change their mind; an undo makes room again."""
    path = tmp_path / "review.sqlite"
    db = QueueDB(path, label_names=LABELS, per_item=2)
    db.load_items(_items(2))
    db.record("A", "i000", "keep")
    db.record("B", "i000", "remove")
    with pytest.raises(CartomapError, match=r"has its 2 annotator\(s\) already \(A, B\)") as err:
        db.record("C", "i000", "keep")
    assert "\n" not in str(err.value)
    db.record("B", "i000", "keep")  # a changed mind is no new annotator
    with pytest.raises(CartomapError, match="annotator"):
        db.record_many([("C", "i001", "keep", None, ""), ("D", "i000", "keep", None, "")])
    assert len(db.history()) == 3  # all of the batch or none of it
    db.undo("A", "i000")
    db.record("C", "i000", "unsure")
    assert db.latest().groupby("item_id")["annotator"].nunique().max() == 2

    raced = tmp_path / "raced.sqlite"
    QueueDB(raced, label_names=LABELS, per_item=1).load_items(_items(1))
    refused = []

    def decide(who: str) -> None:
        try:
            QueueDB(raced).record(who, "i000", "keep")
        except CartomapError:
            refused.append(who)

    threads = [threading.Thread(target=decide, args=(f"t{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    patience.wait_progressing(threads, [tmp_path], what="the racing threads")
    assert len(refused) == 3 and len(QueueDB(raced).history()) == 1
