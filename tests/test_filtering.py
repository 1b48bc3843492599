"""WaNLI Stage 3 (cartomap.wanli.filtering): heuristic rules, tidying, max variability, selection, the task.

The helpers at the top (``make_run``, ``write_generated``, ``generated_rows``, ``save_checkpoints``)
are shared with the review and dashboard tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cartomap.runs.jobs
from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_write_parquet
from cartomap.runs import layout
from cartomap.runs.store import Run, RunStore
from cartomap.runs.tasks import task_status
from cartomap.wanli import batches
from cartomap.wanli import filtering as flt
from cartomap.wanli.filtering import (
    FilterConfig,
    attribute,
    count_rules,
    heuristic_masks,
    max_variability,
    rule_copied_example,
    rule_instruction_phrase,
    rule_same_text,
    rule_too_short,
    select_top,
    tidy,
)

LABELS = ("entailment", "neutral", "contradiction")


# --------------------------------------------------------------------------- shared helpers
def make_run(cache: Path, model: str = "default", n: int | None = None) -> Run:
    """A run on the demo dev set (400 pairs, or the first ``n``), marked done; no weights unless added."""
    data = load_dataset(DataConfig(path="demo:dev"))
    if n is not None:
        data = data.subset(np.arange(n))
    config = RunConfig(
        data=DataConfig(path="demo:dev"), dev=None, model=ModelConfig(model, 64), train=TrainConfig(epochs=2)
    )
    run = RunStore(cache).create(config, data, None)
    run.set_status(state="done", progress=1.0)
    return run


def save_checkpoints(run: Run, model_dir: str, epochs: int = 2) -> None:
    """``epochs`` end-of-epoch checkpoints: the tiny model with the head re-drawn per epoch; tokenizer in model/."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    AutoTokenizer.from_pretrained(model_dir).save_pretrained(run.model_dir)
    for e in range(1, epochs + 1):
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)
        torch.manual_seed(e)
        with torch.no_grad():
            model.classifier.weight.normal_(0, 2.0)
            model.classifier.bias.normal_(0, 0.5)
        model.save_pretrained(run.path / "checkpoints" / f"epoch_{e}", safe_serialization=True)


def generated_rows(run: Run, n_per_label: int = 4) -> pd.DataFrame:
    """Plausible generated rows of the Stage-2 shape, built from the run's own examples (all pass the rules)."""
    ex = run.examples()
    rows = []
    for k, label in enumerate(LABELS):
        for j in range(n_per_label):
            src = ex.iloc[(k * n_per_label + j) * 3]
            context = ex.iloc[(k * n_per_label + j) * 3 + 1 : (k * n_per_label + j) * 3 + 3]["id"].tolist()
            rows.append(
                {
                    "gen_id": f"g{k}{j}",
                    "group": f"grp{k}",
                    "seed_id": context[-1],
                    "intended_label": label,
                    "premise": f"Someone said that {src['premise']}",
                    "hypothesis": f"{src['hypothesis']} Probably.",
                    "raw": "...",
                    "prompt_index": k,
                    "sample_index": j,
                    "in_context_ids": context,
                    "model": "tiny",
                }
            )
    return pd.DataFrame(rows)


def write_generated(run: Run, batch: str, frame: pd.DataFrame) -> Path:
    return atomic_write_parquet(run.path / "wanli" / batch / "generated.parquet", frame)


def row(premise, hypothesis, ids=(), label="neutral", gen_id="x"):
    return {
        "gen_id": gen_id,
        "intended_label": label,
        "premise": premise,
        "hypothesis": hypothesis,
        "in_context_ids": list(ids),
    }


# --------------------------------------------------------------------------- rules
EXAMPLES = {
    "e1": ("A dog runs in the park.", "An animal is outside."),
    "e2": ("Two women are cooking.", "Nobody is cooking."),
}


def test_rule_too_short():
    frame = pd.DataFrame(
        [
            row("A man sleeps.", "He rests."),  # fine
            row(None, "He rests."),  # missing premise
            row("A man sleeps.", "Ok."),  # 3 characters
            row("A man sleeps.", "  abcd  "),  # 4 after stripping
            row("A man sleeps.", "abcde"),  # exactly 5: kept
            row("A man sleeps.", float("nan")),  # missing hypothesis
        ]
    )
    assert rule_too_short(frame).tolist() == [False, True, True, True, False, True]
    assert rule_too_short(frame, min_chars=6)[4]


def test_rule_same_text():
    frame = pd.DataFrame(
        [
            row("A man sleeps.", "a man sleeps"),
            row("A man, sleeps!", "A MAN SLEEPS"),
            row("A man sleeps.", "A man  sleeps ."),  # whitespace collapsed after punctuation removal
            row("A man sleeps.", "A woman sleeps."),
            row(None, "A man sleeps."),
        ]
    )
    assert rule_same_text(frame).tolist() == [True, True, True, False, False]


def test_rule_instruction_phrase():
    frame = pd.DataFrame(
        [
            row("Write a Pair of Sentences here.", "Something else."),
            row("A man sleeps.", "as in the previous examples"),
            row("A man sleeps.", "It has the same relationship as before."),
            row("A man sleeps.", "A pair of shoes."),
        ]
    )
    assert rule_instruction_phrase(frame).tolist() == [True, True, True, False]
    assert rule_instruction_phrase(frame, ("shoes",)).tolist() == [False, False, False, True]


def test_rule_copied_example():
    frame = pd.DataFrame(
        [
            row("A dog runs in the park.", "An animal is outside.", ["e1", "e2"]),  # a pair copied
            row(" A dog runs in the park. ", "An animal is outside.", ["e1"]),  # same after stripping
            row("A dog runs in the park.", "Nobody is cooking.", ["e1", "e2"]),  # premise of e1 + hyp of e2
            row("A dog runs in the park.", "A cat sleeps.", ["e1", "e2"]),  # only the premise copied
            row("A dog runs in the park.", "An animal is outside.", ["e2"]),  # e1 not in this group
            row("A dog runs in the park.", "An animal is outside.", ["unknown"]),
            row("a dog runs in the park.", "An animal is outside.", ["e1"]),  # case differs: not exact
        ]
    )
    assert rule_copied_example(frame, EXAMPLES).tolist() == [True, True, True, False, False, False, False]


def test_rules_in_order_attribute_the_first_rule_only():
    frame = pd.DataFrame(
        [
            row("Hi.", "Hi."),  # too short and same text: too_short
            row("A pair of sentences.", "a pair of sentences"),  # same text and phrase: same_text
            row("A dog runs in the park.", "An animal is outside.", ["e1"]),  # copied
            row("Previous examples: A dog runs in the park.", "An animal is outside.", ["e1"]),  # phrase
            row("A man sleeps.", "A woman reads."),  # survives
        ]
    )
    masks = heuristic_masks(frame, EXAMPLES, FilterConfig())
    assert [name for name, _ in masks] == list(flt.RULES)
    removed = attribute(masks, len(frame))
    assert removed.tolist() == ["too_short", "same_text", "copied_example", "instruction_phrase", None]
    counts = count_rules(removed)
    assert counts == {
        "too_short": 1,
        "same_text": 1,
        "instruction_phrase": 1,
        "copied_example": 1,
        "low_max_variability": 0,
    }


# --------------------------------------------------------------------------- tidy
@pytest.mark.parametrize(
    ("raw", "tidied"),
    [
        ('"A man sleeps."', "A man sleeps."),
        ("'A man sleeps.'", "A man sleeps."),
        ("\u201cA man sleeps.\u201d", "A man sleeps."),
        ("(A man sleeps.)", "A man sleeps."),
        ("[A man sleeps.]", "A man sleeps."),
        ('  "A man sleeps."  ', "A man sleeps."),
        ('""A man sleeps.""', '""A man sleeps.""'),  # quotes inside: not one wrapping pair
        ("((A man sleeps.))", "(A man sleeps.)"),  # a single pair only
        ("(a) or (b)", "(a) or (b)"),  # not a wrapping pair
        ('"A man sleeps.', "A man sleeps."),  # dangling opening quote
        ('A man sleeps."', "A man sleeps."),  # dangling closing quote
        ("A man sleeps.)", "A man sleeps."),  # dangling bracket
        ("(A man sleeps.", "A man sleeps."),
        ('He said "hi" today.', 'He said "hi" today.'),
        ('"Hi," he said.', '"Hi," he said.'),  # a quote that is closed inside stays
        ("The dogs' bowls", "The dogs' bowls"),  # an apostrophe is no dangling quote
        ("(see above) the end", "(see above) the end"),
        ("A man sleeps.", "A man sleeps."),
    ],
)
def test_tidy(raw, tidied):
    assert tidy(raw) == tidied


def test_tidy_leaves_non_text_alone():
    assert tidy(None) is None


# --------------------------------------------------------------------------- max variability and selection
def test_max_variability_by_hand():
    probs = np.array(
        [
            # epoch 1: three examples, three classes
            [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.1, 0.9, 0.0]],
            # epoch 2
            [[0.6, 0.3, 0.1], [1.0, 0.0, 0.0], [0.4, 0.6, 0.0]],
            # epoch 3
            [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.7, 0.3, 0.0]],
        ]
    )
    # example 0: class 0 goes 0.2, 0.6, 0.2 (mean 1/3): deviations -2/15, 4/15, -2/15,
    #            squares 4/225 + 16/225 + 4/225 = 24/225, / 3 epochs = 8/225 -> std sqrt(8)/15 = 0.188562;
    #            class 2 (0.5, 0.1, 0.5) has the same std, class 1 is constant -> max 0.188562
    # example 1: constant -> 0
    # example 2: class 0 goes 0.1, 0.4, 0.7 -> deviations -0.3, 0, 0.3 -> var 0.18 / 3 = 0.06 -> std 0.244949
    expected = [0.18856180831641267, 0.0, 0.2449489742783178]
    np.testing.assert_allclose(max_variability(probs), expected, rtol=1e-9)


def test_max_variability_two_epochs_and_shapes():
    probs = np.array([[[0.2, 0.8]], [[0.6, 0.4]]])  # |0.2 - 0.6| / 2
    np.testing.assert_allclose(max_variability(probs), [0.2])
    assert max_variability(np.zeros((3, 0, 3))).shape == (0,)
    with pytest.raises(ValueError):
        max_variability(np.zeros((3, 3)))


def test_select_top_balanced():
    labels = ["a"] * 4 + ["b"] * 4 + ["c"] * 2
    scores = [0.1, 0.9, 0.5, 0.7, 0.3, 0.2, 0.8, 0.4, 0.05, 0.01]
    # keep 0.6 of 10 over 3 labels: floor(6 / 3) = 2 per label
    keep = select_top(scores, labels, 0.6)
    assert np.flatnonzero(keep).tolist() == [1, 3, 6, 7, 8, 9]  # a: 0.9, 0.7; b: 0.8, 0.4; c: both


def test_select_top_caps_a_small_label():
    labels = ["a"] * 5 + ["b"] * 5 + ["c"]
    scores = np.arange(11, dtype=float)
    # floor(0.6 * 11 / 3) = floor(2.2) = 2 per label; "c" has only one
    keep = select_top(scores, labels, 0.6)
    assert np.flatnonzero(keep).tolist() == [3, 4, 8, 9, 10]
    # half of 4 rows of one label: 2
    assert select_top([0.3, 0.1, 0.2, 0.4], ["a"] * 4, 0.5).tolist() == [True, False, False, True]


def test_select_top_unbalanced_ties_and_nan():
    labels = ["a"] * 5 + ["b"]
    scores = [0.5, 0.5, np.nan, 0.9, 0.1, 0.2]
    keep = select_top(scores, labels, 0.5, balance=False)  # floor(3) overall: 0.9, then the earlier 0.5, 0.5
    assert np.flatnonzero(keep).tolist() == [0, 1, 3]
    assert not select_top([], [], 0.5).any()
    assert select_top([1.0, 2.0], ["a", "b"], 1.0).all()
    with pytest.raises(ValueError):
        select_top([1.0], ["a", "b"], 0.5)


def test_filter_config_is_frozen_and_checked():
    cfg = FilterConfig()
    assert (cfg.min_chars, cfg.keep_fraction, cfg.balance, cfg.batch_size, cfg.device) == (
        5,
        0.5,
        True,
        64,
        "auto",
    )
    assert cfg.instruction_phrases == ("pair of sentences", "previous examples", "same relationship as")
    with pytest.raises(AttributeError):
        cfg.keep_fraction = 0.3  # type: ignore[misc]
    with pytest.raises(CartomapError):
        FilterConfig(keep_fraction=1.5)
    assert FilterConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_filter_frame_with_fake_probabilities():
    """The whole stage on hand-made rows, probabilities injected: rules, tidying, the cut per label."""
    rows = [
        row("Hi.", "A man sleeps.", gen_id="short"),
        row("A man sleeps.", "a man sleeps!", gen_id="same"),
        row('"A woman reads a book.', "(She is reading.)", label="entailment", gen_id="e1"),
        row("A woman reads a book.", "She is asleep.", label="contradiction", gen_id="c1"),
        row("A woman reads a novel.", "She is awake.", label="entailment", gen_id="e2"),
        row("A woman reads a poem.", "She is sad.", label="contradiction", gen_id="c2"),
        row('"(ab)"', "A man sleeps.", label="neutral", gen_id="tidied_short"),
    ]
    frame = pd.DataFrame(rows)
    seen = {}

    def probabilities(survivors):
        seen["ids"] = survivors["gen_id"].tolist()
        seen["premise"] = survivors["premise"].tolist()
        # variability 0.1, 0.3, 0.2, 0.0 for e1, c1, e2, c2
        spread = np.array([0.1, 0.3, 0.2, 0.0])
        first = np.stack([0.5 - spread, 0.5 + spread, np.zeros(4)], axis=1)
        second = np.stack([0.5 + spread, 0.5 - spread, np.zeros(4)], axis=1)
        return np.stack([first, second])

    out = flt.filter_frame(frame, {}, FilterConfig(), probabilities)
    assert seen["ids"] == ["e1", "c1", "e2", "c2"]
    assert seen["premise"][0] == "A woman reads a book."  # tidied before scoring
    assert out.set_index("gen_id")["removed_by"].to_dict() == {
        "short": "too_short",
        "same": "same_text",
        "e1": "low_max_variability",
        "c1": None,
        "e2": None,
        "c2": "low_max_variability",
        "tidied_short": "too_short",  # '"(ab)"' tidies to '(ab)': shorter than 5 characters
    }
    by_id = out.set_index("gen_id")
    assert (
        by_id.loc["e1", "hypothesis"] == "She is reading."
        and by_id.loc["e1", "hypothesis_raw"] == "(She is reading.)"
    )
    assert by_id.loc["short", "premise"] == "Hi."
    np.testing.assert_allclose(by_id.loc[["e1", "c1", "e2", "c2"], "max_variability"], [0.1, 0.3, 0.2, 0.0])
    assert np.isnan(by_id.loc["short", "max_variability"])
    assert by_id["kept"].sum() == 2
    assert flt.cut_by_label(out) == {"contradiction": pytest.approx(0.3), "entailment": pytest.approx(0.2)}
    fig = flt.variability_figure(out, flt.cut_by_label(out))
    assert len(fig.data) == 2 and len(fig.layout.shapes) == 2


# --------------------------------------------------------------------------- checkpoints and the task
def test_no_checkpoints_is_a_clear_error(cache):
    run = make_run(cache, n=40)
    write_generated(run, "b1", generated_rows(run, 2))
    with pytest.raises(RunError, match="train with checkpoints"):
        flt.checkpoint_probabilities(run, generated_rows(run, 1))
    cartomap.runs.tasks.task_update(run, "filter-b1", state="queued")  # as the dashboard leaves it
    with pytest.raises(RunError, match="train with checkpoints"):
        flt.run_filter(run, "b1")
    status = task_status(run, "filter-b1")
    assert status["state"] == "failed" and "train with checkpoints" in status["error"]


def test_batch_names_and_missing_batch(cache):
    run = make_run(cache, n=40)
    for bad in ("", "...", "/"):
        with pytest.raises(CartomapError, match="no letters or digits"):
            batches.batch_dir(run, bad)
    # Names are slugged as generation names its folders, so no name can leave the wanli folder.
    for name, slug in (("../x", "x"), ("a/b", "a-b"), (".hidden", "hidden"), ("My Batch", "my-batch")):
        assert batches.batch_dir(run, name) == run.path / "wanli" / slug
    with pytest.raises(CartomapError, match="no generated batch"):
        batches.load_generated(run, "nothing")
    assert batches.list_batches(run, having=layout.GENERATED) == []
    write_generated(run, "b2", generated_rows(run, 1))
    write_generated(run, "b1", generated_rows(run, 1))
    assert batches.list_batches(run, having=layout.GENERATED) == ["b1", "b2"]  # newest first


def test_checkpoint_probabilities_and_run_filter(cache, tiny_model):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    run = make_run(cache, model=tiny_model, n=60)
    save_checkpoints(run, tiny_model, epochs=2)
    gen = generated_rows(run, 4)
    gen.loc[0, "hypothesis"] = "No."  # too short
    gen.loc[5, "premise"] = '"' + gen.loc[5, "premise"] + '"'  # tidied
    write_generated(run, "b1", gen)

    probs = flt.checkpoint_probabilities(run, gen, batch_size=5)
    assert probs.shape == (2, 12, 3)
    np.testing.assert_allclose(probs.sum(axis=2), 1.0, atol=1e-5)
    # the same as one unpadded eval-mode forward pass per row
    tok = AutoTokenizer.from_pretrained(run.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(run.path / "checkpoints" / "epoch_2").eval()
    with torch.no_grad():
        enc = tok(
            gen.loc[3, "premise"],
            gen.loc[3, "hypothesis"],
            truncation=True,
            max_length=64,
            return_tensors="pt",
        )
        direct = torch.softmax(model(**enc).logits, dim=-1)[0].numpy()
    np.testing.assert_allclose(probs[1, 3], direct, atol=1e-5)
    assert max_variability(probs).max() > 0  # the two checkpoints differ

    frame = flt.run_filter(run, "b1", FilterConfig(batch_size=4, device="cpu"))
    saved = pd.read_parquet(run.path / "wanli" / "b1" / "filtered.parquet")
    assert len(saved) == 12 and saved["gen_id"].tolist() == gen["gen_id"].tolist()
    for col in ("premise_raw", "hypothesis_raw", "removed_by", "max_variability", "kept", "in_context_ids"):
        assert col in saved.columns
    assert saved.loc[0, "removed_by"] == "too_short"
    assert (
        saved.loc[5, "premise"] == gen.loc[5, "premise"][1:-1]
        and saved.loc[5, "premise_raw"] == gen.loc[5, "premise"]
    )
    # 11 survivors, 3 labels: floor(0.5 * 11 / 3) = 1 per label
    assert saved["kept"].sum() == 3
    assert saved[saved["kept"]]["intended_label"].value_counts().to_dict() == dict.fromkeys(LABELS, 1)
    assert (saved["removed_by"] == "low_max_variability").sum() == 8
    survivors = saved[saved["removed_by"] != "too_short"]
    expected = max_variability(flt.checkpoint_probabilities(run, survivors))
    np.testing.assert_allclose(survivors["max_variability"], expected, atol=1e-6)
    for label, part in survivors.groupby("intended_label"):
        assert part.loc[part["kept"], "max_variability"].min() >= part["max_variability"].max() - 1e-12
        assert part["kept"].sum() == 1, label
    report = json.loads((run.path / "wanli" / "b1" / "filter.json").read_text())
    assert report["counts"] == {
        "too_short": 1,
        "same_text": 0,
        "instruction_phrase": 0,
        "copied_example": 0,
        "low_max_variability": 8,
    }
    assert report["n_kept"] == 3 and report["epochs"] == 2 and report["config"]["keep_fraction"] == 0.5
    assert task_status(run, "filter-b1")["state"] == "done"
    assert frame["kept"].sum() == 3


def test_cli_filter(cache, tiny_model, capsys):
    from cartomap.cli import main

    run = make_run(cache, model=tiny_model, n=40)
    save_checkpoints(run, tiny_model, epochs=2)
    write_generated(run, "b1", generated_rows(run, 2))
    code = main(
        [
            "--cache",
            str(cache),
            "filter",
            run.id,
            "--batch",
            "b1",
            "--keep-fraction",
            "1.0",
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    assert "6 of 6 kept" in capsys.readouterr().out
    assert batches.load_report(run, "b1")["config"]["keep_fraction"] == 1.0
    assert main(["--cache", str(cache), "filter", run.id, "--batch", "missing"]) == 2
    assert "no generated batch" in capsys.readouterr().err
