"""Artifact analysis (WaNLI §4): lexical correlations, partial-input baselines, pair similarity, CLI."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis import artifacts as af
from cartomap.cli import main
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import from_frame, load_dataset
from cartomap.errors import DataError
from cartomap.runs.store import RunStore
from cartomap.runs.tasks import task_status
from cartomap.training.similarity import (
    encode_sentences,
    load_similarity,
    pair_similarity,
    similarity_by_label,
    similarity_run,
)

PAIRS = DataConfig(text_columns=("premise", "hypothesis"))


def pairs(rows: list[tuple[str, str, str]]) -> TextDataset:
    frame = pd.DataFrame(rows, columns=["premise", "hypothesis", "label"])
    return from_frame(frame, PAIRS, label_names=("entailment", "neutral", "contradiction"))


def artifact_pairs(n_premises: int = 30) -> TextDataset:
    """Every premise with one hypothesis per label; only contradictions say "not" (a pure artifact)."""
    rows = []
    for i in range(n_premises):
        premise = f"person {i} walks the dog number {i % 7} in the park"
        rows.append((premise, f"someone {i} is outside today", "entailment"))
        rows.append((premise, f"someone {i} is outside for fun", "neutral"))
        rows.append((premise, f"someone {i} is not outside", "contradiction"))
    return pairs(rows)


# --------------------------------------------------------------------------- words
def test_tokenize_words_keeps_inner_apostrophes_and_drops_punctuation():
    assert af.tokenize_words(["The man isn't sleeping.", "A dog's ball -- red!"]) == [
        ["the", "man", "isn't", "sleeping"],
        ["a", "dog's", "ball", "red"],
    ]
    assert af.tokenize_words(["Not NOW"], lowercase=False) == [["Not", "NOW"]]


# --------------------------------------------------------------------------- lexical correlations
# Labels A = 0, B = 1. By hand, words counted once per example, min_count 2 ("dog" is left out):
#   not: examples 0-4, n = 5: A 1, B 4    a: examples 0, 5, 6, n = 3: A 2, B 1    cat: 0, 5, n = 2: A 2
# p0 = 1/2, z = (p - 1/2) / sqrt(1/4 / n):
#   cat|A: p 1,   z = 0.5 / 0.353553 = 1.414214, one-sided p = 0.078650
#   not|B: p 0.8, z = 0.3 / 0.223607 = 1.341641, p = 0.089856
#   a|A:   p 2/3, z = 0.166667 / 0.288675 = 0.577350, p = 0.281851
# m = 3 words x 2 labels = 6 tests; alpha 0.5 -> threshold 0.5 / 6 = 0.083333: only cat|A is significant.
TINY_TEXTS = ["Not a cat.", "not", "NOT!", "not not", "not", "a cat", "a", "dog"]
TINY_LABELS = [0, 1, 1, 1, 1, 0, 1, 0]


def test_lexical_correlations_match_hand_computed_counts_z_and_significance():
    table = af.lexical_correlations(TINY_TEXTS, TINY_LABELS, ("A", "B"), min_count=2, alpha=0.5)
    assert list(table.columns) == list(af.LEXICAL_COLUMNS)
    assert len(table) == 6 and "dog" not in set(table["word"])
    rows = {(r.word, r.label): r for r in table.itertuples()}
    expected = {
        ("cat", "A"): (2, 1.0, 1.414214, 0.078650, True),
        ("not", "B"): (5, 0.8, 1.341641, 0.089856, False),
        ("a", "A"): (3, 2 / 3, 0.577350, 0.281851, False),
        ("not", "A"): (5, 0.2, -1.341641, 1 - 0.089856, False),
        ("cat", "B"): (2, 0.0, -1.414214, 1 - 0.078650, False),
        ("a", "B"): (3, 1 / 3, -0.577350, 1 - 0.281851, False),
    }
    for key, (count, p, z, p_value, significant) in expected.items():
        row = rows[key]
        assert row.count == count, key
        assert row.p_label == pytest.approx(p), key
        assert row.z == pytest.approx(z, abs=1e-6), key
        assert row.p_value == pytest.approx(p_value, abs=1e-6), key
        assert bool(row.significant) is significant, key
    assert table[["word", "label"]].iloc[0].tolist() == ["cat", "A"]  # highest z first
    assert table["z"].is_monotonic_decreasing


def test_lexical_correlations_bonferroni_counts_every_word_label_test():
    # Same data with alpha 0.5 but a min_count of 1 adds "dog": 8 tests, threshold 0.0625 < 0.07865.
    table = af.lexical_correlations(TINY_TEXTS, TINY_LABELS, ("A", "B"), min_count=1, alpha=0.5)
    assert len(table) == 8 and not table["significant"].any()


def test_lexical_correlations_reject_bad_labels():
    with pytest.raises(DataError, match="one label per text"):
        af.lexical_correlations(["a", "b"], [0], ("A", "B"))
    with pytest.raises(DataError, match="integer codes"):
        af.lexical_correlations(["a", "b"], [0, 2], ("A", "B"))


def test_significance_curve_values():
    # z_crit(0.01) = 2.326348: 1/3 + 2.326348 * sqrt((2/9) / 100) = 1/3 + 0.109665 = 0.442998
    # alpha 0.01 over 10 tests: z_crit(0.001) = 3.090232; n = 25: 1/3 + 3.090232 * 0.094281 = 0.624683
    assert af.significance_curve([100], 3, 0.01, 1)[0] == pytest.approx(0.442998, abs=1e-6)
    assert af.significance_curve([25], 3, 0.01, 10)[0] == pytest.approx(0.624683, abs=1e-6)
    curve = af.significance_curve([10, 100, 1000], 2, 0.01, 50)
    assert np.all(np.diff(curve) < 0) and np.all(curve > 0.5)  # falls towards p0 as n grows
    with pytest.raises(ValueError):
        af.significance_curve([0], 3, 0.01, 1)


def test_significant_points_lie_above_the_curve():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    labels = rng.integers(0, 3, 600)
    texts = [
        " ".join(rng.choice(words, 4)) + (" never" if y == 2 and rng.random() < 0.5 else "") for y in labels
    ]
    table = af.lexical_correlations(texts, labels, ("e", "n", "c"), min_count=5, alpha=0.01)
    curve = af.significance_curve(table["count"], 3, 0.01, len(table))
    assert (table["significant"] == (table["p_label"] > curve + 1e-12)).all()
    assert table.iloc[0][["word", "label"]].tolist() == ["never", "c"] and table.iloc[0]["significant"]


def test_lexical_figure_escapes_words_and_labels_and_draws_the_curve():
    table = pd.DataFrame(
        {
            "word": ["<script>x</script>", "a&b", "plain"],
            "label": ["<i>A</i>", "<i>A</i>", "B"],
            "count": [30, 40, 50],
            "p_label": [0.9, 0.5, 0.4],
            "z": [5.0, 1.0, -1.0],
            "p_value": [1e-7, 0.15, 0.84],
            "significant": [True, False, False],
        }
    )
    fig = af.lexical_figure(table, 0.01)
    hover = " ".join(" ".join(map(str, t.hovertext)) for t in fig.data if t.hovertext is not None)
    names = " ".join(str(t.name) for t in fig.data)
    assert "&lt;script&gt;x&lt;/script&gt;" in hover and "<script>" not in hover and "a&amp;b" in hover
    assert "<i>" not in hover + names and "&lt;i&gt;A&lt;/i&gt;" in names
    assert any(t.mode == "lines" for t in fig.data)
    assert fig.layout.xaxis.type == "log"
    points = [t for t in fig.data if t.mode == "markers"]
    assert sorted(len(t.x) for t in points) == [1, 2]


# --------------------------------------------------------------------------- baselines
def test_bow_baseline_separable_toy_set_and_majority():
    train = ["good great", "great fine good", "good", "bad awful", "awful bad terrible"]
    y_train = [0, 0, 0, 1, 1]
    test = ["great good", "terrible awful", "bad"]
    y_test = [0, 1, 1]
    result = af.bow_baseline(train, y_train, test, y_test, seed=0)
    assert result["accuracy"] == 1.0 and result["macro_f1"] == 1.0
    assert result["majority_accuracy"] == pytest.approx(1 / 3)  # always label 0, the most frequent in train
    assert (result["train_examples"], result["test_examples"]) == (5, 3)
    with pytest.raises(DataError, match="fewer than two classes"):
        af.bow_baseline(["a", "b"], [1, 1], ["a"], [1])


def test_split_keeps_each_premise_on_one_side():
    data = artifact_pairs(30)
    train, test = af.split_train_test(data, seed=0)
    assert len(train) + len(test) == len(data)
    assert not set(train.frame["premise"]) & set(test.frame["premise"])
    assert 0.1 < len(test) / len(data) < 0.3


def test_partial_input_baselines_find_the_hypothesis_artifact():
    table = af.partial_input_baselines(artifact_pairs(30), None, seed=0)
    assert list(table.columns) == list(af.BASELINE_COLUMNS)
    rows = table.set_index("input")
    assert list(rows.index) == ["hypothesis only", "premise only", "premise + hypothesis"]
    assert rows.loc["hypothesis only", "accuracy"] >= 0.6  # "not" gives every contradiction away
    # a premise says nothing about the label (each premise has all three), and none is seen in training
    assert rows.loc["premise only", "accuracy"] <= 0.5
    assert rows["chance"].tolist() == pytest.approx([1 / 3] * 3)
    assert (rows["train_examples"] + rows["test_examples"] == 90).all()


def test_partial_input_baselines_with_a_test_set_and_single_texts():
    data = artifact_pairs(30)
    table = af.partial_input_baselines(data, artifact_pairs(6), seed=0, balanced=False)
    assert (table["test_examples"] == 18).all() and (table["train_examples"] == 90).all()
    single = from_frame(
        pd.DataFrame(
            {"text": ["good", "fine good", "bad", "awful bad"] * 3, "label": ["pos", "pos", "neg", "neg"] * 3}
        ),
        DataConfig(text_columns=("text",)),
    )
    out = af.partial_input_baselines(single, None, seed=0)
    assert out["input"].tolist() == ["text"] and out["accuracy"].iloc[0] == 1.0


# --------------------------------------------------------------------------- transformer baseline config
def test_hypothesis_only_config_is_an_ordinary_run_on_a_balanced_sample(cache):
    data = pairs(
        [
            (f"p{i}", f"h{i}", lab)
            for i, lab in enumerate(["entailment"] * 10 + ["neutral"] * 6 + ["contradiction"] * 8)
        ]
    )
    base = RunConfig(
        data=DataConfig(path="x.jsonl"), dev=None, train=TrainConfig(epochs=2, seed=3), name="base"
    )
    config = af.hypothesis_only_config(base, data, cache)
    assert config.data.text_columns == ("text",) and config.dev.text_columns == ("text",)
    assert config.data.path.startswith(str(cache / "datasets")) and config.name == "hypothesis-only · base"
    assert config.train == base.train and config.model == base.model
    train = load_dataset(config.data)
    dev = load_dataset(config.dev, label_names=train.label_names)
    # the premise is gone, not just unmapped: the training job must see single texts
    assert not train.is_pair and "premise" not in train.frame.columns
    assert train.frame["text"].str.startswith("h").all() and dev.frame["text"].str.startswith("h").all()
    counts = np.bincount(np.concatenate([train.labels, dev.labels]), minlength=3)
    assert counts.tolist() == [6, 6, 6]  # balanced to the smallest class, then 20% held out as dev
    assert not set(train.ids) & set(dev.ids) and set(train.ids) | set(dev.ids) <= set(data.ids)
    assert af.hypothesis_only_config(base, data, cache) == config  # same call, same run

    premise = af.hypothesis_only_config(base, data, cache, which="premise")
    assert premise.data.path != config.data.path
    assert load_dataset(premise.data).frame["text"].str.startswith("p").all()

    with_dev = af.hypothesis_only_config(base.replace(dev=DataConfig(path="demo:dev")), data, cache)
    demo_dev = load_dataset(DataConfig(path="demo:dev"))
    loaded = load_dataset(with_dev.dev, label_names=train.label_names)
    assert (
        loaded.ids == demo_dev.ids and loaded.frame["text"].tolist() == demo_dev.frame["hypothesis"].tolist()
    )
    single = from_frame(
        pd.DataFrame({"text": ["a", "b"], "label": ["x", "y"]}), DataConfig(text_columns=("text",))
    )
    with pytest.raises(DataError, match="premise/hypothesis pairs"):
        af.hypothesis_only_config(base, single, cache)


def test_find_run_matches_the_config_identity(cache):
    store = RunStore(cache)
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=1), name="a")
    run = store.create(config, data, None)
    assert af.find_run(store, config.replace(name="other name")).id == run.id
    assert af.find_run(store, config.replace(train=TrainConfig(epochs=2))) is None


# --------------------------------------------------------------------------- similarity
def test_pair_similarity_identical_symmetric_and_shape(tiny_model):
    premises = ["A man plays the guitar on a stage.", "Two dogs run.", "A child sleeps."]
    hypotheses = ["A man plays the guitar on a stage.", "Nobody is outside at all today.", "A kid is asleep."]
    sim = pair_similarity(premises, hypotheses, model=tiny_model, batch_size=2)
    assert sim.shape == (3,) and sim.dtype == np.float32
    assert sim[0] == pytest.approx(1.0, abs=1e-5)
    assert np.all(sim[1:] < 1.0 - 1e-4) and np.all(np.abs(sim) <= 1.0)
    back = pair_similarity(hypotheses, premises, model=tiny_model, batch_size=3)
    np.testing.assert_allclose(back, sim, atol=1e-6)
    assert pair_similarity([], [], model=tiny_model).shape == (0,)


def test_mean_pooling_ignores_padding(tiny_model):
    short = "A dog."
    alone = encode_sentences([short], model=tiny_model)
    padded = encode_sentences(
        [short, "a much longer sentence with many more words than the first"], model=tiny_model
    )
    np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)
    assert np.linalg.norm(alone[0]) == pytest.approx(1.0, abs=1e-5)


def test_similarity_by_label_summary():
    table = similarity_by_label([0.1, 0.2, 0.3, 0.9, 1.0], [0, 0, 0, 1, 1], ("a", "b", "c"))
    a, b, c = (table.iloc[i] for i in range(3))
    assert table["label"].tolist() == ["a", "b", "c"] and table["count"].tolist() == [3, 2, 0]
    assert a["mean"] == pytest.approx(0.2) and a["std"] == pytest.approx(0.1)  # sample std (ddof 1)
    assert (a["q25"], a["median"], a["q75"]) == pytest.approx((0.15, 0.2, 0.25))
    assert b["mean"] == pytest.approx(0.95) and b["std"] == pytest.approx(math.sqrt(0.005))
    assert (b["min"], b["max"]) == pytest.approx((0.9, 1.0))
    assert np.isnan(c["mean"])


def _tiny_run(cache, n: int = 12):
    data = load_dataset(DataConfig(path="demo:dev")).subset(np.arange(n))
    config = RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=1), name="sim")
    return RunStore(cache).create(config, data, None), data


def test_similarity_cli_writes_the_run_file_as_a_task(cache, tiny_model):
    run, data = _tiny_run(cache)
    code = main(
        ["--cache", str(cache), "similarity", run.id, "--model", tiny_model, "--device", "cpu", "--quiet"]
    )
    assert code == 0
    saved = load_similarity(run)
    assert saved["id"].tolist() == data.ids and list(saved.columns) == ["id", "similarity"]
    expected = pair_similarity(data.frame["premise"], data.frame["hypothesis"], model=tiny_model)
    np.testing.assert_allclose(saved["similarity"].to_numpy(), expected, atol=1e-5)
    status = task_status(run, "similarity")
    assert status["state"] == "done" and status["model"] == tiny_model
    mtime = (run.path / "similarity.parquet").stat().st_mtime_ns
    similarity_run(run, model=tiny_model, device="cpu")  # saved: not recomputed
    assert (run.path / "similarity.parquet").stat().st_mtime_ns == mtime


def test_artifacts_cli_writes_the_three_tables(tmp_path, tiny_model, capsys):
    data = artifact_pairs(20)
    frame = data.frame[["id", "premise", "hypothesis"]].assign(
        label=[data.label_names[k] for k in data.labels]
    )
    path = tmp_path / "nli.jsonl"
    frame.to_json(path, orient="records", lines=True)
    out = tmp_path / "out"
    args = [
        "artifacts",
        str(path),
        "--out",
        str(out),
        "--min-count",
        "5",
        "--model",
        tiny_model,
        "--device",
        "cpu",
    ]
    assert main(args) == 0
    lexical = pd.read_csv(out / "lexical_correlations.csv")
    assert list(lexical.columns) == list(af.LEXICAL_COLUMNS)
    top = lexical[lexical["word"] == "not"].iloc[0]  # ties at z 6.3 with "for", "fun", "today"
    assert (top["label"], top["count"], bool(top["significant"])) == ("contradiction", 20, True)
    baselines = pd.read_csv(out / "baselines.csv")
    assert baselines["input"].tolist() == ["hypothesis only", "premise only", "premise + hypothesis"]
    summary = pd.read_csv(out / "similarity_by_label.csv")
    assert summary["label"].tolist() == ["entailment", "neutral", "contradiction"]
    assert summary["count"].tolist() == [20, 20, 20]
    assert "significant" in capsys.readouterr().out
