"""The Filter and Review pages under streamlit.testing (no browser), on runs made without training."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from streamlit.testing.v1 import AppTest
from test_filtering import generated_rows, make_run, write_generated

import cartomap.runs.jobs
from cartomap.io import atomic_write_json, atomic_write_parquet
from cartomap.runs.tasks import task_status
from cartomap.wanli import batches
from cartomap.wanli import filtering as flt
from cartomap.wanli.batches import review_path
from cartomap.wanli.review import ReviewDB

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def env(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    return tmp_path / "cache"


@pytest.fixture()
def spawned(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None: calls.append(args) or os.getpid()
    )
    return calls


def page(name: str) -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / name), default_timeout=patience.WAIT_S)


def fake_checkpoints(run, epochs: int = 2) -> None:
    for e in range(1, epochs + 1):
        (run.path / "checkpoints" / f"epoch_{e}").mkdir(parents=True, exist_ok=True)


def filtered_batch(run, batch: str = "b1") -> pd.DataFrame:
    """A generated and filtered batch (filter_frame with made-up probabilities, so no model runs)."""
    gen = generated_rows(run, 4)
    gen.loc[0, "hypothesis"] = "No."
    gen.loc[1, "premise"] = "Write a pair of sentences."
    write_generated(run, batch, gen)
    rng = np.random.default_rng(0)
    frame = flt.filter_frame(
        gen, {}, flt.FilterConfig(), lambda rows: rng.dirichlet(np.ones(3), size=(2, len(rows)))
    )
    atomic_write_parquet(batches.filtered_path(run, batch), frame)
    report = {
        "config": flt.FilterConfig().to_dict(),
        "counts": flt.count_rules(frame["removed_by"]),
        "cut_by_label": flt.cut_by_label(frame),
        "epochs": 2,
    }
    atomic_write_json(batches.report_path(run, batch), report)
    return frame


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


# --------------------------------------------------------------------------- filter page
def test_filter_page_without_batches(env):
    make_run(env, n=20)
    at = page("filter.py").run()
    assert not at.exception, at.exception
    assert any("no generated batches" in i.value for i in at.info)


def test_filter_page_starts_the_job(env, spawned):
    run = make_run(env, n=40)
    fake_checkpoints(run)
    write_generated(run, "b1", generated_rows(run, 2))
    at = page("filter.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="_kept_flt_batch").value == "b1"
    assert any("not been filtered" in i.value for i in at.info)
    at.number_input(key="_kept_flt_keep_fraction").set_value(0.6).run()
    button(at, "Filter this batch").click().run()
    assert not at.exception, at.exception
    assert spawned == [["filter", run.id, "--batch", "b1", "--keep-fraction", "0.6"]]
    assert task_status(run, "filter-b1")["state"] == "queued"
    assert at.get("progress") and not any(b.label == "Filter this batch" for b in at.button)


def test_filter_page_without_checkpoints_says_so(env, spawned):
    run = make_run(env, n=40)
    write_generated(run, "b1", generated_rows(run, 2))
    at = page("filter.py").run()
    assert not at.exception, at.exception
    assert any("no end-of-epoch checkpoints" in w.value for w in at.warning)
    assert not any(b.label == "Filter this batch" for b in at.button)


def test_filter_page_shows_results(env, spawned):
    run = make_run(env, n=40)
    fake_checkpoints(run)
    frame = filtered_batch(run)
    at = page("filter.py").run()
    assert not at.exception, at.exception
    counts = next(d.value for d in at.dataframe if "rule" in d.value.columns)
    assert counts.set_index("rule")["removed"].to_dict() == flt.count_rules(frame["removed_by"])
    assert counts.set_index("rule").loc["too_short", "removed"] == 1
    assert at.get("plotly_chart")
    assert [t.label for t in at.tabs] == [
        f"Kept ({frame['kept'].sum()})",
        f"Removed ({(~frame['kept']).sum()})",
    ]
    kept_table = next(
        d.value for d in at.dataframe if "removed_by" not in d.value.columns and "gen_id" in d.value.columns
    )
    assert set(kept_table["gen_id"]) == set(frame.loc[frame["kept"], "gen_id"])
    removed_table = next(d.value for d in at.dataframe if "removed_by" in d.value.columns)
    assert set(removed_table["removed_by"]) == {"too_short", "instruction_phrase", "low_max_variability"}
    at.multiselect(key="_kept_flt_rules").set_value(["too_short"]).run()
    removed_table = next(d.value for d in at.dataframe if "removed_by" in d.value.columns)
    assert removed_table["gen_id"].tolist() == [frame.loc[0, "gen_id"]]
    assert button(at, "Filter again")


# --------------------------------------------------------------------------- review page
def test_review_page_label_click_records_and_shows_the_next_item(env):
    run = make_run(env, n=40)
    frame = filtered_batch(run)
    kept = frame[frame["kept"]].reset_index(drop=True)
    at = page("review.py").run()
    assert not at.exception, at.exception
    assert any("add it as a new annotator" in i.value for i in at.info)
    at.text_input(key="rv_new_name").input("Ada")
    button(at, "Add annotator").click().run()
    assert not at.exception, at.exception
    assert at.session_state["rv_annotator"] == "Ada"
    assert at.selectbox(key="_kept_rv_annotator").value == "Ada"
    assert texts(at) == [kept.loc[0, "premise"], kept.loc[0, "hypothesis"]]

    button(at, "neutral").click().run()
    assert not at.exception, at.exception
    db = ReviewDB(review_path(run, "b1"))
    actions = db.actions()
    assert actions[["gen_id", "annotator", "action", "label"]].values.tolist() == [
        [kept.loc[0, "gen_id"], "Ada", "label", "neutral"]
    ]
    assert texts(at) == [kept.loc[1, "premise"], kept.loc[1, "hypothesis"]]

    # a reload (a new session, same database) shows the next unreviewed item, not the first
    again = page("review.py")
    again.session_state["rv_annotator"] = "Ada"
    again.run()
    assert not again.exception, again.exception
    assert texts(again) == [kept.loc[1, "premise"], kept.loc[1, "hypothesis"]]


def test_review_page_revise_discard_and_change(env):
    run = make_run(env, n=40)
    frame = filtered_batch(run)
    kept = frame[frame["kept"]].reset_index(drop=True)
    db = ReviewDB(review_path(run, "b1"))  # created by the page on first view; make it exist here
    at = page("review.py")
    at.session_state["rv_annotator"] = "Ada"
    at.run()
    first = kept.loc[0, "gen_id"]
    at.toggle(key=f"_kept_rv_revise_{first}").set_value(True).run()
    assert at.text_input(key=f"_kept_rv_premise_{first}").value == kept.loc[0, "premise"]
    at.text_input(key=f"_kept_rv_hypothesis_{first}").input("A <b>bold</b> revision.").run()
    at.toggle(key=f"_kept_rv_revise_{first}").set_value(False).run()  # hiding the inputs loses nothing
    at.toggle(key=f"_kept_rv_revise_{first}").set_value(True).run()
    assert at.text_input(key=f"_kept_rv_hypothesis_{first}").value == "A <b>bold</b> revision."
    button(at, "Save revision as entailment").click().run()
    assert not at.exception, at.exception
    last = db.reviews().iloc[-1]
    assert (last["gen_id"], last["action"], last["label"]) == (first, "revise", "entailment")
    assert last["hypothesis"] == "A <b>bold</b> revision." and last["premise"] == kept.loc[0, "premise"]

    second = kept.loc[1, "gen_id"]
    button(at, "Discard").click().run()
    assert db.reviews().set_index("gen_id").loc[second, "action"] == "discard"
    assert any(second in c.value for c in at.caption)  # "Your last review: <id> · discard"

    button(at, "Change it").click().run()  # review the last one again
    assert texts(at)[:2] == [kept.loc[1, "premise"], kept.loc[1, "hypothesis"]]
    button(at, "contradiction").click().run()
    assert not at.exception, at.exception
    assert db.reviews().set_index("gen_id").loc[second, "action"] == "label"
    assert len(db.actions()) == 3
    assert texts(at)[:2] == [kept.loc[2, "premise"], kept.loc[2, "hypothesis"]]


def test_review_page_undoes_any_of_the_annotators_reviews(env):
    """Not only the last review: any of the annotator's own reviews is undone from "Your reviews" (the
    example comes back to them); Undo (Z) undoes the last; the undo is recorded, nothing deleted."""
    run = make_run(env, n=40)
    frame = filtered_batch(run)
    kept = frame[frame["kept"]].reset_index(drop=True)
    ids = kept["gen_id"].tolist()
    at = page("review.py")
    at.session_state["rv_annotator"] = "Ada"
    at.run()
    db = ReviewDB(review_path(run, "b1"))
    assert len(ids) >= 3
    for label in ("neutral", "entailment"):
        button(at, label).click().run()
    assert texts(at)[:2] == [kept.loc[2, "premise"], kept.loc[2, "hypothesis"]]
    assert at.button(key="rv_undo_last").proto.shortcut.lower() == "z"
    assert at.selectbox(key="_kept_rv_mine").options == [
        f"{ids[1]} · label as entailment",
        f"{ids[0]} · label as neutral",
    ]
    at.selectbox(key="_kept_rv_mine").set_value(ids[0]).run()  # the first review, not the last
    at.button(key="rv_undo_mine").click().run()
    assert not at.exception, at.exception
    assert any(f"Undid your review of {ids[0]}" in s.value for s in at.success)
    assert texts(at)[:2] == [kept.loc[0, "premise"], kept.loc[0, "hypothesis"]]  # back to Ada
    assert ids[0] not in set(db.reviews()["gen_id"]) and len(db.actions()) == 2
    at.button(key="rv_undo_last").click().run()  # the last one (ids[1])
    assert db.reviews().empty and len(db.actions()) == 2 and db.undone() == set(db.actions()["id"])


def test_review_page_summary_kappa_and_downloads(env):
    run = make_run(env, n=40)
    frame = filtered_batch(run)
    at = page("review.py").run()  # loads the items
    db = ReviewDB(review_path(run, "b1"))
    ids = frame.loc[frame["kept"], "gen_id"].tolist()
    for i, gid in enumerate(ids):
        db.record("ann1", gid, "label", ["entailment", "neutral", "contradiction"][i % 3])
        db.record("ann2", gid, "label", ["entailment", "neutral", "contradiction"][(i + (i == 0)) % 3])
    at.session_state["rv_annotator"] = "ann1"
    at.run()
    assert not at.exception, at.exception
    assert any("reviewed every example" in s.value for s in at.success)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Two reviews"] == str(len(ids)) and metrics["Pairs for κ"] == str(len(ids))
    kappa, _ = db.kappa()
    assert metrics["Cohen's κ"] == f"{kappa:.3f}"
    downloads = at.get("download_button")
    assert len(downloads) == 2


def test_review_page_without_filtered_batch(env):
    run = make_run(env, n=40)
    write_generated(run, "b1", generated_rows(run, 2))
    at = page("review.py").run()
    assert not at.exception, at.exception
    assert any("No filtered batch" in i.value for i in at.info)


def test_navigation_lists_the_pages():
    from pages.components import navigation

    titles = {script: title for script, title, _ in navigation.PAGES}
    assert titles["pages/filter.py"] == "Filter" and titles["pages/review.py"] == "Review"
    assert "navigation.PAGES" in (ROOT / "app.py").read_text(encoding="utf-8")


def test_pages_render_inside_the_app(env):
    run = make_run(env, n=40)
    fake_checkpoints(run)
    filtered_batch(run)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=patience.WAIT_S).run()
    assert not at.exception, at.exception
    for name, title in (
        ("filter.py", "Filter generated examples"),
        ("review.py", "Review generated examples"),
    ):
        at.switch_page(f"pages/{name}").run()
        assert not at.exception, (name, at.exception)
        assert [t.value for t in at.title] == [title]


def test_review_page_asks_who_is_reviewing(env):
    run = make_run(env, n=40)
    frame = filtered_batch(run)
    kept = frame[frame["kept"]].reset_index(drop=True)
    at = page("review.py").run()
    ReviewDB(review_path(run, "b1")).add_annotator("Bob")
    at = page("review.py").run()  # a new visitor: no name is picked for them
    assert not at.exception, at.exception
    picker = at.selectbox(key="_kept_rv_annotator")
    assert picker.options == ["Bob"] and picker.value is None
    assert texts(at) == [] and any("Pick your name" in i.value for i in at.info)
    picker.set_value("Bob").run()
    assert at.session_state["rv_annotator"] == "Bob"
    assert texts(at) == [kept.loc[0, "premise"], kept.loc[0, "hypothesis"]]


def test_review_page_enter_then_the_add_button_adds_the_annotator_once_without_an_error(env):
    """Enter in the name field submits the form (adds Ada, clears the field); a click on "Add annotator"
    after it does nothing more, and says nothing is wrong."""
    run = make_run(env, n=40)
    filtered_batch(run)
    at = page("review.py").run()
    at.text_input(key="rv_new_name").input("Ada")
    button(at, "Add annotator").click().run()  # the form's submit: what Enter does
    assert at.session_state["rv_annotator"] == "Ada" and at.session_state["rv_new_name"] == ""
    button(at, "Add annotator").click().run()  # then the button
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.session_state["rv_annotator"] == "Ada"
    assert ReviewDB(review_path(run, "b1")).annotators() == ["Ada"]
    at.text_input(key="rv_new_name").input("Ada")  # the same name typed again: picked, not an error
    button(at, "Add annotator").click().run()
    assert not at.error and ReviewDB(review_path(run, "b1")).annotators() == ["Ada"]


def test_the_name_to_add():
    from cartomap.errors import CartomapError
    from cartomap.wanli.review import name_to_add

    assert name_to_add("  Ada  Lovelace ") == "Ada Lovelace"
    assert name_to_add("", "Ada") is None and name_to_add("  ", "Ada") is None
    assert name_to_add("Bob", "Ada") == "Bob"
    with pytest.raises(CartomapError, match="needs a name"):
        name_to_add("", None)


def test_review_page_a_locked_or_full_database_is_one_message(env, monkeypatch):
    import sqlite3

    run = make_run(env, n=40)
    filtered_batch(run)
    at = page("review.py").run()
    at.text_input(key="rv_new_name").input("Ada")
    button(at, "Add annotator").click().run()
    assert not at.exception, at.exception

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(ReviewDB, "record", locked)
    button(at, "neutral").click().run()
    assert not at.exception, at.exception
    assert any("another reviewer is writing" in e.value for e in at.error)

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ReviewDB, "progress", full)
    at.run()
    assert not at.exception, at.exception
    assert any("the disk is full" in e.value for e in at.error)
