"""The token-classification stages of ``bench/bench_scale.py --task token``: N synthetic sentences through
every stage of a token run, each timed in its own process with its peak memory.

    python bench/bench_scale.py --task token --examples 50000 --threads 1

Data (clearly synthetic, no public data set): the words of the bundled demo's premises and hypotheses
(``demo:train``, then ``demo:dev``), cut into sentences and varied deterministically: sentence i is
demo text i mod D, rotated left by (i div D) mod its length words. Tags follow a fixed rule, not a
person: a word of digits is ``B-NUM``; a capitalised word that is not a sentence's first is ``B-CAP``,
or ``I-CAP`` right after another such word; everything else ``O``. So the tags are learnable, and a
rotated sentence's first word loses its entity tag: some words are hard. Dev: 1,000 sentences made
the same way from the demo's dev texts.

Stages: ``token_setup`` (the CoNLL files, the tiny model; not timed in the table), ``token_load``
(parse and validate the CoNLL file, fingerprint, create the run), ``token_tokenise`` (sub-words and
each word's first one), ``token_train`` (1 epoch of the tiny random BERT as a token classifier,
recording per word), ``token_recorder`` (10 epochs of synthetic per-word logits held, written, turned
into metrics; and ``DynamicsRecorder(task="token")`` fed one epoch of sub-word logit batches),
``token_datamap`` (the word- and sentence-level map frames, the sentence map after k recordings and the
paths of 50 sentences, the figure, the Data map page at word and sentence level, with a sentence opened
and with the slider moved).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import scale_harness as harness

STAGES = ("token_setup", "token_load", "token_tokenise", "token_train", "token_recorder", "token_datamap")
RECORD_EPOCHS = 10
DEV_SENTENCES = 1_000
TAGS = ("B-CAP", "B-NUM", "I-CAP", "O")
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[a-z]+)?|[^\sA-Za-z0-9]")


def words_of(text: str) -> list[str]:
    """A text's words and punctuation marks, in order."""
    return _WORD.findall(text)


def tag_words(words: list[str]) -> list[str]:
    """The synthetic tag rule (module docstring)."""
    tags = []
    for k, word in enumerate(words):
        if word.isdigit():
            tags.append("B-NUM")
        elif k > 0 and word[:1].isupper():
            tags.append("I-CAP" if tags and tags[-1] in ("B-CAP", "I-CAP") else "B-CAP")
        else:
            tags.append("O")
    return tags


def demo_sentences(split: str) -> list[list[str]]:
    """Every premise and hypothesis of the bundled demo ``split`` as a list of words (empty ones dropped)."""
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    frame = load_dataset(DataConfig(path=f"demo:{split}")).frame
    out = []
    for column in ("premise", "hypothesis"):
        out += [w for w in (words_of(t) for t in frame[column].astype(str)) if w]
    return out


def synthetic_sentences(base: list[list[str]], n: int, prefix: str) -> tuple[list[str], list[list[str]]]:
    """(ids, word lists) of n sentences: sentence i is ``base[i % D]`` rotated by (i // D) words."""
    ids, rows = [], []
    for i in range(n):
        words = base[i % len(base)]
        shift = (i // len(base)) % len(words)
        ids.append(f"{prefix}-{i}")
        rows.append(words[shift:] + words[:shift])
    return ids, rows


def write_conll(path: Path, ids: list[str], rows: list[list[str]]) -> None:
    """A CoNLL file (``word<TAB>tag`` lines, a blank line between sentences), atomically. Loading numbers
    the sentences ``sent-<i>`` in file order, so ``ids`` only order them here."""
    from cartomap.io import atomic_write_text

    parts = []
    for _, words in zip(ids, rows, strict=True):
        parts.append("\n".join(f"{w}\t{t}" for w, t in zip(words, tag_words(words), strict=True)))
    atomic_write_text(path, "\n\n".join(parts) + "\n")


def stage_token_setup(rows, n: int, work: Path, args) -> None:
    t0 = time.perf_counter()
    out = harness.ROOT / "cache" / "scale" / "token"
    out.mkdir(parents=True, exist_ok=True)
    train, dev = out / f"synthetic_{n}.conll", out / f"synthetic_dev_{DEV_SENTENCES}.conll"
    if not train.exists():
        write_conll(train, *synthetic_sentences(demo_sentences("train"), n, "syn"))
    if not dev.exists():
        write_conll(dev, *synthetic_sentences(demo_sentences("dev"), DEV_SENTENCES, "syn-dev"))
    tiny = work / "tiny-bert"
    if not tiny.exists():
        from cartomap.training.models import save_random_classifier

        save_random_classifier(tiny)  # the tests' tiny model; loaded with a token head of 4 tags
    harness.save_state(work, conll=str(train), dev=str(dev), tiny_model=str(tiny), n=n)
    rows.add(
        "synthetic sentences from the demo texts (cached CoNLL)",
        time.perf_counter() - t0,
        harness.peak_mib(),
        f"{train.name} {train.stat().st_size / 1e6:.0f} MB",
    )


def token_config(state: dict, n: int):
    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    return RunConfig(
        data=DataConfig(path=state["conll"], name=f"synthetic {n:,}"),
        dev=DataConfig(path=state["dev"], name="synthetic dev"),
        model=ModelConfig(name_or_path=state["tiny_model"]),
        train=TrainConfig(epochs=1, seed=42),
        name=f"token scale {n:,}",
    )


def stage_token_load(rows, n: int, work: Path, args) -> None:
    from cartomap.data.loading import load_dataset

    state = harness.load_state(work)
    config = token_config(state, n)

    def load():
        data = load_dataset(config.data)
        data.fingerprint()
        return data

    data = rows.measure(
        "read + parse + validate the CoNLL file, fingerprint",
        load,
        note=lambda d: f"{len(d):,} sentences, {len(d.labels):,} words, tags {', '.join(d.label_names)}",
    )
    dev = load_dataset(config.dev, label_names=data.label_names)
    run = rows.measure(
        "create the run (config, its own copy examples.parquet)",
        lambda: harness.store_of(work).create(config, data, dev),
        note=lambda r: f"run {r.id}",
    )
    harness.save_state(work, run=run.id)


def stage_token_tokenise(rows, n: int, work: Path, args) -> None:
    from cartomap.training.batching import tokenize
    from cartomap.training.models import load_tokenizer

    run = harness.main_run(work)
    examples = run.examples()
    tokenizer = load_tokenizer(run.config.model.name_or_path)
    rows.measure(
        "tokenise every sentence (words split into sub-words, first sub-word of each word)",
        lambda: tokenize(tokenizer, examples, run.config.model.max_length, run.task_kind),
        note=lambda e: f"{len(e['input_ids'].values):,} sub-words",
    )


def stage_token_train(rows, n: int, work: Path, args) -> None:
    from cartomap.training.loop import continue_run

    run = harness.main_run(work)
    if run.state == "done":
        rows.add("train 1 epoch: the run was trained before (--keep); not timed again")
        return
    harness.reset_peak()
    c0, t0 = time.process_time(), time.perf_counter()
    continue_run(run)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    record = run.history()[0]
    loop = record["train_seconds"]
    words = len(run.metrics(columns=("id",)))
    rows.add(
        "train 1 epoch, tiny model as a token classifier (tokenise, loop, record per word, dev, save)",
        total,
        harness.peak_mib(),
        f"loop {loop:.0f} s = {n / loop:,.0f} sentences/s; {words:,} words recorded; dev word accuracy "
        f"{record.get('dev_accuracy', float('nan')):.3f}",
        cpu=cpu,
    )


def stage_token_recorder(rows, n: int, work: Path, args) -> None:
    """10 epochs of synthetic per-word logits (a per-word skill growing over the epochs, plus noise) as a
    finished run of their own (the map stage draws it: one epoch gives every word variability 0); then
    DynamicsRecorder(task="token") fed one epoch of sub-word logit batches."""
    import dataclasses
    import gc

    import numpy as np

    from cartomap.data.loading import load_dataset
    from cartomap.integrations import DynamicsRecorder
    from cartomap.io import atomic_write_json, atomic_write_parquet
    from cartomap.runs.tables import arrow_ids
    from cartomap.runs.units import with_word_keys
    from cartomap.scores.metrics import compute_metrics

    run = harness.main_run(work)
    data = load_dataset(run.data_config())
    config = run.config.replace(
        dev=None,
        train=dataclasses.replace(run.config.train, epochs=RECORD_EPOCHS, record="train"),  # as written below
        name=f"token scale {n:,}: {RECORD_EPOCHS} recorded epochs (synthetic logits, bench_scale.py)",
    )
    rec = harness.store_of(work).create(config, data)
    unit_ids, labels, counts = data.task_kind.units(data.frame)
    m, c = len(unit_ids), len(data.label_names)
    rng = np.random.default_rng(0)
    skill = rng.normal(1.0, 1.5, m).astype(np.float32)
    gc.collect()
    base = harness.rss_mib()
    harness.reset_peak()
    t0 = time.perf_counter()
    recorded = np.zeros((RECORD_EPOCHS, m, c), dtype=np.float32)
    starts = np.cumsum(counts) - counts
    for epoch in range(RECORD_EPOCHS):
        order = rng.permutation(len(counts))
        for start in range(0, len(order), 32):  # a batch of sentences at a time, their words' rows
            batch = order[start : start + 32]
            index = np.concatenate(
                [np.arange(s, s + k) for s, k in zip(starts[batch], counts[batch], strict=True)]
            )
            values = rng.normal(size=(index.size, c)).astype(np.float32)
            values[np.arange(index.size), labels[index]] += skill[index] * (0.3 + 0.25 * epoch)
            recorded[epoch, index] = values
    fill = time.perf_counter() - t0
    rows.add(
        f"recorder: {RECORD_EPOCHS} epochs of per-word logits held in memory",
        fill,
        harness.peak_mib(),
        f"{m:,} words x {c} tags; arrays {recorded.nbytes / 2**20:.0f} MiB, "
        f"{harness.peak_mib() - base - recorded.nbytes / 2**20:.0f} MiB beyond them",
    )

    def write():
        ids = arrow_ids(unit_ids)
        for epoch in range(RECORD_EPOCHS):
            rec.write_epoch("train", epoch, ids, recorded[epoch])

    rows.measure(f"write {RECORD_EPOCHS} epochs of per-word dynamics (Parquet)", write)
    metrics = rows.measure(
        f"compute the word metrics of {RECORD_EPOCHS} epochs, with (sentence id, word) keys",
        lambda: with_word_keys(compute_metrics(recorded, labels, unit_ids), unit_ids),
    )
    rows.measure("write metrics.parquet", atomic_write_parquet, rec.metrics_path(), metrics)
    history = [
        {"epoch": e + 1, "train_loss": float("nan"), "train_seconds": 0.0} for e in range(RECORD_EPOCHS)
    ]
    atomic_write_json(rec.history_path, history)
    rec.log("dynamics written by bench/bench_scale.py --task token (synthetic logits, no model)")
    rec.set_status(state="done", phase="done", epochs_done=RECORD_EPOCHS, metrics_source="train")
    harness.save_state(work, recorded=rec.id)
    metrics = recorded = None  # freed before the integration below
    gc.collect()

    # the integration: sub-word logits [B, T, C] with aligned labels (-100 but at each word's first sub-word)
    frame = data.frame
    words = frame[data.task_kind.text_fields[0]].tolist()
    tags = [row.tolist() for row in frame[data.task_kind.label_field]]
    recorder = DynamicsRecorder(
        frame["id"].tolist(),
        tags,
        words,
        task="token",
        label_names=data.label_names,
        store=work / "recorder-store",
    )
    batches = []
    for start in range(0, len(frame), 32):  # made before timing: what a model and collator hand over
        k = counts[start : start + 32]
        t = int(k.max()) + 2 + int(k.max()) // 3  # [CLS], [SEP], some words of two sub-words
        marks = np.full((len(k), t), -100, dtype=np.int64)
        for r, (s, w) in enumerate(zip(starts[start : start + 32], k, strict=True)):
            positions = (
                1 + np.arange(w) + np.minimum(np.arange(w), int(k.max()) // 3)
            )  # a later sub-word after the first words
            marks[r, positions] = labels[s : s + w]
        batches.append(
            (
                frame["id"].iloc[start : start + 32].tolist(),
                rng.normal(size=(len(k), t, c)).astype(np.float32),
                marks,
            )
        )

    def feed():
        for ids, logits, marks in batches:
            recorder(0, ids, logits, labels=marks)

    rows.measure(
        "DynamicsRecorder(task='token'): 1 epoch of sub-word logit batches [32, T, C], first sub-words picked",
        feed,
        note=f"{len(batches):,} batches, {m:,} words",
    )
    assert not recorder.missing(0), "every word recorded once"


def stage_token_datamap(rows, n: int, work: Path, args) -> None:
    import pandas as pd

    from cartomap.analysis import datamap as dm
    from cartomap.analysis import figures, tokens

    run = harness.main_run(work, "recorded")
    words = rows.measure(
        "word-level map frame: metrics joined with each word and its sentence (cold)",
        lambda: dm.map_frame(run),
        note=lambda f: f"{len(f):,} words",
    )
    for method in tokens.METHODS:
        rows.measure(
            f"sentence-level map frame, sentences scored by {method}",
            lambda method=method: tokens.sentence_map_frame(run, method),
            note=lambda f: f"{len(f):,} sentences",
        )
    fig = rows.measure(
        "word-level figure: sample + density + histograms",
        lambda: figures.data_map_figure(words, "correctness"),
        note=lambda f: f"{f.layout.meta['n_shown']:,} of {len(words):,} points drawn",
    )
    del fig
    some = str(words["id"].iloc[len(words) // 2])
    sentence = tokens.sentence_of(some, "word")
    rows.measure(
        "one sentence word by word (its rows, p(predicted) from the last epoch file)",
        lambda: tokens.sentence_words(
            words,
            sentence,
            tokens.predicted_probabilities(
                run, [words["id"].iloc[i] for i in tokens.sentence_rows(words, sentence)]
            ),
        ),
    )

    # the map after k recordings: the dynamics read once (the page keeps them), then sliced for each k
    half = RECORD_EPOCHS // 2
    dynamics = rows.measure(
        f"read the recorded dynamics ({RECORD_EPOCHS} epochs), once for every map after k recordings",
        lambda: (lambda ids, logits: (ids, logits, run.unit_labels("train")[1]))(*run.dynamics("train")),
        note=lambda d: f"{d[1].shape[1]:,} words",
    )
    rows.measure(
        f"sentence-level map frame after {half} of {RECORD_EPOCHS} recordings (min; dynamics read)",
        lambda: tokens.sentence_map_frame(run, "min", burn_out=half, dynamics=dynamics),
        note=lambda f: f"{len(f):,} sentences",
    )
    picked = [f"sent-{i}" for i in range(0, n, max(1, n // 50))][:50]
    rows.measure(
        f"paths of {len(picked)} sentences through the sentence map, k = 2..{RECORD_EPOCHS}",
        lambda: tokens.sentence_trajectories(dynamics[1], dynamics[2], pd.Index(dynamics[0]), picked),
        note=lambda f: f"{len(f):,} points",
    )
    dynamics = None  # freed before the page reads its own

    harness.prepare_pages(work)
    app = harness.app_test("data_map.py", work)
    app.session_state["run_id"] = run.id
    harness.timed_run(
        rows, "Data map page, word level: open the run (page script; frame read the first time)", app
    )
    app.session_state["selected_ids"] = [some]
    harness.timed_run(rows, "Data map page, word level: a word picked, its sentence shown", app)
    level = harness.app_test("data_map.py", work)
    level.session_state["run_id"] = run.id
    level.session_state["dm_token_level"] = "sentence"
    harness.timed_run(
        rows, "Data map page, sentence level (min): open (its frame computed the first time)", level
    )
    level.session_state["dm_sentence_ids"] = [sentence]
    harness.timed_run(rows, "Data map page, sentence level: a sentence picked and opened", level)
    level.session_state[f"dm_burn_out_{run.id}"] = half
    harness.timed_run(
        rows,
        f"Data map page, sentence level: the map after {half} of {RECORD_EPOCHS} recordings (dynamics read "
        "the first time), the picked sentence's path",
        level,
    )
    level.session_state["dm_sentence_ids"] = picked
    harness.timed_run(
        rows, f"Data map page, sentence level: {len(picked)} sentences picked, their paths", level
    )
