"""A review queue out to Label Studio and Argilla and their decisions back (cartomap.data.interchange):
round trips through each tool's file format (annotations simulated in that format) and malformed files."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
import zipfile

import pandas as pd
import pytest

from cartomap.config import REVIEW_DECISIONS
from cartomap.data import argilla as AR
from cartomap.data import interchange as I
from cartomap.data import label_studio as LS
from cartomap.errors import DataError
from cartomap.scores import agreement

NAMES = ["entailment", "neutral", "contradiction"]


@pytest.fixture()
def queue() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["e1", "e2", "e3"],
            "premise": ["A man <b>sleeps</b>.", "Two dogs run.", "It rains."],
            "hypothesis": ["Someone rests.", "Animals move.", "It is dry."],
            "label": ["entailment", 1, "neutral"],  # names, or class indices with label_names
            "prediction": ["neutral", "neutral", 2],
            "score": [0.91, 0.42, 0.77],
            "detector": ["aum", "aum", "aum"],
        }
    )


#: What two reviewers decide (item, annotator, decision, new_label, note), the import must give back.
EXPECTED = [
    ("e1", "alice", "relabel", "neutral", "hypothesis is vaguer"),
    ("e1", "bob", "keep", None, None),
    ("e2", "alice", "remove", None, None),
    ("e3", "alice", "unsure", None, "line one\nline two"),
    ("e3", "bob", "relabel", "contradiction", None),
]


def rows(table: pd.DataFrame) -> list[tuple]:
    assert list(table.columns) == list(I.DECISION_COLUMNS)
    return list(table.itertuples(index=False, name=None))


# --------------------------------------------------------------------------- Label Studio


def ls_result(decision, new_label=None, note=None):
    result = [
        {"from_name": "decision", "to_name": "premise", "type": "choices", "value": {"choices": [decision]}}
    ]
    if new_label is not None:
        result.append(
            {
                "from_name": "new_label",
                "to_name": "premise",
                "type": "choices",
                "value": {"choices": [new_label]},
            }
        )
    if note is not None:
        result.append(
            {"from_name": "note", "to_name": "premise", "type": "textarea", "value": {"text": note}}
        )
    return result


def annotate_label_studio(tasks):
    """Label Studio's JSON export of the imported tasks after the review (its ids, users 1 and 2)."""
    by_item = {
        "e1": [
            {"completed_by": 1, "result": ls_result("relabel", "neutral", ["hypothesis is vaguer"])},
            # bob first chose relabel/entailment, then keep: the hidden new_label stays in the result
            {
                "completed_by": {"id": 2, "email": "bob@example.org"},
                "result": ls_result("keep", "entailment"),
            },
            {"completed_by": 3, "was_cancelled": True, "result": []},  # skipped
        ],
        "e2": [{"completed_by": 1, "result": ls_result("remove")}],
        "e3": [
            {"completed_by": 1, "result": ls_result("unsure", None, ["line one", "line two"])},
            {
                "completed_by": {"id": 2, "email": "bob@example.org"},
                "result": ls_result("relabel", "contradiction"),
            },
        ],
    }
    exported = []
    for n, task in enumerate(tasks):
        annotations = [
            {"id": 100 * n + k, "was_cancelled": False, "ground_truth": False, "lead_time": 3.2, **a}
            for k, a in enumerate(by_item[task["data"]["item_id"]])
        ]
        exported.append(
            {"id": n + 1, "project": 7, "data": task["data"], "annotations": annotations, "predictions": []}
        )
    return exported


def test_label_studio_tasks(queue):
    tasks = LS.label_studio_tasks(queue, label_names=NAMES)
    assert tasks[0] == {
        "data": {
            "item_id": "e1",
            "premise": "A man <b>sleeps</b>.",  # text stays text: Label Studio's Text tag does not render HTML
            "hypothesis": "Someone rests.",
            "gold_label": "entailment",
            "prediction": "neutral",
            "score": "0.91",
            "detector": "aum",
        }
    }
    assert [t["data"]["gold_label"] for t in tasks] == ["entailment", "neutral", "neutral"]
    assert tasks[2]["data"]["prediction"] == "contradiction"
    only = LS.label_studio_tasks(queue, label_names=NAMES, text_columns=["hypothesis"], extra_columns=[])
    assert set(only[0]["data"]) == {"item_id", "hypothesis", "gold_label"}


def test_label_studio_config_is_valid_xml_with_the_questions():
    config = LS.label_studio_config(
        ("premise", "hypothesis"), ['say "no" <b>', "neutral"], extra_columns=("score",)
    )
    root = ET.fromstring(config)
    texts = {t.get("name"): t.get("value") for t in root.iter("Text")}
    assert texts == {
        "premise": "$premise",
        "hypothesis": "$hypothesis",
        "gold_label": "$gold_label",
        "score": "$score",
    }
    choices = {c.get("name"): c for c in root.iter("Choices")}
    assert [c.get("value") for c in choices["decision"]] == list(REVIEW_DECISIONS)
    assert choices["decision"].get("required") == "true"
    assert [c.get("value") for c in choices["new_label"]] == [
        'say "no" <b>',
        "neutral",
    ]  # escaped, parsed back
    assert choices["new_label"].get("whenChoiceValue") == "relabel"
    assert [t.get("name") for t in root.iter("TextArea")] == ["note"]
    with pytest.raises(DataError, match="not usable as a Label Studio name"):
        LS.label_studio_config(("premise text",), NAMES)


def test_label_studio_round_trip(queue, tmp_path):
    tasks_path, config_path = LS.write_label_studio(queue, tmp_path / "review.json", label_names=NAMES)
    assert config_path == tmp_path / "review.config.xml"
    ET.fromstring(config_path.read_text())
    tasks = json.loads(tasks_path.read_text())
    assert len(tasks) == 3
    export = tmp_path / "export.json"
    export.write_text(json.dumps(annotate_label_studio(tasks)))
    got = LS.read_label_studio(export, label_names=NAMES, users={1: "alice", "bob@example.org": "bob"})
    assert rows(got) == EXPECTED
    # without a users mapping: the tool's own ids (an object's email)
    raw = LS.read_label_studio(export)
    assert raw["annotator"].tolist() == ["1", "bob@example.org", "1", "1", "bob@example.org"]
    # the table feeds the agreement statistics as it is
    consensus = agreement.item_consensus(got).set_index("item")
    assert consensus.loc["e1", "tie"] and consensus.loc["e3", "majority"] == "relabel:contradiction"


def ls_task(result=None, **changes):
    task = {
        "id": 1,
        "data": {"item_id": "e1", "premise": "p"},
        "annotations": [{"completed_by": 1, "result": result or ls_result("keep")}],
    }
    task.update(changes)
    return task


@pytest.mark.parametrize(
    ("tasks", "match"),
    [
        ({"tasks": []}, r"bad\.json: expected a list of tasks, got dict"),
        ([ls_task(), "x"], r"bad\.json task 1: expected an object"),
        ([ls_task(data={"premise": "p"})], r"bad\.json task 0: field 'data\.item_id': no example id"),
        ([ls_task(annotations={"a": 1})], r"task 0: field 'annotations': expected a list"),
        (
            [ls_task(ls_result("maybe"))],
            r"task 0: field 'annotations\[0\]\.result\[0\]\.value\.choices': unknown decision 'maybe'",
        ),
        (
            [ls_task(ls_result("relabel", "sad"))],
            r"task 0: field 'annotations\[0\]\.result\[1\]\.value\.choices': unknown label 'sad'",
        ),
        (
            [ls_task([{"from_name": "decision", "type": "choices", "value": {"choices": "keep"}}])],
            r"field 'annotations\[0\]\.result\[0\]\.value\.choices': expected a list of choices",
        ),
        (
            [ls_task([{"from_name": "note", "type": "textarea", "value": {"text": ["n"]}}])],
            r"task 0: field 'annotations\[0\]\.result': no 'decision' choice",
        ),
        (
            [ls_task(annotations=[{"result": ls_result("keep")}])],
            r"field 'annotations\[0\]\.completed_by': no annotator",
        ),
        (
            [ls_task(annotations=[{"completed_by": 1, "result": "keep"}])],
            r"field 'annotations\[0\]\.result': expected a list",
        ),
        (
            [
                ls_task(
                    annotations=[
                        {"completed_by": 1, "result": ls_result("keep")},
                        {"completed_by": 1, "result": ls_result("remove")},
                    ]
                )
            ],
            r"task 0: field 'annotator': annotator '1' decided item 'e1' twice",
        ),
    ],
)
def test_label_studio_bad_exports(tmp_path, tasks, match):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(tasks))
    with pytest.raises(DataError, match=match):
        LS.read_label_studio(path, label_names=NAMES)


def test_label_studio_unreadable_files(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[{"data": {}},\n{oops}]')
    with pytest.raises(DataError, match=r"broken\.json: line 2: not valid JSON"):
        LS.read_label_studio(path)
    with pytest.raises(DataError, match=r"missing\.json: no such file"):
        LS.read_label_studio(tmp_path / "missing.json")


def test_empty_export_is_an_empty_table():
    table = LS.label_studio_decisions([])
    assert list(table.columns) == list(I.DECISION_COLUMNS) and table.empty


# --------------------------------------------------------------------------- Argilla


def argilla_responses(records):
    """The records after the review, as ``rg.Dataset.to_disk`` writes them (user ids are UUIDs)."""
    alice, bob = "3f7c0000-0000-4000-8000-00000000a11c", "3f7c0000-0000-4000-8000-000000000b0b"
    answers = {
        "e1": {
            "decision": [
                {"value": "relabel", "user_id": alice, "status": "submitted"},
                {"value": "keep", "user_id": bob, "status": "submitted"},
            ],
            "new_label": [
                {"value": "neutral", "user_id": alice, "status": "submitted"},
                {"value": "entailment", "user_id": bob, "status": "submitted"},  # stale: bob keeps
            ],
            "note": [{"value": "hypothesis is vaguer", "user_id": alice, "status": "submitted"}],
        },
        "e2": {
            "decision": [
                {"value": "remove", "user_id": alice, "status": "submitted"},
                {"value": "keep", "user_id": bob, "status": "draft"},  # not submitted: left out
            ]
        },
        "e3": {
            "decision": [
                {"value": "unsure", "user_id": alice, "status": "submitted"},
                {"value": "relabel", "user_id": bob, "status": "submitted"},
            ],
            "new_label": [{"value": "contradiction", "user_id": bob, "status": "submitted"}],
            "note": [{"value": "line one\nline two", "user_id": alice, "status": "submitted"}],
        },
    }
    for record in records:
        record["responses"] = answers[record["id"]]
        record["_server_id"] = "9b2d0000-0000-4000-8000-000000000001"
    return records, {alice: "alice", bob: "bob"}


def test_argilla_folder(queue, tmp_path):
    folder = AR.write_argilla(
        queue, tmp_path / "review", label_names=NAMES, name="snli-review", min_submitted=2
    )
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == sorted([AR.ARGILLA_RECORDS, AR.ARGILLA_SETTINGS, AR.ARGILLA_DATASET])
    dataset = json.loads((folder / AR.ARGILLA_DATASET).read_text())
    assert dataset["name"] == "snli-review"
    # argilla 2.8's DatasetModel: these fields only, status "draft" or "ready" (None failed from_disk)
    assert (
        set(dataset)
        <= {
            "id",
            "inserted_at",
            "updated_at",
            "name",
            "status",
            "guidelines",
            "allow_extra_metadata",
            "distribution",
            "workspace_id",
            "last_activity_at",
        }
        and dataset["status"] == "draft"
    )
    settings = json.loads((folder / AR.ARGILLA_SETTINGS).read_text())
    assert [f["name"] for f in settings["fields"]] == ["premise", "hypothesis", "gold_label"]
    questions = {q["name"]: q for q in settings["questions"]}
    assert [o["value"] for o in questions["decision"]["settings"]["options"]] == list(REVIEW_DECISIONS)
    assert (
        questions["decision"]["settings"]["type"] == "label_selection" and questions["decision"]["required"]
    )
    assert [o["value"] for o in questions["new_label"]["settings"]["options"]] == NAMES
    assert questions["note"]["settings"]["type"] == "text" and not questions["note"]["required"]
    assert {m["name"]: m["settings"]["type"] for m in settings["metadata"]} == {
        "prediction": "terms",
        "score": "float",
        "detector": "terms",
    }
    assert settings["distribution"] == {"strategy": "overlap", "min_submitted": 2}
    records = json.loads((folder / AR.ARGILLA_RECORDS).read_text())
    assert records[1] == {
        "id": "e2",
        "fields": {"premise": "Two dogs run.", "hypothesis": "Animals move.", "gold_label": "neutral"},
        "metadata": {"prediction": "neutral", "score": 0.42, "detector": "aum"},
        "suggestions": {},
        "responses": {},
        "vectors": {},
        "status": "pending",
        "_server_id": None,
    }


def test_argilla_round_trip(queue, tmp_path):
    folder = AR.write_argilla(queue, tmp_path / "review", label_names=NAMES)
    records, users = argilla_responses(json.loads((folder / AR.ARGILLA_RECORDS).read_text()))
    (folder / AR.ARGILLA_RECORDS).write_text(json.dumps(records))
    got = AR.read_argilla(folder, users=users)
    assert rows(got) == EXPECTED
    assert AR.read_argilla(folder / AR.ARGILLA_RECORDS, users=users).equals(got)  # the records file itself


def test_argilla_new_labels_checked_against_the_folders_settings(queue, tmp_path):
    folder = AR.write_argilla(queue, tmp_path / "review", label_names=NAMES)
    records = json.loads((folder / AR.ARGILLA_RECORDS).read_text())
    records[0]["responses"] = {
        "decision": [{"value": "relabel", "user_id": "u1"}],
        "new_label": [{"value": "sad", "user_id": "u1"}],
    }
    (folder / AR.ARGILLA_RECORDS).write_text(json.dumps(records))
    with pytest.raises(
        DataError,
        match=r"records\.json record 0: field 'responses\.new_label\[0\]\.value': unknown label 'sad'",
    ):
        AR.read_argilla(folder)


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ({"records": []}, r"expected a list of records, got dict"),
        ([{"fields": {}, "responses": {}}], r"record 0: field 'id': no example id"),
        ([{"id": "e1", "responses": []}], r"record 0: field 'responses': expected an object"),
        (
            [{"id": "e1", "responses": {"decision": {"value": "keep"}}}],
            r"field 'responses\.decision': expected a list",
        ),
        (
            [{"id": "e1", "responses": {"decision": [{"value": "drop", "user_id": "u"}]}}],
            r"field 'responses\.decision\[0\]\.value': unknown decision 'drop'",
        ),
        (
            [{"id": "e1", "responses": {"decision": [{"value": "keep"}]}}],
            r"field 'responses\.decision\[0\]\.user_id': no annotator",
        ),
        (
            [
                {"id": "e1", "responses": {}},
                {"id": "e2", "responses": {"note": [{"value": "n", "user_id": "u"}]}},
            ],
            r"record 1: field 'responses\.decision': reviewer 'u' answered \['note'\] but not 'decision'",
        ),
        (
            [{"id": "e1", "responses": {"note": [{"value": 3, "user_id": "u"}]}}],
            r"field 'responses\.note\[0\]\.value': expected text",
        ),
    ],
)
def test_argilla_bad_records(tmp_path, records, match):
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    with pytest.raises(DataError, match=match):
        AR.read_argilla(path, label_names=NAMES)


def test_argilla_records_file_zip_and_folder_hold_the_same(queue, tmp_path):
    """The three Argilla forms: the to_disk folder, the records file (records.to_json) with its settings
    file (Settings.to_json) next to it, and the folder as a ZIP download: the same settings and records."""
    options = dict(
        label_names=NAMES, name="snli-review", guidelines="Relabel only when sure.", min_submitted=2
    )
    folder = AR.write_argilla(queue, tmp_path / "review", **options)
    records_path, settings_path = AR.write_argilla_records(queue, tmp_path / "argilla.json", **options)
    assert records_path.is_file() and settings_path == tmp_path / "argilla.settings.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argilla.json", "argilla.settings.json", "review"]
    assert json.loads(records_path.read_text()) == json.loads((folder / AR.ARGILLA_RECORDS).read_text())
    settings = json.loads(settings_path.read_text())
    assert settings == json.loads((folder / AR.ARGILLA_SETTINGS).read_text())
    assert settings["guidelines"] == "Relabel only when sure."
    with zipfile.ZipFile(io.BytesIO(AR.argilla_zip(queue, "snli-review", **options))) as archive:
        names = sorted(archive.namelist())
        assert names == sorted(
            f"snli-review/{p}" for p in (AR.ARGILLA_RECORDS, AR.ARGILLA_SETTINGS, AR.ARGILLA_DATASET)
        )
        for path in (AR.ARGILLA_RECORDS, AR.ARGILLA_SETTINGS, AR.ARGILLA_DATASET):
            assert json.loads(archive.read(f"snli-review/{path}")) == json.loads((folder / path).read_text())
    # the records file comes back as the folder does
    records, users = argilla_responses(json.loads(records_path.read_text()))
    records_path.write_text(json.dumps(records))
    assert len(AR.read_argilla(records_path, label_names=NAMES, users=users)) > 0


def test_argilla_folder_is_complete_or_absent(queue, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "other.txt").write_text("mine")
    with pytest.raises(DataError, match=r"taken: exists and is not an empty folder"):
        AR.write_argilla(queue, taken, label_names=NAMES)
    assert [p.name for p in taken.iterdir()] == ["other.txt"]
    bad = queue.assign(label=["entailment", 1, "sad"])
    with pytest.raises(DataError, match=r"field 'label': row 2: unknown label 'sad'"):
        AR.write_argilla(bad, tmp_path / "new", label_names=NAMES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing half-written
    with pytest.raises(DataError, match="not usable as an Argilla name"):
        AR.write_argilla(
            queue.rename(columns={"premise": "Premise"}),
            tmp_path / "x",
            label_names=NAMES,
            text_columns=["Premise", "hypothesis"],
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (AR.write_argilla(queue, empty, label_names=NAMES) / AR.ARGILLA_RECORDS).exists()


# --------------------------------------------------------------------------- the queue


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda q: q.drop(columns="id"), r"field 'id': the queue has no column 'id'"),
        (lambda q: q.assign(id=["e1", "e1", "e3"]), r"field 'id': row 1: id 'e1' appears twice"),
        (lambda q: q.assign(id=["e1", None, "e3"]), r"field 'id': row 1: no id"),
        (
            lambda q: q.assign(label=["entailment", 5, "neutral"]),
            r"field 'label': row 1: class index 5 outside 0\.\.2",
        ),
        (
            lambda q: q.drop(columns=["premise", "hypothesis"]),
            r"no premise/hypothesis, text or tokens column",
        ),
        (lambda q: q.assign(hypothesis=["h", None, "h"]), r"field 'hypothesis': row 1: no text"),
        (lambda q: q.rename(columns={"detector": "gold_label"}).assign(detector="x"), None),
    ],
)
def test_bad_queues(queue, change, match):
    bad = change(queue)
    if match is None:  # a column named like the gold label's key, chosen as an extra
        with pytest.raises(DataError, match="must be distinct and not named"):
            LS.label_studio_tasks(bad, label_names=NAMES, extra_columns=["gold_label"])
        return
    with pytest.raises(DataError, match=match):
        LS.label_studio_tasks(bad, label_names=NAMES)
