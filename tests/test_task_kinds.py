"""Task kinds (cartomap.tasks): the shape of a task in one place, and configs that name it or not."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cartomap.config import DataConfig, RunConfig
from cartomap.errors import DataError
from cartomap.tasks import registry
from cartomap.tasks.base import UNIT_SEPARATOR, TaskKind, sigmoid, softmax, unit_id_of, word_key
from cartomap.tasks.sequence import PAIR, SINGLE


def test_the_built_in_kinds_are_registered_pair_first():
    assert registry.names()[:2] == ("pair", "single")
    assert registry.kind("pair") is PAIR and registry.kind("single") is SINGLE
    assert PAIR.is_pair and not SINGLE.is_pair
    assert registry.text_fields()[: len(PAIR.text_fields) + 1] == (*PAIR.text_fields, *SINGLE.text_fields)


def test_an_unknown_kind_is_a_data_error_naming_the_field():
    with pytest.raises(DataError, match="unknown task 'nerr'; expected one of pair, single") as err:
        registry.kind("nerr")
    assert err.value.field == "task"


def test_a_config_without_a_task_has_the_kind_its_columns_imply():
    assert registry.for_columns("", ("a", "b")) is PAIR
    assert registry.for_columns("", ("a",)) is SINGLE
    assert registry.for_columns("single", ("review",)) is SINGLE
    with pytest.raises(DataError, match="1 text column.*or 2"):
        registry.for_columns("", ("a", "b", "c"))
    with pytest.raises(DataError, match="task 'single' reads 1 text column"):
        registry.for_columns("single", ("a", "b"))


def test_the_kind_of_a_table_comes_from_its_columns():
    first, second = PAIR.text_fields
    (only,) = SINGLE.text_fields
    assert registry.of_columns(["id", first, second, "label"]) is PAIR
    assert registry.of_columns(["id", only, "label"]) is SINGLE
    # A table with both kinds' fields (a review queue's export) reads as the kind with more fields.
    assert registry.of_columns(["id", first, second, only]) is PAIR
    assert registry.text_fields_in(["label", second, only, first]) == (first, second, only)
    with pytest.raises(DataError, match="no text columns of a known task"):
        registry.of_columns(["id", "label", first])


def test_rows_become_tokenizer_inputs():
    first, second = PAIR.text_fields
    pairs = pd.DataFrame({"id": ["a", "b"], first: ["p1", "p2"], second: ["h1", 7]})
    assert PAIR.inputs(pairs) == (["p1", "p2"], ["h1", "7"])
    texts = pd.DataFrame(SINGLE.texts_frame(["x", "y"]))
    assert SINGLE.inputs(texts) == (["x", "y"], None)
    assert PAIR.inputs(pd.DataFrame(PAIR.texts_frame([("p", "h")]))) == (["p"], ["h"])


def test_logits_become_probabilities_per_unit():
    # softmax of [0, ln 3] is [1/4, 3/4]; any leading shape ([E, N, C] here).
    logits = np.array([[[0.0, math.log(3.0)], [5.0, 5.0]]])
    probs = PAIR.probabilities(logits)
    assert probs.shape == (1, 2, 2)
    np.testing.assert_allclose(probs[0], [[0.25, 0.75], [0.5, 0.5]])
    np.testing.assert_allclose(softmax(np.array([1000, 1000])), [0.5, 0.5])  # integers, no overflow
    # sigmoid: each label on its own (the multi-label output); stable at large |z|.
    np.testing.assert_allclose(sigmoid(np.array([0.0, math.log(3.0), -math.log(3.0)])), [0.5, 0.75, 0.25])
    assert np.all(np.isfinite(sigmoid(np.array([-1000.0, 1000.0]))))
    assert PAIR.unit_columns == ("id",)


def test_a_kind_is_checked_when_made():
    with pytest.raises(ValueError, match="unit 'sentence' is not one of example, word, label"):
        TaskKind(name="x", description="", text_fields=("t",), noun="t", unit="sentence")
    with pytest.raises(ValueError, match="distinct text fields"):
        TaskKind(name="x", description="", text_fields=("t", "t"), noun="t")
    with pytest.raises(ValueError, match="keeps it in the column 'label'.*not 'verdict'"):
        TaskKind(name="x", description="", text_fields=("t",), noun="t", label_field="verdict")
    word = TaskKind(
        name="w", description="", text_fields=("tokens",), noun="sentence", unit="word", head="token"
    )
    assert (
        word.unit_columns == ("id", "word")
        and word.plural(1) == "1 sentence"
        and word.plural(3) == "3 sentences"
    )


def test_the_task_keeps_the_run_ids_of_configs_saved_before_it():
    old = RunConfig()
    assert "task" not in old.identity()["data"]
    # Naming the kind the columns imply is the same run; a config dict saved without the field loads.
    named = RunConfig(data=DataConfig(task="pair"))
    assert named.identity() == old.identity()
    saved = old.to_dict()
    for part in (saved["data"], saved["dev"]):
        part.pop("task")
    assert RunConfig.from_dict(saved) == old and RunConfig.from_dict(saved).task_kind is PAIR
    single = DataConfig(text_columns=("sentence",))
    assert single.task_kind is SINGLE and "task" not in RunConfig(data=single, dev=None).identity()["data"]
    with pytest.raises(DataError, match="unknown task 'nli'") as err:
        DataConfig(task="nli")
    assert err.value.field == "task"


def test_the_kind_picks_the_model_head(tmp_path):
    """A sequence kind gets one row of logits per example; a token kind one per sub-word; a sigmoid
    kind is a multi-label problem (binary cross-entropy per label)."""
    import torch

    from cartomap.training.batching import tokenize
    from cartomap.training.models import load_classifier, load_tokenizer, save_random_classifier

    folder = save_random_classifier(tmp_path / "m", hidden=16, layers=1, num_labels=3)
    first, second = PAIR.text_fields
    frame = pd.DataFrame({first: ["a cat sat"], second: ["it sat"]})
    ids = tokenize(load_tokenizer(folder), frame, 32, PAIR)["input_ids"][0]
    batch = torch.tensor(np.asarray(ids, dtype=np.int64))[None, :]
    names = ("x", "y", "z")
    with torch.no_grad():
        assert load_classifier(folder, names, PAIR)(input_ids=batch).logits.shape == (1, 3)
        word = TaskKind(
            name="w", description="", text_fields=("tokens",), noun="sentence", unit="word", head="token"
        )
        assert load_classifier(folder, names, word)(input_ids=batch).logits.shape == (1, len(ids), 3)
    many = TaskKind(
        name="m", description="", text_fields=("text",), noun="text", unit="label", output="sigmoid"
    )
    assert load_classifier(folder, names, many).config.problem_type == "multi_label_classification"
    assert load_classifier(folder, names).config.problem_type in (None, "single_label_classification")


def _write_jsonl(path, rows):
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_command_line_reads_the_task(tmp_path, capsys):
    """``--task single`` reads a file of single texts by the kind's own column; naming no task keeps the
    old default (a pair); a task that does not fit the text columns is one line, rc 2."""
    import json

    from cartomap.cli import main

    (only,) = SINGLE.text_fields
    data = _write_jsonl(tmp_path / "s.jsonl", [{only: f"t {i}", "label": "ab"[i % 2]} for i in range(6)])
    out = tmp_path / "o.jsonl"
    assert main(["subset", "--data", str(data), "--task", "single", "--n", "2", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(only in r and PAIR.text_fields[0] not in r for r in rows)
    capsys.readouterr()
    assert main(["subset", "--data", str(data), "--n", "2", "--out", str(tmp_path / "p.jsonl")]) == 2
    assert f"missing columns {PAIR.text_fields[0]!r}" in capsys.readouterr().err
    rc = main(
        [
            "subset",
            "--data",
            str(data),
            "--task",
            "pair",
            "--text-columns",
            only,
            "--n",
            "2",
            "--out",
            str(out),
            "--force",
        ]
    )
    assert rc == 2 and "task 'pair' reads 2 text column(s)" in capsys.readouterr().err


def test_a_run_keeps_its_task_kind_and_old_runs_have_theirs(tmp_path):
    import json

    from cartomap.data.loading import from_frame
    from cartomap.runs.store import RunStore

    (only,) = SINGLE.text_fields
    frame = pd.DataFrame({"review": ["good", "bad", "fine", "awful"], "label": ["pos", "neg", "pos", "neg"]})
    config = DataConfig(path="mem", text_columns=("review",), task="single")
    data = from_frame(frame, config, label_names=("neg", "pos"))
    assert data.task_kind is SINGLE and data.text_columns == (only,)
    run = RunStore(tmp_path / "cache").create(RunConfig(data=config, dev=None), data)
    assert run.task_kind is SINGLE
    assert run.data_config("train").task_kind is SINGLE and run.data_config("train").text_columns == (only,)
    # A run saved before the kind was kept: its saved is_pair says it, then its config.
    path = run.path / "config.json"
    info = json.loads(path.read_text())
    assert info["task_kind"] == "single"
    del info["task_kind"], info["config"]["data"]["task"]
    path.write_text(json.dumps(info))
    fresh = RunStore(tmp_path / "cache").get(run.id)
    assert fresh.task_kind is SINGLE
    del info["is_pair"]
    path.write_text(json.dumps(info))
    assert RunStore(tmp_path / "cache").get(run.id).task_kind is SINGLE  # one text column in its config


@pytest.mark.parametrize("field", ["aum", "el2n", "mean_entropy", "forgetting"])
def test_a_text_field_named_like_a_registered_score_column_is_refused(field):
    """The score columns a map carries are reserved by their registries (cartomap.scores.columns), not
    spelled in cartomap.tasks.reserved: a kind that takes one is refused when made, naming the field."""
    import cartomap.scores.columns  # noqa: F401 (the registries reserve their columns when imported)
    from cartomap.tasks.base import TaskKind

    with pytest.raises(ValueError, match=f"text field '{field}' is a column name .*a data-map score"):
        TaskKind(name="odd", description="", text_fields=(field,), noun="x")


@pytest.mark.parametrize(("example", "k"), [("sent-3", 0), ("a#b", 3), ("##", 12), ("", 1), ("x#1", 0)])
def test_word_key_and_unit_id_of_round_trip_ids_holding_the_separator(example, k):
    """A unit id is split at its last '#': an example id may hold one (or be "#"s only)."""
    unit = unit_id_of(example, k)
    assert unit == f"{example}{UNIT_SEPARATOR}{k}"
    assert word_key(unit) == (example, k)
    assert unit_id_of(*word_key(unit)) == unit


@pytest.mark.parametrize("bad", ["sent-1", "sent#", "sent#x", "a#1-2", "a#-1", 7])
def test_word_key_refuses_an_id_without_an_index(bad):
    with pytest.raises(DataError, match="is not a unit id"):
        word_key(bad)


def test_the_modules_that_read_word_ids_ask_word_key():
    """The three readers of ``<id>#<k>`` agree with word_key on ids holding '#', and refuse the same ids."""
    from cartomap.runs.units import with_word_keys
    from cartomap.scores.swaps import word_texts
    from cartomap.scores.token_quality import sentence_keys

    units = ["a#b#0", "a#b#1", "c#0"]
    assert sentence_keys(units).tolist() == ["a#b", "a#b", "c"]
    assert word_texts(["a#b", "c"], [["x", "y"], ["z"]], units) == ["x", "y", "z"]
    keyed = with_word_keys(pd.DataFrame({"id": units}), units)
    assert keyed["example_id"].tolist() == ["a#b", "a#b", "c"] and keyed["word"].tolist() == [0, 1, 0]
    for read in (sentence_keys, lambda u: with_word_keys(pd.DataFrame({"id": u}), u)):
        with pytest.raises(DataError, match="not a unit id"):
            read(["a#b"])
