"""Benchmark: N training pairs through every stage of cartomap, each timed, with its peak memory.

    python bench/bench_scale.py --examples 550000          # the full size (SNLI's 550,152 pairs)
    python bench/bench_scale.py --examples 50000           # the smoke check (training the tiny model dominates)
    python bench/bench_scale.py --examples 50000 --stages load,datamap --keep   # some stages again
    python bench/bench_scale.py --examples 2000000 --synthetic --source ../shared/data   # no training

Data: the synthetic NLI set of ``scripts/make_scale_data.py`` (real pairs varied by deterministic edits;
built under cache/scale/ on first use) from ``--source``: the bundled demo data by default, so a plain
clone runs it; ``--source ../shared/data`` for the SNLI/MultiNLI/ANLI/WaNLI pairs of docs/benchmarks.md,
whose SNLI dev and test are then the runs' dev and test sets (the demo's dev set otherwise). The model is a tiny random BERT (2 layers,
32 wide, the default encoder's tokenizer): the point is the pipeline around the model, not the model.
The default encoder's own speed is measured on a slice and extrapolated to N (rows marked so).

Every stage runs in a fresh Python process, as in the dashboard and the CLI, where loading, training,
embedding, projecting and the pages are separate processes. Its **peak RSS** is that process's high-water
mark (``VmHWM``, imports included); sub-steps reset the mark (``/proc/self/clear_refs``) so each row
shows the peak while it ran, memory still held from the process's earlier steps included. Times are
wall clock of the step alone (imports excluded).

``--synthetic`` (past SNLI's size): no training, the stages setup, load, recorder, datamap and browser:
a run made from the data file, a run of synthetic dynamics, the Data map's views on it (page script and
headless chromium served by ``dashboard.py``, with and without its warm-up, a mouse lasso, the server
process's peak memory).

The run store, the runs and the embeddings are left in ``--work`` (default cache/scale/work-<N>), so
``python -m cartomap.cli --cache cache/scale/work-<N>/store dashboard`` opens the bench's runs. The end
of the output is a markdown table for docs/benchmarks.md; ``--json`` writes the rows too.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from scale_harness import (
    ROOT,
    Rows,
    app_test,
    load_state,
    main_run,
    peak_mib,
    prepare_pages,
    reset_peak,
    rows_seconds,
    rss_mib,
    save_state,
    store_of,
    timed_run,
)

from cartomap.analysis import selection, tables

FULL = 550_000
STAGES = (
    "setup",
    "load",
    "tokenise",
    "train",
    "encoder",
    "recorder",
    "datamap",
    "embeddings",
    "neighbours",
    "projection",
    "groups",
    "filtering",
    "pruning",
    "compare",
    "neighbours_page",
)
OPTIONAL = ("faiss", "browser")
#: ``--synthetic``: the run made from the data file and given synthetic dynamics (no training), its
#: Data map page (library, page script) and the browser: the stages that make sense past SNLI's size.
SYNTHETIC_STAGES = ("setup", "load", "recorder", "datamap", "browser")
EMBED_DIM = 384  # all-MiniLM-L6-v2's hidden size
RECORD_EPOCHS = 10
LASSO_SHARE = 200_000 / FULL  # the goal's lasso: 200k of 550k points


def run_config(state: dict, data_path: str, name: str, seed: int = 42):
    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    return RunConfig(
        data=DataConfig(path=data_path, name=name),
        dev=DataConfig(path=state["dev"], name=state["dev_name"]),
        tests=(DataConfig(path=state["test"], name=state["test_name"]),),
        model=ModelConfig(name_or_path=state["tiny_model"]),
        train=TrainConfig(epochs=1, seed=seed),
        name=name,
    )


def dev_and_test(source: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """((path, name) of the dev set, (path, name) of the test set) for data from ``source``: SNLI dev and
    test when the source folder has them, else the bundled demo's dev set for both."""
    folder = Path(source)
    snli_dev, snli_test = folder / "snli" / "dev.jsonl.gz", folder / "snli" / "test.jsonl.gz"
    if source != "demo" and snli_dev.exists() and snli_test.exists():
        return (str(snli_dev), "snli/dev"), (str(snli_test), "snli/test")
    return ("demo:dev", "demo/dev"), ("demo:dev", "demo/dev (as test)")


# --------------------------------------------------------------------------- stages
def stage_setup(rows: Rows, n: int, work: Path, args) -> None:
    """The synthetic data (cached under cache/scale/) and the tiny model; not timed in the table."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_scale_data

    t0 = time.perf_counter()
    source = args.source
    out = ROOT / "cache" / "scale" / ("demo" if source == make_scale_data.DEMO else "")
    jsonl, parquet = make_scale_data.make(n, out, source, quiet=True)
    dev, test = dev_and_test(source)
    made = time.perf_counter() - t0
    tiny = work / "tiny-bert"
    if not tiny.exists():
        from cartomap.training.models import save_random_classifier

        save_random_classifier(tiny)  # the tests' tiny model: 2 layers, 32 wide
    save_state(
        work,
        jsonl=str(jsonl),
        parquet=str(parquet),
        tiny_model=str(tiny),
        n=n,
        dev=dev[0],
        dev_name=dev[1],
        test=test[0],
        test_name=test[1],
    )
    rows.add(
        "synthetic data (scripts/make_scale_data.py; cached)",
        made,
        peak_mib(),
        f"{jsonl.name} {jsonl.stat().st_size / 1e6:.0f} MB, {parquet.name} {parquet.stat().st_size / 1e6:.0f} MB",
    )


def stage_load(rows: Rows, n: int, work: Path, args) -> None:
    from cartomap.config import DataConfig
    from cartomap.data.loading import from_frame, load_dataset
    from cartomap.data.readers import read_table

    state = load_state(work)
    config = DataConfig(path=state["jsonl"])
    t_all = time.perf_counter()
    raw, lines = rows.measure("read JSONL.gz (gunzip, parse)", lambda: read_table(state["jsonl"]))
    validate = functools.partial(from_frame, raw, config, state["jsonl"], lines=lines)
    data = rows.measure("validate and map columns", validate)
    del validate
    del raw, lines
    rows.measure("fingerprint (sha256 of ids, texts, labels)", data.fingerprint)
    total = time.perf_counter() - t_all
    rows.add(
        "load + validate + fingerprint, JSONL.gz",
        total,
        None,
        f"{len(data):,} pairs",
        "<= 30 s",
        total <= 30,
    )
    del data

    def parquet():
        d = load_dataset(DataConfig(path=state["parquet"]))
        d.fingerprint()
        return d

    data = rows.measure("load + validate + fingerprint, Parquet", parquet, goal="<= 30 s", limit=30)

    parquet_s = rows_seconds(rows)
    store = store_of(work)
    dev = load_dataset(run_config(state, "", "").dev, label_names=data.label_names)
    test = load_dataset(run_config(state, "", "").tests[0], label_names=data.label_names)
    main = run_config(state, state["jsonl"], f"scale {n:,}")
    run = rows.measure(
        "create the run (config, its own copy examples.parquet)",
        lambda: store.create(main, data, dev, (test,)),
        note=lambda r: f"run {r.id}",
    )
    create_s = rows_seconds(rows)
    for source, seconds in (("JSONL.gz", total), ("Parquet", parquet_s)):
        rows.add(
            f"a new run from its data file ({source}): load + validate + fingerprint + create",
            seconds + create_s,
            None,
            "the sum of the rows above; the map frame's cold read is the datamap stage's first row",
            "<= 30 s",
            seconds + create_s <= 30,
        )
    if args.synthetic:  # no Compare page: no second run
        save_state(work, run=run.id)
        return
    # a second, smaller run (the first tenth of the rows) for the Compare page
    small_n = max(1000, n // 10)
    small_path = work / f"nli_first_{small_n}.parquet"
    data.frame.head(small_n).assign(label=lambda f: [data.label_names[i] for i in f["label"]]).to_parquet(
        small_path, index=False
    )
    small_data = load_dataset(DataConfig(path=str(small_path)))
    small = store.create(
        run_config(state, str(small_path), f"scale first {small_n:,}"), small_data, dev, (test,)
    )
    save_state(work, run=run.id, small_run=small.id, small_n=small_n)


def stage_tokenise(rows: Rows, n: int, work: Path, args) -> None:
    from cartomap.training.batching import tokenize
    from cartomap.training.models import load_tokenizer

    run = main_run(work)
    examples = run.examples()
    tokenizer = load_tokenizer(run.config.model.name_or_path)
    encoded = rows.measure(
        "tokenise every pair (the training job's first step)",
        lambda: tokenize(tokenizer, examples, run.config.model.max_length),
        note=lambda e: f"{sum(len(x) for x in e['input_ids']):,} tokens",
    )
    del encoded


def stage_train(rows: Rows, n: int, work: Path, args) -> None:
    from cartomap.training.loop import continue_run

    state = load_state(work)
    run = main_run(work)
    if run.state == "done":
        rows.add("train 1 epoch, tiny model: the run was trained before (--keep); not timed again")
    else:
        reset_peak()
        c0, t0 = time.process_time(), time.perf_counter()
        continue_run(run)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        loop = run.history()[0]["train_seconds"]
        rows.add(
            "train 1 epoch, tiny model (tokenise, loop, record, dev + test, save)",
            total,
            peak_mib(),
            f"loop {loop:.0f} s = {n / loop:,.0f} examples/s; the rest (tokenise, load, evaluate, write) "
            f"{total - loop:.0f} s",
            cpu=cpu,
        )
    small = main_run(work, "small_run")
    if small.state != "done":
        c0, t0 = time.process_time(), time.perf_counter()
        continue_run(small)
        rows.add(
            f"train the first {state['small_n']:,} pairs too (the Compare page's second run)",
            time.perf_counter() - t0,
            cpu=time.process_time() - c0,
        )


def stage_encoder(rows: Rows, n: int, work: Path, args) -> None:
    """The default encoder's speed on a slice, extrapolated to N."""
    import tempfile

    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from cartomap.runs.store import RunStore
    from cartomap.training.embeddings import compute_cls_embeddings
    from cartomap.training.loop import train_or_load
    from cartomap.training.models import default_model_path

    state = load_state(work)
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        slice_path = Path(tmp) / "slice.parquet"
        frame = pd.read_parquet(state["parquet"]).head(args.encoder_slice)
        frame.to_parquet(slice_path, index=False)
        config = RunConfig(
            data=DataConfig(path=str(slice_path)),
            dev=None,
            model=ModelConfig(name_or_path="default"),
            train=TrainConfig(epochs=1, save_checkpoints=False),
        )
        run = train_or_load(config, RunStore(Path(tmp) / "store"))
        loop = run.history()[0]["train_seconds"]
        rate = len(frame) / loop
        rows.add(
            f"default encoder: 1 training epoch, measured on {len(frame):,} pairs",
            loop,
            peak_mib(),
            f"{rate:.1f} examples/s, so one epoch of {n:,} takes ~{n / rate / 3600:.1f} h on this CPU (extrapolated)",
        )
        reset_peak()
        t0 = time.perf_counter()
        compute_cls_embeddings(default_model_path(), frame)
        seconds = time.perf_counter() - t0
        rate = len(frame) / seconds
        rows.add(
            f"default encoder: [CLS] embeddings, measured on {len(frame):,} pairs",
            seconds,
            peak_mib(),
            f"{rate:.1f} examples/s, so {n:,} take ~{n / rate / 3600:.1f} h (extrapolated)",
        )


def stage_recorder(rows: Rows, n: int, work: Path, args) -> None:
    """10 epochs recorded as the loop does (arrays filled batch by batch), written, turned into metrics.

    The logits are synthetic (a per-example skill that grows over the epochs, plus noise) and become
    a finished run of their own, "10 recorded epochs": the data map, neighbours, projection and
    groups stages use it, since one epoch of the tiny model gives every example variability 0."""
    import dataclasses
    import gc

    import numpy as np
    import pandas as pd

    from cartomap.data.loading import load_dataset
    from cartomap.io import atomic_write_json, atomic_write_parquet
    from cartomap.runs.tables import arrow_ids
    from cartomap.scores.metrics import compute_metrics

    run = main_run(work)
    data = load_dataset(run.data_config())
    dev = load_dataset(run.config.dev, label_names=data.label_names) if run.config.dev else None
    config = run.config.replace(
        tests=(),
        train=dataclasses.replace(run.config.train, epochs=RECORD_EPOCHS),
        name=f"scale {n:,}: {RECORD_EPOCHS} recorded epochs (synthetic logits, bench_scale.py)",
    )
    rec = store_of(work).create(config, data, dev)
    labels = data.labels
    del data
    gc.collect()
    rng = np.random.default_rng(0)
    skill = rng.normal(1.0, 1.5, n).astype(np.float32)
    base = rss_mib()
    reset_peak()
    t0 = time.perf_counter()
    ids = pd.read_parquet(rec.examples_path, columns=["id"])["id"].astype(str).tolist()  # the loop keeps them
    recorded = np.zeros((RECORD_EPOCHS, n, 3), dtype=np.float32)  # as the loop allocates them
    for epoch in range(RECORD_EPOCHS):
        order = rng.permutation(n)
        for start in range(0, n, 32):  # one training batch at a time, in shuffled order
            index = order[start : start + 32]
            values = rng.normal(size=(index.size, 3)).astype(np.float32)
            values[np.arange(index.size), labels[index]] += skill[index] * (0.3 + 0.25 * epoch)
            recorded[epoch, index] = values
    fill = time.perf_counter() - t0
    beyond = peak_mib() - base - recorded.nbytes / 2**20
    rows.add(
        f"recorder: {RECORD_EPOCHS} epochs of logits held in memory",
        fill,
        peak_mib(),
        f"arrays {recorded.nbytes / 2**20:.0f} MiB; {beyond:.0f} MiB beyond them (the ids, batch writes)",
        "<= 100 MB beyond the arrays",
        beyond * 2**20 / 1e6 <= 100,
    )

    def write():  # as the loop does: the ids made an Arrow array once, then one file per epoch
        train_ids = arrow_ids(ids)
        for epoch in range(RECORD_EPOCHS):
            rec.write_epoch("train", epoch, train_ids, recorded[epoch])

    rows.measure(f"write {RECORD_EPOCHS} epochs of dynamics (Parquet)", write, goal="<= 10 s", limit=10)
    metrics = rows.measure(
        f"compute the metrics of {RECORD_EPOCHS} epochs", lambda: compute_metrics(recorded, labels, ids)
    )
    rows.measure("write metrics.parquet", atomic_write_parquet, rec.metrics_path(), metrics)
    del metrics

    def resume():
        out = np.zeros_like(recorded)
        for epoch in range(RECORD_EPOCHS):
            out[epoch] = rec.read_epoch("train", epoch, ids)
        return out

    back = rows.measure(f"resume: read the {RECORD_EPOCHS} epochs back", resume)
    assert np.array_equal(back, recorded)
    # the dev set gets synthetic logits too (a growing share right), so the run summary has its accuracy
    # by epoch and a confusion matrix, and the curves a dev line
    history = []
    for e in range(RECORD_EPOCHS):
        record = {"epoch": e + 1, "train_loss": float(1.1 * 0.8**e), "train_seconds": 0.0}
        if dev is not None:
            right = rng.random(len(dev)) < 0.5 + 0.04 * e
            guess = np.where(right, dev.labels, (dev.labels + 1) % dev.num_labels)
            logits = rng.normal(size=(len(dev), dev.num_labels)).astype(np.float32)
            logits[np.arange(len(dev)), guess] += 3.0
            rec.write_epoch("dev", e, dev.ids, logits)
            record.update(dev_accuracy=float((guess == dev.labels).mean()), dev_loss=float(1.0 * 0.85**e))
        history.append(record)
    atomic_write_json(rec.history_path, history)
    rec.log("dynamics written by bench/bench_scale.py (synthetic logits, no model)")
    rec.set_status(state="done", phase="done", epochs_done=RECORD_EPOCHS, metrics_source="train")
    save_state(work, recorded=rec.id)


def lasso_event(frame, share: float) -> tuple[dict, int]:
    """A concave star-shaped lasso around the map's middle, scaled to hold about ``share`` of the points."""
    import numpy as np

    x = frame["variability"].to_numpy()
    y = frame["confidence"].to_numpy()
    cx, cy = float(np.median(x)), float(np.median(y))
    sx, sy = float(np.percentile(np.abs(x - cx), 90)), float(np.percentile(np.abs(y - cy), 90))
    t = np.linspace(0, 2 * np.pi, 200, endpoint=False)
    r = 0.75 + 0.25 * np.sin(7 * t)

    def event(scale):
        xs = cx + scale * sx * r * np.cos(t)
        ys = cy + scale * sy * r * np.sin(t)
        return {
            "selection": {
                "points": [],
                "box": [],
                "lasso": [{"xref": "x", "yref": "y", "x": xs.tolist(), "y": ys.tolist()}],
            }
        }

    lo, hi, want = 0.01, 4.0, share * len(frame)
    for _ in range(30):
        mid = (lo + hi) / 2
        count = int(selection.geometry_mask(frame, event(mid)).sum())
        lo, hi = (mid, hi) if count < want else (lo, mid)
    best = event((lo + hi) / 2)
    return best, int(selection.geometry_mask(frame, best).sum())


def stage_datamap(rows: Rows, n: int, work: Path, args) -> None:
    from cartomap.analysis import datamap as dm
    from cartomap.analysis import figures

    run = main_run(work, "recorded")
    frame = rows.measure("map frame: metrics joined with the texts (cold)", lambda: dm.map_frame(run))
    fig = rows.measure(
        "figure: sample + density + histograms",
        lambda: figures.data_map_figure(frame, "correctness"),
        note=lambda f: f"{f.layout.meta['n_shown']:,} of {len(frame):,} points drawn",
    )
    payload = rows.measure(
        "figure to JSON (what the browser receives)", fig.to_json, note=lambda p: f"{len(p) / 1e6:.1f} MB"
    )
    del payload
    labels = list(frame["gold"].cat.categories[:2])
    rows.measure(
        "filters: two labels, confidence 0.2-0.9",
        lambda: dm.filter_frame(frame, labels=labels, ranges={"confidence": (0.2, 0.9)}),
        note=lambda f: f"{len(f):,} rows match",
    )
    event, inside = lasso_event(frame, LASSO_SHARE)
    ids = rows.measure(
        "lasso (200-vertex concave polygon) resolved on the server, exact ids",
        lambda: selection.resolve_selection(frame, event, sampled=True),
        note=lambda r: f"{len(r):,} of {len(frame):,} points selected",
        goal="<= 1 s for 200k of 550k",
        limit=1.0,
    )
    assert len(ids) == inside
    rows.measure(
        "selection table of the lasso's ids",
        lambda: tables.selection_table(frame, ids),
        note=lambda t: f"{len(t):,} rows",
    )
    some = ids[len(ids) // 2]
    rows.measure(
        "one example's trajectory (its row of every epoch file)", lambda: dm.gold_trajectory(run, some)
    )

    fig = rows.measure(
        f"the lasso's selection on the figure: rings + its marginal histograms over the whole ({len(ids):,})",
        lambda: figures.data_map_figure(frame, "correctness", highlight_ids=ids),
    )
    del fig
    from cartomap.analysis import curves, summary

    rows.measure(
        "live curves: the run's history and status to the loss / accuracy figure",
        lambda: curves.training_curves_figure(curves.training_curves(run.history(), run.status())),
    )
    rows.measure("run summary (accuracy, recording, regions)", lambda: summary.run_summary(run))
    rows.measure(
        "dev confusion matrix at the final epoch",
        lambda: summary.dev_confusion(run),
        note=lambda c: "no dev set" if c is None else f"{int(c.to_numpy().sum()):,} dev pairs",
    )

    prepare_pages(work)
    from cartomap.runs.groups import save_group

    page = "Data map page"
    app = app_test("data_map.py", work)
    app.session_state["run_id"] = run.id
    timed_run(
        rows,
        f"{page}: open a stored run (page script: its frame read the first time; run summary, epoch slider, "
        "histograms)",
        app,
        goal="<= 3 s",
        limit=3,
    )
    again = app_test("data_map.py", work)
    again.session_state["run_id"] = run.id
    timed_run(rows, f"{page}: open it again in a new session (frame cached)", again, goal="<= 3 s", limit=3)
    app.session_state["selected_ids"] = ids
    timed_run(
        rows,
        f"{page}: rerun with the lasso's {len(ids):,} examples selected (rings, histograms of the selection, "
        "table, paths of the first 50)",
        app,
        goal="<= 3 s",
        limit=3,
    )
    slider = f"dm_burn_out_{run.id}"
    half = RECORD_EPOCHS // 2
    app.session_state[slider] = half
    timed_run(
        rows,
        f"{page}: epoch slider to {half} of {RECORD_EPOCHS} with the selection (the dynamics read the first "
        "time, the map of the first k recordings)",
        app,
        goal="<= 3 s",
        limit=3,
    )
    app.session_state[slider] = half - 1
    timed_run(
        rows,
        f"{page}: epoch slider to {half - 1} (dynamics cached, a new map frame)",
        app,
        goal="<= 3 s",
        limit=3,
    )
    app.session_state[slider] = RECORD_EPOCHS
    app.session_state["dm_facet"] = True
    timed_run(
        rows,
        f"{page}: split by gold label (one panel per class, the selection ringed in each)",
        app,
        goal="<= 3 s",
        limit=3,
    )
    app.session_state["dm_facet"] = False
    app.session_state["dm_color"] = "AUM"
    timed_run(
        rows, f"{page}: coloured by AUM (a colour scale), the selection kept", app, goal="<= 3 s", limit=3
    )
    rows.measure(
        f"save the selection as a group ({len(ids):,} ids)",
        lambda: save_group(run, "bench lasso", ids, source="data map", overwrite=True),
    )


def stage_embeddings(rows: Rows, n: int, work: Path, args) -> None:
    import numpy as np

    from cartomap.training.embeddings import embed_run, save_embeddings

    run = main_run(work)
    if run.state == "done":
        rows.measure(
            "[CLS] embeddings of every pair, tiny model (the real job: tokenise, batches, save)",
            lambda: embed_run(run, force=True),
            note=lambda r: f"{r[1].shape[1]} dims",
        )
    else:
        rows.add(
            "[CLS] embeddings of the tiny model: not timed, its run was not trained (--stages without train)"
        )
    rec = main_run(work, "recorded")
    ids = rec.examples()["id"].astype(str).tolist()

    def random_unit():
        rng = np.random.default_rng(0)
        out = np.empty((n, EMBED_DIM), dtype=np.float32)
        for start in range(0, n, 65536):
            block = rng.standard_normal((min(65536, n - start), EMBED_DIM), dtype=np.float32)
            out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
        save_embeddings(rec, ids, out)

    rows.measure(
        f"random unit vectors of {EMBED_DIM} dims (the default encoder's width) saved as the embeddings "
        "of the 10-epoch run",
        random_unit,
        note="the default encoder would take hours here (see 'encoder'); the next stages use these",
    )


def stage_neighbours(rows: Rows, n: int, work: Path, args) -> None:
    import numpy as np

    from cartomap.analysis.neighbours import same_label_neighbors
    from cartomap.training.embeddings import load_embeddings

    run = main_run(work, "recorded")
    ids, emb = load_embeddings(run)
    labels = run.examples()["label"].to_numpy()
    idx, sims = rows.measure(
        f"same-label k = 4 neighbours of all {n:,} examples ({EMBED_DIM} dims, exact)",
        lambda: same_label_neighbors(emb, labels, k=4, normalize=False),
        goal="<= 10 min",
        limit=600,
    )
    np.save(work / "neighbours_exact.npy", idx)
    rows.measure(
        "one seed's neighbours (the Neighbours page, per seed)",
        lambda: same_label_neighbors(emb, labels, k=4, query_idx=[n // 2], normalize=False),
    )


FAISS_QUERIES = 20_000  # queries timed per faiss index; the search time of all N is extrapolated


def stage_faiss(rows: Rows, n: int, work: Path, args) -> None:
    """faiss-cpu against the exact neighbours of stage 'neighbours' (optional: pip install faiss-cpu).

    Per label, an index of that label's vectors is built (timed in full) and searched by a random
    sample of at most 20,000 queries (timed, then extrapolated to all N); recall@4 is measured on
    those queries against the exact neighbours."""
    import faiss
    import numpy as np

    from cartomap.training.embeddings import load_embeddings

    run = main_run(work, "recorded")
    _, emb = load_embeddings(run)
    labels = run.examples(columns=["label"])["label"].to_numpy()
    exact = np.load(work / "neighbours_exact.npy")
    faiss.omp_set_num_threads(args.threads or os.cpu_count() or 1)
    sample = np.sort(np.random.default_rng(0).choice(n, size=min(n, FAISS_QUERIES), replace=False))

    def run_variant(make, params):
        build = search = 0.0
        found = np.full((sample.size, 4), -1, dtype=np.int64)
        for label in np.unique(labels):
            members = np.flatnonzero(labels == label)
            x = np.ascontiguousarray(emb[members])
            t0 = time.perf_counter()
            index = make(EMBED_DIM)
            for key, value in params.items():
                faiss.ParameterSpace().set_index_parameter(index, key, value)
            if not index.is_trained:
                index.train(x[np.random.default_rng(0).choice(len(x), min(len(x), 100_000), replace=False)])
            index.add(x)
            build += time.perf_counter() - t0
            queries = sample[labels[sample] == label]
            t0 = time.perf_counter()
            _, nn = index.search(np.ascontiguousarray(emb[queries]), 5)
            search += time.perf_counter() - t0
            out = np.flatnonzero(labels[sample] == label)
            for r, row in zip(out.tolist(), nn.tolist(), strict=True):  # drop the query itself
                keep = [members[j] for j in row if j >= 0 and members[j] != sample[r]][:4]
                found[r, : len(keep)] = keep
        hits = sum(len(set(a) & set(b)) for a, b in zip(exact[sample].tolist(), found.tolist(), strict=True))
        return build, search, hits / (sample.size * 4)

    variants = [
        ("faiss IndexFlatIP (exact)", lambda d: faiss.IndexFlatIP(d), {}),
        (
            "faiss HNSW32, efSearch 64",
            lambda d: faiss.IndexHNSWFlat(d, 32, faiss.METRIC_INNER_PRODUCT),
            {"efSearch": 64},
        ),
        (
            "faiss HNSW32, efSearch 256",
            lambda d: faiss.IndexHNSWFlat(d, 32, faiss.METRIC_INNER_PRODUCT),
            {"efSearch": 256},
        ),
        (
            "faiss IVF1024,Flat, nprobe 64",
            lambda d: faiss.index_factory(d, "IVF1024,Flat", faiss.METRIC_INNER_PRODUCT),
            {"nprobe": 64},
        ),
    ]
    for name, make, params in variants:
        if args.faiss_only and args.faiss_only not in name:
            continue
        reset_peak()
        build, search, recall = run_variant(make, params)
        total = build + search * n / sample.size
        rows.add(
            f"{name}: same-label k = 4 of all {n:,} (build + search, extrapolated)",
            total,
            peak_mib(),
            f"build {build:.0f} s, search {search:.1f} s for {sample.size:,} queries; recall@4 vs exact {recall:.4f}",
            "recall >= 0.99 and faster than exact",
        )


def stage_projection(rows: Rows, n: int, work: Path, args) -> None:
    """PCA, then the UMAP job; then the placement of 10,000 rows alone, the part of UMAP's time that
    grows with N (the fit on the sample does not), which extrapolates the job's time to 550k."""
    import numpy as np

    from cartomap.analysis import projection as pj
    from cartomap.training.embeddings import load_embeddings

    run = main_run(work, "recorded")
    rows.measure("2-D projection: PCA", lambda: pj.project_run(run, "pca", force=True))
    sample = min(n, pj.UMAP_FIT_SAMPLE)
    t0 = time.perf_counter()
    coords = rows.measure(
        "2-D projection: UMAP (the first one, job)",
        lambda: pj.project_run(run, "umap", force=True),
        note=f"exact 15-NN graph and fit on {sample:,} rows; "
        + (
            f"the other {n - sample:,} placed by their 15 nearest fitted rows"
            if n > sample
            else "no placement"
        ),
        goal="<= 5 min",
        limit=300,
    )
    total = time.perf_counter() - t0
    if n <= sample:
        return
    emb = load_embeddings(run)[1]
    fitted = np.sort(np.random.default_rng(0).choice(n, size=sample, replace=False))
    rest = np.setdiff1d(np.arange(n), fitted)[:10_000]
    reset_peak()
    c0, t0 = time.process_time(), time.perf_counter()
    reduced = pj.reduce_dims(emb, pj.top_axes(emb[fitted], pj.PLACE_DIMS))
    t1 = time.perf_counter()
    pj.place_by_neighbours(reduced, fitted, coords[fitted], rest)
    t2 = time.perf_counter()
    per_row = (t1 - t0) / n + (t2 - t1) / rest.size  # the reduction touches every row, the search the rest
    at_full = total + (FULL - n) * per_row
    rows.add(
        f"UMAP: the part that grows with N (all {n:,} rows to {pj.PLACE_DIMS} dims, {rest.size:,} rows placed)",
        t2 - t0,
        peak_mib(),
        f"{per_row * 1e3:.2f} ms per placed row: the job at {FULL:,} rows is about {at_full:.0f} s "
        f"({total:.0f} s + {FULL - n:,} rows more x {per_row * 1e3:.2f} ms)",
        "<= 5 min at 550k (extrapolated)",
        at_full <= 300,
        cpu=time.process_time() - c0,
    )


def stage_groups(rows: Rows, n: int, work: Path, args) -> None:
    from cartomap.runs.groups import list_groups
    from cartomap.training.embeddings import load_embeddings
    from cartomap.wanli.exemplars import collect_groups, save_auto_groups

    run = main_run(work, "recorded")
    embeddings = load_embeddings(run)
    groups = rows.measure(
        "WaNLI groups: seeds (top 25% variability per label) + 4 neighbours (reference: 15 nearest, same label kept)",
        lambda: collect_groups(run, embeddings=embeddings),
        note=lambda g: f"{len(g):,} groups",
    )
    rows.measure("save the automatic groups", lambda: save_auto_groups(run, groups))
    rows.measure(
        "list the run's groups (every page that offers groups)",
        lambda: list_groups(run),
        note=lambda g: f"{len(g):,} groups",
    )
    save_state(work, groups=len(groups))


def stage_filtering(rows: Rows, n: int, work: Path, args) -> None:
    """WaNLI Stage 3 on a generated batch of 5 samples for each of 2,000 groups (10,000 pairs)."""
    import numpy as np
    import pandas as pd

    from cartomap.io import atomic_write_json, atomic_write_parquet
    from cartomap.wanli.batches import generated_path, info_path
    from cartomap.wanli.exemplars import auto_groups
    from cartomap.wanli.filtering import run_filter

    run = main_run(work)  # the trained run: its end-of-epoch checkpoint scores the pairs
    groups = auto_groups(main_run(work, "recorded"))[:2000]  # the same examples, the same ids
    examples = run.examples().set_index("id")
    names = run.label_names
    rng = np.random.default_rng(0)
    records = []
    for g in groups:
        seed = examples.loc[g["seed"]]
        for s in range(5):
            other = examples.iloc[int(rng.integers(len(examples)))]
            kind = rng.integers(10)  # some rows for every heuristic
            premise, hypothesis = str(seed["premise"]), str(other["hypothesis"])
            if kind == 0:
                hypothesis = "no"
            elif kind == 1:
                hypothesis = premise.upper()
            elif kind == 2:
                hypothesis = str(seed["hypothesis"])
            records.append(
                {
                    "gen_id": f"{g['name']}-{s}",
                    "group": g["name"],
                    "seed_id": g["seed"],
                    "intended_label": names[int(seed["label"])],
                    "premise": premise,
                    "hypothesis": hypothesis,
                    "in_context_ids": list(g["ids"]),
                }
            )
    atomic_write_json(
        info_path(run, "bench"), {"created_at": time.time(), "groups": [g["name"] for g in groups]}
    )
    atomic_write_parquet(generated_path(run, "bench"), pd.DataFrame(records))
    rows.measure(
        f"WaNLI filtering of {len(records):,} generated pairs (heuristics + max variability over the checkpoints)",
        lambda: run_filter(run, "bench"),
        note=lambda f: f"{int(f['kept'].sum()):,} kept",
    )


def stage_pruning(rows: Rows, n: int, work: Path, args) -> None:
    """Everything a 10-fold pruning experiment does before its first fold trains, and one later pass."""
    from cartomap.experiments.pruning import PruningKind, PruningParams, create_pruning
    from cartomap.experiments.store import ExperimentStore
    from cartomap.training.prepare import prepare_run

    run = main_run(work)
    store = ExperimentStore(work / "store")
    params = PruningParams(base=run.config.replace(dev=None), folds=10, cache=str((work / "store").resolve()))
    exp = rows.measure(
        "pruning: create the experiment (checks the data)", lambda: create_pruning(params, store)
    )
    kind = PruningKind()
    planned = rows.measure(
        "pruning: plan the runs (load, 10 stratified folds, 20 derived datasets)",
        lambda: kind.planned_runs(exp, store.runs),
        note=lambda p: f"{len(p)} runs",
    )
    rows.measure(
        "pruning: create the 11 run folders (what the runner does before training)",
        lambda: [prepare_run(config, store.runs) for _, config in planned],
    )
    rows.measure(
        "pruning: plan again (the runner asks after every finished run)",
        lambda: kind.planned_runs(exp, store.runs),
    )


def stage_compare(rows: Rows, n: int, work: Path, args) -> None:
    from cartomap.analysis import compare

    prepare_pages(work)
    run, small = main_run(work), main_run(work, "small_run")
    trained = run.state == "done" and small.state == "done"
    if trained:
        rows.measure("comparison table (scores on snli/test)", lambda: compare.comparison_table([run, small]))
        rows.measure("example diff on snli/test", lambda: compare.example_diff(run, small))
    else:
        rows.add(
            "comparison table and example diff: not timed, the two runs were not trained (no train stage)"
        )
    # the page: the trained runs and the 10-epoch run (the map of every example), every map asked for
    shown = [r for r in (run, small) if r.state == "done"] + [main_run(work, "recorded")]
    app = app_test("compare.py", work)
    app.session_state["cmp_runs"] = [r.id for r in shown]
    app.session_state["cmp_maps"] = [compare.run_label(r) for r in shown]
    what = (
        "the two runs and the 10-epoch run" if trained else "the 10-epoch run (its data map of every example)"
    )
    timed_run(rows, f"Compare page: {what} (scores, curves, F1, maps, example diff)", app)
    timed_run(rows, "Compare page: rerun", app)


def stage_neighbours_page(rows: Rows, n: int, work: Path, args) -> None:
    prepare_pages(work)
    run = main_run(work, "recorded")
    app = app_test("neighbours.py", work)
    app.session_state["run_id"] = run.id
    timed_run(rows, "Neighbours page: open (embeddings, seeds, a seed's group, PCA view)", app)
    timed_run(rows, "Neighbours page: rerun", app)


def server_memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process ``pid`` in MiB: its resident memory now and its peak so far."""
    out = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out.get("VmRSS", float("nan")), out.get("VmHWM", float("nan"))


def server_memory_row(rows: Rows, tag: str, pid: int, what: str) -> None:
    """A row of the server's memory: its peak so far (VmHWM) against the 8 GiB goal, its RSS now."""
    now, high = server_memory_mib(pid)
    rows.add(
        f"browser, {tag}: server memory after {what} (peak = VmHWM of the server process)",
        None,
        high,
        f"{now:,.0f} MiB resident now; load {os.getloadavg()[0]:.1f}",
        "<= 8 GiB",
        high <= 8192,
    )


# the map's plot area on the page: its position and axes (for a lasso drawn with the mouse)
_MAP_GEOMETRY_JS = """
const gd = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')].find(g =>
    g._fullLayout && g._fullLayout.meta && g._fullLayout.meta.n_total !== undefined);
if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis || !gd._fullLayout.xaxis._length) return null;
gd.scrollIntoView({block: 'center'});
const fl = gd._fullLayout, r = gd.getBoundingClientRect();
return {left: r.left, top: r.top, xo: fl.xaxis._offset, xl: fl.xaxis._length, xr: fl.xaxis.range,
        yo: fl.yaxis._offset, yl: fl.yaxis._length, yr: fl.yaxis.range, dragmode: fl.dragmode};
"""
# the data map (its figure's meta has n_total; the page's other charts do not) is drawn
MAP_DRAWN_JS = """
return [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')].some(gd =>
    gd._fullLayout && gd._fullLayout.meta && gd._fullLayout.meta.n_total !== undefined
    && gd.querySelector('.scatterlayer, canvas'));
"""

# the map's picture (``cartomap.analysis.preview``, sent before the chart on a session's first map) is on
# screen: decoded and displayed (hidden again once the chart is drawn)
MAP_PICTURE_JS = """
return [...document.querySelectorAll(".st-key-dm_map_slot img[alt='picture of the data map']")].some(img =>
    img.complete && img.naturalWidth > 0 && img.offsetParent !== null);
"""


def settle(driver, limit: float = 60.0) -> None:
    """Wait until the page's script run has finished (Streamlit's running indicator gone) and a second
    more: the browser keeps drawing after the map's layer appears, and a next open straight away would
    wait on that (a new session in the same browser measured 3.7-3.8 s back to back, 1.8-2.0 s after a
    pause, in the same minutes)."""
    from selenium.webdriver.common.by import By

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit and driver.find_elements(
        By.CSS_SELECTOR, "[data-testid=stStatusWidgetRunningIcon], [data-testid=stStatusWidgetRunningManIcon]"
    ):
        time.sleep(0.1)
    time.sleep(1.0)


def browser_lasso(driver, xs, ys) -> None:
    """Drag a lasso along the polygon (xs, ys) in data coordinates over the Data map with real mouse
    events (the map's dragmode is lasso)."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    geo = None
    for _ in range(100):
        geo = driver.execute_script(_MAP_GEOMETRY_JS)
        if geo:
            break
        time.sleep(0.1)
    if not geo or geo["dragmode"] != "lasso":
        raise RuntimeError(f"the map is not ready for a lasso: {geo}")
    (x0, x1), (y0, y1) = geo["xr"], geo["yr"]

    def px(x, y):
        return (
            round(geo["left"] + geo["xo"] + (x - x0) / (x1 - x0) * geo["xl"]),
            round(geo["top"] + geo["yo"] + (1 - (y - y0) / (y1 - y0)) * geo["yl"]),
        )

    points = [px(x, y) for x, y in zip(xs, ys, strict=True)]
    actions = ActionBuilder(driver, duration=5)
    actions.pointer_action.move_to_location(*points[0])
    actions.pointer_action.pointer_down()
    for point in points[1:] + points[:1]:
        actions.pointer_action.move_to_location(*point)
    actions.pointer_action.pointer_up()
    actions.perform()


def stage_browser(rows: Rows, n: int, work: Path, args) -> None:
    """The Data map in headless chromium, served as ``cartomap dashboard`` serves it (``dashboard.py``):
    from opening the address to the map drawn, after a server start and in a new session; then a lasso
    over the map, to the selection's count on the page. The server's memory (VmHWM of its process) after
    each step. Three servers: without the launcher's warm-up (``CARTOMAP_WARM_UP=0``: as before it), with it
    (the default) opened as soon as the server answers, and with it opened once it finished (its own line
    in the server's log); the lasso on the last one."""
    import re

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from cartomap.analysis import datamap as dm

    run = main_run(work, "recorded")
    frame = dm.map_frame(run)  # the lasso's polygon: the datamap stage's, in data coordinates
    event, inside = lasso_event(frame, LASSO_SHARE)
    lasso = event["selection"]["lasso"][0]
    del frame
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    configs = (
        ("without the warm-up (CARTOMAP_WARM_UP=0)", False, False),
        ("with the warm-up, opened as the server answers", True, False),
        ("with the warm-up, opened once it finished", True, True),
    )
    for k, (tag, warm, after) in enumerate(configs):
        port = 8650 + k
        env = dict(
            os.environ,
            CARTOMAP_CACHE=str(work / "store"),
            STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
            CARTOMAP_WARM_UP="1" if warm else "0",
        )
        log_path = work / f"streamlit-{k}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed below
        t_launch = time.perf_counter()
        server = subprocess.Popen(
            [
                sys.executable,
                "dashboard.py",
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.fileWatcherType",
                "none",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            import urllib.request

            for _ in range(600):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            up = time.perf_counter() - t_launch
            rows.add(f"browser, {tag}: server launched until it answers", up)
            if after:
                line = None
                while time.perf_counter() - t_launch < 300 and line is None:
                    line = next(
                        (x for x in log_path.read_text().splitlines() if x.startswith("cartomap warm-up:")),
                        None,
                    )
                    time.sleep(0.1)
                rows.add(
                    f"browser, {tag}: server launched until the warm-up finished",
                    time.perf_counter() - t_launch,
                    note=f"{line or 'no warm-up line in 300 s'}; load {os.getloadavg()[0]:.1f}",
                )
            for what in ("first open after the server started", "open again (a new session)"):
                driver.get("about:blank")
                t0 = time.perf_counter()
                driver.get(f"http://127.0.0.1:{port}/data_map?run={run.id}")
                shown = None  # the map on screen: its picture, or the chart if that came first
                while not driver.execute_script(MAP_DRAWN_JS):
                    if shown is None and driver.execute_script(MAP_PICTURE_JS):
                        shown = time.perf_counter() - t0
                    if time.perf_counter() - t0 > 300:
                        raise RuntimeError("the map did not appear in 300 s")
                    time.sleep(0.02)
                seconds = time.perf_counter() - t0
                since = (
                    f"; {time.perf_counter() - t_launch:.1f} s since the launch" if "first" in what else ""
                )
                first = seconds if shown is None else shown
                rows.add(
                    f"browser, {tag}: Data map {what}, until the map is on screen (its picture or the chart)",
                    first,
                    goal="<= 3 s",
                    ok=first <= 3,
                    note=f"load {os.getloadavg()[0]:.1f}{since}; "
                    + ("the picture first" if shown is not None else "the chart first (no picture seen)"),
                )
                rows.add(
                    f"browser, {tag}: Data map {what}, until the interactive chart is drawn",
                    seconds,
                    note=f"load {os.getloadavg()[0]:.1f}",
                )
                server_memory_row(rows, tag, server.pid, what)
                settle(driver)
            if not after:
                continue  # the lasso once, on the warmed server
            # a lasso over the map with the mouse, until the page shows the selection's count
            time.sleep(1.0)  # the page's last elements settle
            body = driver.find_element(By.TAG_NAME, "body")
            before = re.search(r"([\d,]+) selected ·", body.text)
            browser_lasso(driver, lasso["x"], lasso["y"])
            t0 = time.perf_counter()
            count = None
            while time.perf_counter() - t0 < 120:
                found = re.search(r"([\d,]+) selected ·", driver.find_element(By.TAG_NAME, "body").text)
                if found and found.group(1) not in ("0", before and before.group(1)):
                    count = int(found.group(1).replace(",", ""))
                    break
                time.sleep(0.05)
            seconds = time.perf_counter() - t0
            rows.add(
                f"browser, {tag}: lasso with the mouse over {LASSO_SHARE:.0%} of the map, until the page "
                "shows the selection's count (event, exact ids on the server, the page's rerun)",
                seconds if count else None,
                note=(
                    f"{count:,} selected ({inside:,} inside the bench's polygon; the browser's is in pixels)"
                    if count
                    else "the selection did not show in 120 s"
                ),
                ok=None if count else False,
            )
            server_memory_row(rows, tag, server.pid, "the lasso")
        finally:
            driver.quit()
            server.terminate()
            server.wait()
            log.close()


# --------------------------------------------------------------------------- parent
def run_child(stage: str, args) -> list[dict]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        stage,
        "--examples",
        str(args.examples),
        "--work",
        str(args.work),
    ]
    cmd += [
        "--encoder-slice",
        str(args.encoder_slice),
        "--threads",
        str(args.threads),
        "--source",
        args.source,
    ]
    if args.faiss_only:
        cmd += ["--faiss-only", args.faiss_only]
    if args.task != "pair":
        cmd += ["--task", args.task]
    if args.synthetic:
        cmd += ["--synthetic"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if args.threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(args.threads)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    found = []
    for line in proc.stdout:
        if line.startswith("@@ROW "):
            row = json.loads(line[6:])
            found.append(row)
            print(
                f"  {row['what']}: {row['seconds']} s (CPU {row.get('cpu_seconds')} s), "
                f"peak {row['peak_mib']} MiB {row['note']}",
                flush=True,
            )
    err = proc.stderr.read()
    if proc.wait() != 0:
        tail = err.strip().splitlines()[-1] if err.strip() else "no output"
        (args.work / f"{stage}.err").write_text(err)
        print(err[-3000:], file=sys.stderr)
        found.append(
            {
                "stage": stage,
                "what": f"FAILED: {tail}",
                "seconds": None,
                "peak_mib": None,
                "note": "",
                "goal": "",
                "ok": False,
            }
        )
    print(f"[{stage}] {time.perf_counter() - t0:.0f} s", flush=True)
    return found


def fmt_seconds(s) -> str:
    if s is None:
        return ""
    return f"{s:,.3f}" if s < 1 else f"{s:,.1f}" if s < 600 else f"{s:,.0f} ({s / 60:.1f} min)"


def markdown(rows: list[dict], n: int) -> str:
    out = [
        "| stage | step | seconds | CPU s | peak RSS (MiB) | goal | met | notes |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        met = "" if r.get("ok") is None else ("yes" if r["ok"] else "**no**")
        peak = "" if r.get("peak_mib") is None else f"{r['peak_mib']:,}"
        out.append(
            f"| {r['stage']} | {r['what']} | {fmt_seconds(r.get('seconds'))} | {fmt_seconds(r.get('cpu_seconds'))} "
            f"| {peak} | {r.get('goal', '')} | {met} | {r.get('note', '')} |"
        )
    peaks = [r["peak_mib"] for r in rows if r.get("peak_mib") is not None and r["stage"] not in ("encoder",)]
    if peaks:
        top = max(peaks)
        out.append(
            f"| all | peak RSS of any stage (the default encoder's slice aside) | | | {top:,} | <= 8 GiB "
            f"| {'yes' if top <= 8192 else '**no**'} | |"
        )
    return "\n".join(out)


def machine() -> str:
    load = os.getloadavg()
    try:
        mem = subprocess.run(["free", "-g"], capture_output=True, text=True).stdout.splitlines()[1].split()
        memory = f"{mem[1]} GiB RAM, {mem[2]} GiB used"
    except (OSError, IndexError):
        memory = ""
    import importlib.metadata as md

    versions = ", ".join(f"{p} {md.version(p)}" for p in ("torch", "pandas", "pyarrow", "numpy", "streamlit"))
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, {memory}, Python {platform.python_version()}, {versions}; "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--examples", type=int, default=50_000, help="training pairs N (the full size: 550000)"
    )
    parser.add_argument("--work", type=Path, help="work folder (default cache/scale/work-<N>)")
    parser.add_argument("--stages", help=f"comma-separated subset of {','.join(STAGES + OPTIONAL)}")
    parser.add_argument(
        "--faiss", action="store_true", help="also time faiss-cpu against the exact neighbours"
    )
    parser.add_argument("--faiss-only", default="", help=argparse.SUPPRESS)
    parser.add_argument("--browser", action="store_true", help="also time the Data map in headless chromium")
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help=f"no training: the stages {','.join(SYNTHETIC_STAGES)} (the run made from the data file, synthetic "
        "dynamics, its Data map page and the browser with the server's memory); for sizes past SNLI's, e.g. "
        "--examples 2000000 --source ../shared/data (the bundled demo cannot make 2,000,000 distinct rows)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the work folder's runs (needed with --stages)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="threads of torch / BLAS in every stage (default: theirs; 1 on a machine shared with other jobs)",
    )
    parser.add_argument(
        "--encoder-slice", type=int, default=256, help="pairs the default encoder is timed on"
    )
    parser.add_argument(
        "--source",
        default="demo",
        help="real pairs the synthetic set is made from: demo (bundled, default) or a shared/data folder "
        "(scripts/make_scale_data.py --source)",
    )
    parser.add_argument(
        "--task",
        default="pair",
        choices=("pair", "token"),
        help="pair: NLI pairs (the default); token: synthetic tagged sentences through a token run's stages "
        "(bench/scale_token.py)",
    )
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    token = args.task == "token"
    if token and args.synthetic:
        parser.error("--synthetic makes NLI pairs; --task token makes its own synthetic sentences")
    folder = f"work-token-{args.examples}" if token else f"work-{args.examples}"
    args.work = (args.work or ROOT / "cache" / "scale" / folder).resolve()
    if token:
        sys.path.insert(0, str(ROOT / "bench"))
        import scale_token

        globals().update({k: v for k, v in vars(scale_token).items() if k.startswith("stage_token_")})
    if args.child:
        fn = globals()[f"stage_{args.child}"]
        fn(Rows(args.child), args.examples, args.work, args)
        return
    all_stages = scale_token.STAGES if token else SYNTHETIC_STAGES if args.synthetic else STAGES
    stages = list(all_stages) if not args.stages else args.stages.split(",")
    if not args.stages and not args.synthetic and not token:
        stages += [s for s in OPTIONAL if getattr(args, s)]
    if not args.stages and not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    if all_stages[0] not in stages and not load_state(args.work):
        stages.insert(0, all_stages[0])
    before = machine()
    print(f"bench_scale: {args.examples:,} examples, work folder {args.work}\n{before}", flush=True)
    t0 = time.perf_counter()
    rows = []
    for stage in stages:
        rows += run_child(stage, args)
    wall = time.perf_counter() - t0
    print()
    print(f"### {args.examples:,} examples\n")
    print(
        f"`python bench/bench_scale.py --examples {args.examples}"
        + (" --task token" if token else "")
        + (" --faiss" if args.faiss else "")
        + (" --browser" if args.browser else "")
        + (" --synthetic" if args.synthetic else "")
        + (f" --source {args.source}" if args.source != "demo" else "")
        + (f" --threads {args.threads}" if args.threads else "")
        + (f" --stages {args.stages}" if args.stages else "")
        + f"`: {wall / 60:.1f} min in all.\n"
    )
    print(markdown(rows, args.examples))
    print(f"\nBefore: {before}\nAfter:  {machine()}")
    if args.json:
        args.json.write_text(
            json.dumps({"examples": args.examples, "rows": rows, "machine": machine()}, indent=2)
        )


if __name__ == "__main__":
    main()
