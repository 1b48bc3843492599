"""WaNLI Stage 4 (cartomap.wanli.review): the review database, every aggregation case, Cohen's κ, export."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import patience
import pytest
from test_filtering import make_run

from cartomap.config import DataConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.io import atomic_write_parquet
from cartomap.wanli.batches import review_path
from cartomap.wanli.review import ReviewDB, export_bytes, export_frame, export_reviewed, open_review
from cartomap.wanli.review_rules import (
    Decision,
    Review,
    aggregate,
    aggregate_pair,
    cohen_kappa,
    item_rng,
    kappa_pairs,
    minor_change,
)

LABELS = ("entailment", "neutral", "contradiction")
P, H = "A man is sleeping on a bench.", "The man is awake."


def lab(who, label):
    return Review(who, "label", label)


def rev(who, label, premise=P, hypothesis=H):
    return Review(who, "revise", label, premise, hypothesis)


def dis(who):
    return Review(who, "discard")


# --------------------------------------------------------------------------- aggregation cases
@pytest.mark.parametrize(
    ("a", "b"),
    [
        (dis("a"), lab("b", "neutral")),
        (lab("a", "neutral"), dis("b")),
        (dis("a"), dis("b")),
        (rev("a", "neutral", "Changed.", "Changed too."), dis("b")),
    ],
)
def test_discard_if_either_discards(a, b):
    assert aggregate_pair(P, H, a, b, item_rng(0, "x")) == Decision("discard", "discarded")


def test_both_revised_picks_one_revision_with_its_label():
    a = rev("a", "neutral", "A man naps on a bench.", "The man is awake.")
    b = rev("b", "contradiction", "A man sleeps on a park bench.", "The man is wide awake.")
    picks = set()
    for seed in range(20):
        d = aggregate_pair(P, H, a, b, item_rng(seed, "x"))
        assert d.status == "keep" and d.rule == "both_revised" and d.revised
        assert (d.premise, d.hypothesis, d.label) in {
            (a.premise, a.hypothesis, a.label),
            (b.premise, b.hypothesis, b.label),
        }
        picks.add(d.label)
        # seeded: the same seed and item give the same pick
        assert aggregate_pair(P, H, a, b, item_rng(seed, "x")) == d
    assert picks == {"neutral", "contradiction"}  # both can be picked


@pytest.mark.parametrize("reviser_first", [True, False])
def test_one_revised_minor_change_keeps_the_revision(reviser_first):
    reviser = rev(
        "a", "contradiction", "a man is sleeping on a bench", "The man is awake!"
    )  # case/punctuation
    other = lab("b", "contradiction")
    pair = (reviser, other) if reviser_first else (other, reviser)
    d = aggregate_pair(P, H, *pair, item_rng(0, "x"))
    assert d == Decision(
        "keep", "one_revised_minor", reviser.premise, reviser.hypothesis, "contradiction", True, False
    )


def test_one_revised_minor_change_with_different_labels_picks_a_label():
    reviser = rev("a", "neutral", P.upper(), H)
    other = lab("b", "contradiction")
    labels = set()
    for seed in range(20):
        d = aggregate_pair(P, H, reviser, other, item_rng(seed, "x"))
        assert d.rule == "one_revised_minor" and d.premise == P.upper() and d.revised and d.label_random
        labels.add(d.label)
    assert labels == {"neutral", "contradiction"}


@pytest.mark.parametrize("reviser_first", [True, False])
def test_one_revised_major_change_keeps_the_unrevised_text_and_its_label(reviser_first):
    reviser = rev("a", "neutral", P, "The man might be dreaming.")
    other = lab("b", "contradiction")
    pair = (reviser, other) if reviser_first else (other, reviser)
    for seed in range(5):
        d = aggregate_pair(P, H, *pair, item_rng(seed, "x"))
        assert d == Decision("keep", "one_revised_major", P, H, "contradiction", False, False)


def test_both_labelled_agree_and_disagree():
    d = aggregate_pair(P, H, lab("a", "neutral"), lab("b", "neutral"), item_rng(0, "x"))
    assert d == Decision("keep", "agreed", P, H, "neutral", False, False)
    labels = set()
    for seed in range(20):
        d = aggregate_pair(P, H, lab("a", "neutral"), lab("b", "entailment"), item_rng(seed, "x"))
        assert d.rule == "disagreed_random" and d.label_random and (d.premise, d.hypothesis) == (P, H)
        labels.add(d.label)
    assert labels == {"neutral", "entailment"}


def test_minor_change():
    assert minor_change((P, H), (P.lower(), H.rstrip(".")))
    assert minor_change((P, H), ("A man is  sleeping on a bench", H))  # whitespace
    assert not minor_change((P, H), (P, "The man is not awake."))


def test_random_picks_are_per_item_and_reproducible():
    assert item_rng(3, "g1").random() == item_rng(3, "g1").random()
    assert item_rng(3, "g1").random() != item_rng(3, "g2").random()


def test_aggregate_frames_pending_and_order():
    items = pd.DataFrame(
        {
            "gen_id": ["g1", "g2", "g3"],
            "premise": [P, P, P],
            "hypothesis": [H, H, H],
            "intended_label": ["neutral"] * 3,
            "seed_id": ["s"] * 3,
            "group": ["grp"] * 3,
        }
    )
    reviews = pd.DataFrame(
        [
            {"gen_id": "g1", "annotator": "a", "action": "label", "label": "neutral", "first_action_id": 1},
            {"gen_id": "g1", "annotator": "b", "action": "discard", "label": None, "first_action_id": 2},
            {
                "gen_id": "g2",
                "annotator": "a",
                "action": "label",
                "label": "entailment",
                "first_action_id": 3,
            },
            # a third review of g1 is not used
            {"gen_id": "g1", "annotator": "c", "action": "label", "label": "neutral", "first_action_id": 4},
        ]
    )
    out = aggregate(items, reviews).set_index("gen_id")
    assert out.loc["g1", "status"] == "discard" and out.loc["g1", "annotators"] == ["a", "b"]
    assert out.loc["g1", "n_reviews"] == 3
    assert out.loc["g2", "status"] == "pending" and out.loc["g3", "status"] == "pending"
    assert out.loc["g3", "n_reviews"] == 0


# --------------------------------------------------------------------------- kappa
def test_kappa_matches_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(0)
    rows, first, second, aid = [], [], [], 0
    for i in range(60):
        truth = LABELS[rng.integers(3)]
        a = truth if rng.random() < 0.7 else LABELS[rng.integers(3)]
        b = truth if rng.random() < 0.7 else LABELS[rng.integers(3)]
        kinds = ("label", "label") if i < 45 else (("revise", "label"), ("label", "discard"))[i % 2]
        for who, kind, label in (("ann1", kinds[0], a), ("ann2", kinds[1], b)):
            aid += 1
            rows.append(
                {"gen_id": f"g{i}", "annotator": who, "action": kind, "label": label, "first_action_id": aid}
            )
        if i < 45:
            first.append(a)
            second.append(b)
    reviews = pd.DataFrame(rows).sample(frac=1.0, random_state=1)  # order comes from first_action_id
    assert kappa_pairs(reviews) == (first, second)
    assert cohen_kappa(reviews) == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
    assert np.isnan(cohen_kappa(reviews.iloc[:0]))


def test_kappa_perfect_and_chance():
    rows = []
    for i, (a, b) in enumerate(
        [("neutral", "neutral"), ("entailment", "entailment"), ("neutral", "entailment")]
    ):
        rows += [
            {"gen_id": f"g{i}", "annotator": "x", "action": "label", "label": a, "first_action_id": 2 * i},
            {
                "gen_id": f"g{i}",
                "annotator": "y",
                "action": "label",
                "label": b,
                "first_action_id": 2 * i + 1,
            },
        ]
    from sklearn.metrics import cohen_kappa_score

    expected = cohen_kappa_score(
        ["neutral", "entailment", "neutral"], ["neutral", "entailment", "entailment"]
    )
    assert cohen_kappa(pd.DataFrame(rows)) == pytest.approx(expected)
    assert cohen_kappa(pd.DataFrame(rows[:4])) == pytest.approx(1.0)


# --------------------------------------------------------------------------- the database
def items_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "gen_id": [f"g{i:03d}" for i in range(n)],
            "premise": [f"Premise number {i}." for i in range(n)],
            "hypothesis": [f"Hypothesis number {i}." for i in range(n)],
            "intended_label": [LABELS[i % 3] for i in range(n)],
            "seed_id": [f"s{i}" for i in range(n)],
            "group": [f"grp{i // 5}" for i in range(n)],
        }
    )


def test_database_setup_wal_and_idempotent_items(tmp_path):
    db = ReviewDB(tmp_path / "r.sqlite", label_names=LABELS)
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"annotators", "items", "actions"} <= tables
    assert db.label_names == LABELS
    assert db.load_items(items_frame(5)) == 5
    assert db.load_items(items_frame(5)) == 0  # idempotent
    assert ReviewDB(tmp_path / "r.sqlite", label_names=LABELS).items()["gen_id"].tolist() == [
        f"g{i:03d}" for i in range(5)
    ]
    db.record("ann", "g004", "label", "neutral")
    # a new filtering keeps only some items: the others become inactive, their reviews stay
    assert db.load_items(items_frame(3)) == 0
    assert db.items()["gen_id"].tolist() == ["g000", "g001", "g002"]
    assert len(db.items(active_only=False)) == 5
    assert db.reviews().empty and len(db.reviews(active_only=False)) == 1
    assert db.load_items(items_frame(5)) == 0 and len(db.reviews()) == 1


def test_record_validation_and_latest_action_counts(tmp_path):
    db = ReviewDB(tmp_path / "r.sqlite", label_names=LABELS)
    db.load_items(items_frame(3))
    assert db.add_annotator("  Ada   Lovelace ") == "Ada Lovelace"
    assert db.add_annotator("Ada Lovelace") == "Ada Lovelace" and db.annotators() == ["Ada Lovelace"]
    with pytest.raises(CartomapError, match="name"):
        db.add_annotator("   ")
    with pytest.raises(CartomapError, match="needs a label"):
        db.record("ann", "g000", "label")
    with pytest.raises(CartomapError, match="unknown label"):
        db.record("ann", "g000", "label", "maybe")
    with pytest.raises(CartomapError, match="unknown action"):
        db.record("ann", "g000", "skip")
    with pytest.raises(CartomapError, match="no item"):
        db.record("ann", "nope", "discard")
    with pytest.raises(CartomapError, match="premise and a hypothesis"):
        db.record("ann", "g000", "revise", "neutral", premise="  ", hypothesis="x")
    assert db.actions().empty  # nothing was written by a refused action

    db.record("ann", "g000", "label", "neutral")
    db.record("ann", "g000", "revise", "entailment", premise="New premise.", hypothesis="New hypothesis.")
    db.record(
        "ann", "g001", "revise", "neutral", premise=" Premise number 1. ", hypothesis="Hypothesis number 1."
    )
    db.record("ann", "g002", "discard", "neutral")
    assert "ann" in db.annotators()  # registered by its first action
    reviews = db.reviews().set_index("gen_id")
    assert len(db.actions()) == 4 and len(reviews) == 3
    assert reviews.loc["g000", "action"] == "revise" and reviews.loc["g000", "premise"] == "New premise."
    assert reviews.loc["g001", "action"] == "label"  # a revision that changes nothing is a label
    assert reviews.loc["g002", "action"] == "discard" and pd.isna(reviews.loc["g002", "label"])
    assert db.latest("ann", 1)["gen_id"].tolist() == ["g002"]


def test_next_items_order(tmp_path):
    db = ReviewDB(tmp_path / "r.sqlite", label_names=LABELS)
    db.load_items(items_frame(6))
    assert [i["gen_id"] for i in db.next_items("c", 3)] == ["g000", "g001", "g002"]
    db.record("a", "g003", "label", "neutral")  # one review from another
    db.record("a", "g004", "label", "neutral")
    db.record("b", "g004", "label", "neutral")  # two reviews from others: last
    db.record("c", "g000", "label", "neutral")  # c's own review: never offered again to c
    order = [i["gen_id"] for i in db.next_items("c", 10)]
    assert order == ["g003", "g001", "g002", "g005", "g004"]
    assert db.next_items("c", 1)[0]["others"] == 1
    assert [i["gen_id"] for i in db.next_items("a", 10)] == ["g000", "g001", "g002", "g005"]
    assert db.progress() == {
        "items": 6,
        "unreviewed": 3,
        "one_review": 2,
        "complete": 1,
        "by_annotator": {"a": 2, "b": 1, "c": 1},
        "actions": 4,
    }


def test_an_annotator_undoes_any_of_their_own_reviews(tmp_path):
    db = ReviewDB(tmp_path / "r.sqlite", label_names=LABELS)
    db.load_items(items_frame(3))
    db.record("a", "g000", "label", "neutral")
    db.record("a", "g001", "discard")
    db.record("a", "g001", "label", "entailment")  # a changed mind
    db.record("b", "g000", "label", "neutral")
    assert db.undo("a", "g000") == 1  # an older review, not the last
    assert [i["gen_id"] for i in db.next_items("a", 5)] == ["g000", "g002"]
    assert db.latest("a", None)["gen_id"].tolist() == ["g001"]
    db.undo("a", "g001")
    assert db.reviews().set_index(["gen_id", "annotator"]).loc[("g001", "a"), "action"] == "discard"
    assert db.progress()["by_annotator"] == {"a": 1, "b": 1}
    assert db.kappa()[1] == 0  # g000 has one live review now
    assert len(db.actions()) == 4 and db.undone() == {1, 3}  # append-only
    with pytest.raises(CartomapError, match="no decision on 'g002'"):
        db.undo("a", "g002")
    with pytest.raises(CartomapError, match="b has no decision on 'g001'"):
        db.undo("b", "g001")


ANNOTATE = """
import sys, time
from pathlib import Path
from cartomap.wanli.review import ReviewDB
path, name, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
db = ReviewDB(path)
while not go.exists():
    time.sleep(0.005)
for i in range(n):
    db.record(name, f"g{i:03d}", "label", ("entailment", "neutral", "contradiction")[i % 3])
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    # Separate interpreters (not multiprocessing: its spawn start method re-runs whatever script
    # is __main__, which after an AppTest test is a dashboard page).
    path = tmp_path / "r.sqlite"
    ReviewDB(path, label_names=LABELS).load_items(items_frame(200))
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", ANNOTATE, str(path), f"ann{k}", "200", str(go)])
        for k in range(2)
    ]
    time.sleep(1.0)  # both interpreters are up and waiting
    go.touch()
    patience.wait_progressing(procs, [tmp_path], what="the annotating processes")
    assert [p.returncode for p in procs] == [0, 0]
    db = ReviewDB(path)
    actions = db.actions()
    assert len(actions) == 400 and actions["id"].is_unique
    assert actions.groupby("annotator").size().to_dict() == {"ann0": 200, "ann1": 200}
    assert db.progress()["complete"] == 200
    assert np.isclose(db.kappa()[0], 1.0) and db.kappa()[1] == 200


OPEN_NEW = """
import sys, time
from pathlib import Path
from cartomap.wanli.review import ReviewDB
folder, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
for k in range(30):
    ReviewDB(folder / f"new{k}.sqlite", label_names=("entailment", "neutral", "contradiction"))
"""


def test_two_people_opening_new_batches_at_the_same_moment_both_get_in(tmp_path):
    """Both set up the same new databases at once: the journal-mode change waits for the other's lock
    (the busy timeout applies to it too) instead of failing with "database is locked"."""
    go = tmp_path / "go"
    logs = [tmp_path / f"stderr{k}.txt" for k in range(2)]
    procs = []
    for log in logs:
        with open(log, "wb") as err:
            procs.append(
                subprocess.Popen([sys.executable, "-c", OPEN_NEW, str(tmp_path), str(go)], stderr=err)
            )
    time.sleep(1.0)
    go.touch()
    patience.wait_progressing(procs, [tmp_path], what="the processes opening batches")
    assert [p.returncode for p in procs] == [0, 0], [log.read_text()[-2000:] for log in logs]
    for k in range(30):
        assert ReviewDB(tmp_path / f"new{k}.sqlite").label_names == LABELS


def test_a_locked_or_full_database_is_one_clear_message(tmp_path, monkeypatch):
    import sqlite3

    from cartomap.runs import sqlite as review  # the shared SQLite helpers of every review store

    db = ReviewDB(tmp_path / "r.sqlite", label_names=LABELS)
    locked, full = (
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("database or disk is full"),
    )
    assert "busy: another reviewer is writing" in review.database_problem(locked, db.path)
    assert "the disk is full" in review.database_problem(full)
    # the journal-mode change is retried while the database is locked, and raised past the timeout
    calls = []

    class Locked:
        def execute(self, sql):
            calls.append(sql)
            if len(calls) < 3:
                raise sqlite3.OperationalError("database is locked")

    review.set_wal(Locked())
    assert calls == ["PRAGMA journal_mode=WAL"] * 3
    monkeypatch.setattr(review, "BUSY_TIMEOUT_MS", 50)
    calls.clear()

    class AlwaysLocked:
        def execute(self, sql):
            calls.append(sql)
            raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError):
        review.set_wal(AlwaysLocked())
    assert len(calls) > 1


# --------------------------------------------------------------------------- export
def _filtered(run, n: int = 9) -> pd.DataFrame:
    frame = items_frame(n).assign(kept=True, removed_by=None, max_variability=0.1)
    frame.loc[n - 1, "kept"] = False  # not offered for review
    frame.loc[n - 1, "removed_by"] = "low_max_variability"
    atomic_write_parquet(run.path / "wanli" / "b1" / "filtered.parquet", frame)
    return frame


def _review_batch(db: ReviewDB) -> None:
    for i, (a, b) in enumerate(
        [
            (("label", "entailment"), ("label", "entailment")),
            (("label", "neutral"), ("label", "neutral")),
            (("label", "contradiction"), ("label", "contradiction")),
            (("label", "neutral"), ("discard", None)),
            (("revise", "contradiction"), ("label", "neutral")),  # major revision: unrevised, "neutral"
            (("revise", "entailment"), ("revise", "entailment")),
            (("label", "entailment"), ("label", "neutral")),
        ]
    ):
        gid = f"g{i:03d}"
        for who, (action, label) in (("ann1", a), ("ann2", b)):
            extra = {}
            if action == "revise":
                extra = {
                    "premise": f"Revised premise {i} by {who}.",
                    "hypothesis": f"Revised hypothesis {i}.",
                }
            db.record(who, gid, action, label, **extra)
    db.record("ann1", "g007", "label", "neutral")  # one review only: pending, not exported


def test_export_loads_with_load_dataset(cache, tmp_path):
    run = make_run(cache, n=20)
    _filtered(run)
    db = open_review(run, "b1")
    assert db.path == review_path(run, "b1") and len(db.items()) == 8
    assert len(open_review(run, "b1").items()) == 8  # idempotent
    _review_batch(db)

    out, rows = export_reviewed(run, "b1", tmp_path / "final.jsonl")
    assert rows == 6
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert set(lines[0]) == {
        "id",
        "premise",
        "hypothesis",
        "label",
        "seed_id",
        "group",
        "intended_label",
        "revised",
        "annotators",
        "rule",
    }
    by_id = {x["id"]: x for x in lines}
    assert set(by_id) == {"g000", "g001", "g002", "g004", "g005", "g006"}
    assert by_id["g004"]["label"] == "neutral" and by_id["g004"]["premise"] == "Premise number 4."
    assert not by_id["g004"]["revised"] and by_id["g004"]["annotators"] == ["ann1", "ann2"]
    assert by_id["g005"]["revised"] and by_id["g005"]["premise"].startswith("Revised premise 5 by ann")
    assert by_id["g006"]["label"] in ("entailment", "neutral") and by_id["g006"]["rule"] == "disagreed_random"
    assert by_id["g000"]["seed_id"] == "s0" and by_id["g000"]["group"] == "grp0"

    data = load_dataset(DataConfig(path=str(out)))
    assert data.ids == [x["id"] for x in lines]
    assert data.label_names == LABELS
    assert [data.label_names[c] for c in data.labels] == [x["label"] for x in lines]
    assert data.frame["premise"].tolist() == [x["premise"] for x in lines]

    csv_out, _ = export_reviewed(run, "b1", tmp_path / "final.csv")
    csv_data = load_dataset(DataConfig(path=str(csv_out)))
    assert csv_data.ids == data.ids and (csv_data.labels == data.labels).all()
    assert csv_data.frame.loc[0, "annotators"] == "ann1;ann2"

    # the same seed gives the same file; existing files are not overwritten silently
    again, _ = export_reviewed(run, "b1", tmp_path / "again.jsonl")
    assert again.read_bytes() == out.read_bytes()
    with pytest.raises(CartomapError, match="exists already"):
        export_reviewed(run, "b1", out)
    export_reviewed(run, "b1", out, overwrite=True)
    with pytest.raises(CartomapError, match=r"\.jsonl or \.csv"):
        export_reviewed(run, "b1", tmp_path / "final.txt")


def test_export_bytes_and_nothing_to_export(cache, tmp_path):
    run = make_run(cache, n=20)
    _filtered(run)
    with pytest.raises(CartomapError, match="nothing to export"):
        export_reviewed(run, "b1", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()
    db = open_review(run, "b1")
    _review_batch(db)
    frame = export_frame(db.aggregate())
    assert export_bytes(frame, "csv").decode().splitlines()[0] == (
        "id,premise,hypothesis,label,seed_id,group,intended_label,revised,annotators,rule"
    )
    with pytest.raises(CartomapError):
        export_bytes(frame, "xml")


def test_open_review_needs_a_filtered_batch(cache):
    run = make_run(cache, n=20)
    with pytest.raises(CartomapError, match="not filtered yet"):
        open_review(run, "b1")


def test_cli_review_export(cache, tmp_path, capsys):
    from cartomap.cli import main

    run = make_run(cache, n=20)
    _filtered(run)
    _review_batch(open_review(run, "b1"))
    out = tmp_path / "final.jsonl"
    assert main(["--cache", str(cache), "review-export", run.id, "--batch", "b1", "--out", str(out)]) == 0
    assert "wrote 6 reviewed examples" in capsys.readouterr().out
    assert len(load_dataset(DataConfig(path=str(out)))) == 6
    assert main(["--cache", str(cache), "review-export", run.id, "--batch", "b1", "--out", str(out)]) == 2
    assert "exists already" in capsys.readouterr().err
