"""Bad inputs of the newer data features through the command line: votes and annotator columns,
multi-label label vectors, token data from the real world. Each ends in one line naming the file, the
line and the field (exit 2), and leaves nothing in the store; what is accepted is read as it says."""

from __future__ import annotations

import json
from pathlib import Path

import patience
import pytest

from cartomap.cli import main
from cartomap.runs.store import RunStore

NLI = ("entailment", "neutral", "contradiction")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("cartomap: error: "), err
    return err


def nothing_in(cache: Path) -> None:
    """No run, and no half-made folder, in the store."""
    assert RunStore(cache).list() == []
    runs = cache / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())


def nli_rows(key: str, values: list) -> list[dict]:
    return [
        {"id": f"r{i}", "premise": f"p {i}", "hypothesis": f"h {i}", "label": NLI[i % 3], key: v}
        for i, v in enumerate(values)
    ]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def train(cache: Path, model: str, data: Path, *extra: str) -> int:
    args = ["--cache", str(cache), "train", "--data", str(data), "--dev", "none", "--model", model]
    return main([*args, "--epochs", "1", "--batch-size", "8", "--max-length", "32", "--quiet", *extra])


# --------------------------------------------------------------------------- votes


@pytest.mark.parametrize(
    ("key", "values", "options", "line", "words"),
    [
        # a list that is not one count per class, in a votes column (found by name or named)
        ("label_count", [[2, 1, 2], [1, 0, 3, 1], [0, 1, 0]], [], 2, "got 4 numbers"),
        (
            "crowd",
            [[2, 1, 2], ["neutral", "neutral"], [0, 1, 0]],
            ["--votes-column", "crowd"],
            2,
            "--annotator-column crowd",
        ),
        # a mapping in an annotator column
        ("crowd", [["neutral"], {"neutral": 3}], ["--annotator-column", "crowd"], 2, "--votes-column crowd"),
        # counts that overflowed or wrapped around
        ("votes", [{"neutral": 1}, {"neutral": 10**30}], [], 2, "at most 1,000,000,000 votes"),
        (
            "votes",
            [{"neutral": 1}, {"neutral": 2**63 - 1, "entailment": 2**63 - 1}],
            [],
            2,
            "at most 1,000,000,000 votes",
        ),
        # a scalar first and mappings later (was an ArrowInvalid from the store)
        ("votes", [3, {"neutral": 2}, {"entailment": 1}], [], 1, "expected a mapping label -> count"),
        # two keys naming one label (were added up)
        ("votes", [{"neutral": 1}, {"neutral": 2, " neutral": 3}], [], 2, "both name label 'neutral'"),
    ],
)
def test_bad_votes_are_one_line_and_leave_nothing(
    tiny_model, tmp_path, capsys, key, values, options, line, words
):
    data = write_jsonl(tmp_path / "votes.jsonl", nli_rows(key, values))
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, data, *options) == 2
    err = one_line_error(capsys)
    assert f"{data}: line {line}: field '{key}'" in err and words in err, err
    nothing_in(cache)


def test_both_vote_options_are_refused(tiny_model, tmp_path, capsys):
    data = write_jsonl(tmp_path / "votes.jsonl", nli_rows("votes", [{"neutral": 1}] * 3))
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, data, "--votes-column", "votes", "--annotator-column", "votes") == 2
    assert "name one" in one_line_error(capsys)
    nothing_in(cache)


# --------------------------------------------------------------------------- token data from the real world

#: Tweets in CoNLL columns: emoji followed by a lone U+FE0F variation selector (sentences 0, 1 and 6),
#: a zero-width space (sentence 2), a token of only spaces (line 27, sentence 3) and an I- tag after O
#: (sentence 4). 47 tokens, 46 without the blank one.
TWEETS = Path(__file__).parent / "fixtures" / "tweets.conll"
#: The words the default encoder's tokenizer turns into no sub-word (sentence id, word index).
SUBWORDLESS = [("sent-0", 6), ("sent-1", 6), ("sent-2", 3), ("sent-6", 5)]


def test_a_blank_token_is_refused_by_its_line_and_the_option_to_skip_is_offered(tiny_model, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, TWEETS, "--max-length", "64") == 2
    err = one_line_error(capsys)
    assert f"{TWEETS}: line 27: field 'token': empty token" in err and "--skip-blank-tokens" in err
    nothing_in(cache)


def test_tweets_train_with_every_word_recorded_and_every_warning_kept(tiny_model, tmp_path, capsys):
    """Words without a sub-word are read as [UNK] (they stopped training with "past max_length", at any
    max length, leaving a failed run); the blank token is skipped on request; the I- after O is told
    (it was dropped by the loader); no entity type is called rare against O."""
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, TWEETS, "--max-length", "64", "--skip-blank-tokens") == 0
    err = capsys.readouterr().err
    (run,) = RunStore(cache).list()
    assert run.status()["state"] == "done"
    warnings = run.warnings
    assert len(warnings) == 3, warnings
    blank, bio, subwordless = warnings
    assert "skipped 1 blank token" in blank and "line 27" in blank
    assert "sent-4 word 2: I-LOC after O" in bio
    assert "4 words in 4 sentences become no sub-word" in subwordless and "'[UNK]'" in subwordless
    assert "sent-0 word 6 '\\ufe0f'" in subwordless and "sent-2 word 3 '\\u200b'" in subwordless
    for warning in warnings:
        assert f"cartomap: warning: {warning}" in err
    assert "a typo or a stray" not in err
    metrics = run.metrics()
    assert len(metrics) == 46 and metrics["confidence"].notna().all()
    for sid, k in SUBWORDLESS:
        assert f"{sid}#{k}" in set(metrics["id"])
    assert "sent-3#1" in set(metrics["id"]) and "sent-3#3" not in set(metrics["id"])  # 3 words left


def test_a_sentence_past_max_length_is_refused_before_the_run_exists(tiny_model, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, TWEETS, "--max-length", "8", "--skip-blank-tokens") == 2
    err = one_line_error(capsys)
    assert f"{TWEETS}: field 'max_length': sentence 'sent-0': word 5 of 8 is past max_length 8" in err
    nothing_in(cache)


def test_tokenize_words_reads_a_word_without_sub_word_as_unk(tiny_model):
    import numpy as np

    from cartomap.data.loading import tagged_dataset
    from cartomap.tasks.token import TOKEN
    from cartomap.training.batching import subwordless_words, tokenize_words
    from cartomap.training.models import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    sentences = [["Rain", "\u2614", "\ufe0f", "lol"], ["\u200b", "ok"], ["fine"]]
    assert [w.tolist() for w in subwordless_words(tokenizer, sentences)] == [[2], [0], []]
    frame = {"id": ["a", "b", "c"], "tokens": sentences, "tags": [["O"] * 4, ["O", "B-X"], ["O"]]}
    import pandas as pd

    data = tagged_dataset(pd.DataFrame(frame), TOKEN, None, "mem")
    encoded = tokenize_words(tokenizer, data.frame, 32, TOKEN)
    units = encoded["word_units"]
    assert sorted(np.concatenate(list(units))[np.concatenate(list(units)) >= 0].tolist()) == list(range(7))
    row = encoded["input_ids"][0].tolist()
    unit_row = units[0].tolist()
    assert row[unit_row.index(2)] == tokenizer.unk_token_id  # the lone U+FE0F, at its own [UNK]


def test_the_train_page_shows_a_token_runs_tagging_warning(root, tmp_path):
    """The warning of an I- tag after O reaches the run, and so the Train page."""
    from streamlit.testing.v1 import AppTest

    from cartomap.config import DataConfig, ModelConfig, RunConfig
    from cartomap.training.prepare import prepare_run

    data = tmp_path / "iob1.conll"
    data.write_text("I\tO\nmiss\tO\nParis\tI-LOC\n\nMary\tB-PER\nsmiles\tO\n", encoding="utf-8")
    run = prepare_run(
        RunConfig(data=DataConfig(path=str(data)), dev=None, model=ModelConfig()), RunStore(root)
    )
    (warning,) = run.warnings
    assert "sent-0 word 2: I-LOC after O" in warning
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "pages" / "train.py"), default_timeout=patience.WAIT_S
    )
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception
    shown = [w.value for w in at.warning if "Data warning" in w.value]
    assert len(shown) == 1 and "I-LOC after O" in shown[0]


# --------------------------------------------------------------------------- rare classes of token data


def _tagged(counts: dict[str, int]):
    import pandas as pd

    from cartomap.data.loading import tagged_dataset
    from cartomap.tasks.token import TOKEN

    tags = [t for t, n in counts.items() for _ in range(n)]
    frame = pd.DataFrame({"id": ["s"], "tokens": [[f"w{i}" for i in range(len(tags))]], "tags": [tags]})
    return tagged_dataset(frame, TOKEN, tuple(counts), "ner.conll")


def test_entity_types_are_not_called_rare_against_o():
    """CoNLL-2003's shape: every entity tag is under 1 % of O; none is a typo."""
    from cartomap.data.checks import label_warnings

    counts = {
        "O": 25_666,
        "B-LOC": 420,
        "I-LOC": 114,
        "B-PER": 380,
        "I-PER": 270,
        "B-MISC": 210,
        "I-MISC": 70,
    }
    assert label_warnings(_tagged(counts)) == []


def test_a_stray_tag_is_called_rare_against_the_largest_entity_type():
    from cartomap.data.checks import label_warnings

    counts = {"O": 25_666, "B-LOC": 420, "I-LOC": 114, "B-PER": 380, "I-PER": 270, "B-LCO": 1, "X": 2}
    warnings = label_warnings(_tagged(counts))
    assert len(warnings) == 2, warnings
    assert "entity type 'LCO' (B-LCO) has 1 word in the training set against 650 of 'PER'" in warnings[0]
    assert "tag 'X' has 2 words" in warnings[1]


def test_an_entity_type_without_words_is_told():
    from cartomap.data.checks import label_warnings

    (warning,) = label_warnings(_tagged({"O": 50, "B-LOC": 5, "I-LOC": 2, "B-PER": 0, "I-PER": 0}))
    assert "no word tagged as entity type 'PER' (B-PER, I-PER)" in warning


# --------------------------------------------------------------------------- multi-label label vectors

TOPICS = ("sports", "politics", "tech")


def ml_rows(labels: list) -> list[dict]:
    return [{"id": f"m{i}", "text": f"snippet {i}", "labels": v} for i, v in enumerate(labels)]


def ml_config(path: Path, names=TOPICS):
    from cartomap.config import DataConfig

    return DataConfig(
        path=str(path), task="multilabel", text_columns=("text",), label_column="labels", label_names=names
    )


def test_zero_one_vectors_with_label_names_are_read_as_one_flag_per_label(tmp_path):
    """They were refused with "label 'sports' appears twice" (read as positions 0, 1, 1)."""
    from cartomap.data.loading import load_dataset

    rows = ml_rows([[0, 1, 1], [1, 0, 0], [0, 0, 0], [True, True, False], [1.0, 0.0, 1.0]])
    data = load_dataset(ml_config(write_jsonl(tmp_path / "ml.jsonl", rows)))
    lists = [["politics", "tech"], ["sports"], [], ["sports", "politics"], ["sports", "tech"]]
    assert data.frame["labels"].tolist() == lists
    # float vectors (a loss's multi-hot targets) read one way only, also for two labels
    rows = ml_rows([[0.0, 1.0], [1.0, 0.0]])
    data = load_dataset(ml_config(write_jsonl(tmp_path / "two.jsonl", rows), names=("a", "b")))
    assert data.frame["labels"].tolist() == [["b"], ["a"]]


def test_positions_are_still_positions(tmp_path):
    from cartomap.data.loading import load_dataset

    rows = ml_rows([[0, 2], [1], [], [2, 1, 0]])
    data = load_dataset(ml_config(write_jsonl(tmp_path / "ml.jsonl", rows)))
    assert data.frame["labels"].tolist() == [
        ["sports", "tech"],
        ["politics"],
        [],
        ["sports", "politics", "tech"],
    ]


@pytest.mark.parametrize(
    ("labels", "names", "line", "words"),
    [
        # width-2 vectors with three names: were read as positions {sports, politics} and accepted
        (
            [[0, 1], [1, 0], [0, 1]],
            TOPICS,
            1,
            "every row is a list of 2 numbers 0/1, but there are 3 label names",
        ),
        ([[0, 1], [1, 1], [0, 0]], TOPICS, 1, "0/1 per label needs 3 numbers a row"),
        # two labels, pairs without a repeat: 0/1 per label or positions? refused, never guessed
        ([[0, 1], [1, 0]], ("sports", "politics"), 1, "each reads as 0/1 per label and as label positions"),
        # a 0/1 row among positions: the repeat is told as a position
        (
            [[0, 2], [0, 1, 1]],
            TOPICS,
            2,
            "the integer 1 is a label position; 0/1 per label needs a list of 3",
        ),
    ],
)
def test_ambiguous_label_vectors_are_one_line(tiny_model, tmp_path, capsys, labels, names, line, words):
    data = write_jsonl(tmp_path / "ml.jsonl", ml_rows(labels))
    cache = tmp_path / "cache"
    args = ["--task", "multilabel", "--text-columns", "text", "--label-names", ",".join(names)]
    assert train(cache, tiny_model, data, *args) == 2
    err = one_line_error(capsys)
    assert f"{data}: line {line}: field 'labels'" in err and words in err, err
    nothing_in(cache)


def test_zero_one_vectors_without_label_names_ask_for_them(tiny_model, tmp_path, capsys):
    data = write_jsonl(tmp_path / "ml.jsonl", ml_rows([[0, 1, 1], [1, 0, 0]]))
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, data, "--task", "multilabel", "--text-columns", "text") == 2
    err = one_line_error(capsys)
    assert "0/1 per label needs the label names in their order (--label-names" in err
    nothing_in(cache)


# --------------------------------------------------------------------------- extra columns of mixed kinds


@pytest.mark.parametrize(
    ("values", "text", "words"),
    [
        (
            [3, {"neutral": 2}, {"neutral": 1}],
            ["3", '{"neutral": 2}', '{"neutral": 1}'],
            "mixes mappings and numbers",
        ),
        ([1, "web", None], ["1", "web", None], "mixes numbers and strings"),
        ([2**70, 1, 2], [str(2**70), "1", "2"], "holds numbers Parquet cannot store as one type"),
    ],
)
def test_an_extra_column_of_mixed_kinds_is_kept_as_text_with_a_warning(
    tiny_model, tmp_path, capsys, values, text, words
):
    """Such a column (ordinary, unused by cartomap) ended in pyarrow's ArrowInvalid from the store."""
    data = write_jsonl(tmp_path / "d.jsonl", nli_rows("note", values))
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, data) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"column 'note' {words}" in err, err
    (run,) = RunStore(cache).list()
    kept = run.examples()["note"].tolist()
    assert [None if not isinstance(v, str) else v for v in kept] == text  # a null read back as NaN
    assert any(f"column 'note' {words}" in w for w in run.warnings)


def test_a_multilabel_extra_column_of_mixed_kinds_is_kept_as_text(tmp_path):
    from cartomap.data.loading import load_dataset

    rows = ml_rows([["sports"], ["tech"], []])
    for row, note in zip(rows, [1, {"a": 1}, "x"], strict=True):
        row["note"] = note
    data = load_dataset(ml_config(write_jsonl(tmp_path / "ml.jsonl", rows)))
    assert data.frame["note"].tolist() == ["1", '{"a": 1}', "x"]
    (warning,) = data.warnings
    assert "column 'note' mixes mappings and numbers and strings" in warning


# --------------------------------------------------------------------------- control characters in CLI output

EVIL = "\x1b[31mmallory\x1b[0m"  # an ANSI colour escape in an annotator's name
NOTE = "see \x1b]0;pwned\x07 this\rline"  # a terminal-title escape, a bell and a carriage return


def no_raw_controls(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\r"), repr(text)


def test_review_queue_output_escapes_control_characters(tmp_path, capsys):
    """`review-queue show` sent an annotator's name (and notes) raw to the terminal."""
    from curation_fixture import make_run

    run = make_run(tmp_path / "cache", embeddings=False)
    base = ["--cache", str(tmp_path / "cache"), "review-queue"]
    assert main([*base, "create", run.id, "q", "--detector", "aum", "--top", "2", "--per-item", "1"]) == 0
    capsys.readouterr()
    assert main([*base, "next", run.id, "q", "--annotator", EVIL]) == 0
    (item, *_) = capsys.readouterr().out.split()
    decide = [*base, "decide", run.id, "q", "--annotator", EVIL, "--item", item, "--decision", "remove"]
    assert main([*decide, "--note", NOTE]) == 0
    for command in (["show", run.id, "q"], ["show", run.id, "q", "--item", item], ["list", run.id]):
        assert main([*base, *command]) == 0
        out = capsys.readouterr()
        no_raw_controls(out.out + out.err)
    assert main([*base, "show", run.id, "q"]) == 0
    assert "\\x1b[31mmallory\\x1b[0m: 1 decided" in capsys.readouterr().out
    assert main([*base, "show", run.id, "q", "--item", item]) == 0
    assert "(see \\x1b]0;pwned\\x07 this" in capsys.readouterr().out
    # an error naming what the user typed stays one escaped line
    assert main([*base, "undo", run.id, "q", "--annotator", EVIL + "\nX", "--item", item]) == 2
    err = capsys.readouterr().err
    no_raw_controls(err)
    assert len(err.strip().splitlines()) == 1


def test_a_table_with_control_characters_stays_aligned():
    import pandas as pd

    from cartomap.cli.printing import printable_frame

    frame = pd.DataFrame({"name": [EVIL, "bob"], "n": [1, 22]})
    lines = printable_frame(frame).to_string(index=False).splitlines()
    no_raw_controls("\n".join(lines))
    assert len({len(line) for line in lines}) == 1  # every row as wide as the header


# --------------------------------------------------------------------------- the truth report without folds


@pytest.fixture()
def voted_run(tmp_path, monkeypatch):
    from test_truth import synthetic_run, votes_rows, write_votes

    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    return synthetic_run(cache, write_votes(tmp_path / "votes.jsonl", votes_rows()))


def test_the_truth_report_without_folds_names_cleanlab_and_how_to_get_it(voted_run, capsys):
    """It listed the detectors it had and said nothing of cleanlab's, the reference."""
    cache = voted_run.path.parents[1]
    assert main(["--cache", str(cache), "truth", voted_run.id, "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    section = out.split("## Detectors this run cannot feed yet", 1)[1]
    first = section.strip().splitlines()[0]
    assert first.startswith(
        "- cleanlab_self_confidence (the reference detector), cleanlab 1 − quality: needs "
    )
    assert "out-of-fold probabilities" in first and "pruning experiment" in first
    prune = f"cartomap prune --data run:{voted_run.id} --test run:{voted_run.id} --folds 10 --no-model1"
    assert f"run `{prune}`, then this report again" in first
    for name in ("oof_margin", "consensus_p1g0", "fold_aum", "rank_oof_folds", "seed_spread"):
        assert f"- {name}" in section
    assert f"`cartomap seeds {voted_run.id}`" in section and f"`cartomap embed {voted_run.id}`" in section


@pytest.mark.slow
def test_the_command_the_truth_report_gives_makes_cleanlab_available(voted_run, tiny_model, capsys):
    """The printed command, run as printed (2 folds of the tiny model instead of 10 of the default),
    gives the report its reference detector."""
    import shlex

    from cartomap.experiments.truth import truth_of

    cache = str(voted_run.path.parents[1])
    rows = truth_of(voted_run, cache, n_boot=0)["unavailable"]
    (row,) = [r for r in rows if r["detector"] == "cleanlab_self_confidence"]
    args = shlex.split(row["command"])[1:]
    args[args.index("--folds") + 1] = "2"
    args += ["--model", tiny_model, "--epochs", "1", "--max-length", "32", "--batch-size", "32"]
    assert main(["--cache", cache, *args]) == 0
    report = truth_of(voted_run, cache, n_boot=0)
    assert "cleanlab_self_confidence" in {r["detector"] for r in report["detectors"]}
    assert "cleanlab_self_confidence" not in {r["detector"] for r in report["unavailable"]}


def test_the_truth_report_on_the_page_lists_what_it_cannot_feed(voted_run):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "pages" / "data_map.py"), default_timeout=patience.WAIT_S
    )
    at.run()
    at.number_input(key="_kept_dm_truth_boot").set_value(0).run()
    at.toggle(key="dm_truth_on").set_value(True).run()
    assert not at.exception, at.exception
    missing = next(d.value for d in at.dataframe if "command" in d.value.columns)
    first = missing.iloc[0]
    assert first["detector"] == "cleanlab_self_confidence" and "out-of-fold probabilities" in first["needs"]
    assert first["command"].startswith(f"cartomap prune --data run:{voted_run.id} --test run:{voted_run.id} ")
    assert any("reference detector" in c.value for c in at.caption)


def test_skip_blank_tokens_on_other_data_is_one_line(tiny_model, tmp_path, capsys):
    data = write_jsonl(tmp_path / "pairs.jsonl", nli_rows("note", [1, 2, 3]))
    cache = tmp_path / "cache"
    assert train(cache, tiny_model, data, "--skip-blank-tokens") == 2
    assert "--skip-blank-tokens: is for token data (task token), not pair data" in one_line_error(capsys)
    nothing_in(cache)
