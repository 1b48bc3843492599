"""Several annotations per example: votes, annotator labels and known errors as input, and the human
columns computed from them (cartomap.scores.human, cartomap.data.annotations)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from cartomap.config import DataConfig, RunConfig
from cartomap.data.annotations import DERIVED_COLUMNS, vote_columns
from cartomap.data.loading import from_frame, load_dataset
from cartomap.errors import DataError
from cartomap.runs.store import RunStore
from cartomap.runs.units import own_copy
from cartomap.scores import human

NLI = ("entailment", "neutral", "contradiction")


# --------------------------------------------------------------------------- scores.human


def test_entropy_matches_chaosnli_bits():
    votes = np.array([[12, 68, 20]])
    assert human.entropy_bits(votes)[0] == pytest.approx(1.2098, abs=1e-4)  # the file's entropy field
    assert human.entropy_nats(votes)[0] == pytest.approx(0.8386, abs=1e-4)
    p = np.array([0.12, 0.68, 0.20])
    assert human.entropy_bits(votes)[0] == pytest.approx(-(p * np.log2(p)).sum())


def test_majority_ties_and_one_vote():
    votes = np.array([[3, 1, 1], [2, 2, 1], [0, 1, 0], [5, 0, 0], [1, 1, 1]])
    cls, share = human.majority(votes)
    assert cls.tolist() == [0, -1, 1, 0, -1]
    assert share.tolist() == pytest.approx([0.6, 0.4, 1.0, 1.0, 1 / 3])
    h = human.entropy_bits(votes)
    assert h[2] == 0.0 and h[3] == 0.0  # one vote / unanimous: no disagreement
    assert h[4] == pytest.approx(math.log2(3))
    cols = human.human_columns(votes, gold=[1, 0, 1, 0, 2])
    assert cols["human_n"].tolist() == [5, 5, 1, 5, 3]
    assert cols["gold_disagrees"].tolist() == [True, False, False, False, False]  # gold in every tie


def test_a_tie_disagrees_only_when_gold_is_not_among_the_most_voted():
    """50/50 with gold one of the two: no disagreement (ChaosNLI's `majority`, which breaks ties by label
    order, may name the other class); a tie of two other classes: the annotators agree gold is wrong."""
    votes = np.array([[50, 50, 0], [50, 50, 0], [0, 50, 50], [34, 33, 33], [0, 0, 0]])
    cols = human.human_columns(votes, gold=[1, 0, 0, 0, 2])
    assert cols["human_majority"].tolist() == [-1, -1, -1, 0, -1]
    assert cols["gold_disagrees"].tolist() == [False, False, True, False, False]


def test_check_votes_refuses_bad_arrays():
    with pytest.raises(DataError):
        human.check_votes([[1, -1]])
    with pytest.raises(DataError):
        human.check_votes([[1.5, 1]])
    with pytest.raises(DataError):
        human.check_votes([1, 2])


# --------------------------------------------------------------------------- data: accepted forms


def _rows(votes_values, key="votes", **extra):
    rows = []
    for i, v in enumerate(votes_values):
        row = {"id": f"r{i}", "premise": f"p {i}", "hypothesis": f"h {i}", "label": NLI[i % 3], key: v}
        row.update({k: vals[i] for k, vals in extra.items()})
        rows.append(row)
    return rows


def _jsonl(tmp_path, rows, name="d.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _votes(ds):
    return ds.frame[vote_columns(ds.label_names)].to_numpy().tolist()


def test_votes_as_mapping(tmp_path):
    rows = _rows(
        [
            {"entailment": 12, "neutral": 68, "contradiction": 20},
            {"neutral": 3},
            {"contradiction": 1, "entailment": 1},
        ]
    )
    ds = load_dataset(DataConfig(path=str(_jsonl(tmp_path, rows))))
    assert _votes(ds) == [[12, 68, 20], [0, 3, 0], [1, 0, 1]]
    f = own_copy(ds)
    assert f["human_n"].tolist() == [100, 3, 2]
    assert f["human_majority"].tolist() == [1, 1, -1]
    assert f["human_entropy"][0] == pytest.approx(1.2098, abs=1e-4)
    assert f["gold_disagrees"].tolist() == [True, False, False]  # gold entailment vs majority neutral
    assert "votes" not in f.columns  # replaced by the normalised columns


def test_annotator_labels_names_and_indices(tmp_path):
    rows = _rows(
        [["neutral", "neutral", "entailment"], [0, 0, 2, 2, 2], ["contradiction"]], key="annotator_labels"
    )
    ds = load_dataset(DataConfig(path=str(_jsonl(tmp_path, rows))))
    assert _votes(ds) == [[1, 2, 0], [2, 0, 3], [0, 0, 1]]


def test_votes_preferred_to_annotator_labels(tmp_path):
    rows = _rows(
        [{"neutral": 5}, {"entailment": 5}, {"contradiction": 5}], original_labels=[["entailment"]] * 3
    )
    ds = load_dataset(DataConfig(path=str(_jsonl(tmp_path, rows))))
    assert _votes(ds) == [[0, 5, 0], [5, 0, 0], [0, 0, 5]]
    assert "original_labels" in ds.frame.columns  # kept as an ordinary extra column


def test_json_string_votes_and_boolean_errors_in_csv(tmp_path):
    frame = pd.DataFrame(
        {
            "premise": ["a", "b", "c"],
            "hypothesis": ["x", "y", "z"],
            "label": list(NLI),
            "votes": ['{"entailment": 2, "neutral": 1}', '{"neutral": 2}', "[2, 2, 0]"],
            "annotator_labels": ['["neutral"]', '["neutral", "neutral"]', "[2, 2, 0]"],
            "label_error": ["true", "False", "0"],
        }
    )
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    ds = load_dataset(DataConfig(path=str(path)))
    assert _votes(ds) == [[2, 1, 0], [0, 2, 0], [2, 2, 0]]  # a list of C numbers: counts in label order
    labels = load_dataset(DataConfig(path=str(path), votes_column="", annotator_column="annotator_labels"))
    assert _votes(labels) == [[0, 1, 0], [0, 2, 0], [1, 0, 2]]  # the same list: three annotators' labels
    assert ds.frame["is_error"].tolist() == [True, False, False]


def test_named_columns_and_none(tmp_path):
    rows = _rows([["neutral"], ["entailment"], ["neutral"]], key="crowd", flag=[True, False, True])
    path = _jsonl(tmp_path, rows)
    ds = load_dataset(DataConfig(path=str(path), annotator_column="crowd", error_column="flag"))
    assert _votes(ds) == [[0, 1, 0], [1, 0, 0], [0, 1, 0]]
    assert ds.frame["is_error"].tolist() == [True, False, True]
    plain = load_dataset(DataConfig(path=str(path)))
    assert "votes_neutral" not in plain.frame.columns and "is_error" not in plain.frame.columns


def test_scalar_votes_column_found_by_name_is_left_alone():
    frame = pd.DataFrame(
        {"premise": ["a", "b"], "hypothesis": ["x", "y"], "label": ["neutral", "entailment"], "votes": [3, 7]}
    )
    ds = from_frame(frame, DataConfig())
    assert ds.frame["votes"].tolist() == [3, 7] and "votes_neutral" not in ds.frame.columns


def test_run_copy_keeps_the_normalised_columns_and_ids_do_not_change(tmp_path):
    rows = _rows([{"entailment": 2, "neutral": 1}, [0, 2, 0], [1, 0, 2]], is_error=[False, True, False])
    config = DataConfig(path=str(_jsonl(tmp_path, rows)))
    ds = load_dataset(config)
    run = RunStore(tmp_path / "cache").create(RunConfig(data=config, dev=None), ds, None)
    kept = run.examples()
    for col in human.HUMAN_COLUMNS:
        assert col in kept.columns
    assert kept["human_majority"].tolist() == [0, 1, 2]
    copy = load_dataset(run.data_config())
    for col in (*vote_columns(NLI), "is_error"):
        assert copy.frame[col].tolist() == ds.frame[col].tolist(), col
    assert not any(c.startswith("orig_") for c in copy.frame.columns)
    assert own_copy(copy).columns.tolist() == kept.columns.tolist()
    assert DERIVED_COLUMNS == human.HUMAN_COLUMNS
    # the new DataConfig fields stay out of the identity at their default
    assert "votes_column" not in RunConfig(data=config).identity()["data"]
    assert "annotator_column" not in RunConfig(data=config).identity()["data"]
    assert RunConfig(data=DataConfig(votes_column="v")).identity()["data"]["votes_column"] == "v"
    assert RunConfig(data=DataConfig(annotator_column="a")).identity()["data"]["annotator_column"] == "a"


# --------------------------------------------------------------------------- data: refused forms


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"entailment": 1, "maybe": 2}, "'maybe' is not in the label set"),
        ({"entailment": -1, "neutral": 2}, "negative"),
        ({"entailment": 1.5}, "whole number"),
        ({"entailment": "lots"}, "whole number"),
        ([], "empty list"),
        ({}, "empty mapping"),
        (
            ["neutral", "unsure"],
            "got 'neutral'; if it holds each annotator's label, name the column "
            "with --annotator-column votes",
        ),
        ([0, 5], "(3 for ['entailment', 'neutral', 'contradiction']), got 2 numbers"),
        ([1, 0, 3, 1], "got 4 numbers"),
        ([0, 0, 0], "no votes"),
        ([1, 2.5, 0], "whole number"),
        ("neutral", "expected a mapping"),
        ({"neutral": 10**30}, "expected at most 1,000,000,000 votes per example"),
        ([0, 10**30, 0], "expected at most 1,000,000,000 votes per example"),
        ({"neutral": 1e30}, "expected at most 1,000,000,000 votes per example"),
        ({"neutral": 2**63 - 1, "entailment": 2**63 - 1}, "expected at most 1,000,000,000"),
        ({"neutral": 600_000_000, "entailment": 600_000_000}, "add up to 1,200,000,000 votes"),
        ({"neutral": 2, " neutral": 3}, "the keys 'neutral' and ' neutral' both name label 'neutral'"),
        ({"neutral": 2, "1": 3}, "both name label 'neutral'"),
    ],
)
def test_bad_votes_name_file_line_and_field(tmp_path, value, message):
    rows = _rows([{"neutral": 1}, value, {"neutral": 1}])
    path = _jsonl(tmp_path, rows)
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(path=str(path), votes_column="votes"))
    text = str(err.value)
    assert message in text
    assert f"{path}: line 2" in text and "votes" in text


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"neutral": 2},
            "a mapping is per-class counts, not annotator labels; expected a list of label "
            "names or indices, one per annotator: if it holds per-class counts, name the column with "
            "--votes-column crowd",
        ),
        (["neutral", ["entailment"]], "an annotator label is list"),
        (["neutral", None], "missing (null)"),
        ([0, 3], "annotator label 3 is not in the label set"),
        ("neutral", "expected a list of label names"),
    ],
)
def test_bad_annotator_labels_name_file_line_and_field(tmp_path, value, message):
    rows = _rows([["neutral"], value, ["neutral"]], key="crowd")
    path = _jsonl(tmp_path, rows)
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(path=str(path), annotator_column="crowd"))
    text = str(err.value)
    assert message in text
    assert f"{path}: line 2: field 'crowd'" in text


def test_chaosnli_label_count_is_counts_in_label_order(tmp_path):
    """ChaosNLI's `label_count` (e, n, c) found by name, and named: per-class counts, not 3 annotators."""
    rows = _rows([[2, 1, 2], [1, 0, 3], [0, 100, 0]], key="label_count")
    path = _jsonl(tmp_path, rows)
    for config in (DataConfig(path=str(path)), DataConfig(path=str(path), votes_column="label_count")):
        ds = load_dataset(config)
        assert _votes(ds) == [[2, 1, 2], [1, 0, 3], [0, 100, 0]]
        f = own_copy(ds)
        assert f["human_n"].tolist() == [5, 4, 100]
        assert f["human_majority"].tolist() == [-1, 2, 1]


def test_a_votes_column_with_a_scalar_first_and_mappings_later_is_votes(tmp_path):
    """Found by name: any mapping makes the column votes, so the scalar row is refused by its line
    (it was kept as an ordinary column, a mix pyarrow could not save)."""
    path = _jsonl(tmp_path, _rows([3, {"neutral": 2}, {"neutral": 1}]))
    with pytest.raises(DataError, match="line 1: field 'votes': expected a mapping label -> count"):
        load_dataset(DataConfig(path=str(path)))


def test_naming_both_roles_is_refused(tmp_path):
    path = _jsonl(tmp_path, _rows([{"neutral": 1}] * 3))
    with pytest.raises(DataError, match="name one: --votes-column for per-class counts"):
        load_dataset(DataConfig(path=str(path), votes_column="votes", annotator_column="votes"))


def test_one_named_role_turns_the_other_off(tmp_path):
    rows = _rows([{"neutral": 5}] * 3, annotator_labels=[["entailment"]] * 3)
    path = _jsonl(tmp_path, rows)
    ds = load_dataset(DataConfig(path=str(path), annotator_column="annotator_labels"))
    assert _votes(ds) == [[1, 0, 0]] * 3 and "votes" in ds.frame.columns
    ds = load_dataset(DataConfig(path=str(path), votes_column=""))  # no counts: labels found by name
    assert _votes(ds) == [[1, 0, 0]] * 3


def test_check_votes_refuses_counts_that_would_wrap():
    for votes in ([[2**63 - 1, 2**63 - 1, 0]], [[1e30, 0.0, 0.0]], [[600_000_000, 600_000_000, 0]]):
        with pytest.raises(DataError, match="more than 1,000,000,000 votes"):
            human.human_columns(votes, [0])


def test_malformed_json_votes_in_csv(tmp_path):
    path = tmp_path / "d.csv"
    pd.DataFrame(
        {
            "premise": ["a", "b"],
            "hypothesis": ["x", "y"],
            "label": ["neutral", "entailment"],
            "votes": ['{"neutral": 1}', '{"neutral": '],
        }
    ).to_csv(path, index=False)
    with pytest.raises(DataError, match="malformed JSON") as err:
        load_dataset(DataConfig(path=str(path)))
    assert "line 3" in str(err.value)


@pytest.mark.parametrize("value", ["maybe", 2, None, 0.5])
def test_bad_error_values(tmp_path, value):
    rows = _rows([{"neutral": 1}] * 3, is_error=[True, value, False])
    path = _jsonl(tmp_path, rows)
    with pytest.raises(DataError, match="expected a boolean") as err:
        load_dataset(DataConfig(path=str(path)))
    assert f"{path}: line 2" in str(err.value) and "is_error" in str(err.value)


def test_named_column_missing(tmp_path):
    path = _jsonl(tmp_path, _rows([{"neutral": 1}] * 3))
    with pytest.raises(DataError, match="no votes column 'crowd'"):
        load_dataset(DataConfig(path=str(path), votes_column="crowd"))


def test_cli_options_reach_the_data_config():
    import argparse

    from cartomap.cli.options import add_data_arguments, data_config

    p = argparse.ArgumentParser()
    add_data_arguments(p)
    a = p.parse_args(["--votes-column", "crowd", "--error-column", "none", "--annotator-column", "none"])
    a.cache = None
    config = data_config(a, "x.jsonl", None)
    assert config.votes_column == "crowd" and config.error_column == "" and config.annotator_column == ""
