"""The detector registry (cartomap.scores.detectors): every detector ranks planted label flips first."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.errors import DataError
from cartomap.scores import consensus, detectors
from cartomap.scores.metrics import compute_metrics
from cartomap.scores.stability import seed_table

N, C, E = 300, 3, 4
EMBEDDINGS = None  # set by the planted fixture


def _dynamics(rng, true, noisy, flipped, memorise: np.ndarray) -> np.ndarray:
    """[E, N, C]: the true class learned over the epochs; flipped examples' noisy label memorised at
    ``memorise`` per epoch."""
    out = []
    for e in range(E):
        z = rng.normal(0, 0.7, size=(N, C))
        z[np.arange(N), true] += 1.0 + 1.2 * e
        z[np.arange(N), noisy] += np.where(flipped, memorise * e, 0.0)
        out.append(z)
    return np.stack(out)


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(7)
    true = rng.integers(0, C, size=N)
    flipped = np.zeros(N, dtype=bool)
    flipped[rng.choice(N, size=20, replace=False)] = True
    # a flip from entailment to... keep half of them P1G0-like: true neutral, noisy entailment
    noisy = true.copy()
    idx = np.flatnonzero(flipped)
    noisy[idx] = (true[idx] + rng.integers(1, C, size=idx.size)) % C
    noisy[idx[:10]] = 0
    true[idx[:10]] = 1
    dyn = _dynamics(rng, true, noisy, flipped, np.full(N, 0.4))
    oof = rng.normal(0, 0.7, size=(N, C))
    oof[np.arange(N), true] += 3.0
    frames = {}
    for s in range(3):
        d = _dynamics(np.random.default_rng(100 + s), true, noisy, flipped, rng.uniform(0, 2.5, size=N))
        frames[s] = compute_metrics(d, noisy, [f"x{i}" for i in range(N)])
    seeds = seed_table(frames)
    metrics = compute_metrics(dyn, noisy, [f"x{i}" for i in range(N)])
    # three "fold models", each trained on two thirds of the examples (in-sample dynamics)
    ids = [f"x{i}" for i in range(N)]
    fold_of = np.arange(N) % 3
    fold_frames = []
    for f in range(3):
        d = _dynamics(np.random.default_rng(200 + f), true, noisy, flipped, np.full(N, 0.5))
        part = compute_metrics(d, noisy, ids)
        fold_frames.append(part[fold_of != f])
    folds = detectors.fold_table(fold_frames, ids)
    # [CLS]-like vectors clustered by the TRUE class: a flipped example sits among examples of its true
    # class, so its neighbours are labelled otherwise
    vectors = np.eye(C)[true] * 3.0 + rng.normal(0, 0.5, size=(N, C))
    global EMBEDDINGS
    EMBEDDINGS = vectors
    return noisy, flipped, dyn, oof, seeds, metrics, folds


def test_every_detector_ranks_the_planted_flips_first(planted):
    noisy, flipped, dyn, oof, seeds, _, folds = planted
    sentences = (
        np.arange(len(noisy)) // 3
    )  # units grouped as a token run's words are, for cleanlab's token scores
    inputs = detectors.DetectorInputs(
        labels=noisy,
        dynamics=dyn,
        oof_logits=oof,
        seeds=seeds,
        folds=folds,
        embeddings=EMBEDDINGS,
        sentences=sentences,
    )
    assert detectors.available(inputs) == list(detectors.NAMES)
    table = detectors.score_all(inputs)
    assert list(table.columns) == list(detectors.NAMES)
    for name in detectors.NAMES:
        s = table[name].to_numpy()
        assert np.all(np.isfinite(s)), name
        assert s[flipped].mean() > s[~flipped].mean(), name
        # and as a ranking: the flips' mean rank is in the top half
        ranks = np.argsort(np.argsort(-s))
        assert ranks[flipped].mean() < N / 2, name


def test_metric_columns_stand_in_for_the_dynamics(planted):
    noisy, _, dyn, _, _, metrics, _ = planted
    from_dyn = detectors.DetectorInputs(labels=noisy, dynamics=dyn)
    from_metrics = detectors.DetectorInputs(labels=noisy, metrics=metrics)
    assert detectors.available(from_metrics) == ["datamap_confidence", "aum", "el2n", "forgetting"]
    for name in detectors.available(from_metrics):
        np.testing.assert_allclose(
            detectors.score(name, from_metrics), detectors.score(name, from_dyn), rtol=1e-5, atol=1e-6
        )


def test_availability_follows_the_inputs(planted):
    noisy, _, dyn, oof, _, _, folds = planted
    assert detectors.available(detectors.DetectorInputs(labels=noisy, oof_logits=oof)) == [
        "oof_margin",
        "oof_self_confidence",
        "cleanlab_self_confidence",
        "consensus_p1g0",
    ]
    both = detectors.DetectorInputs(labels=noisy, oof_logits=oof, folds=folds)
    assert "rank_oof_folds" in detectors.available(both)
    assert "rank_oof_dynamics" not in detectors.available(both)  # needs Model 0's dynamics too
    with pytest.raises(DataError, match="needs oof and folds"):
        detectors.score("rank_oof_folds", detectors.DetectorInputs(labels=noisy, oof_logits=oof))
    with pytest.raises(DataError, match="needs seeds"):
        detectors.score("seed_spread", detectors.DetectorInputs(labels=noisy, dynamics=dyn))
    with pytest.raises(DataError, match="unknown detector"):
        detectors.get("magic")


def test_consensus_score_selects_what_the_rule_selects(planted):
    noisy, _, _, oof, _, _, _ = planted
    s = detectors.score("consensus_p1g0", detectors.DetectorInputs(labels=noisy, oof_logits=oof))
    for t in (0.0, 0.5, 2.0):
        rule = consensus.select_suspects(oof, noisy, categories=("P1G0",), threshold=t)
        np.testing.assert_array_equal(s > t, rule)


def test_oof_scores_by_hand():
    z = np.array([[2.0, 0.0, 0.0], [0.0, 3.0, 1.0]])
    y = np.array([1, 1])
    inputs = detectors.DetectorInputs(labels=y, oof_logits=z)
    assert detectors.score("oof_margin", inputs).tolist() == [2.0, -2.0]
    p0 = np.exp(0.0) / (np.exp(2.0) + 2)
    assert detectors.score("oof_self_confidence", inputs)[0] == pytest.approx(1 - p0)
    np.testing.assert_allclose(
        detectors.score("cleanlab_self_confidence", inputs), detectors.score("oof_self_confidence", inputs)
    )
    # row 0 is P0G1 (not the rule's category): negative; row 1 is correct: negative
    assert (detectors.score("consensus_p1g0", inputs) < 0).all()


def test_every_detector_documents_formula_and_direction():
    for name, d in detectors.REGISTRY.items():
        assert "s_i" in d.doc or "score" in d.doc, name
        assert "Higher" in d.doc, name
        assert set(d.needs) <= set(detectors.INPUT_KINDS)
    assert set(detectors.descriptions()) == set(detectors.NAMES)


def test_fold_table_by_hand():
    frames = [
        pd.DataFrame({"id": ["a", "b"], "confidence": [0.2, 0.6], "aum": [-1.0, 2.0]}),
        pd.DataFrame({"id": ["b", "c"], "confidence": [0.8, 0.5], "aum": [4.0, 0.0]}),
    ]
    table = detectors.fold_table(frames, ["c", "b", "a", "d"])
    assert table["id"].tolist() == ["c", "b", "a", "d"]
    assert table["fold_confidence"].tolist()[:3] == pytest.approx([0.5, 0.7, 0.2])
    assert table["fold_aum"].tolist()[:3] == pytest.approx([0.0, 3.0, -1.0])
    assert table["fold_models"].tolist() == [1, 2, 1, 0]
    assert np.isnan(table["fold_confidence"].iloc[3])  # in no fold's training part


def test_rank_average_by_hand():
    a = np.array([0.1, 0.9, 0.5, 0.3])  # ranks 1, 4, 3, 2
    b = np.array([4.0, 1.0, 3.0, 3.0])  # ranks 4, 1, 2.5, 2.5
    np.testing.assert_allclose(detectors.rank_average(a, b), [5 / 8, 5 / 8, 5.5 / 8, 4.5 / 8])
    # a missing score ranks as the least suspect
    np.testing.assert_allclose(detectors.rank_average(np.array([np.nan, 1.0, 2.0])), [1 / 3, 2 / 3, 1.0])
    with pytest.raises(DataError):
        detectors.rank_average(a, b[:3])
    with pytest.raises(DataError):
        detectors.rank_average()


def test_rank_ensembles_are_the_rank_mean_of_their_parts(planted):
    noisy, _, dyn, oof, _, _, folds = planted
    inputs = detectors.DetectorInputs(labels=noisy, dynamics=dyn, oof_logits=oof, folds=folds)
    margin = detectors.score("oof_margin", inputs)
    np.testing.assert_allclose(
        detectors.score("rank_oof_folds", inputs),
        detectors.rank_average(margin, detectors.score("fold_aum", inputs)),
    )
    np.testing.assert_allclose(
        detectors.score("rank_oof_dynamics", inputs),
        detectors.rank_average(margin, detectors.score("aum", inputs)),
    )


def test_neighbour_disagreement_by_hand():
    """Four points on a line (cosine on 2-D vectors): with k = 10 > N - 1 every other example counts."""
    vectors = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    labels = np.array([0, 0, 1, 0])
    s = detectors.score("neighbour_disagreement", detectors.DetectorInputs(labels=labels, embeddings=vectors))
    # each has 3 neighbours; labels of the others: 0 -> {0, 1, 0}, 1 -> {0, 1, 0}, 2 -> {0, 0, 0}, 3 -> {0, 0, 1}
    np.testing.assert_allclose(s, [1 / 3, 1 / 3, 1.0, 1 / 3])
    from cartomap.scores.knn import cosine_top_k

    idx, sims = cosine_top_k(vectors, np.array([0, 2]), k=2, block=1)  # blocks of one: the same answer
    assert idx.tolist() == [[1, 3], [3, 1]] and sims[0, 0] == pytest.approx(1 / np.sqrt(1.01))
    idx, _ = cosine_top_k(vectors, np.array([0]), k=5)
    assert idx.tolist() == [[1, 3, 2, -1, -1]]  # N - 1 < k: -1 beyond
    with pytest.raises(DataError, match="embeddings must be"):
        detectors.score(
            "neighbour_disagreement", detectors.DetectorInputs(labels=labels, embeddings=vectors[:3])
        )


def test_rank_logistic_is_the_weighted_sum_of_its_features_ranks(planted):
    noisy, flipped, dyn, oof, _, _, folds = planted
    inputs = detectors.DetectorInputs(labels=noisy, dynamics=dyn, oof_logits=oof, folds=folds)
    ranks = detectors.feature_ranks(inputs)
    assert list(ranks.columns) == list(detectors.FITTED_FEATURES)
    assert ranks.to_numpy().min() > 0 and ranks.to_numpy().max() <= 1
    np.testing.assert_allclose(ranks["aum"], detectors.rank_average(detectors.score("aum", inputs)))
    weights = {"oof_margin": 2.0, "aum": -1.0}  # weights by hand: 2 r(margin) - r(-AUM)
    expected = 2.0 * ranks["oof_margin"] - ranks["aum"]
    np.testing.assert_allclose(detectors.rank_logistic(inputs, weights), expected)
    assert "rank_logistic" not in detectors.NAMES  # fitted weights: a study's tool, not a registered detector
    with pytest.raises(DataError, match="one or more detectors"):
        detectors.rank_logistic(inputs, {})


def test_fit_rank_weights_finds_the_informative_score():
    """Feature a separates flips from clean rows, b is noise, c points the wrong way."""
    rng = np.random.default_rng(3)
    flipped = rng.random(2000) < 0.1
    a = np.where(flipped, rng.uniform(0.5, 1.0, 2000), rng.uniform(0.0, 0.8, 2000))
    b = rng.random(2000)
    c = np.where(flipped, rng.uniform(0.0, 0.5, 2000), rng.uniform(0.2, 1.0, 2000))
    w = detectors.fit_rank_weights(pd.DataFrame({"a": a, "b": b, "c": c}), flipped)
    assert list(w) == ["a", "b", "c"]
    assert w["a"] > 1.0 and w["c"] < -1.0 and abs(w["b"]) < 0.5 * min(w["a"], -w["c"])
    with pytest.raises(DataError, match="both"):
        detectors.fit_rank_weights(pd.DataFrame({"a": a}), np.zeros(2000, dtype=bool))
    with pytest.raises(DataError, match="one row"):
        detectors.fit_rank_weights(pd.DataFrame({"a": a[:10]}), flipped)


def test_every_detector_has_one_title_people_read():
    """The registry names each detector for people once (pages, menus, report tables ask it)."""
    titles = [detectors.title(name) for name in detectors.NAMES]
    assert all(titles) and len(set(titles)) == len(titles)
    assert detectors.title("aum") == "−AUM" and detectors.title("datamap_confidence") == "1 − confidence"
    with pytest.raises(DataError, match="unknown detector"):
        detectors.title("nope")
