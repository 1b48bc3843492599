"""Conformance of every task kind: the checks each registered kind passes, as scikit-learn's estimator checks.

A kind (cartomap.tasks) is a plug-in: every layer asks it what a unit is, which columns hold an example,
how logits become probabilities. These tests run the same pipeline for each registered kind and for a
fourth one defined here alone (a fact-checking kind with its own field names: "claim"/"evidence" judged
with a "verdict"), which proves that a new kind of an existing unit needs nothing but its declaration
and one ``register`` call: the file below is the whole of it.

Each kind: a few rows in its own columns are written to a JSON Lines file, loaded (:func:`load_dataset`),
trained on a tiny random BERT with learning rate 0 (the oracle: the model never changes, so every
recorded epoch is the same and each unit's variability is 0), and then read back through what the
pages and commands use: the dynamics, the metrics (as training wrote them and as recomputed from the
dynamics: the same frame), the map frame, the summary, the reference export.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest

from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.runs.store import RunStore
from cartomap.scores import ambiguity
from cartomap.tasks import registry
from cartomap.tasks.base import UNITS, TaskKind
from cartomap.training.loop import train_or_load

#: The fourth kind, declared here and nowhere else: a claim and its evidence, judged with a verdict. Its
#: files name the verdict "verdict" (read into the run's gold column "label", as every kind of one label
#: per example keeps it) and may call the texts "statement"/"source".
FACT_CHECK = TaskKind(
    name="fact-check",
    description="a claim and the evidence it is judged against, labelled with a verdict",
    text_fields=("claim", "evidence"),
    noun="claim",
    source_columns=(("statement", "source"),),
)
#: A kind of three texts, declared here alone: a passage, a question on it and an answer, judged with a
#: verdict. Every text reaches the model: the first as the tokenizer's text, the others joined by the
#: tokenizer's separator as its second segment (``TaskKind.inputs``).
ANSWER_CHECK = TaskKind(
    name="answer-check",
    description="a passage, a question on it and an answer, labelled with whether the answer holds",
    text_fields=("passage", "question", "answer"),
    noun="answer",
)
#: The column of a kind's files that holds the gold label, where it is not the kind's own label field.
FILE_LABEL = {FACT_CHECK.name: "verdict"}

#: Label names per unit: an example's class, a word's tag, a label of a multi-label example.
NAMES = {
    "example": ("supported", "refuted", "not enough info"),
    "word": ("B-LOC", "B-PER", "I-PER", "O"),
    "label": ("sports", "politics", "tech"),
}
WORDS = [
    (["Anna", "Smith", "lives", "in", "Paris"], ["B-PER", "I-PER", "O", "O", "B-LOC"]),
    (["Bob", "visited", "Rome"], ["B-PER", "O", "B-LOC"]),
    (["the", "cat", "sat"], ["O", "O", "O"]),
    (["Oslo", "is", "cold"], ["B-LOC", "O", "O"]),
]
SETS = [["sports"], ["politics", "tech"], [], ["tech"], ["sports", "politics", "tech"], ["politics"]]


def file_fields(kind: TaskKind) -> tuple[str, ...]:
    """The text columns of the test's files: the last names a kind knows its fields by (its own when it
    knows no others), so that loading maps a file's columns onto the kind's fields."""
    return kind.known_columns[-1]


def rows_of(kind: TaskKind) -> list[dict]:
    """A few rows in a file's columns (:func:`file_fields`, the label under its file name), whatever the
    kind's unit."""
    label = FILE_LABEL.get(kind.name, kind.label_field)
    if kind.unit == "word":
        return [{file_fields(kind)[0]: w, label: t} for w, t in WORDS]
    rows = []
    for i in range(6):
        texts = {f: f"{f} number {i} says the {['cat', 'dog', 'bird'][i % 3]} sat" for f in file_fields(kind)}
        rows.append({**texts, label: SETS[i] if kind.unit == "label" else NAMES["example"][i % 3]})
    return rows


KINDS = [*registry.KINDS.values(), FACT_CHECK, ANSWER_CHECK]
#: The kinds declared in this file alone, registered while it runs.
OWN_KINDS = (FACT_CHECK, ANSWER_CHECK)
ROOT = Path(__file__).resolve().parents[1]
#: The pages that open on a run (``?run=ID``): each draws every kind's run, or says in words why a part
#: applies to examples with one label each; never an exception.
RUN_PAGES = ("data_map.py", "neighbours.py", "review_suspects.py", "pruning.py", "prompts.py")


@pytest.fixture(scope="module", autouse=True)
def own_kinds_registered():
    """The kinds of this file registered while this module runs (a plug-in's one ``register`` call)."""
    with pytest.MonkeyPatch.context() as mp:
        for own in OWN_KINDS:
            mp.setitem(registry.KINDS, own.name, own)
        yield


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model):
    """{kind name: (cache, run)}: each kind's rows trained on a tiny random BERT with learning rate 0,
    once per module."""
    done = {}
    for kind in KINDS:
        folder = tmp_path_factory.mktemp(kind.name)
        path = folder / "data.jsonl"
        write_rows(kind, path)
        config = RunConfig(
            data=data_config(kind, path),
            dev=data_config(kind, path),
            model=ModelConfig(tiny_model, max_length=32),
            train=TrainConfig(epochs=2, batch_size=2, learning_rate=0.0, warmup_ratio=0.0, record="eval"),
        )
        run = train_or_load(config, RunStore(folder / "cache"))
        done[kind.name] = (folder / "cache", run)
    return done


def data_config(kind: TaskKind, path) -> DataConfig:
    label = FILE_LABEL.get(kind.name, kind.label_field)
    return DataConfig(path=str(path), task=kind.name, text_columns=file_fields(kind), label_column=label)


def write_rows(kind: TaskKind, path) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows_of(kind)), encoding="utf-8")


def test_a_kind_declares_a_known_unit_head_and_output(kind):
    assert kind.unit in UNITS and registry.kind(kind.name) is kind
    assert kind.unit_columns[0] == "id" and len(kind.unit_columns) == 1 + (kind.unit != "example")
    logits = np.array([[[0.5, -1.0], [2.0, 0.0]]])
    probs = kind.probabilities(logits)
    assert probs.shape == logits.shape and np.all((probs > 0) & (probs < 1))


def test_every_unit_has_its_traits_and_exactly_one_shape():
    """Each unit is described once (TRAITS) and says one of: an example with one label, the words of a
    sentence, the labels of an example; only examples train across processes."""
    from cartomap.tasks.units import TRAITS, Unit

    assert set(TRAITS) == set(Unit) and tuple(u.value for u in Unit) == UNITS
    for unit in Unit:
        assert [unit.per_example, unit.sentences, unit.label_sets].count(True) == 1
        assert unit.shards == unit.per_example and (unit.keys == ()) == unit.per_example
        assert (unit.group == "") == unit.per_example  # a unit that comes in groups names its group
        assert unit.plural(1).startswith("1 ") and unit.count_note(2) == (
            "" if unit.per_example else f" ({unit.plural(2)})"
        )


def test_a_kind_made_with_a_units_name_has_that_unit_and_a_bad_name_is_refused():
    from cartomap.tasks.units import Unit

    made = TaskKind(name="x", description="", text_fields=("t",), noun="t", label_field="tags", unit="word")
    assert made.unit is Unit.WORD and made.unit == "word" and f"{made.unit}" == "word"
    with pytest.raises(ValueError, match="unit 'sentence' is not one of example, word, label"):
        TaskKind(name="x", description="", text_fields=("t",), noun="t", unit="sentence")


def test_a_kinds_reader_has_its_code_in_the_data_layer(kind):
    """Each kind names how its files are read and checked; the data layer has both halves of it."""
    from cartomap.data.checks import CLASS_WARNINGS
    from cartomap.data.loading import READERS

    assert kind.reader in READERS and kind.reader in CLASS_WARNINGS


def test_a_kind_whose_reader_the_data_layer_lacks_is_one_clear_error(tmp_path, monkeypatch):
    from cartomap.errors import DataError

    odd = TaskKind(name="odd", description="", text_fields=("t",), noun="t", reader="xml")
    monkeypatch.setitem(registry.KINDS, odd.name, odd)
    with pytest.raises(
        DataError, match="task 'odd' reads its files with 'xml'; expected one of labels, tagged"
    ):
        load_dataset(DataConfig(path=str(tmp_path / "x.xml"), task="odd", text_columns=("t",)))


def test_a_kinds_name_in_a_config_reads_back_as_that_kind(kind):
    """What a config made from in-memory examples saves (``origin.data_config``: "" where the number of
    text columns implies the kind) reads back as the same kind: the fact-checking kind's two texts are
    not taken for a pair."""
    from cartomap.data.dataset import TextDataset
    from cartomap.integrations.origin import data_config as memory_config

    saved = registry.config_name(kind, kind.text_fields)
    assert registry.for_columns(saved, kind.text_fields) is kind
    assert (saved == "") == (kind.name in ("pair", "single"))
    frame = pd.DataFrame({"id": ["a"], **{f: ["x"] for f in kind.text_fields}, kind.label_field: [0]})
    examples = TextDataset(frame=frame, label_names=("yes", "no"), source="memory")
    assert memory_config("trainer", "train", examples).task_kind is kind


def test_a_kinds_file_loads_as_that_kind_with_consistent_units(kind, tmp_path):
    path = tmp_path / "data.jsonl"
    write_rows(kind, path)
    data = load_dataset(data_config(kind, path))
    assert data.task_kind is kind and len(data) == len(rows_of(kind))
    assert set(NAMES[kind.unit]) >= set(data.label_names)
    unit_ids, gold, counts = kind.units(data.frame, data.label_names)
    assert kind.unit_ids(data.frame, data.label_names)[0] == unit_ids
    assert int(counts.sum()) == len(unit_ids) == len(gold) and len(set(unit_ids)) == len(unit_ids)
    assert gold.min() >= 0 and gold.max() < len(kind.unit_classes(data.label_names))
    first, second = kind.inputs(data.frame)
    assert len(first) == len(data) and (second is None) == (len(kind.text_fields) == 1)
    # the table's kind is found again from its columns alone (a run's examples.parquet is read so)
    assert registry.of_columns(data.frame.columns) is kind


def test_every_text_of_a_kind_reaches_the_model(kind, tiny_model):
    """Each text field of an example is in its tokenized input: the first in the first segment (token
    type 0), every later one in the second (token type 1); a kind of one or two texts is tokenized exactly
    as the tokenizer reads (text, text pair), so its runs' identity is what it was."""
    from cartomap.training.batching import tokenize
    from cartomap.training.models import load_tokenizer

    if kind.unit.sentences:
        pytest.skip("a sentence's words are one text")
    tokenizer = load_tokenizer(tiny_model)
    frame = pd.DataFrame(
        {"id": ["a", "b"], **{f: [f"{f} one zebra", f"{f} two yak"] for f in kind.text_fields}}
    )
    encoded = tokenize(tokenizer, frame, 128, kind)
    for row in range(len(frame)):
        ids, types = encoded["input_ids"][row], encoded["token_type_ids"][row]
        for k, field in enumerate(kind.text_fields):
            wanted = tokenizer(str(frame[field][row]), add_special_tokens=False)["input_ids"]
            at = next((i for i in range(len(ids)) if ids[i : i + len(wanted)].tolist() == wanted), None)
            assert at is not None, f"{kind.name}: the text of {field!r} is not in the model's input"
            assert set(types[at : at + len(wanted)].tolist()) == {min(k, 1)}
    if len(kind.text_fields) <= 2:  # what a pair or a single text always was
        texts = [frame[f].tolist() for f in kind.text_fields]
        plain = tokenizer(*texts, truncation=True, max_length=128)
        assert [r.tolist() for r in encoded["input_ids"]] == plain["input_ids"]


def test_a_kind_of_three_texts_sets_its_later_texts_apart_by_the_separator(tiny_model):
    """The second and third texts of a three-text kind are one segment with the tokenizer's separator
    between them: "[CLS] passage [SEP] question [SEP] answer [SEP]"."""
    from cartomap.training.batching import tokenize
    from cartomap.training.models import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    frame = pd.DataFrame({"id": ["a"], "passage": ["red"], "question": ["green"], "answer": ["blue"]})
    ids = tokenize(tokenizer, frame, 32, ANSWER_CHECK)["input_ids"][0]
    assert tokenizer.convert_ids_to_tokens(ids.tolist()) == [
        "[CLS]",
        "red",
        "[SEP]",
        "green",
        "[SEP]",
        "blue",
        "[SEP]",
    ]


def test_a_kind_trains_and_every_reader_of_the_run_agrees(kind, trained, tmp_path, capsys):
    from cartomap.analysis.datamap import map_frame
    from cartomap.cli import main

    cache, run = trained[kind.name]
    assert run.state == "done"
    run = RunStore(cache).get(run.id)  # read back from its folder, as a page opens it
    assert run.task_kind is kind

    # dynamics: one row per unit, in the kind's unit order; lr 0 => every recorded epoch the same
    ids, logits = run.dynamics(run.recorded_source())
    unit_ids, gold = run.unit_labels(run.recorded_source())
    assert ids == unit_ids and logits.shape == (2, len(ids), len(kind.unit_classes(run.label_names)))
    np.testing.assert_allclose(logits[0], logits[1], atol=1e-5)

    # metrics: keyed like the dynamics, every map score there, no spread when nothing changed
    metrics = run.metrics()
    assert metrics["id"].astype(str).tolist() == ids and metrics["label"].tolist() == gold.tolist()
    assert set(ambiguity.MAP_SCORES) <= set(metrics.columns)
    np.testing.assert_allclose(metrics["variability"], 0.0, atol=1e-5)
    # recomputed from the dynamics (a damaged or old metrics file): the frame training wrote
    again = run.recompute_metrics(write=False)
    pd.testing.assert_frame_equal(again[metrics.columns], metrics, check_dtype=False, atol=1e-6)

    # the map the Data map page draws: a point per unit with its texts
    frame = map_frame(run)
    assert len(frame) == len(ids)
    text = kind.text_fields[0]
    assert text in frame.columns and frame[text].notna().all(), f"the map lost the texts of {kind.name}"
    listed = run.summary()  # the run's row of `cartomap runs` and the run picker
    assert (listed["state"], listed["epochs"], listed["problem"]) == ("done", "2/2", "")

    # the commands: the reference export (every recorded epoch and the metrics, by the same ids), the map
    out = tmp_path / "export"
    assert main(["--cache", str(cache), "export", run.id, "--out", str(out)]) == 0
    assert len(pd.read_json(out / "td_metrics.jsonl", lines=True)) == len(ids)
    assert main(["--cache", str(cache), "map", run.id, "--out", str(tmp_path / "map.html")]) == 0
    assert (tmp_path / "map.html").stat().st_size > 0
    capsys.readouterr()


def test_every_column_the_maps_tables_and_cards_add_is_a_reserved_name(kind, trained):
    """The columns a run's map frames (every view), selection table, metrics and review cards put beside
    the kind's own fields are all reserved (``cartomap.tasks.reserved``), so a kind that names a text
    field like one of them is refused when it is made rather than breaking a table."""
    from cartomap.analysis import multilabel
    from cartomap.analysis.datamap import HUMAN_MAP_COLUMNS, LABEL_COLUMNS, SENTENCE, map_frame, sentence_map
    from cartomap.analysis.tables import SEED_COLUMNS, selection_table
    from cartomap.curation.queue import build_cards
    from cartomap.curation.sources import from_selection, queue_ids
    from cartomap.scores.label_examples import EXAMPLE_COLUMNS, SCORE_COLUMNS
    from cartomap.scores.metrics import METRIC_COLUMNS
    from cartomap.scores.tokens import SENTENCE_COLUMNS
    from cartomap.tasks.reserved import reserved

    cache, run = trained[kind.name]
    run = RunStore(cache).get(run.id)
    frame = map_frame(run)
    tables = [frame, selection_table(frame, frame["id"].head(3)), run.metrics()]
    if kind.unit.label_sets:
        tables += [multilabel.view_frame(run, v) for v in multilabel.views(run.label_names)]
        tables.append(run.example_metrics())
    if kind.unit.sentences:
        tables.append(sentence_map(run))
    tables.append(build_cards(run, from_selection(run, queue_ids(run)[:2])))
    added = {str(c) for t in tables for c in t.columns} - set(kind.text_fields)
    static = {*METRIC_COLUMNS, *ambiguity.SCORES, *HUMAN_MAP_COLUMNS, *LABEL_COLUMNS, SENTENCE, *SEED_COLUMNS}
    static |= {*SENTENCE_COLUMNS, *EXAMPLE_COLUMNS, *SCORE_COLUMNS, "agreement", "seed_list", "p_gold_seeds"}
    free = sorted(c for c in added | static if reserved(c) is None)
    assert not free, f"columns the tables add that a kind could name a text field: {free}"
    assert reserved("votes_entailment") and reserved("neighbour_premise")


@pytest.mark.parametrize(
    "field", ["context", "gold", "confidence", "label_name", "votes_yes", "neighbour_ids"]
)
def test_a_kind_naming_a_text_field_like_a_column_of_the_map_is_refused_when_made(field):
    """One line naming the kind, the field and what the map keeps under that name: a text field ``context``
    was two columns of one name on the map (``'DataFrame' object has no attribute 'dtype'``)."""
    with pytest.raises(
        ValueError, match=rf"task kind 'odd': text field '{field}' is a column name the data map"
    ) as e:
        TaskKind(name="odd", description="", text_fields=("claim", field), noun="claim")
    assert "\n" not in str(e.value) and "name the field otherwise" in str(e.value)


@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_run_page_opens_on_a_run_of_every_kind(kind, page, trained, monkeypatch):
    from streamlit.testing.v1 import AppTest

    cache, run = trained[kind.name]
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=patience.WAIT_S)
    at.query_params["run"] = run.id
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(str(m.value) for m in (*at.markdown, *at.caption, *at.info, *at.warning, *at.error))
    assert "Traceback" not in shown
