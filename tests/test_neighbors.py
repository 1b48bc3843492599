"""Same-label nearest neighbours, seed selection, neighbour groups and 2-D projections."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis.datamap import AXIS_COLUMNS
from cartomap.analysis.neighbours import (
    labelled_by_name,
    neighbour_group,
    same_label_neighbors,
    seed_examples,
)
from cartomap.analysis.projection import load_projection, project, project_run
from cartomap.config import DataConfig, RunConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import RunStore
from cartomap.scores.metrics import RegionRule, region_partition
from cartomap.training.embeddings import load_embeddings, save_embeddings


def unit(angles_deg):
    a = np.radians(np.asarray(angles_deg, dtype=np.float64))
    return np.stack([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


# --------------------------------------------------------------------------- hand-made cases
def test_known_neighbours_on_a_circle():
    # points on the unit circle: cosine similarity falls with the angle between them
    emb = unit([0, 10, 25, 45, 90, 180])
    labels = np.zeros(6, dtype=int)
    idx, sims = same_label_neighbors(emb, labels, k=3)
    assert idx[0].tolist() == [1, 2, 3]
    assert idx[1].tolist() == [0, 2, 3]
    assert idx[4].tolist() == [3, 2, 1]
    assert idx[5].tolist() == [4, 3, 2]
    np.testing.assert_allclose(sims[0], np.cos(np.radians([10, 25, 45])), atol=1e-6)
    assert np.all(np.diff(sims, axis=1) <= 0)  # most similar first


def test_scale_does_not_matter_cosine():
    emb = unit([0, 10, 25, 45]) * np.array([[1.0], [7.0], [0.1], [3.0]], dtype=np.float32)
    idx, _ = same_label_neighbors(emb, np.zeros(4, dtype=int), k=2)
    assert idx[0].tolist() == [1, 2]


def test_same_label_restriction_and_self_excluded():
    emb = unit([0, 1, 2, 30, 60, 90])
    labels = np.array([0, 1, 1, 0, 1, 0])
    idx, sims = same_label_neighbors(emb, labels, k=2)
    # row 0 (label 0): 1 and 2 are nearer but have label 1
    assert idx[0].tolist() == [3, 5]
    assert idx[1].tolist() == [2, 4]
    for q in range(6):
        assert q not in idx[q]
        assert np.all(labels[idx[q]] == labels[q])


def test_self_excluded_even_with_duplicates():
    emb = unit([0, 0, 0, 50])
    idx, sims = same_label_neighbors(emb, np.zeros(4, dtype=int), k=2)
    for q in range(3):
        assert q not in idx[q]
        assert set(idx[q]) == ({0, 1, 2} - {q})
        np.testing.assert_allclose(sims[q], 1.0, atol=1e-6)


def test_too_few_candidates_padded():
    emb = unit([0, 20, 40, 60])
    labels = np.array([0, 0, 1, 2])
    idx, sims = same_label_neighbors(emb, labels, k=3)
    assert idx[0].tolist() == [1, -1, -1]
    assert np.isnan(sims[0, 1:]).all()
    assert idx[3].tolist() == [-1, -1, -1]


def test_query_subset_and_candidate_mask_and_blocks():
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(300, 16)).astype(np.float32)
    labels = rng.integers(0, 3, size=300)
    full_idx, full_sims = same_label_neighbors(emb, labels, k=5)
    q = np.array([7, 3, 250, 3])
    idx, sims = same_label_neighbors(emb, labels, k=5, query_idx=q, block=2)
    np.testing.assert_array_equal(idx, full_idx[q])
    np.testing.assert_allclose(sims, full_sims[q], atol=1e-6)
    mask = np.arange(300) % 2 == 0
    idx, _ = same_label_neighbors(emb, labels, k=5, candidate_mask=mask)
    assert np.all(idx % 2 == 0)
    assert np.all(labels[idx] == labels[:, None])


def test_bad_arguments():
    emb = np.zeros((4, 3), dtype=np.float32)
    with pytest.raises(ValueError):
        same_label_neighbors(emb, np.zeros(3, dtype=int))
    with pytest.raises(ValueError):
        same_label_neighbors(emb, np.zeros(4, dtype=int), k=0)
    with pytest.raises(IndexError):
        same_label_neighbors(emb, np.zeros(4, dtype=int), query_idx=[4])


def test_matches_sklearn_per_label():
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(0)
    n, k = 2000, 4
    emb = rng.normal(size=(n, 64)).astype(np.float32)
    labels = rng.integers(0, 3, size=n)
    idx, sims = same_label_neighbors(emb, labels, k=k, block=257)
    same = 0
    for label in range(3):
        members = np.flatnonzero(labels == label)
        nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine").fit(emb[members])
        dist, pos = nn.kneighbors(emb[members])
        for row, q in enumerate(members):
            found = [members[p] for p in pos[row] if members[p] != q][:k]
            same += set(found) == set(idx[q])
            np.testing.assert_allclose(np.sort(1 - dist[row][pos[row] != row])[::-1][:k], sims[q], atol=1e-5)
    assert same == n


# --------------------------------------------------------------------------- seeds
def test_seed_examples_per_label_top_quarter():
    labels = np.repeat([0, 1], 8)
    variability = np.concatenate([np.arange(8) / 100, 0.3 + np.arange(8) / 100])
    metrics = pd.DataFrame({"label": labels, "variability": variability})
    seeds = seed_examples(metrics)
    # 2 of 8 per label above the 0.75 quantile, even though every label-1 value beats label 0
    assert seeds.tolist() == [6, 7, 14, 15]
    assert seed_examples(metrics, labels=labels, quantile=0.5).tolist() == [4, 5, 6, 7, 12, 13, 14, 15]


def test_seed_examples_exclude_genre():
    labels = np.zeros(8, dtype=int)
    variability = np.arange(8) / 10
    genres = ["fiction"] * 4 + ["telephone"] * 4
    metrics = pd.DataFrame({"label": labels, "variability": variability})
    seeds = seed_examples(metrics, exclude_genres=("telephone",), genres=genres)
    assert seeds.tolist() == [3]
    with pytest.raises(CartomapError):
        seed_examples(metrics, exclude_genres=("telephone",))


# --------------------------------------------------------------------------- run-level
@pytest.fixture()
def run_with_embeddings(tmp_path):
    data = load_dataset(DataConfig(path="demo:dev"))
    run = RunStore(tmp_path / "cache").create(
        RunConfig(data=DataConfig(path="demo:dev"), dev=None), data, None
    )
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(len(data), 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    save_embeddings(run, data.ids, emb)
    return run, data, emb


def test_neighbour_group_order(run_with_embeddings):
    run, data, emb = run_with_embeddings
    seed = 5
    group = neighbour_group(run, data.ids[seed], k=4)
    assert len(group) == 5
    assert group["role"].tolist() == ["neighbour"] * 4 + ["seed"]
    assert group["id"].iloc[-1] == data.ids[seed]
    assert group["similarity"].iloc[-1] == 1.0
    assert np.all(np.diff(group["similarity"].to_numpy()[:-1]) >= 0)  # increasing, seed last
    assert (group["label"] == data.labels[seed]).all()
    assert {"premise", "hypothesis", "label_name", "position"} <= set(group.columns)
    expected, _ = same_label_neighbors(emb, data.labels, k=4, query_idx=[seed])
    assert set(group["id"][:-1]) == {data.ids[i] for i in expected[0]}
    shown = labelled_by_name(group)
    assert shown["label"].tolist() == [run.label_names[data.labels[seed]]] * 5 and "label_name" not in shown
    assert shown.columns.tolist() == [c for c in group.columns if c != "label_name"]
    with pytest.raises(CartomapError):
        neighbour_group(run, "no-such-id")


def test_neighbour_group_needs_embeddings(tmp_path):
    data = load_dataset(DataConfig(path="demo:dev"))
    run = RunStore(tmp_path / "c").create(RunConfig(data=DataConfig(path="demo:dev"), dev=None), data, None)
    assert load_embeddings(run) is None
    with pytest.raises(RunError):
        neighbour_group(run, data.ids[0])


def test_neighbour_group_adds_metrics(run_with_embeddings):
    run, data, _ = run_with_embeddings
    n = len(data)
    default = RegionRule()
    metrics = pd.DataFrame(
        {
            "id": data.ids,
            "label": data.labels,
            "variability": np.linspace(0, 0.4, n),
            default.axis: np.linspace(0, 0.4, n)[np.random.default_rng(1).permutation(n)],
            "confidence": 0.5,
            "region": "ambiguous",
        }
    )
    atomic_write_parquet(run.path / "metrics.parquet", metrics)
    group = neighbour_group(run, data.ids[0], k=2)
    assert group["variability"].notna().all() and group[default.axis].notna().all()
    # regions are drawn by the default rule (by rank on its axis: the top third is ambiguous), not as saved
    ranked = region_partition(metrics["confidence"], metrics[default.axis], default)
    expected = pd.Series(ranked, index=metrics["id"].astype(str)).reindex(group["id"])
    assert group["region"].tolist() == expected.tolist()


def test_neighbour_group_of_metrics_without_the_default_axis_keeps_their_regions(run_with_embeddings):
    """Metrics written before the default axis's score existed, with no dynamics to compute it from: the
    group still has their metrics, and the regions they were saved with."""
    run, data, _ = run_with_embeddings
    others = [a for a in AXIS_COLUMNS if a != RegionRule().axis]
    metrics = pd.DataFrame(
        {
            "id": data.ids,
            "label": data.labels,
            **{axis: np.linspace(0, 0.4, len(data)) for axis in others},
            "confidence": 0.5,
            "region": np.where(np.arange(len(data)) % 2 == 0, "ambiguous", "easy-to-learn"),
        }
    )
    atomic_write_parquet(run.path / "metrics.parquet", metrics)
    group = neighbour_group(run, data.ids[0], k=2)
    assert RegionRule().axis not in group.columns and all(group[a].notna().all() for a in others)
    saved = metrics.set_index("id")["region"].reindex(group["id"])
    assert group["region"].tolist() == saved.tolist()


def test_pca_projection_cached(run_with_embeddings):
    run, data, emb = run_with_embeddings
    coords = project(emb, "pca")
    assert coords.shape == (len(data), 2) and coords.dtype == np.float32
    assert load_projection(run, "pca") is None
    cached = project_run(run, "pca")
    np.testing.assert_allclose(cached, coords, atol=1e-5)
    np.testing.assert_array_equal(load_projection(run, "pca"), cached)
    assert (run.path / "tasks" / "projection_pca.json").exists()
    with pytest.raises(CartomapError):
        project(emb, "tsne")


@pytest.mark.slow
def test_umap_projection(run_with_embeddings):
    run, data, _ = run_with_embeddings
    coords = project_run(run, "umap")
    assert coords.shape == (len(data), 2) and np.isfinite(coords).all()
    assert load_projection(run, "umap") is not None
