"""WaNLI prompts (Stage 2): the exact prompt text, label words, the completion parser, and Stage 1 groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_write_parquet
from cartomap.runs.groups import list_groups, load_group, save_group
from cartomap.runs.store import Run, RunStore
from cartomap.training.embeddings import save_embeddings
from cartomap.wanli.exemplars import (
    auto_groups,
    collect_groups,
    group_examples,
    in_context_examples,
    save_auto_groups,
)
from cartomap.wanli.prompts import (
    PromptTemplate,
    build_prompt,
    count_tokens,
    label_words_for,
    parse_completion,
)

GROUP = [
    ("A man is playing a guitar on stage.", "A man is performing music."),
    ("Two dogs run through a snowy field.", "Animals are outside."),
    ("A woman reads a book in the park.", "Someone is reading."),
    ("Children are building a sandcastle.", "Kids are at play."),
    ("The chef is slicing onions in a kitchen.", "Food is being prepared."),
]

EXPECTED_ENTAILMENT = (
    "Write a pair of sentences that have the same relationship as the previous examples. Examples:\n"
    "\n"
    "1. A man is playing a guitar on stage.\n"
    "Implication: A man is performing music.\n"
    "\n"
    "2. Two dogs run through a snowy field.\n"
    "Implication: Animals are outside.\n"
    "\n"
    "3. A woman reads a book in the park.\n"
    "Implication: Someone is reading.\n"
    "\n"
    "4. Children are building a sandcastle.\n"
    "Implication: Kids are at play.\n"
    "\n"
    "5. The chef is slicing onions in a kitchen.\n"
    "Implication: Food is being prepared.\n"
    "\n"
    "6."
)


# --------------------------------------------------------------------------- the prompt
def test_prompt_is_the_wanli_format_byte_for_byte():
    prompt = build_prompt(GROUP, "entailment", PromptTemplate())
    assert prompt == EXPECTED_ENTAILMENT
    assert prompt.encode("utf-8") == EXPECTED_ENTAILMENT.encode("utf-8")
    assert prompt.endswith("\n\n6.")  # the bare next number: no trailing space or newline


def test_prompt_words_per_label_and_edits():
    neutral = build_prompt(GROUP[:2], "neutral")
    assert neutral == (
        "Write a pair of sentences that have the same relationship as the previous examples. Examples:\n\n"
        "1. A man is playing a guitar on stage.\nPossibility: A man is performing music.\n\n"
        "2. Two dogs run through a snowy field.\nPossibility: Animals are outside.\n\n"
        "3."
    )
    assert "\nContradiction: Animals are outside.\n\n3." in build_prompt(GROUP[:2], "contradiction")
    custom = PromptTemplate(instruction="Copy the pattern.", label_words={"entailment": "Therefore"})
    assert build_prompt(GROUP[:1], "entailment", custom) == (
        "Copy the pattern.\n\n1. A man is playing a guitar on stage.\nTherefore: A man is performing music.\n\n2."
    )
    with pytest.raises(CartomapError, match="no separator word for label 'neutral'"):
        build_prompt(GROUP[:1], "neutral", custom)


def test_line_breaks_in_the_data_cannot_break_the_format():
    prompt = build_prompt([("First line.\n\nSecond line.", "A\r\nB")], "entailment")
    assert prompt.endswith("1. First line. Second line.\nImplication: A B\n\n2.")


def test_label_words_for_ronli_labels_need_custom_words():
    assert label_words_for(["entailment", "neutral", "contradiction"]) == {
        "entailment": "Implication",
        "neutral": "Possibility",
        "contradiction": "Contradiction",
    }
    ronli = ["contrastive", "entailment", "reasoning", "neutral"]
    with pytest.raises(CartomapError) as err:
        label_words_for(ronli)
    message = str(err.value)
    assert "'contrastive'" in message and "'reasoning'" in message
    assert "'entailment'" not in message.split(":")[0]
    words = label_words_for(ronli, {"contrastive": "However", "reasoning": "Because"})
    assert words == {
        "contrastive": "However",
        "entailment": "Implication",
        "reasoning": "Because",
        "neutral": "Possibility",
    }
    with pytest.raises(CartomapError, match="one line"):
        PromptTemplate(label_words={"entailment": "Im\nplication"})


def test_count_tokens_uses_the_tokenizer():
    class Words:
        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": text.split()}

    assert count_tokens("a b c", Words()) == 3


# --------------------------------------------------------------------------- the parser
@pytest.mark.parametrize(
    "text, expected",
    [
        (" A cat sleeps.\nImplication: An animal rests.", ("A cat sleeps.", "An animal rests.")),
        (
            " A cat sleeps.\nImplication: An animal rests.\n\n7. More text\nImplication: x",
            ("A cat sleeps.", "An animal rests."),
        ),
        (" A cat sleeps.\nImplication: An animal rests.\n", ("A cat sleeps.", "An animal rests.")),
        (" A cat sleeps. Implication: An animal rests.", None),  # no separator line
        (" A cat sleeps.\nPossibility: An animal rests.", None),  # another label's word
        (" A.\nImplication: B.\nImplication: C.", None),  # two separators
        (" A cat sleeps.\n\nImplication: An animal rests.", None),  # the blank line cuts the separator off
        ("", None),
        ("\n\n", None),
    ],
)
def test_parse_completion(text, expected):
    assert parse_completion(text, "Implication") == expected


# --------------------------------------------------------------------------- Stage 1 groups
def unit(angles_deg) -> np.ndarray:
    a = np.radians(np.asarray(angles_deg, dtype=np.float64))
    return np.stack([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


def make_run(cache: Path, n: int = 12) -> Run:
    """A finished run on the first ``n`` demo dev pairs with hand-made labels, variability and embeddings.

    Label 0 (entailment) rows 0..5 on a circle at angles 0, 10, 20, 35, 55, 80 degrees; label 1
    (neutral) rows 6..11 at 0.5, 12, 22, 30, 50, 170. Row 0 and row 6 are the most variable of
    their label; row 3 is of the telephone genre.
    """
    data = load_dataset(DataConfig(path="demo:dev"))
    frame = data.frame.iloc[:n].copy()
    frame["label"] = [0] * 6 + [1] * 6
    frame["genre"] = ["snli"] * n
    frame.loc[frame.index[3], "genre"] = "telephone"
    path = cache / "mini.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.assign(label=[data.label_names[v] for v in frame["label"]]).drop(
        columns=["bert_runs_correct_of_100"], errors="ignore"
    ).to_json(path, orient="records", lines=True)
    config = DataConfig(path=str(path), label_names=data.label_names)
    mini = load_dataset(config)
    run = RunStore(cache).create(RunConfig(data=config, dev=None, train=TrainConfig(epochs=2)), mini, None)
    ids = mini.ids
    variability = np.array([0.40, 0.10, 0.05, 0.30, 0.02, 0.01, 0.35, 0.03, 0.02, 0.01, 0.04, 0.04])
    metrics = run.examples()[["id", "label"]].copy()
    metrics["confidence"] = 0.5
    metrics["variability"] = variability[:n]
    atomic_write_parquet(run.path / "metrics.parquet", metrics)
    run.set_status(state="done", progress=1.0)
    angles = [0, 10, 20, 35, 55, 80, 0.5, 12, 22, 30, 50, 170]
    save_embeddings(run, ids, unit(angles[:n]))
    return run


def test_collect_groups_seeds_neighbours_and_order(cache):
    run = make_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    # 0.75 quantile per label: label 0 seeds = {row 0} (row 3 is telephone: neither seed nor neighbour),
    # label 1 seeds = {row 6}; k = 3 neighbours of the same label, seed last
    groups = collect_groups(run, k=3, quantile=0.75, exclude_genres=("telephone",), query=None)
    assert [g["seed"] for g in groups] == [ids[0], ids[6]]
    assert groups[0]["ids"] == [ids[4], ids[2], ids[1], ids[0]]  # 55, 20, 10 degrees away, then the seed
    assert groups[1]["ids"] == [ids[9], ids[8], ids[7], ids[6]]
    assert groups[0]["label_name"] == "entailment" and groups[1]["label_name"] == "neutral"
    np.testing.assert_allclose(groups[0]["similarities"], np.cos(np.radians([55, 20, 10, 0])), atol=1e-5)
    # without excluding telephone, row 3 (35 degrees) is a neighbour and row 3 may be a seed
    groups = collect_groups(run, k=3, quantile=0.75, exclude_genres=(), query=None)
    assert groups[0]["ids"] == [ids[3], ids[2], ids[1], ids[0]]


def test_collect_groups_reference_query_window(cache):
    run = make_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    # the 5 nearest of any label (seed included) around row 0 are rows 0, 6 (0.5), 1 (10), 7 (12), 2 (20):
    # only 2 same-label neighbours, so the seed is skipped with k = 3 ...
    groups = collect_groups(run, k=3, exclude_genres=("telephone",), query=5)
    assert ids[0] not in [g["seed"] for g in groups]
    # ... and kept with k = 2
    groups = collect_groups(run, k=2, exclude_genres=("telephone",), query=5)
    first = next(g for g in groups if g["seed"] == ids[0])
    assert first["ids"] == [ids[2], ids[1], ids[0]]
    # a seed with fewer than k same-label neighbours is skipped (4 and 5 others per label here)
    assert collect_groups(run, k=6, exclude_genres=("telephone",), query=None) == []


def test_save_auto_groups_and_group_examples(cache):
    run = make_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    save_group(run, "mine", [ids[1], ids[4], ids[2]], source="selection")
    groups = collect_groups(run, k=3, exclude_genres=("telephone",), query=None)
    assert save_auto_groups(run, groups, settings={"k": 3}) == 2
    saved = auto_groups(run)
    assert [g["name"] for g in saved] == [groups[0]["name"], groups[1]["name"]]
    assert saved[0]["source"] == "auto" and saved[0]["ids"] == groups[0]["ids"]
    assert saved[0]["seed"] == ids[0] and saved[0]["settings"] == {"k": 3}
    frame = group_examples(run, load_group(run, groups[0]["name"]))
    assert frame["id"].tolist() == groups[0]["ids"]
    assert frame["role"].tolist() == ["example"] * 3 + ["seed"]
    assert set(frame.columns) >= {"premise", "hypothesis", "label_name", "similarity"}
    # a hand-made group: its last id is the seed, the others by increasing similarity to it
    mine = group_examples(run, load_group(run, "mine"))
    assert mine["id"].tolist() == [ids[4], ids[1], ids[2]]
    # collecting again replaces the automatic groups, never the hand-made ones
    save_auto_groups(run, groups[:1])
    assert len(auto_groups(run)) == 1 and "mine" in {g["name"] for g in list_groups(run)}


def test_hand_made_group_without_embeddings_and_mixed_labels(cache):
    run = make_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    (run.path / "embeddings.npy").unlink()
    group = save_group(
        run, "mixed", [ids[2], ids[7], ids[1], ids[5]], source="selection", extra={"seed": ids[1]}
    )
    frame = group_examples(run, group)
    assert frame["id"].tolist() == [ids[2], ids[7], ids[5], ids[1]]  # as stored, the seed moved last
    assert frame["similarity"].isna().all()
    used = in_context_examples(frame, max_examples=2)  # the seed's label only, the closest two
    assert used["id"].tolist() == [ids[5], ids[1]] and used["position"].tolist() == [1, 2]


def test_collect_groups_by_another_ambiguity_score(cache):
    """WaNLI's seeds are the most variable per label; ``score`` picks them by another ambiguity score."""
    import pandas as pd

    run = make_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    metrics = pd.read_parquet(run.metrics_path())
    # mean entropy ranks row 1 first among label 0 and row 7 among label 1 (variability: rows 0 and 6)
    metrics["mean_entropy"] = [0.1, 0.9, 0.2, 0.3, 0.1, 0.1, 0.1, 0.8, 0.2, 0.1, 0.2, 0.1]
    atomic_write_parquet(run.metrics_path(), metrics)
    groups = collect_groups(
        run, k=3, quantile=0.75, exclude_genres=("telephone",), query=None, score="mean_entropy"
    )
    assert [g["seed"] for g in groups] == [ids[1], ids[7]]
    assert groups[0]["score"] == "mean_entropy" and groups[0]["seed_score"] == pytest.approx(0.9)
    assert groups[0]["seed_variability"] == pytest.approx(0.10)
    with pytest.raises(RunError, match="no margin_gap score"):
        collect_groups(run, k=3, query=None, score="margin_gap")
