"""A token run through the commands that print, count, compare, embed, export and draw it: every one
uses the token kind's region rule (by threshold), words carry their text, and nothing ends in a traceback
(issue 39's token seams). Hand-set runs of tests/token_fixture.py: no training unless a test says so."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from token_fixture import OVER_EPOCHS, make_token_run

from cartomap import cli
from cartomap.analysis.datamap import with_regions
from cartomap.experiments.seeds import (
    SUMMARY,
    create_seeds_from_runs,
    region_table,
    seeds_results,
    summary_lines,
)
from cartomap.experiments.store import ExperimentStore
from cartomap.scores.metrics import RegionRule
from cartomap.scores.stability import region_agreement_pairwise


def call(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([str(a) for a in args])
    return code, out.getvalue()


def counts_line(frame) -> str:
    counts = frame["region"].value_counts().to_dict()
    return "  regions: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def test_show_counts_the_regions_of_the_token_kinds_rule(tmp_path):
    """`cartomap show` of a token run prints the regions its map draws (by threshold), not the rank
    rule's (the fixture's words split differently by the two)."""
    run = make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)
    metrics = run.metrics()
    threshold = with_regions(metrics, run.region_rule())
    assert run.region_rule().method == "threshold"
    ranked = with_regions(metrics, RegionRule())
    assert counts_line(threshold) != counts_line(ranked)  # the fixture tells them apart
    code, out = call("--cache", tmp_path / "cache", "show", run.id)
    assert code == 0, out
    assert counts_line(threshold) in out.splitlines()


#: p(gold) of a second seed: "Arnold", "Paris" and "The" (sent-0#0, #4, sent-2#0) learned at once, "cat" later.
OTHER_SEED = np.array(
    [
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.6, 0.9, 0.1, 0.9, 0.2, 0.9],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.7, 0.9, 0.2, 0.9, 0.6, 0.9],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9],
    ]
)


def test_seeds_agreement_is_the_token_kinds_regions(tmp_path):
    """A seeds experiment of token runs compares the regions their maps draw (the kind's threshold rule),
    says so, and reports the agreement leaving out the words easy in both seeds."""
    cache = tmp_path / "cache"
    base = make_token_run(cache, tmp_path, OVER_EPOCHS, seed=1)
    other = make_token_run(cache, tmp_path, OTHER_SEED, seed=2)
    store = ExperimentStore(cache)
    exp = create_seeds_from_runs(store, base, [other])
    summary = seeds_results(exp, store.runs)[SUMMARY]
    rule = base.region_rule()
    by_kind = {s: with_regions(r.metrics(), rule) for s, r in ((1, base), (2, other))}
    by_rank = {s: with_regions(r.metrics(), RegionRule()) for s, r in ((1, base), (2, other))}
    assert region_agreement_pairwise(by_kind) != pytest.approx(region_agreement_pairwise(by_rank))
    assert summary["region_agreement"] == pytest.approx(region_agreement_pairwise(by_kind))
    assert summary["regions"]["method"] == "threshold"
    # by threshold, seed 1's ambiguous words are 0, 4, 5, 7, 8, 9, seed 2's 5, 7, 9 (the rest easy): 8 of
    # 11 agree; of the 6 easy in at most one, 3
    assert summary["region_agreement"] == pytest.approx(8 / 11)
    assert summary["region_agreement_not_easy"] == pytest.approx(3 / 6)
    lines = "\n".join(summary_lines(summary))
    assert "by threshold on" in lines and "leaving out those easy in both seeds: 0.50" in lines
    assert "leaving out the words easy-to-learn in both" in " ".join(region_table(summary)["measure"])


@pytest.mark.parametrize("command", [("review-queue", "create"), ("truth",), ("noise-benchmark",)])
def test_detector_help_lists_the_registered_detectors(monkeypatch, command):
    """The help of the commands that take or score detectors names them, read from the registry when
    the parser is built: one registered later is listed too."""
    from cartomap.scores import detectors

    extra = detectors.Detector("zz_test_detector", detectors.aum_detector, detectors.DYNAMICS, ("aum",))
    monkeypatch.setitem(detectors.REGISTRY, extra.name, extra)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.build_parser().parse_args([*command, "--help"])
    text = " ".join(out.getvalue().split())
    for name in detectors.REGISTRY:
        assert name in text


# --------------------------------------------------------------------------- a trained token run

DEV = "Paris B-LOC\nis O\nbig O\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model):
    """A token run of the fixture's 3 sentences trained 2 epochs with learning rate 0 on the tiny BERT
    (seconds), with a dev set and a test set, its words embedded."""
    from token_fixture import CONLL

    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from cartomap.runs.store import RunStore
    from cartomap.training.embeddings import embed_run
    from cartomap.training.loop import train_or_load

    root = tmp_path_factory.mktemp("token-seams")
    train, dev = root / "train.conll", root / "dev.conll"
    train.write_text(CONLL, encoding="utf-8")
    dev.write_text(DEV, encoding="utf-8")
    config = RunConfig(
        data=DataConfig(path=str(train)),
        dev=DataConfig(path=str(dev)),
        tests=(DataConfig(path=str(dev), name="again"),),
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(epochs=2, batch_size=2, learning_rate=0.0, warmup_ratio=0.0, record="train"),
        name="ner",
    )
    cache = root / "cache"
    run = train_or_load(config, RunStore(cache))
    assert run.state == "done"
    embed_run(run, device="cpu", batch_size=2)
    return {"run": run, "cache": cache, "root": root}


def test_a_token_run_is_embedded_per_word_at_its_first_sub_word(trained):
    """`cartomap embed` on a token run: one unit vector per word, keyed by its unit id, the final hidden
    state at the word's first sub-word (the model loaded by hand is the oracle), in dynamics order."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from cartomap.training.embeddings import load_embeddings

    run = trained["run"]
    ids, emb = load_embeddings(run)
    assert ids == run.task_kind.units(run.examples())[0] and len(ids) == 11
    assert ids[:2] == ["sent-0#0", "sent-0#1"]
    assert emb.shape[0] == 11 and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    tokenizer = AutoTokenizer.from_pretrained(run.model_dir)
    encoder = AutoModel.from_pretrained(run.model_dir).eval()
    expected = []
    for words in run.examples()["tokens"]:
        enc = tokenizer(list(words), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            hidden = encoder(**enc).last_hidden_state[0].numpy()
        word_ids = enc.word_ids(0)
        expected.append(hidden[[word_ids.index(w) for w in range(len(words))]])
    expected = np.concatenate(expected)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(emb, expected, atol=1e-4)
    code, out = call("--cache", trained["cache"], "embed", run.id, "--device", "cpu")
    assert code == 0 and "11 x" in out, out
    assert (run.task("embeddings").status() or {}).get("state") == "done"


def test_a_words_neighbours_are_words_and_same_label_means_same_tag(trained):
    """The Neighbours page's group, the Data map's focused example's neighbours and the projection's
    points of a token run are words: same-label neighbours carry the word's gold tag."""
    from cartomap.analysis.neighbours import neighbour_group
    from cartomap.analysis.overlays import focus_neighbour_ids
    from cartomap.analysis.projection import points_frame, project_run

    run = trained["run"]
    group = neighbour_group(run, "sent-2#1", k=3)  # "cat", tag O: the other O words are "lives", "in", ...
    assert group["id"].iloc[-1] == "sent-2#1" and group["role"].iloc[-1] == "seed"
    assert len(group) == 4 and set(group["label_name"]) == {"O"}
    assert group["tokens"].iloc[-1] == "cat" and group["context"].iloc[-1] == "The cat sat"
    assert group["region"].notna().all()
    found = focus_neighbour_ids(run, "sent-0#4", k=2)  # "Paris", the only other B-LOC is "Berlin"
    assert found["same label"] == ["sent-1#2"] and len(found["any label"]) == 2
    points = points_frame(run)
    assert points["id"].tolist() == run.task_kind.units(run.examples())[0]
    assert points["label"].tolist()[:5] == ["B-PER", "I-PER", "O", "O", "B-LOC"]
    assert points["tokens"].iloc[4] == "Paris" and "region" in points.columns
    assert project_run(run, "pca").shape == (11, 2)
    code, out = call("--cache", trained["cache"], "project", run.id, "--method", "pca")
    assert code == 0 and "11 points" in out, out


def test_a_multilabel_run_is_embedded_per_example(tmp_path, tiny_model):
    """Multi-label runs keep one vector per example (not per label unit); their projection's points carry
    each example's label set, and same-label neighbours are refused in one line naming the kind."""
    from multilabel_fixture import make_multilabel_run

    from cartomap.analysis.neighbours import neighbour_group
    from cartomap.analysis.projection import points_frame
    from cartomap.errors import RunError
    from cartomap.training.embeddings import embed_run

    run = make_multilabel_run(tmp_path / "cache", tmp_path)
    ids, emb = embed_run(run, device="cpu", model=tiny_model)
    assert ids == run.examples()["id"].astype(str).tolist() and emb.shape[0] == 3
    points = points_frame(run)
    assert points["label"].tolist() == ["sports", "politics, sports", ""]
    with pytest.raises(RunError, match="multilabel"):
        neighbour_group(run, ids[0])


def test_export_of_a_token_run_writes_dev_and_test_predictions_per_word_with_its_text(trained, tmp_path):
    """`cartomap export` of a token run: predictions_dev.parquet and predictions_test_0.parquet, a row per
    word (sentence id, word position, the word, gold and predicted tag, p(predicted) from the recorded
    logits at the best epoch); metrics.csv and detectors.parquet carry each word's text beside its
    position."""
    import pandas as pd

    from cartomap.scores.metrics import softmax

    run = trained["run"]
    out = tmp_path / "export"
    code, printed = call("--cache", trained["cache"], "export", run.id, "--out", out)
    assert code == 0, printed
    for source in ("dev", "test_0"):
        table = pd.read_parquet(out / f"predictions_{source}.parquet")
        assert table.columns.tolist() == [
            "id", "example_id", "word", "word_text", "gold", "predicted", "correct", "p_pred"
        ]  # fmt: skip
        assert table["word_text"].tolist() == ["Paris", "is", "big"]
        assert table["word"].tolist() == [0, 1, 2] and table["gold"].tolist() == ["B-LOC", "O", "O"]
        logits = run.read_epoch(source, run.best_epoch(), table["id"].tolist())
        names = np.asarray(run.label_names, dtype=object)
        assert table["predicted"].tolist() == names[logits.argmax(1)].tolist()
        np.testing.assert_allclose(table["p_pred"], softmax(logits.astype(np.float64)).max(1), atol=1e-6)
    assert "predictions_dev.parquet" in printed and "3 words" in printed
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["word_text"].tolist()[:5] == ["Arnold", "Schwarzenegger", "lives", "in", "Paris"]
    assert metrics["word"].tolist()[:5] == [0, 1, 2, 3, 4]  # the key column stays the position
    detectors = pd.read_parquet(out / "detectors.parquet")
    assert detectors.set_index("id").loc["sent-1#2", "word_text"] == "Berlin"
    again = call("--cache", trained["cache"], "export", run.id, "--out", out)  # nothing replaced silently
    assert again[0] != 0
    code, printed = call(
        "--cache", trained["cache"], "export", run.id, "--out", tmp_path / "one", "--burn-out", 1
    )
    assert code == 0, printed
    early = pd.read_csv(tmp_path / "one" / "metrics.csv")  # the map after 1 recording: the kind's regions
    assert early["word_text"].tolist()[:2] == ["Arnold", "Schwarzenegger"]
    assert early["region"].tolist() == with_regions(early, run.region_rule())["region"].tolist()


# --------------------------------------------------------------------------- the word map's picture


def crowded_map(n_easy: int = 5_700, n_ambiguous: int = 170, n_hard: int = 100):
    """A token map's shape: most points easy in the top-left corner, a few ambiguous and hard ones spread
    out (regions by the token kind's threshold rule on mean entropy)."""
    import pandas as pd

    rng = np.random.default_rng(0)
    conf = np.concatenate(
        [1 - rng.beta(1, 40, n_easy), rng.uniform(0.2, 0.9, n_ambiguous), rng.uniform(0.0, 0.45, n_hard)]
    )
    entropy = np.concatenate(
        [rng.beta(1, 30, n_easy) * 0.5, rng.uniform(0.5, 1.2, n_ambiguous), rng.uniform(0.05, 0.45, n_hard)]
    )
    n = len(conf)
    metrics = pd.DataFrame(
        {
            "id": [f"s{i}#0" for i in range(n)],
            "label": 0,
            "predicted": 0,
            "confidence": conf,
            "variability": entropy / 4,
            "mean_entropy": entropy,
            "correctness": np.round(conf * 3) / 3,
            "forgetfulness": 0,
            "aum": 0.0,
        }
    )
    metrics.attrs["n_epochs"] = 3
    return with_regions(metrics, RegionRule(method="threshold"))


def test_a_sampled_map_keeps_every_ambiguous_and_hard_point():
    """Over max_points, the map draws every point of the regions other than the largest (and of sparse
    areas) and fills the rest with a uniform sample; when those alone are too many, a sample of them."""
    from cartomap.analysis.datamap import kept_first, sample_rows

    frame = crowded_map()
    rare = frame["region"] != "easy-to-learn"
    assert rare.sum() == 270
    first = kept_first(frame)
    assert first[rare.to_numpy()].all() and 270 < first.sum() < 2_000  # and a few lone easy points
    shown = sample_rows(frame, 2_000)
    assert len(shown) == 2_000 and shown.index.is_monotonic_increasing
    assert set(frame.loc[first, "id"]) <= set(shown["id"])  # a uniform sample keeps about a third of them
    few = sample_rows(frame, 100)
    assert len(few) == 100 and first[few.index].all()


def test_region_labels_hide_no_points():
    """Each region label's box (as the figures size it) lies where no point of the map is, and no two
    overlap; the median of the easy words, where the label used to go, is in the crowded corner."""
    from cartomap.analysis.figures import CONFIDENCE_RANGE, label_box, map_x_range, region_label_points

    frame = crowded_map()
    x, y = frame["mean_entropy"].to_numpy(), frame["confidence"].to_numpy()
    (x0, x1), (y0, y1) = map_x_range(x), CONFIDENCE_RANGE
    places = region_label_points(frame)
    assert set(places) == {"easy-to-learn", "ambiguous", "hard-to-learn"}
    boxes = []
    for region, (cx, cy) in places.items():
        w, h = label_box(region)
        box = (cx - w / 2 * (x1 - x0), cx + w / 2 * (x1 - x0), cy - h / 2 * (y1 - y0), cy + h / 2 * (y1 - y0))
        inside = (x >= box[0]) & (x <= box[1]) & (y >= box[2]) & (y <= box[3])
        assert not inside.any(), region
        boxes.append(box)
    for a, b in ((0, 1), (0, 2), (1, 2)):
        apart = boxes[a][1] <= boxes[b][0] or boxes[b][1] <= boxes[a][0]
        apart |= boxes[a][3] <= boxes[b][2] or boxes[b][3] <= boxes[a][2]
        assert apart
    easy = frame["region"] == "easy-to-learn"
    median = (np.median(x[easy]), np.median(y[easy]))
    assert ((abs(x - median[0]) < 0.05) & (abs(y - median[1]) < 0.05)).sum() > 100


def test_the_static_map_shades_every_point_under_its_sample(tmp_path):
    """The PNG of a map over max_points: a density of every point under the drawn ones (every ambiguous
    and hard point among them), its title says so."""
    from matplotlib.collections import PathCollection, QuadMesh

    from cartomap.analysis.map_files import data_map_matplotlib

    frame = crowded_map()
    fig = data_map_matplotlib(frame, title="words", max_points=2_000)
    ax = fig.axes[0]
    assert any(isinstance(c, QuadMesh) for c in ax.collections)
    drawn = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    assert drawn == 2_000 and "shading = all" in ax.get_title()
    assert data_map_matplotlib(frame.iloc[:500], max_points=2_000).axes[0].get_title() == "Data Map"


def test_the_word_maps_picture_and_table_of_a_token_run(trained, tmp_path):
    """`cartomap map` of a token run: the picture, and a table with each word's text and sentence."""
    import pandas as pd

    run = trained["run"]
    picture, table = tmp_path / "words.png", tmp_path / "words.csv"
    code, out = call("--cache", trained["cache"], "map", run.id, "--out", picture, "--table", table)
    assert code == 0 and picture.stat().st_size > 0, out
    words = pd.read_csv(table)
    assert words.set_index("id").loc["sent-1#2", ["tokens", "context"]].tolist() == [
        "Berlin",
        "Mary visited Berlin",
    ]


def test_the_pages_map_frames_default_to_the_runs_rule(tmp_path, monkeypatch):
    """The pages' cached map frames (the Compare page asks for one without a rule) draw a token run's
    regions by its kind's rule."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from pages.components import maps

    run = make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)
    frame = maps.map_frame(run)
    assert frame.attrs["regions"]["method"] == "threshold"
    expected = with_regions(run.metrics(), run.region_rule())["region"].tolist()
    assert frame["region"].astype(str).tolist() == expected
    assert maps.units_at(run, 2).attrs["regions"]["method"] == "threshold"


def test_the_neighbours_page_opens_on_a_token_runs_words(tmp_path, monkeypatch):
    """The Neighbours page of a token run with word embeddings (hand-set): its seeds are words, its group
    the seed word and its nearest words of the same tag, its 2-D map a point per word."""
    from pathlib import Path

    import patience
    from streamlit.testing.v1 import AppTest

    from cartomap.training.embeddings import save_embeddings

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("CARTOMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(root))
    run = make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)
    ids = run.task_kind.units(run.examples())[0]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(ids), 8)).astype(np.float32)
    save_embeddings(run, ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    at = AppTest.from_file(str(root / "pages" / "neighbours.py"), default_timeout=patience.WAIT_S).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    seed = at.selectbox(key="_kept_nb_seed").value
    assert seed in ids
    table = next(d.value for d in at.dataframe if "similarity" in d.value.columns)
    assert table["id"].iloc[-1] == seed and set(table["id"]) <= set(ids)
    assert table["label"].nunique() == 1 and "tokens" in table.columns  # one tag; each row a word
    assert at.get("plotly_chart"), "no 2-D map drawn"
