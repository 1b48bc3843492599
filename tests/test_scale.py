"""What makes full-size datasets (550k pairs) fast, checked at small N: every fast path gives the
result of the plain one (fingerprints, JSONL reading, tokens, neighbours, projections, groups)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap.config import DataConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import from_frame

WEIRD = [
    'a "quoted" word',
    "back\\slash",
    "new\nline and\ttab",
    "\x01control\x1f",
    "é ü 漢字 😀",
    "line\u2028separator",
    "delete\x7f",
    "plain text",
]


def reference_fingerprint(data: TextDataset) -> str:
    """The fingerprint's definition, row by row: sha256 of a header line and one JSON list per row."""
    h = hashlib.sha256()
    header = {"label_names": list(data.label_names), "text_columns": list(data.text_columns)}
    h.update(json.dumps(header, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
    columns = [data.frame[c].tolist() for c in ("id", *data.text_columns)]
    labels = [data.label_names[i] for i in data.frame["label"].tolist()]
    for row in zip(*columns, labels, strict=True):
        h.update(json.dumps(list(row), ensure_ascii=False).encode("utf-8") + b"\n")
    return h.hexdigest()


def weird_dataset(n: int = 300, single: bool = False) -> TextDataset:
    rng = np.random.default_rng(0)
    texts = [WEIRD[i % len(WEIRD)] + f" {i}" for i in rng.permutation(n)]
    frame = pd.DataFrame({"id": [f'id"{i}\\' for i in range(n)], "label": rng.integers(0, 3, n)})
    if single:
        frame["text"] = texts
    else:
        frame["premise"], frame["hypothesis"] = texts, texts[::-1]
    return TextDataset(frame=frame, label_names=('ent"ail', "neutral", "contra\\"), source="t")


@pytest.mark.parametrize("single", [False, True])
def test_fingerprint_is_the_row_by_row_sha256(single, monkeypatch):
    import cartomap.data.dataset as dataset

    monkeypatch.setattr(dataset, "_HASH_BLOCK", 7)  # many blocks, a short last one
    data = weird_dataset(single=single)
    assert data.fingerprint() == reference_fingerprint(weird_dataset(single=single))


def test_fingerprint_of_non_string_values_takes_the_row_by_row_path():
    frame = pd.DataFrame({"id": [1, 2], "premise": ["a", "b"], "hypothesis": ["c", "d"], "label": [0, 1]})
    data = TextDataset(frame=frame, label_names=("x", "y"), source="t")
    assert data.fingerprint() == reference_fingerprint(data)  # ids as JSON numbers, not strings


def test_fingerprint_of_columns_in_several_arrow_chunks():
    """A derived set (a concat of two frames) holds Arrow-backed strings in several chunks."""
    a, b = weird_dataset(40), weird_dataset(30)
    frame = pd.concat([a.frame, b.frame.assign(id=b.frame["id"] + "b")], ignore_index=True)
    for column in ("id", "premise", "hypothesis"):
        frame[column] = frame[column].astype("string[pyarrow]")
    frame = pd.concat([frame.iloc[:25], frame.iloc[25:]], ignore_index=True)
    data = TextDataset(frame=frame, label_names=a.label_names, source="t")
    assert data.fingerprint() == reference_fingerprint(data)


def test_fingerprint_of_a_loaded_file_is_unchanged(tmp_path):
    """A run's id hashes the fingerprint: the value for a fixed file must never change."""
    rows = [
        {"id": f"p{i}", "premise": WEIRD[i], "hypothesis": WEIRD[-1 - i], "label": "neutral"}
        for i in range(8)
    ]
    rows[0]["label"] = "entailment"
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = from_frame(pd.read_json(path, lines=True, dtype=False), DataConfig(path=str(path)))
    assert data.fingerprint() == reference_fingerprint(data)


# --------------------------------------------------------------------------- JSON Lines through Arrow
JSONL_CASES = {
    "plain": b'{"id": "a", "premise": "p \\"q\\"", "hypothesis": "h\\u00e9", "label": "neutral"}\n'
    b'{"id": "b", "premise": "p2", "hypothesis": "h2", "label": "entailment", "extra": 1.5}\n',
    "no final newline, CRLF": b'{"id": 1, "label": 0, "x": true}\r\n{"id": 2, "label": 2, "x": null}',
    "missing keys": b'{"a": 1}\n{"b": "x"}\n{"a": 3, "b": "y"}\n',
    "all null column": b'{"a": null, "b": 1}\n{"a": null, "b": 2}\n',
}
FALLBACK_CASES = {
    "blank line": b'{"a": 1}\n\n{"a": 2}\n',
    "whitespace line": b'{"a": 1}\n  \t\n{"a": 2}\n',
    "mixed types": b'{"a": 1}\n{"a": "x"}\n',
    "nested": b'{"a": [1, 2]}\n{"a": [3]}\n',
    "timestamp-like text": b'{"a": "2020-01-01"}\n',
    "huge integer": b'{"a": 1.5}\n{"a": 123456789012345678901}\n',
    "repeated key": b'{"a": 1, "a": 2}\n',
    "lone surrogate": b'{"a": "\\ud800"}\n',
    "not UTF-8": b'{"a": "\xff"}\n',
    "malformed": b'{"a": 1}\n{"a": \n',
}


@pytest.mark.parametrize("name", sorted(JSONL_CASES))
def test_arrow_jsonl_reader_gives_the_line_parser_frame(name):
    from cartomap.data import readers

    data = JSONL_CASES[name]
    fast = readers._parse_jsonl_arrow(data)
    assert fast is not None, "the fast path should take this file"
    slow_frame, slow_lines = readers._parse_json(data, "f", allow_array=False)
    assert fast[1] == slow_lines
    pd.testing.assert_frame_equal(fast[0], slow_frame, check_dtype=False)


@pytest.mark.parametrize("name", sorted(FALLBACK_CASES))
def test_arrow_jsonl_reader_declines_what_it_could_read_differently(name):
    from cartomap.data import readers

    assert readers._parse_jsonl_arrow(FALLBACK_CASES[name]) is None


def test_jsonl_errors_still_name_the_line(tmp_path):
    from cartomap.data.loading import load_dataset
    from cartomap.errors import DataError

    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"premise": "a", "hypothesis": "b", "label": "neutral"}\n{"premise": "a", "hypothesis": "b"}\n'
        '{"premise": "a", "hypothesis": "b", "label": "entailment"}\n'
    )
    with pytest.raises(DataError, match="line 2"):
        load_dataset(DataConfig(path=str(path)))
    path.write_text(
        '{"premise": "a", "hypothesis": "b", "label": "neutral"}\n\n{"premise": "", "hypothesis": "b", "label": "x"}\n'
    )
    with pytest.raises(DataError, match="line 3"):
        load_dataset(DataConfig(path=str(path)))


# --------------------------------------------------------------------------- tokens in flat arrays
@pytest.mark.parametrize("single", [False, True])
def test_tokenize_gives_the_tokenizers_ids_in_flat_arrays(tiny_model, monkeypatch, single):
    from cartomap.data.loading import load_dataset
    from cartomap.training import batching
    from cartomap.training.models import load_tokenizer

    monkeypatch.setattr(batching, "TOKENIZE_CHUNK", 37)  # several chunks, a short last one
    frame = load_dataset(DataConfig(path="demo:dev")).frame.head(100)
    if single:
        frame = frame.drop(columns=["hypothesis"]).rename(columns={"premise": "text"})
    tokenizer = load_tokenizer(tiny_model)
    first, second = batching.texts_of(frame)
    expected = tokenizer(first, second, truncation=True, max_length=24)
    encoded = batching.tokenize(tokenizer, frame, 24)
    assert set(encoded) == {"input_ids", "token_type_ids"}
    for key, ragged in encoded.items():
        assert [row.tolist() for row in ragged] == expected[key]
        assert ragged.lengths.tolist() == [len(row) for row in expected[key]]
    assert encoded["input_ids"].values.dtype == np.int32
    dataset = batching.TokenizedExamples(encoded, np.zeros(len(frame), dtype=np.int64))
    batch = batching.DynamicPadding(tokenizer.pad_token_id)([dataset[3], dataset[50]])
    assert batch["input_ids"][0, : dataset.lengths[3]].tolist() == expected["input_ids"][3]
    assert batch["attention_mask"].sum(1).tolist() == [dataset.lengths[3], dataset.lengths[50]]


def test_ragged_concat_and_empty():
    from cartomap.training.batching import Ragged

    a, b = Ragged.from_rows([[1, 2], [3]]), Ragged.from_rows([[], [4, 5, 6]])
    both = Ragged.concat([a, b])
    assert [r.tolist() for r in both] == [[1, 2], [3], [], [4, 5, 6]]
    assert len(Ragged.concat([])) == 0


# --------------------------------------------------------------------------- sampled UMAP
def _circle(degrees):
    a = np.radians(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


def test_rows_are_placed_at_the_weighted_mean_of_their_nearest_fitted_rows():
    from cartomap.analysis.projection import place_by_neighbours

    emb = _circle([0, 90, 180, 0, 45, 10])  # rows 0-2 fitted; 3 copies row 0, 4 halfway, 5 near row 0
    fitted = np.array([0, 1, 2])
    coords = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]], dtype=np.float32)
    one = place_by_neighbours(emb, fitted, coords, np.array([3]), k=1)
    np.testing.assert_allclose(one, [[0.0, 0.0]], atol=1e-6)
    two = place_by_neighbours(emb, fitted, coords, np.array([4, 5]), k=2)
    np.testing.assert_allclose(two[0], [5.0, 0.0], atol=1e-4)  # equally near 0° and 90°
    w = np.exp(-2.0)  # (d - d_min) / (mean d - d_min) = 2 for the farther of two
    np.testing.assert_allclose(two[1], [10.0 * w / (1 + w), 0.0], atol=1e-4)


def test_umap_gets_the_exact_cosine_neighbour_graph():
    from sklearn.neighbors import NearestNeighbors

    from cartomap.analysis.projection import exact_knn

    emb = np.random.default_rng(3).normal(size=(150, 24)).astype(np.float32)
    indices, dists = exact_knn(emb, 6)
    assert indices.dtype == np.int32 and dists.dtype == np.float32 and indices.shape == (150, 6)
    assert (indices[:, 0] == np.arange(150)).all() and (dists[:, 0] == 0).all()
    ref_d, ref_i = NearestNeighbors(n_neighbors=6, metric="cosine").fit(emb).kneighbors(emb)
    np.testing.assert_array_equal(indices, ref_i)
    np.testing.assert_allclose(dists, ref_d, atol=1e-5)


def test_placement_search_in_fewer_dimensions_keeps_the_cosines():
    """Rows that span 8 directions of a 96-dim space: on the sample's top 64 uncentred axes every
    dot product of the unit rows is kept, so the rows are placed exactly as in 96 dims."""
    from cartomap.analysis.projection import place_by_neighbours, reduce_dims, top_axes

    rng = np.random.default_rng(5)
    basis = np.linalg.qr(rng.normal(size=(96, 8)))[0]  # 8 orthonormal directions in 96 dims
    emb = (rng.normal(size=(300, 8)) @ basis.T * rng.uniform(0.5, 3, size=(300, 1))).astype(np.float32)
    fitted = np.sort(rng.choice(300, size=90, replace=False))
    axes = top_axes(emb[fitted], 64)
    assert axes.shape == (96, 64)
    reduced = reduce_dims(emb, axes, block=64)  # several blocks
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    np.testing.assert_allclose(reduced @ reduced.T, unit @ unit.T, atol=1e-4)
    coords = rng.normal(size=(90, 2)).astype(np.float32)
    rest = np.setdiff1d(np.arange(300), fitted)
    np.testing.assert_allclose(
        place_by_neighbours(reduced, fitted, coords, rest),
        place_by_neighbours(emb, fitted, coords, rest),
        atol=1e-4,
    )


@pytest.mark.slow
def test_sampled_umap_fits_the_sample_and_places_the_rest():
    from cartomap.analysis.projection import PLACE_DIMS, _umap, project

    rng = np.random.default_rng(0)
    dims = PLACE_DIMS + 32  # more than PLACE_DIMS: the placement search runs on fewer dimensions
    centres = rng.normal(size=(4, dims))
    emb = (np.repeat(centres, 100, axis=0) + 0.05 * rng.normal(size=(400, dims))).astype(np.float32)
    coords = project(emb, "umap", seed=0, fit_sample=120)
    fitted = np.sort(np.random.default_rng(0).choice(400, size=120, replace=False))
    np.testing.assert_allclose(coords[fitted], _umap(emb[fitted], 0), atol=1e-5)
    assert np.isfinite(coords).all()
    # a placed point lands among its cluster's fitted points
    for cluster in range(4):
        rows = np.arange(cluster * 100, (cluster + 1) * 100)
        mine = coords[np.intersect1d(rows, fitted)]
        placed = coords[np.setdiff1d(rows, fitted)]
        assert (placed >= mine.min(0) - 1e-3).all() and (placed <= mine.max(0) + 1e-3).all()


# --------------------------------------------------------------------------- the map frame
def reference_build_map_frame(metrics, examples, label_names, n_epochs=None):
    """build_map_frame as it was before the positional join (a hash merge and a string per row), with the
    map's ambiguity axes (every score the metrics have a column for, after correctness)."""
    from cartomap.analysis.datamap import AXIS_COLUMNS, id_array, n_epochs_of
    from cartomap.scores.metrics import correctness_bucket

    def names(codes):
        return codes.map(dict(enumerate(label_names))).fillna(codes.astype(str)).astype(str)

    metrics = metrics.copy()
    metrics["id"] = metrics["id"].astype(str)
    examples = pd.DataFrame({"id": metrics["id"]}) if examples is None else examples.copy()
    examples["id"] = examples["id"].astype(str)
    if "predicted" not in metrics.columns:
        metrics["predicted"] = metrics["label"]
    text_cols = [c for c in ("premise", "hypothesis", "text") if c in examples.columns]
    extra = [c for c in ("genre",) if c in examples.columns]
    joined = metrics.merge(examples[["id", *text_cols, *extra]], on="id", how="left", validate="one_to_one")
    n_epochs = n_epochs or n_epochs_of(metrics)
    out = pd.DataFrame({"id": pd.Series(id_array(joined["id"]), dtype=object)})
    for col in text_cols:
        out[col] = joined[col].astype(object).where(joined[col].notna(), "").astype(str)
    out["gold"] = names(joined["label"].astype(np.int64)).astype("category")
    out["predicted"] = names(joined["predicted"].astype(np.int64)).astype("category")
    if "genre" in extra:
        genre = joined["genre"].astype(object).where(joined["genre"].notna(), "")
        out["genre"] = genre.astype(str).astype("category")
    for col in ("confidence", "variability", "correctness"):
        out[col] = joined[col].astype(np.float64)
    for col in AXIS_COLUMNS:
        if col not in out.columns and col in joined.columns:
            out[col] = joined[col].astype(np.float64)
    out["forgetfulness"] = joined["forgetfulness"].astype(np.int64)
    if "never_learned" in joined.columns:
        out["never_learned"] = joined["never_learned"].astype(bool)
    out["aum"] = joined["aum"].astype(np.float64) if "aum" in joined.columns else np.nan
    if "el2n" in joined.columns:  # offered as a colouring
        out["el2n"] = joined["el2n"].astype(np.float64)
    out["region"] = joined["region"].astype(str).astype("category")
    out["bucket"] = pd.Categorical(correctness_bucket(out["correctness"].to_numpy(), n_epochs))
    out["label"] = joined["label"].astype(np.int64)
    out["predicted_label"] = joined["predicted"].astype(np.int64)
    return out.reset_index(drop=True)


def small_map_inputs(n: int = 60, epochs: int = 5):
    from cartomap.scores.metrics import compute_metrics

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, n)
    labels[0] = 5  # a class without a name shows its number
    logits = rng.normal(size=(epochs, n, 6)).astype(np.float32)
    ids = [f"ex{i}" for i in range(n)]
    metrics = compute_metrics(logits, labels, ids)
    examples = pd.DataFrame(
        {
            "id": ids,
            "premise": [None if i % 7 == 0 else f"p{i} <b>" for i in range(n)],
            "hypothesis": [f"h{i}" for i in range(n)],
            "genre": [None if i % 5 == 0 else f"g{i % 3}" for i in range(n)],
            "label": labels,
        }
    ).astype({"premise": str, "hypothesis": str, "genre": str})
    examples.loc[examples.index % 7 == 0, "premise"] = None
    examples.loc[examples.index % 5 == 0, "genre"] = None
    return metrics, examples, ("entailment", "neutral", "contradiction")


@pytest.mark.parametrize("order", ["aligned", "shuffled", "subset", "no examples", "object texts"])
def test_map_frame_is_the_joined_frame_it_was(order):
    from cartomap.analysis.datamap import build_map_frame

    metrics, examples, names = small_map_inputs()
    if order == "shuffled":
        examples = examples.sample(frac=1.0, random_state=0)
    elif order == "subset":
        examples = examples.iloc[5:]
        metrics = metrics.set_index(pd.RangeIndex(100, 100 + len(metrics)))  # an index of its own
    elif order == "no examples":
        examples = None
    elif order == "object texts":
        examples = examples.astype({"premise": object, "genre": object})
    got = build_map_frame(metrics, examples, names)
    want = reference_build_map_frame(metrics, examples, names)
    pd.testing.assert_frame_equal(got, want)
    assert got.attrs["n_epochs"] == 5


def test_map_frame_of_a_run_reads_only_its_columns(tmp_path, monkeypatch):
    from cartomap.analysis.datamap import AXIS_COLUMNS, map_frame, map_metric_columns
    from cartomap.scores.metrics import METRIC_COLUMNS

    sys.path.insert(0, str(Path(__file__).parent))
    from test_app_datamap import make_run

    run = make_run(tmp_path / "cache", epochs=4)
    asked = []
    read_metrics = type(run).metrics

    def spy(self, *args, **kwargs):
        asked.append(kwargs.get("columns"))
        return read_metrics(self, *args, **kwargs)

    monkeypatch.setattr(type(run), "metrics", spy)
    got = map_frame(run)
    # the map reads its columns of the metrics file, every ambiguity axis among them, and not the curricula's
    assert asked and all(columns is not None for columns in asked)
    read = {c for columns in asked for c in columns}
    assert read == set(map_metric_columns()) and set(AXIS_COLUMNS) <= read
    assert set(METRIC_COLUMNS) - read  # the curricula's columns stay on disk
    want = reference_build_map_frame(read_metrics(run), run.examples(), run.label_names)
    pd.testing.assert_frame_equal(got, want)
    assert got.attrs["n_epochs"] == 4


# --------------------------------------------------------------------------- automatic groups in one table
def test_automatic_groups_are_one_table_and_every_reader_sees_them(tmp_path):
    from cartomap.runs import layout
    from cartomap.runs.groups import (
        count_table_groups,
        delete_group,
        group_table_path,
        list_groups,
        load_group,
        save_group,
    )
    from cartomap.wanli.exemplars import auto_groups, save_auto_groups

    sys.path.insert(0, str(Path(__file__).parent))
    from test_app_datamap import make_run

    run = make_run(tmp_path / "cache")
    ids = run.examples()["id"].astype(str).tolist()
    # a group saved one file each, as automatic groups were before the table
    save_group(run, "auto-old", ids[:3], source="auto")
    save_group(run, "mine", ids[3:5])

    def group(n):
        return {
            "name": f"auto-x-{n}",
            "seed": ids[n],
            "label_name": "neutral",
            "ids": ids[n + 1 : n + 5] + [ids[n]],
            "similarities": [0.1, 0.2, 0.3, 0.4, 1.0],
            "seed_variability": 0.3 - n / 1000,
        }

    assert save_auto_groups(run, [group(n) for n in range(50)], settings={"k": 4, "query": None}) == 50
    files = sorted(p.name for p in run.groups_dir.iterdir())
    assert files == [layout.AUTO_GROUPS, "mine.json"]  # the old automatic group replaced, no file per group
    assert count_table_groups(run) == 50 and group_table_path(run).exists()
    assert [g["name"] for g in auto_groups(run)] == [f"auto-x-{n}" for n in range(50)]
    assert {g["name"] for g in list_groups(run)} == {"mine"} | {f"auto-x-{n}" for n in range(50)}
    assert [g["name"] for g in list_groups(run, include_table=False)] == ["mine"]
    loaded = load_group(run, "auto-x-7")
    assert loaded["ids"] == group(7)["ids"] and loaded["settings"] == {"k": 4, "query": None}
    assert loaded["similarities"] == [0.1, 0.2, 0.3, 0.4, 1.0] and loaded["rank"] == 7

    # appending keeps the others; a deleted group leaves the table (re-read after each change)
    save_auto_groups(run, [group(60)], replace=False)
    assert count_table_groups(run) == 51 and auto_groups(run)[-1]["name"] == "auto-x-60"
    delete_group(run, "auto-x-0")
    assert count_table_groups(run) == 50 and "auto-x-0" not in {g["name"] for g in auto_groups(run)}
    save_auto_groups(run, [group(3)])  # a new collection replaces every automatic group
    assert [g["name"] for g in auto_groups(run)] == ["auto-x-3"]
    assert load_group(run, "mine")["ids"] == ids[3:5]
    with pytest.raises(Exception, match="no group named"):
        load_group(run, "auto-x-7")


# --------------------------------------------------------------------------- pruning's plan, once per process
def test_pruning_plans_its_folds_once_per_process_and_rereads_a_changed_file(tmp_path, monkeypatch):
    from cartomap.config import RunConfig
    from cartomap.data import derived
    from cartomap.experiments import pruning
    from cartomap.runs.store import run_id_for

    rows = [
        {
            "id": f"e{i}",
            "premise": f"p {i}",
            "hypothesis": f"h {i}",
            "label": ["entailment", "neutral", "contradiction"][i % 3],
        }
        for i in range(30)
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    params = pruning.PruningParams(
        base=RunConfig(data=DataConfig(path=str(path)), dev=None, tests=(DataConfig(path="demo:dev"),)),
        folds=3,
    )
    train = pruning.load_training_set(params)
    assert pruning.load_training_set(params) is train  # unchanged file: the same object
    saved = []
    monkeypatch.setattr(
        derived,
        "save_dataset",
        lambda d, cache, name="": (
            saved.append(name) or DataConfig(path=f"{cache}/{d.fingerprint()[:16]}.parquet")
        ),
    )
    plan = pruning.fold_plan(params, train, tmp_path)
    assert len(saved) == 6 and pruning.fold_plan(params, train, tmp_path) is plan and len(saved) == 6
    held = train.subset(np.asarray(pruning.stratified_folds(train.labels, 3, 0)) == 1)
    assert plan[1].held_out_fingerprint == held.fingerprint()
    assert run_id_for(plan[1].config, plan[1].train_fingerprint, None, (held.fingerprint(),))

    rows[0]["label"] = "neutral"  # the file changes: it is read again
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    again = pruning.load_training_set(params)
    assert again is not train and again.fingerprint() != train.fingerprint()


# --------------------------------------------------------------------------- epoch files
def test_epoch_table_from_arrow_ids_equals_the_frame(tmp_path):
    """Ids converted to Arrow once (as the loop does) give the file that the pandas frame gave."""
    import pyarrow.parquet as pq

    from cartomap.runs.tables import arrow_ids, logits_frame, logits_table

    ids = [f"ex-{i}" for i in range(50)]
    logits = np.random.default_rng(1).normal(size=(50, 3)).astype(np.float32)
    table = logits_table(arrow_ids(ids), logits)
    assert table.equals(logits_table(ids, logits))
    pq.write_table(table, tmp_path / "e.parquet", use_dictionary=False)
    back = pd.read_parquet(tmp_path / "e.parquet")
    pd.testing.assert_frame_equal(back, logits_frame(ids, logits), check_dtype=False)
    assert back["id"].tolist() == ids and back[["logit_0", "logit_1", "logit_2"]].dtypes.eq(np.float32).all()
    assert logits_table(np.arange(3), logits[:3]).column("id").to_pylist() == ["0", "1", "2"]
    with pytest.raises(ValueError, match="49 ids for 50 rows"):
        logits_table(ids[:-1], logits)
