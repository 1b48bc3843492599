"""The Review suspects page under streamlit.testing (no browser): a queue made on the page, two
annotators deciding in two sessions, progress, agreement and the corrected set."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import patience
import pytest
from curation_fixture import make_run
from streamlit.testing.v1 import AppTest

from cartomap.curation import corrected, exchange, queue, sources
from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "review_suspects.py"


@pytest.fixture()
def env(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT))
    return tmp_path / "cache"


def session(run_id: str) -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run_id
    return at


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def test_two_annotators_review_a_detector_queue_end_to_end(env):
    run = make_run(env)
    at = session(run.id).run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Review suspects"]
    # make a queue: detector aum, top 3, k = 2; detectors are offered by their titles
    assert "−AUM" in at.selectbox(key="_kept_rs_detector").options
    at.selectbox(key="_kept_rs_detector").set_value("aum").run()
    at.number_input(key="_kept_rs_top").set_value(3).run()
    assert at.text_input(key="rs_new_name_aum-top3").value == "aum-top3"
    at.button(key="rs_create").click().run()
    assert not at.exception, at.exception
    assert queue.list_queues(run) == ["aum-top3"]
    assert any("3 examples to review" in s.value for s in at.success)

    # annotator ann: the first card is e1 (most suspect), its text shown as text, never markdown
    at.text_input(key="_kept_rs_annotator").set_value("ann").run()
    assert "Premise e1 <b>bold</b> *star*" in texts(at)
    assert not any("<b>" in m.value and "bold" in m.value and "\\<b" not in m.value for m in at.markdown)
    assert at.button(key="rs_keep").proto.shortcut.lower() == "k"
    relabel_keys = {b.key for b in at.button if b.key and b.key.startswith("rs_relabel_")}
    assert relabel_keys == {"rs_relabel_1", "rs_relabel_2"}  # not to its gold label (entailment, 0)
    assert len(at.get("arrow_vega_lite_chart")) >= 1 or len(at.get("vega_lite_chart")) >= 1  # p(gold) chart
    at.text_input(key="_kept_rs_note").set_value("clearly neutral").run()
    at.button(key="rs_relabel_1").click().run()  # e1 -> neutral
    assert "Premise n1 <b>bold</b> *star*" in texts(at)
    at.button(key="rs_remove").click().run()  # n1
    at.button(key="rs_unsure").click().run()  # c1
    assert any("Nothing left for you" in s.value for s in at.success)

    # annotator bob in a second session: the same three items (k = 2), in order
    bob = session(run.id).run()
    bob.selectbox(key="_kept_rs_queue").set_value("aum-top3").run()
    bob.text_input(key="_kept_rs_annotator").set_value("bob").run()
    assert "Premise e1 <b>bold</b> *star*" in texts(bob)
    bob.button(key="rs_relabel_1").click().run()  # e1 -> neutral: agrees
    bob.button(key="rs_keep").click().run()  # n1: disagrees with remove -> unsure
    bob.button(key="rs_remove").click().run()  # c1: ann unsure -> remove
    assert not bob.exception, bob.exception
    db = queue.open_queue(run, "aum-top3")
    assert db.progress()["complete"] == 3
    assert db.decision_of("ann", "e1") == {
        "decision": "relabel",
        "label": "neutral",
        "note": "clearly neutral",
    }
    assert set(db.history()["origin"]) == {"app"}
    table = corrected.decisions(run, "aum-top3")
    assert table["decision"].tolist() == ["relabel", "unsure", "remove"]

    # bob changes his mind on c1 (his last decision)
    bob.button(key="rs_redo_button").click().run()
    assert "Premise c1 <b>bold</b> *star*" in texts(bob)
    bob.button(key="rs_unsure").click().run()
    assert corrected.decisions(run, "aum-top3")["decision"].tolist() == ["relabel", "unsure", "unsure"]

    # agreement and the corrected set
    bob.run()
    final = next(d.value for d in bob.dataframe if "final decision" in d.value.columns)
    assert dict(zip(final["final decision"], final["examples"], strict=True))["relabel"] == 1
    assert any("statistic" in d.value.columns for d in bob.dataframe)
    bob.button(key="rs_write").click().run()
    assert not bob.exception, bob.exception
    assert any(f"run:{run.id}:corrected/aum-top3" in c.value for c in bob.caption)
    labels = dict(
        zip(
            pd.read_parquet(run.corrected_path("aum-top3"))["id"],
            pd.read_parquet(run.corrected_path("aum-top3"))["label"],
            strict=True,
        )
    )
    assert labels["e1"] == 1 and len(labels) == 8
    assert RunStore(env).data_ref(f"run:{run.id}:corrected/aum-top3").path.endswith("corrected.parquet")
    assert bob.get("download_button")


def test_an_annotator_undoes_any_of_their_own_decisions_on_the_page(env):
    """Any of the annotator's decisions, not only the last, is changed or undone from "Your decisions";
    Undo (Z) undoes the last; the undo is recorded and the final decisions read the live ones."""
    run = make_run(env)
    queue.create_queue(run, "q", sources.from_detector(run, "aum", 3), per_item=1)
    at = session(run.id)
    at.session_state["rs_annotator"] = "ann"
    at.run()
    at.button(key="rs_keep").click().run()  # e1
    at.button(key="rs_remove").click().run()  # n1
    at.button(key="rs_unsure").click().run()  # c1
    assert any("Nothing left for you" in s.value for s in at.success)
    assert at.button(key="rs_undo_last").proto.shortcut.lower() == "z"
    mine = at.selectbox(key="_kept_rs_mine")
    assert mine.options == ["c1 · unsure", "n1 · remove", "e1 · keep"]
    mine.set_value("e1").run()  # the first decision, not the last
    at.button(key="rs_undo_mine").click().run()
    assert not at.exception, at.exception
    assert any("Undid your decision on e1" in s.value for s in at.success)
    assert "Premise e1 <b>bold</b> *star*" in texts(at)  # e1 is ann's to decide again
    db = queue.open_queue(run, "q")
    assert db.decision_of("ann", "e1") is None and len(db.history()) == 3
    assert corrected.decisions(run, "q").set_index("id").loc["e1", "decision"] == "unreviewed"
    at.button(key="rs_undo_last").click().run()  # the last live one: c1
    assert db.decisions_of("ann")["item_id"].tolist() == ["n1"]
    # change an older decision: n1, from remove to keep
    at.selectbox(key="_kept_rs_mine").set_value("n1").run()
    at.button(key="rs_redo_mine").click().run()
    assert "Premise n1 <b>bold</b> *star*" in texts(at)
    at.button(key="rs_keep").click().run()
    assert db.decision_of("ann", "n1")["decision"] == "keep"


def test_card_probability_is_no_change_and_the_own_class_key_says_it_does_nothing(env):
    """ "Model predicts" shows p without a change arrow (a level, not a delta); p(gold)'s real change over
    the epochs is stated as one; the key of the example's own class records nothing and says so."""
    run = make_run(env)
    queue.create_queue(run, "q", sources.from_detector(run, "aum", 3), per_item=1)
    at = session(run.id)
    at.session_state["rs_annotator"] = "ann"
    at.run()
    card = queue.item_card(run, "q", "e1")
    metrics = {m.label: m for m in at.metric}
    predicts = metrics["Model predicts"]
    assert predicts.value == "neutral" and not predicts.proto.delta  # no arrow for a probability
    assert f"p = {card['p_predicted']:.2f}" in [c.value for c in at.caption]
    gold = metrics["p(gold), last epoch"]
    change = card["p_gold_epochs"][-1] - card["p_gold_epochs"][0]
    assert gold.value == f"{card['p_gold']:.2f}" and gold.proto.delta == f"{change:+.2f} since epoch 1"
    # e1's own class is entailment, key 1: a button that records nothing and says so
    same = at.button(key="rs_same_label_button")
    assert same.proto.shortcut == "1" and same.label == "entailment (its label)"
    same.click().run()
    assert not at.exception, at.exception
    assert any("entailment is already the label of e1: nothing was recorded" in w.value for w in at.warning)
    db = queue.open_queue(run, "q")
    assert db.history().empty and db.next_items("ann", 1) == ["e1"]
    at.run()  # the feedback is for that press only
    assert not any("nothing was recorded" in w.value for w in at.warning)


def test_group_queue_and_an_empty_run_of_queues(env):
    run = make_run(env)
    at = session(run.id).run()
    assert any("No review queue yet" in i.value for i in at.info)
    at.radio(key="_kept_rs_source").set_value("Saved group").run()
    at.button(key="rs_create").click().run()
    assert not at.exception, at.exception
    assert queue.list_queues(run) == ["group-lasso"]
    assert not at.get("radio") or all(r.key != "_kept_rs_source" for r in at.radio)  # the form closed
    assert "Premise c1 <b>bold</b> *star*" not in [t.value for t in at.text]  # no name yet: no card
    at.toggle(key="_kept_rs_new").set_value(True).run()
    at.radio(key="_kept_rs_source").set_value("Pruning suspects").run()
    assert any("No finished pruning experiment" in i.value for i in at.info)


def test_decisions_imported_from_a_label_studio_upload(env):
    run = make_run(env)
    queue.create_queue(run, "up", sources.from_group(run, "lasso"), per_item=1)
    tasks = [
        {
            "data": {"item_id": "n2"},
            "annotations": [
                {
                    "completed_by": "ls-user",
                    "result": [
                        {
                            "from_name": "decision",
                            "to_name": "premise",
                            "type": "choices",
                            "value": {"choices": ["remove"]},
                        }
                    ],
                }
            ],
        }
    ]
    at = session(run.id).run()
    at.file_uploader(key="rs_import_file").set_value(
        ("export.json", json.dumps(tasks).encode(), "application/json")
    )
    at.run()
    at.button(key="rs_import").click().run()
    assert not at.exception, at.exception
    assert any("Imported 1 decisions" in s.value for s in at.success)
    assert queue.open_queue(run, "up").decision_of("ls-user", "n2")["decision"] == "remove"


def test_label_studio_and_argilla_downloads_beside_each_other_before_any_decision(env, tmp_path):
    run = make_run(env)
    queue.create_queue(run, "out", sources.from_group(run, "lasso"), per_item=2)
    at = session(run.id).run()
    assert not at.exception, at.exception
    downloads = {b.proto.label: b for b in at.get("download_button")}
    assert {"Label Studio tasks (JSON)", "Argilla dataset (ZIP)"} <= set(downloads)
    # the ZIP is the folder rg.Dataset.from_disk loads: unzipped, its records are the queue's
    with zipfile.ZipFile(io.BytesIO(exchange.argilla_download(run, "out"))) as archive:
        archive.extractall(tmp_path / "unzipped")
    folder = tmp_path / "unzipped" / "out"
    records = json.loads((folder / "records.json").read_text())
    assert [r["id"] for r in records] == ["c1", "n2", "e0"]
    assert (
        json.loads((folder / ".argilla" / "settings.json").read_text())["distribution"]["min_submitted"] == 2
    )
    assert exchange.read_decisions(folder, "argilla", list(run.label_names)).empty  # nothing decided yet


def test_retrain_with_these_decisions_starts_the_retrain_after_review(env, monkeypatch):
    """The loop's last step on the page: the decisions file is written and handed to the retrain
    experiment, which starts as a background job; a run the retrain refuses (no dev or test set here) is
    one clear error, not a traceback."""
    from cartomap.curation import queue as queue_mod
    from cartomap.experiments import correction, launch

    run = make_run(env)
    queue_mod.create_queue(run, "fix", sources.from_group(run, "lasso"), per_item=1)
    queue_mod.open_queue(run, "fix").record("ann", "c1", "remove")
    at = session(run.id)
    at.session_state["_kept_rs_queue"] = "fix"
    at.run()
    assert not at.exception, at.exception
    at.button(key="rs_retrain").click().run()
    assert not at.exception, at.exception
    assert any("dev" in e.value or "test" in e.value for e in at.error)  # the fixture run has neither

    seen = {}

    class Started:
        id, state = "abc123", "queued"

    def fake_create(store, base, path, n_seeds=3, seeds=None, name=""):
        seen.update(run=base.id, path=Path(path), n_seeds=n_seeds, name=name)
        return Started()

    monkeypatch.setattr(correction, "create_correction", fake_create)
    monkeypatch.setattr(launch, "start_experiment", lambda exp, store, executor=None, by=None: exp)
    at.number_input(key="_kept_rs_retrain_seeds").set_value(2).run()
    at.button(key="rs_retrain").click().run()
    assert not at.exception, at.exception
    assert seen["run"] == run.id and seen["n_seeds"] == 2 and seen["name"] == "review fix"
    table = pd.read_parquet(seen["path"])
    assert table.set_index("id").loc["c1", "decision"] == "remove"
    assert any("abc123" in s.value for s in at.success)


def test_the_retrain_started_here_is_followed_and_cancelled_here(env):
    """The retrain experiment of the queue shows its progress where it was started, with Cancel while it
    runs (a flag its job reads between steps) and Resume once stopped."""
    from cartomap.experiments.correction import KIND
    from cartomap.experiments.store import ExperimentStore

    run = make_run(env)
    queue.create_queue(run, "fix", sources.from_group(run, "lasso"), per_item=1)
    queue.open_queue(run, "fix").record("ann", "c1", "remove")
    xstore = ExperimentStore(env)
    other = xstore.create(KIND, {"base_run": run.id, "n": 1}, name="review another-queue")
    exp = xstore.create(KIND, {"base_run": run.id, "n": 2}, name="review fix")
    exp.set_status(state="running", runs_planned=6, runs_done=2, role="original_s2", run_id="r2")
    lock = exp.acquire_lock()  # as the experiment's job would
    try:
        at = session(run.id)
        at.session_state["_kept_rs_queue"] = "fix"
        at.run()
        assert not at.exception, at.exception
        cancel = at.button(key=f"rs_retrain_cancel_{exp.id}")
        assert not any(b.key == f"rs_retrain_cancel_{other.id}" for b in at.button)  # another queue's
        cancel.click().run()
        assert not at.exception, at.exception
        assert exp.cancel_requested() and not other.cancel_requested()
    finally:
        lock.close()
    exp.set_status(state="cancelled")
    at.run()
    assert at.button(key=f"rs_retrain_resume_{exp.id}")  # stopped: Resume, here too


def test_guidelines_written_with_a_new_queue_show_on_every_card_and_are_edited_here(env):
    run = make_run(env)
    at = session(run.id).run()
    at.selectbox(key="_kept_rs_detector").set_value("aum").run()
    at.number_input(key="_kept_rs_top").set_value(2).run()
    at.text_area(key="_kept_rs_new_guidelines").input(
        "Relabel only when sure.\n<b>Remove</b> nonsense."
    ).run()
    at.button(key="rs_create").click().run()
    assert not at.exception, at.exception
    db = queue.open_queue(run, "aum-top2")
    assert db.guidelines == "Relabel only when sure.\n<b>Remove</b> nonsense."
    at.text_input(key="_kept_rs_annotator").set_value("ann").run()
    for decision in ("keep", "remove"):  # the guidelines with each card, as text (never markdown)
        assert "Relabel only when sure.\n<b>Remove</b> nonsense." in texts(at)
        at.button(key=f"rs_{decision}").click().run()
    assert any("Nothing left for you" in m.value for m in at.success)
    # edited here (a queue made without a team: whoever reviews on this machine may)
    at.text_area(key="rs_guidelines_aum-top2").input("Keep when unsure.").run()
    at.button(key="rs_save_guidelines").click().run()
    assert not at.exception, at.exception
    assert db.guidelines == "Keep when unsure."
    assert any("Saved the guidelines of aum-top2" in m.value for m in at.success)
