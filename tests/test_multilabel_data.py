"""Tests for cartomap.data.multilabel: every accepted shape of multi-label data, and each bad one's message."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap.data.loading import read_multilabel
from cartomap.data.multilabel import (
    from_frame,
    from_indicator,
    parse_multilabel_jsonl,
    records,
    to_indicator,
)
from cartomap.errors import DataError

# Three news snippets, labels from {politics, sports, tech}; the third has none ("none apply").
ROWS = [
    {"id": "a", "text": "The minister scored a goal", "labels": ["sports", "politics"]},
    {"id": "b", "text": "New phone released", "labels": ["tech"]},
    {"id": "c", "text": "Nice weather today", "labels": []},
]
EXPECTED_NAMES = ("politics", "sports", "tech")  # sorted
EXPECTED_LISTS = [["politics", "sports"], ["tech"], []]  # label-space order
EXPECTED_MATRIX = [[True, True, False], [False, False, True], [False, False, False]]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def error_of(call, *args, **options) -> DataError:
    with pytest.raises(DataError) as caught:
        call(*args, **options)
    return caught.value


# ----------------------------------------------------------------------------- accepted forms


def test_jsonl_lists_with_ids(tmp_path):
    data = read_multilabel(write_jsonl(tmp_path / "train.jsonl", ROWS), id_column="id")
    assert data.label_names == EXPECTED_NAMES
    assert data.frame["labels"].tolist() == EXPECTED_LISTS
    assert data.indicator.tolist() == EXPECTED_MATRIX
    assert data.indicator.dtype == bool and not data.indicator.flags.writeable
    assert list(data.frame.columns) == ["id", "text", "labels"]
    assert data.frame["id"].tolist() == ["a", "b", "c"]
    assert data.frame["text"].tolist() == [r["text"] for r in ROWS]  # texts untouched
    assert data.lines == (1, 2, 3)
    assert data.label_counts == {"politics": 1, "sports": 1, "tech": 1}
    assert data.warnings == ()


def test_without_an_id_column_ids_are_row_positions(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "id"} for r in ROWS]
    data = read_multilabel(write_jsonl(tmp_path / "train.jsonl", rows))
    assert data.frame["id"].tolist() == ["ex-0", "ex-1", "ex-2"]


def test_gzip_jsonl_blank_lines_and_lines_per_row(tmp_path):
    text = "\n" + json.dumps(ROWS[0]) + "\n\n" + json.dumps(ROWS[1]) + "\n"
    path = tmp_path / "train.jsonl.gz"
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    data = read_multilabel(path)
    assert data.lines == (2, 4)
    assert data.frame["labels"].tolist() == [["politics", "sports"], ["tech"]]


def test_given_label_space_keeps_its_order_and_reads_integer_positions(tmp_path):
    rows = [{"text": "x", "labels": [2, "sports"]}, {"text": "y", "labels": []}]
    data = read_multilabel(write_jsonl(tmp_path / "t.jsonl", rows), label_names=["tech", "sports", "arts"])
    assert data.label_names == ("tech", "sports", "arts")
    assert data.frame["labels"].tolist() == [["sports", "arts"], []]
    assert data.indicator.tolist() == [[False, True, True], [False, False, False]]
    # tech is never present: said, not refused
    assert len(data.warnings) == 1 and "'tech'" in data.warnings[0] and "no example" in data.warnings[0]


def test_csv_delimited_labels_with_an_empty_cell_for_none(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('text,tags\nhello,"sports | politics"\nbye,\nphone,tech\n', encoding="utf-8")
    data = read_multilabel(path, labels_column="tags", separator="|")
    assert data.label_names == EXPECTED_NAMES
    assert data.frame["labels"].tolist() == EXPECTED_LISTS[:1] + [[], ["tech"]]
    assert list(data.frame.columns) == ["id", "text", "labels"]  # the tags column became labels
    assert data.lines == (2, 3, 4)


def test_csv_one_zero_one_column_per_label(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("id,text,tech,sports\n7,a,1,0\n8,b,0,0\n9,c,1,1\n", encoding="utf-8")
    data = read_multilabel(path, label_columns=["tech", "sports"], id_column="id")
    assert data.label_names == ("tech", "sports")  # the columns' order, not sorted
    assert data.indicator.tolist() == [[True, False], [False, False], [True, True]]
    assert data.frame["labels"].tolist() == [["tech"], [], ["tech", "sports"]]
    assert list(data.frame.columns) == ["id", "text", "labels"]
    assert data.frame["id"].tolist() == ["7", "8", "9"]


def test_parquet_list_column_and_bool_flag_columns(tmp_path):
    frame = pd.DataFrame({"text": ["a", "b"], "labels": [["x", "y"], ["y"]]})
    frame.to_parquet(tmp_path / "t.parquet")
    data = read_multilabel(tmp_path / "t.parquet")  # lists come back as numpy arrays
    assert data.frame["labels"].tolist() == [["x", "y"], ["y"]] and data.lines is None
    flags = pd.DataFrame({"text": ["a", "b"], "x": [True, False], "y": [1.0, 0.0]})
    data = from_frame(flags, label_columns=["x", "y"])
    assert data.indicator.tolist() == [[True, True], [False, False]]


def test_frame_keeps_other_columns_and_renames_a_clashing_one():
    frame = pd.DataFrame(
        {"premise": ["p"], "hypothesis": ["h"], "labels": ["old"], "x": [1], "y": [0], "id": ["unused"]}
    )
    data = from_frame(frame, label_columns=["x", "y"])
    assert list(data.frame.columns) == ["id", "premise", "hypothesis", "orig_labels", "orig_id", "labels"]
    assert data.frame["orig_labels"].tolist() == ["old"] and data.frame["labels"].tolist() == [["x"]]


def test_a_label_on_every_example_is_said():
    data = from_frame(pd.DataFrame({"labels": [["a", "b"], ["a"]]}), source="s.jsonl")
    assert data.warnings == ("s.jsonl: every example has the label ['a']: its map is all 'present'",)


def test_indicator_round_trip_and_records(tmp_path):
    matrix = to_indicator([["b"], [], ["c", "a"]], ["a", "b", "c"])
    assert matrix.tolist() == [[False, True, False], [False, False, False], [True, False, True]]
    assert from_indicator(matrix, ["a", "b", "c"]) == [["b"], [], ["a", "c"]]
    assert from_indicator(matrix.astype(int), ["a", "b", "c"]) == [["b"], [], ["a", "c"]]
    data = read_multilabel(write_jsonl(tmp_path / "t.jsonl", ROWS), id_column="id")
    again = read_multilabel(write_jsonl(tmp_path / "u.jsonl", records(data)), id_column="id")
    assert again.frame.equals(data.frame) and again.label_names == data.label_names


# ----------------------------------------------------------------------------- bad forms


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ("sports", "labels", "got the string 'sports'; give the separator"),
        (None, "labels", "missing labels (null); expected a list of label names ([] when none apply)"),
        (3, "labels", "expected a list of label names, got int 3"),
        (["a", "a"], "labels", "label 'a' appears twice"),
        (["a", ""], "labels", "empty label name at position 1"),
        (["a", 1], "labels", "label 1 is the integer 1; expected a label name"),
        (["a", {"b": 1}], "labels", "label 1 is dict"),
    ],
)
def test_bad_label_lists_name_the_line_and_field(tmp_path, value, field, words):
    rows = [{"text": "ok", "labels": ["a"]}, {"text": "bad", "labels": value}]
    error = error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", rows))
    assert error.location == f"{tmp_path / 't.jsonl'}: line 2" and error.field == field
    assert words in str(error)


def test_unknown_label_with_a_given_label_space(tmp_path):
    rows = [{"text": "ok", "labels": ["a", "zzz"]}]
    error = error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", rows), label_names=["a", "b"])
    assert str(error).endswith("line 1: field 'labels': label 'zzz' is not one of the label names ['a', 'b']")
    error = error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", [{"labels": [5]}]), label_names=["a"])
    assert "label 0 is 5, outside [0, 1) for the 1 label names" in str(error)


def test_delimited_string_with_a_doubled_separator(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,labels\na,x||y\n", encoding="utf-8")
    error = error_of(read_multilabel, path, separator="|")
    assert error.location == f"{path}: line 2" and "doubled or trailing '|'" in str(error)


@pytest.mark.parametrize(
    ("value", "words"),
    [("2", "value '2'; expected 0 or 1"), ("", "value ''; expected 0 or 1"), ("yes", "value 'yes'")],
)
def test_bad_flag_cells_name_the_line_and_column(tmp_path, value, words):
    path = tmp_path / "t.csv"
    path.write_text(f"text,x,y\na,1,0\nb,0,{value}\n", encoding="utf-8")
    error = error_of(read_multilabel, path, label_columns=["x", "y"])
    assert error.location == f"{path}: line 3" and error.field == "y" and words in str(error)


def test_bad_flags_in_a_frame_name_the_row():
    error = error_of(from_frame, pd.DataFrame({"x": [0, 2]}), label_columns=["x"], source="up.parquet")
    assert (
        str(error)
        == "up.parquet: row 1: field 'x': value 2; expected 0 or 1 (the label is absent or present)"
    )
    error = error_of(from_frame, pd.DataFrame({"x": [0.5]}), label_columns=["x"])
    assert "value 0.5" in str(error)
    error = error_of(from_frame, pd.DataFrame({"x": [np.nan]}), label_columns=["x"])
    assert "missing value (null); expected 0 or 1" in str(error)


def test_jsonl_line_problems(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"labels": ["a"]}\n{"text": "no labels"}\n', encoding="utf-8")
    error = error_of(read_multilabel, path)
    assert (
        error.location == f"{path}: line 2"
        and error.field == "labels"
        and "missing; the line has fields ['text']" in str(error)
    )
    path.write_text('{"labels": ["a"]}\n[1, 2]\n', encoding="utf-8")
    assert "expected a JSON object per line, got list" in str(error_of(read_multilabel, path))
    path.write_text('{"labels": ["a"]\n', encoding="utf-8")
    assert "line 1: malformed JSON" in str(error_of(read_multilabel, path))
    path.write_text("\n\n", encoding="utf-8")
    assert "no examples" in str(error_of(read_multilabel, path))


def test_text_columns_are_checked_when_named(tmp_path):
    rows = [{"text": "fine", "labels": ["a"]}, {"text": "  ", "labels": ["b"]}]
    error = error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", rows), text_columns=["text"])
    assert (
        error.location.endswith("line 2")
        and error.field == "text"
        and "empty text (only whitespace)" in str(error)
    )
    rows = [{"text": "fine", "labels": ["a"]}, {"labels": ["b"]}]
    error = error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", rows), text_columns=["text"])
    assert error.location.endswith("line 2") and "missing; the line has fields ['labels']" in str(error)
    frame = pd.DataFrame({"text": ["a", 5], "labels": [["x"], []]})
    assert "expected a text string, got int 5" in str(error_of(from_frame, frame, text_columns=["text"]))
    assert "missing text column" in str(error_of(from_frame, frame, text_columns=["premise"]))
    assert from_frame(frame).frame["text"].tolist() == ["a", 5]  # not named: kept as it is


def test_ids_missing_or_repeated(tmp_path):
    rows = [{"id": 1, "labels": ["a"]}, {"id": 1.0, "labels": ["b"]}]
    error = error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", rows), id_column="id")
    assert (
        error.location.endswith("line 2")
        and "id '1' repeats the id of" in str(error)
        and "line 1" in str(error)
    )
    rows = [{"id": "", "labels": ["a"]}]
    assert "missing id" in str(
        error_of(read_multilabel, write_jsonl(tmp_path / "t.jsonl", rows), id_column="id")
    )


def test_frame_level_problems():
    frame = pd.DataFrame({"text": ["a"], "labels": [[]]})
    assert "no example has a label" in str(error_of(from_frame, frame))
    assert from_frame(frame, label_names=["a"]).indicator.tolist() == [[False]]  # legal with a given space
    assert "missing labels column" in str(error_of(from_frame, frame, labels_column="tags"))
    assert "missing label column" in str(error_of(from_frame, frame, label_columns=["x"]))
    assert "not both" in str(error_of(from_frame, frame, labels_column="labels", label_columns=["x"]))
    assert "no rows" in str(error_of(from_frame, frame.iloc[:0]))
    assert "label_names applies to a labels column" in str(
        error_of(from_frame, pd.DataFrame({"x": [1]}), label_columns=["x"], label_names=["x"])
    )
    assert "distinct column names" in str(
        error_of(from_frame, pd.DataFrame({"x": [1]}), label_columns=["x", "x"])
    )
    assert "appears twice" in str(error_of(from_frame, frame, label_names=["a", "a"]))
    assert "expected a pandas DataFrame" in str(error_of(from_frame, [{"labels": []}]))


def test_indicator_helpers_refuse_bad_input():
    assert error_of(to_indicator, [["a"], ["q"]], ["a"]).location == "row 1"
    assert "appears twice" in str(error_of(to_indicator, [["a", "a"]], ["a"]))
    assert "expected a matrix" in str(error_of(from_indicator, np.zeros((2, 3), dtype=bool), ["a"]))
    assert "0/1 or bool" in str(error_of(from_indicator, np.array([[2]]), ["a"]))


def test_parse_from_text_names_the_source():
    data = parse_multilabel_jsonl('{"labels": "a;b"}\n', "upload", separator=";")
    assert data.source == "upload" and data.frame["labels"].tolist() == [["a", "b"]]
