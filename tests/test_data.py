"""Tests for cartomap.data.loading: readers, column mapping, validation messages, demo data."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap.config import DataConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import DEMO_LABEL_NAMES, demo_path, from_frame, load_dataset
from cartomap.data.readers import read_table
from cartomap.errors import DataError

NLI = ("entailment", "neutral", "contradiction")

ROWS = [
    {
        "id": "007",
        "premise": "A man plays a guitar.",
        "hypothesis": "A man makes music.",
        "label": "entailment",
        "genre": "snli",
    },
    {
        "id": "a2",
        "premise": "Kids run, laughing.",
        "hypothesis": 'They say "hi", then leave.',
        "label": "neutral",
        "genre": "mnli",
    },
    {
        "id": "a3",
        "premise": "Une phrase en français – ü ß 漢字",
        "hypothesis": "No one is here.",
        "label": "contradiction",
        "genre": "snli",
    },
    {
        "id": "10",
        "premise": "Line\nbreak inside",
        "hypothesis": "tab\tinside",
        "label": "entailment",
        "genre": "mnli",
    },
]


# ----------------------------------------------------------------------------- writers


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_delimited(path: Path, rows: list[dict], sep: str) -> Path:
    cols = list(rows[0])
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=sep)
        w.writerow(cols)
        for r in rows:
            w.writerow([r[c] for c in cols])
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def load(path, **kw) -> TextDataset:
    label_names = kw.pop("label_names_arg", None)
    return load_dataset(DataConfig(path=str(path), **kw), label_names=label_names)


def check_error(err: pytest.ExceptionInfo, *parts: str, field: str | None = None) -> str:
    msg = str(err.value)
    for part in parts:
        assert part in msg, f"{part!r} not in {msg!r}"
    if field is not None:
        assert err.value.field == field
        assert repr(field) in msg
    return msg


# ----------------------------------------------------------------------------- round trips


def all_formats(tmp_path: Path, rows: list[dict]) -> dict[str, Path]:
    paths = {
        "jsonl": write_jsonl(tmp_path / "d.jsonl", rows),
        "jsonl.gz": write_jsonl(tmp_path / "d.jsonl.gz", rows),
        "csv": write_delimited(tmp_path / "d.csv", rows, ","),
        "csv.gz": write_delimited(tmp_path / "d.csv.gz", rows, ","),
        "tsv": write_delimited(tmp_path / "d.tsv", rows, "\t"),
        "tsv.gz": write_delimited(tmp_path / "d.tsv.gz", rows, "\t"),
    }
    frame = pd.DataFrame(rows)
    frame.to_parquet(tmp_path / "d.parquet", index=False)
    paths["parquet"] = tmp_path / "d.parquet"
    # pandas' own CSV writer (quotes differently from the csv module)
    frame.to_csv(tmp_path / "pd.csv", index=False)
    paths["pandas-csv"] = tmp_path / "pd.csv"
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_pandas(frame, preserve_index=False).save_to_disk(str(tmp_path / "hf"))
    paths["hf"] = tmp_path / "hf"
    datasets.DatasetDict({"train": datasets.Dataset.from_pandas(frame, preserve_index=False)}).save_to_disk(
        str(tmp_path / "hfdict")
    )
    paths["hfdict"] = tmp_path / "hfdict"
    return paths


def test_round_trip_every_format(tmp_path):
    paths = all_formats(tmp_path, ROWS)
    loaded = {name: load(p) for name, p in paths.items()}
    ref = loaded["jsonl"]
    assert list(ref.frame.columns) == ["id", "premise", "hypothesis", "label", "genre"]
    assert ref.frame["id"].tolist() == ["007", "a2", "a3", "10"]
    assert ref.frame["label"].tolist() == [0, 1, 2, 0]
    assert ref.frame["label"].dtype == np.int64
    assert ref.label_names == NLI
    assert ref.is_pair and ref.text_columns == ("premise", "hypothesis") and len(ref) == 4
    for name, ds in loaded.items():
        pd.testing.assert_frame_equal(ds.frame, ref.frame, obj=name)
        assert ds.label_names == ref.label_names, name
        assert ds.fingerprint() == ref.fingerprint(), name


def test_read_table_line_numbers(tmp_path):
    p = write_delimited(tmp_path / "d.csv", [*ROWS, dict(ROWS[0], id="last")], ",")
    frame, lines = read_table(p)
    assert lines == [2, 3, 4, 5, 7]  # row 4 (line 5) has a quoted line break, so row 5 starts on line 7
    assert frame["id"].tolist() == ["007", "a2", "a3", "10", "last"]
    p = write_jsonl(tmp_path / "d.jsonl", ROWS)
    p.write_text("\n" + p.read_text(encoding="utf-8"), encoding="utf-8")  # blank first line
    _, lines = read_table(p)
    assert lines == [2, 3, 4, 5]
    _, lines = read_table(write_jsonl(tmp_path / "x.jsonl", ROWS).rename(tmp_path / "x.ndjson"))
    assert lines == [1, 2, 3, 4]


def test_json_array_and_explicit_format(tmp_path):
    p = write_text(tmp_path / "d.json", json.dumps(ROWS))
    ref = load(write_jsonl(tmp_path / "d.jsonl", ROWS))
    assert load(p).fingerprint() == ref.fingerprint()
    q = write_jsonl(tmp_path / "data.txt", ROWS)
    assert load(q, format="jsonl").fingerprint() == ref.fingerprint()


def test_hf_dataset_dict_needs_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    frame = pd.DataFrame(ROWS)
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_pandas(frame, preserve_index=False),
            "validation": datasets.Dataset.from_pandas(frame.iloc[:3], preserve_index=False),
        }
    )
    dd.save_to_disk(str(tmp_path / "hf"))
    assert len(load(tmp_path / "hf", split="validation")) == 3
    with pytest.raises(DataError) as err:
        load(tmp_path / "hf")
    check_error(err, "hf", "train", "validation", "split")
    with pytest.raises(DataError) as err:
        load(tmp_path / "hf", split="test")
    check_error(err, "'test'", "not found")


def test_hf_class_label_names(tmp_path):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=list(NLI)),
        }
    )
    ds = datasets.Dataset.from_dict(
        {"premise": ["a b", "c d", "e f"], "hypothesis": ["x", "y", "z"], "label": [2, 0, 1]},
        features=features,
    )
    ds.save_to_disk(str(tmp_path / "hf"))
    out = load(tmp_path / "hf")
    assert out.label_names == NLI
    assert out.frame["label"].tolist() == [2, 0, 1]
    assert out.frame["id"].str.startswith("ex-").all()


def test_hub_errors_are_data_errors(monkeypatch):
    import datasets

    def boom(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", boom)
    with pytest.raises(DataError) as err:
        load("hf:someone/nli", split="train")
    check_error(err, "hf:someone/nli", "someone/nli", "no network")


# ----------------------------------------------------------------------------- mapping


def test_single_text_dataset_and_column_mapping(tmp_path):
    rows = [
        {"uid": 1, "sentence": "great film", "sentiment": "pos", "topic": "film", "text": "orig", "x": 1.5},
        {"uid": 2, "sentence": "dull plot", "sentiment": "neg", "topic": "film", "text": "orig", "x": 2.5},
        {"uid": 3, "sentence": "fine", "sentiment": "pos", "topic": "book", "text": "orig", "x": 3.5},
    ]
    p = write_jsonl(tmp_path / "s.jsonl", rows)
    cfg = dict(
        text_columns=("sentence",),
        label_column="sentiment",
        id_column="uid",
        genre_column=None,
        group_column="topic",
    )
    ds = load(p, **cfg)
    assert not ds.is_pair and ds.text_columns == ("text",)
    assert list(ds.frame.columns) == ["id", "text", "label", "group", "orig_text", "x"]
    assert ds.frame["id"].tolist() == ["1", "2", "3"]
    assert ds.label_names == ("neg", "pos")  # inferred classes are sorted
    assert ds.frame["label"].tolist() == [1, 0, 1]
    assert ds.frame["group"].tolist() == ["film", "film", "book"]
    assert ds.frame["x"].tolist() == [1.5, 2.5, 3.5]
    # same rows as CSV: same fingerprint
    p2 = write_delimited(tmp_path / "s.csv", rows, ",")
    assert load(p2, **cfg).fingerprint() == ds.fingerprint()
    # absent genre/group columns are simply not used
    ds2 = load(
        p, text_columns=("sentence",), label_column="sentiment", genre_column="nope", group_column="nope"
    )
    assert "genre" not in ds2.frame.columns and "group" not in ds2.frame.columns


def test_integer_labels_need_label_names(tmp_path):
    rows = [{"premise": f"p{i}", "hypothesis": f"h{i}", "label": i % 3} for i in range(6)]
    p = write_jsonl(tmp_path / "int.jsonl", rows)
    ds = load(p, label_names=NLI)
    assert ds.label_names == NLI and ds.frame["label"].tolist() == [0, 1, 2, 0, 1, 2]
    # the same data as CSV ("0", "1", ...) and with float labels (1.0) gives the same dataset
    assert (
        load(write_delimited(tmp_path / "int.csv", rows, ","), label_names=NLI).fingerprint()
        == ds.fingerprint()
    )
    frows = [dict(r, label=float(r["label"])) for r in rows]
    assert load(write_jsonl(tmp_path / "f.jsonl", frows), label_names=NLI).fingerprint() == ds.fingerprint()
    # string names equal to label_names work too, in the given order
    srows = [dict(r, label=NLI[r["label"]]) for r in rows]
    assert load(write_jsonl(tmp_path / "s.jsonl", srows), label_names=NLI).fingerprint() == ds.fingerprint()
    # booleans are 0/1
    brows = [{"text": f"t{i}", "label": bool(i % 2)} for i in range(4)]
    b = load(write_jsonl(tmp_path / "b.jsonl", brows), text_columns=("text",), label_names=("no", "yes"))
    assert b.frame["label"].tolist() == [0, 1, 0, 1]

    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "int.jsonl", "line 1", "label_names", field="label")
    with pytest.raises(DataError) as err:
        load(write_delimited(tmp_path / "int.csv", rows, ","))
    check_error(err, "int.csv", "line 2", "label_names", field="label")
    with pytest.raises(DataError) as err:
        load(p, label_names=("a", "b"))
    check_error(err, "int.jsonl", "line 3", "out of range", field="label")
    bad = write_jsonl(tmp_path / "bad.jsonl", [*rows, {"premise": "p", "hypothesis": "h", "label": 1.5}])
    with pytest.raises(DataError) as err:
        load(bad, label_names=NLI)
    check_error(err, "bad.jsonl", "line 7", "1.5", field="label")


def test_nli_label_order_inferred(tmp_path):
    rows = [
        {"premise": "p", "hypothesis": f"h{i}", "label": lab}
        for i, lab in enumerate(["contradiction", "neutral", "entailment"])
    ]
    assert load(write_jsonl(tmp_path / "n.jsonl", rows)).label_names == NLI
    rows2 = [{"text": f"t{i}", "label": lab} for i, lab in enumerate(["b", "c", "a"])]
    assert load(write_jsonl(tmp_path / "t.jsonl", rows2), text_columns=("text",)).label_names == (
        "a",
        "b",
        "c",
    )


def test_generated_ids_stable_under_reordering(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "id"} for r in ROWS]
    rows.append(dict(rows[0]))  # an exact repeat
    a = load(write_jsonl(tmp_path / "a.jsonl", rows))
    ids = a.frame["id"].tolist()
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("ex-") for i in ids)
    assert ids[4] == ids[0] + "-2"
    shuffled = [rows[i] for i in (3, 1, 4, 2, 0)]
    b = load(write_jsonl(tmp_path / "b.jsonl", shuffled))

    def by_content(ds):
        f = ds.frame
        return dict(zip(f["id"], zip(f["premise"], f["hypothesis"], f["label"], strict=True), strict=True))

    assert by_content(a) == by_content(b)
    assert set(b.frame["id"]) == set(ids)
    # generated the same way from every format
    assert load(write_delimited(tmp_path / "a.csv", rows, ",")).frame["id"].tolist() == ids


def test_dev_with_train_label_names(tmp_path):
    train = load(write_jsonl(tmp_path / "train.jsonl", ROWS))
    dev_rows = [
        {"premise": "p1", "hypothesis": "h1", "label": "neutral"},  # one class only: fine for a dev set
        {"premise": "p2", "hypothesis": "h2", "label": "neutral"},
    ]
    dev = load(write_jsonl(tmp_path / "dev.jsonl", dev_rows), label_names_arg=train.label_names)
    assert dev.label_names == NLI and dev.frame["label"].tolist() == [1, 1]
    dev_rows.append({"premise": "p3", "hypothesis": "h3", "label": "reasoning"})
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "dev.jsonl", dev_rows), label_names_arg=train.label_names)
    check_error(err, "dev.jsonl", "line 3", "'reasoning'", "entailment", field="label")


def test_from_frame_and_subset():
    frame = pd.DataFrame(ROWS)
    ds = from_frame(frame, DataConfig(), source="upload.csv")
    assert ds.source == "upload.csv" and len(ds) == 4
    sub = ds.subset(ds.frame["label"].to_numpy() == 0)
    assert sub.frame["id"].tolist() == ["007", "10"] and sub.label_names == ds.label_names
    assert sub.frame.index.tolist() == [0, 1]
    sub2 = ds.subset([2, 0])
    assert sub2.frame["id"].tolist() == ["a3", "007"]
    assert ds.subset([]).frame.empty
    assert sub2.fingerprint() != ds.fingerprint()
    assert ds.subset(np.arange(4)).fingerprint() == ds.fingerprint()
    assert ds.fingerprint() is ds.fingerprint()  # cached
    bad = frame.copy()
    bad.loc[2, "hypothesis"] = "   "
    with pytest.raises(DataError) as err:
        from_frame(bad, DataConfig(), source="upload.csv")
    check_error(err, "upload.csv", "row 2", "empty", field="hypothesis")


def test_fingerprint_sensitivity():
    base = from_frame(pd.DataFrame(ROWS), DataConfig())
    changed = [dict(r) for r in ROWS]
    changed[1]["hypothesis"] += "!"
    assert from_frame(pd.DataFrame(changed), DataConfig()).fingerprint() != base.fingerprint()
    assert from_frame(pd.DataFrame(ROWS[::-1]), DataConfig()).fingerprint() != base.fingerprint()
    extra = pd.DataFrame(ROWS).assign(extra=1)
    assert from_frame(extra, DataConfig()).fingerprint() == base.fingerprint()
    relabeled = from_frame(
        pd.DataFrame(ROWS), DataConfig(), label_names=("contradiction", "neutral", "entailment")
    )
    assert relabeled.fingerprint() != base.fingerprint()


# ----------------------------------------------------------------------------- validation


def test_file_not_found(tmp_path):
    with pytest.raises(DataError) as err:
        load(tmp_path / "nope.jsonl")
    check_error(err, "nope.jsonl", "not found")


def test_unknown_format(tmp_path):
    p = write_text(tmp_path / "data.xlsx", "whatever")
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "data.xlsx", "'.xlsx'", "format")
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "d.jsonl", ROWS), format="yaml")
    check_error(err, "d.jsonl", "'yaml'")
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataError) as err:
        load(tmp_path / "folder")
    check_error(err, "folder", "save_to_disk")


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_missing_columns(tmp_path, suffix):
    rows = [{"id": "1", "sentence1": "a", "sentence2": "b", "gold": "neutral"}]
    frame = pd.DataFrame(rows)
    p = tmp_path / f"cols.{suffix}"
    if suffix == "jsonl":
        write_jsonl(p, rows)
    elif suffix == "csv":
        frame.to_csv(p, index=False)
    else:
        frame.to_parquet(p, index=False)
    with pytest.raises(DataError) as err:
        load(p)
    msg = check_error(err, f"cols.{suffix}", "'premise'", "'hypothesis'", "'label'", field="premise")
    assert "sentence1" in msg and "gold" in msg  # lists the columns present


def test_empty_whitespace_and_missing_text(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[2]["premise"] = "  \t "
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "ws.jsonl", rows))
    check_error(err, "ws.jsonl", "line 3", "empty", field="premise")
    rows[2]["premise"] = "fine"
    rows[1]["hypothesis"] = ""
    with pytest.raises(DataError) as err:
        load(write_delimited(tmp_path / "e.csv", rows, ","))
    check_error(err, "e.csv", "line 3", "empty", field="hypothesis")
    rows[1]["hypothesis"] = None
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "null.jsonl", rows))
    check_error(err, "null.jsonl", "line 2", "missing", field="hypothesis")
    del rows[1]["hypothesis"]
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "absent.jsonl", rows))
    check_error(err, "absent.jsonl", "line 2", "missing", field="hypothesis")
    rows[1]["hypothesis"] = 42
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "num.jsonl", rows))
    check_error(err, "num.jsonl", "line 2", "text string", field="hypothesis")
    rows[1]["hypothesis"] = None
    pd.DataFrame(rows).to_parquet(tmp_path / "null.parquet", index=False)
    with pytest.raises(DataError) as err:
        load(tmp_path / "null.parquet")
    check_error(err, "null.parquet", "row 1", "missing", field="hypothesis")


def test_unknown_label(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[3]["label"] = "entails"
    with pytest.raises(DataError) as err:
        load(write_delimited(tmp_path / "lab.tsv", rows, "\t"), label_names=NLI)
    # row 4 starts on line 5 of the TSV (header is line 1)
    check_error(err, "lab.tsv", "line 5", "'entails'", "unknown label", field="label")


def test_missing_label(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[1]["label"] = None
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "nolab.jsonl", rows))
    check_error(err, "nolab.jsonl", "line 2", "missing label", field="label")
    rows[1]["label"] = ""
    with pytest.raises(DataError) as err:
        load(write_delimited(tmp_path / "nolab.csv", rows, ","), label_names=NLI)
    check_error(err, "nolab.csv", "line 3", "missing label", field="label")


def test_non_utf8(tmp_path):
    good = write_jsonl(tmp_path / "x.jsonl", ROWS).read_bytes()
    lines = good.split(b"\n")
    lines[2] = lines[2].replace(b"No one", b"No \xff one")
    p = tmp_path / "latin.jsonl"
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "latin.jsonl", "line 3", "UTF-8", "byte offset")
    c = tmp_path / "latin.csv"
    c.write_bytes(b"id,premise,hypothesis,label\n1,caf\xe9,b,neutral\n")
    with pytest.raises(DataError) as err:
        load(c)
    check_error(err, "latin.csv", "line 2", "UTF-8")


def test_malformed_json_line(tmp_path):
    text = (
        "".join(json.dumps(r) + "\n" for r in ROWS[:2])
        + '{"id": "x", "premise": "a",\n'
        + json.dumps(ROWS[3])
        + "\n"
    )
    with pytest.raises(DataError) as err:
        load(write_text(tmp_path / "broken.jsonl", text))
    check_error(err, "broken.jsonl", "line 3", "malformed JSON")


def test_json_line_not_an_object(tmp_path):
    text = json.dumps(ROWS[0]) + "\n" + json.dumps(["a", "b"]) + "\n"
    with pytest.raises(DataError) as err:
        load(write_text(tmp_path / "arr.jsonl", text))
    check_error(err, "arr.jsonl", "line 2", "JSON object", "array")


def test_duplicate_ids(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[3]["id"] = "a2"
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "dup.jsonl", rows))
    check_error(err, "dup.jsonl", "line 4", "line 2", "'a2'", "duplicate", field="id")
    # in a CSV the header is line 1 and "007" keeps its zeros
    rows[3]["id"] = "007"
    with pytest.raises(DataError) as err:
        load(write_delimited(tmp_path / "dup.csv", rows, ","))
    check_error(err, "dup.csv", "line 5", "line 2", "'007'", field="id")
    pd.DataFrame(rows).to_parquet(tmp_path / "dup.parquet", index=False)
    with pytest.raises(DataError) as err:
        load(tmp_path / "dup.parquet")
    check_error(err, "dup.parquet", "row 3", "row 0", "'007'", field="id")
    # a missing id is an error
    rows = [{"id": 7, "text": "a", "label": "x"}, {"id": None, "text": "b", "label": "y"}]
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "noid.jsonl", rows), text_columns=("text",))
    check_error(err, "noid.jsonl", "line 2", "missing id", field="id")


def test_fewer_than_two_classes(tmp_path):
    rows = [{"premise": f"p{i}", "hypothesis": "h", "label": "neutral"} for i in range(3)]
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "one.jsonl", rows))
    check_error(err, "one.jsonl", "two classes", field="label")
    with pytest.raises(DataError) as err:
        load(write_jsonl(tmp_path / "one.jsonl", rows), label_names=("neutral",))
    check_error(err, "one.jsonl", "two classes", field="label")


@pytest.mark.parametrize(
    "name,content",
    [
        ("empty.jsonl", b""),
        ("blank.jsonl", b"\n  \n"),
        ("empty.csv", b""),
        ("empty.jsonl.gz", gzip.compress(b"")),
    ],
)
def test_empty_file(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, name, "empty")


def test_header_only_and_empty_parquet(tmp_path):
    p = write_text(tmp_path / "head.csv", "id,premise,hypothesis,label\n")
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "head.csv", "no rows")
    pd.DataFrame(columns=["id", "premise", "hypothesis", "label"]).to_parquet(tmp_path / "e.parquet")
    with pytest.raises(DataError) as err:
        load(tmp_path / "e.parquet")
    check_error(err, "e.parquet", "no rows")


def test_csv_structure_errors(tmp_path):
    p = write_text(tmp_path / "ragged.csv", "id,premise,hypothesis,label\n1,a,b,neutral\n2,a,b\n")
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "ragged.csv", "line 3", "expected 4 fields")
    p = write_text(tmp_path / "dupcol.csv", "id,premise,premise,label\n1,a,b,neutral\n")
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "dupcol.csv", "line 1", "twice")
    p = tmp_path / "notgz.jsonl.gz"
    p.write_bytes(b"\x1f\x8bgarbage")
    with pytest.raises(DataError) as err:
        load(p)
    check_error(err, "notgz.jsonl.gz", "gzip")


def test_no_partial_success(tmp_path):
    # the last row is bad: nothing is returned
    rows = [*ROWS, {"id": "z", "premise": "p", "hypothesis": "h", "label": "maybe"}]
    with pytest.raises(DataError):
        load(write_jsonl(tmp_path / "last.jsonl", rows), label_names=NLI)


# ----------------------------------------------------------------------------- demo data


def test_demo_data():
    train = load_dataset(DataConfig(path="demo:train"))
    dev = load_dataset(DataConfig(path="demo:dev"), label_names=train.label_names)
    assert len(train) == 3198 and len(dev) == 400
    assert train.label_names == DEMO_LABEL_NAMES == NLI and dev.label_names == NLI
    assert train.frame["id"].is_unique and dev.frame["id"].is_unique
    assert not set(train.frame["id"]) & set(dev.frame["id"])
    assert train.source == "demo:train"
    assert train.frame["label"].value_counts().tolist() == [1066, 1066, 1066]
    assert dev.frame["label"].value_counts().sort_index().tolist() == [134, 133, 133]
    assert set(train.frame["genre"]) == set(dev.frame["genre"]) == {"snli"}
    # whole premise triples: every premise once with each label; none of them in the dev file
    per_premise = train.frame.groupby("premise")["label"].apply(lambda y: sorted(y.tolist()))
    assert len(per_premise) == 1066 and all(labels == [0, 1, 2] for labels in per_premise)
    assert not set(train.frame["premise"]) & set(dev.frame["premise"])
    assert demo_path("train").exists() and demo_path("dev").exists()
    with pytest.raises(DataError):
        demo_path("test")
    # the same data read straight from the file
    assert load(demo_path("train")).fingerprint() == train.fingerprint()


def test_single_text_mapping_of_a_pair_file_is_single_text(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"premise": "a p", "hypothesis": "a h", "label": "x"}\n{"premise": "b p", "hypothesis": "b h", "label": "y"}\n'
    )
    data = load_dataset(DataConfig(path=str(path), text_columns=("hypothesis",)))
    assert not data.is_pair
    assert data.frame["text"].tolist() == ["a h", "b h"]
    assert data.frame["orig_premise"].tolist() == ["a p", "b p"]


def test_a_small_gz_that_expands_past_the_cap_is_refused(tmp_path, monkeypatch, capsys):
    """A 64 MiB line of zeros in a ~64 kB .jsonl.gz, under a 16 MiB cap (CARTOMAP_MAX_DECOMPRESSED):
    refused with the cap and how to raise it, before it is decompressed in full."""
    import zlib

    from cartomap.cli import main
    from cartomap.data import loading

    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b'{"text": "a", "label": "x"}\n' + b" " * (64 * 1024**2), compresslevel=9))
    assert bomb.stat().st_size < 200_000
    monkeypatch.setenv("CARTOMAP_MAX_DECOMPRESSED", "16M")
    produced = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args, **kwargs):
            self.inner = real(*args, **kwargs)

        def decompress(self, data, max_length=0):
            out = self.inner.decompress(data, max_length)
            produced.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)  # the one gzip reader's (cartomap.io.gunzip)
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(path=str(bomb), text_columns=("text",)))
    message = str(err.value)
    assert "expands to more than 16 MiB" in message and "CARTOMAP_MAX_DECOMPRESSED" in message
    assert sum(produced) <= 16 * 1024**2 + 1  # never more than the cap was produced
    assert main(["--cache", str(tmp_path / "c"), "train", "--data", str(bomb), "--text-columns", "text"]) == 2
    assert "expands to more than 16 MiB" in capsys.readouterr().err
    monkeypatch.setenv("CARTOMAP_MAX_DECOMPRESSED", "lots")
    with pytest.raises(DataError, match="expected a size such as 4G"):
        loading.max_decompressed()
    monkeypatch.delenv("CARTOMAP_MAX_DECOMPRESSED")
    assert loading.max_decompressed() == 2 * 1024**3


def test_gzip_members_are_all_read_under_the_cap(tmp_path):
    from cartomap.data.loading import gunzip

    data = gzip.compress(b"one\n") + gzip.compress(b"two\n")
    assert gunzip(data, "x") == b"one\ntwo\n"
    with pytest.raises(DataError, match="expands to more than"):
        gunzip(data, "x", limit=6)
    with pytest.raises(DataError, match="not a valid gzip file"):
        gunzip(data[:-5], "x")
