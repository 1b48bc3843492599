"""The detector registry (cartomap.scores.detectors): every detector ranks planted label flips first."""

from __future__ import annotations

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.scores import consensus, detectors
from cartomap.scores.metrics import compute_metrics
from cartomap.scores.stability import seed_table

N, C, E = 300, 3, 4


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
    return noisy, flipped, dyn, oof, seeds, metrics


def test_every_detector_ranks_the_planted_flips_first(planted):
    noisy, flipped, dyn, oof, seeds, _ = planted
    inputs = detectors.DetectorInputs(labels=noisy, dynamics=dyn, oof_logits=oof, seeds=seeds)
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
    noisy, _, dyn, _, _, metrics = planted
    from_dyn = detectors.DetectorInputs(labels=noisy, dynamics=dyn)
    from_metrics = detectors.DetectorInputs(labels=noisy, metrics=metrics)
    assert detectors.available(from_metrics) == ["datamap_confidence", "aum", "el2n", "forgetting"]
    for name in detectors.available(from_metrics):
        np.testing.assert_allclose(
            detectors.score(name, from_metrics), detectors.score(name, from_dyn), rtol=1e-5, atol=1e-6
        )


def test_availability_follows_the_inputs(planted):
    noisy, _, dyn, oof, _, _ = planted
    assert detectors.available(detectors.DetectorInputs(labels=noisy, oof_logits=oof)) == [
        "oof_margin",
        "oof_self_confidence",
        "cleanlab_self_confidence",
        "consensus_p1g0",
    ]
    with pytest.raises(DataError, match="needs seeds"):
        detectors.score("seed_spread", detectors.DetectorInputs(labels=noisy, dynamics=dyn))
    with pytest.raises(DataError, match="unknown detector"):
        detectors.get("magic")


def test_consensus_score_selects_what_the_rule_selects(planted):
    noisy, _, _, oof, _, _ = planted
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
        assert d.needs in (detectors.DYNAMICS, detectors.OOF, detectors.SEEDS)
    assert set(detectors.descriptions()) == set(detectors.NAMES)
