"""Reading runs and datasets: ``cartomap embed``, ``project``, ``similarity``, ``artifacts``, ``subset``,
``truth``, ``swaps``."""

from __future__ import annotations

import argparse
from pathlib import Path

from cartomap.cli.options import add_column_arguments, add_data_arguments, data_config, detector_names
from cartomap.cli.printing import CountBar, printable_frame
from cartomap.config import SOURCES
from cartomap.errors import CartomapError
from cartomap.io import refuse_overwrite
from cartomap.tasks.sequence import PAIR

#: What the similarity commands compare, in their help: "premise-hypothesis".
_PAIR_TEXTS = "-".join(PAIR.text_fields)


def cmd_embed(a: argparse.Namespace) -> int:
    """Compute a finished run's [CLS] embeddings (task "embeddings"; a token run's words)."""
    from cartomap.errors import RunError
    from cartomap.runs.store import RunStore
    from cartomap.training.embeddings import embed_run, embedding_problem

    run = RunStore(a.cache).get(a.run)
    problem = embedding_problem(run, a.model)
    if problem:
        raise RunError(problem)  # before any task is started: one line, rc 2
    progress = CountBar(a.quiet, "ex", f"embed {run.id}")

    try:
        ids, array = embed_run(
            run, batch_size=a.batch_size, device=a.device, progress=progress, force=a.force, model=a.model
        )
    finally:
        progress.close()
    print(f"embeddings of run {run.id}: {array.shape[0]} x {array.shape[1]} in {run.embeddings_path}")
    return 0


def cmd_truth(a: argparse.Namespace) -> int:
    """The truth report: data-map metrics vs human entropy, every detector vs gold != majority (or known
    errors), with bootstrap intervals; markdown on stdout, ``--json`` to a file."""
    from cartomap.analysis.truth import truth_json, truth_markdown
    from cartomap.errors import DataError
    from cartomap.experiments.truth import truth_of
    from cartomap.io import atomic_write_text
    from cartomap.runs.store import RunStore

    for option, value in (("--bootstrap", a.bootstrap), ("--seed", a.seed)):
        if value < 0 or (option == "--seed" and value > 2**32 - 1):
            raise DataError(
                f"{option}: expected a whole number >= 0 (0 resamples: no intervals), got {value}"
            )
    run = RunStore(a.cache).get(a.run)
    report = truth_of(run, a.cache, n_boot=a.bootstrap, seed=a.seed, source=run.metrics_source(a.source))
    print(truth_markdown(report), end="")
    if a.json:
        refuse_overwrite([Path(a.json)], a.force)
        atomic_write_text(a.json, truth_json(report) + "\n")
        print(f"wrote {a.json}")
    return 0


def cmd_swaps(a: argparse.Namespace) -> int:
    """A token run's recurring tag swaps (word, gold, predicted, count, example sentences): out-of-fold when
    a finished token k-fold experiment has its words (``cartomap prune --data run:RUN``), else its last
    recording; ``--csv`` to a file."""
    from cartomap.experiments.store import ExperimentStore
    from cartomap.experiments.token_folds import swaps_of_run
    from cartomap.io import atomic_write_text
    from cartomap.runs.store import RunStore

    run = RunStore(a.cache).get(a.run)
    table, what, exp = swaps_of_run(run, ExperimentStore(a.cache), a.source, min_count=a.min_count)
    origin = f" of experiment {exp.id}" if exp is not None else ""
    print(f"run {run.id}: {len(table):,} swaps (gold -> predicted, predictions: {what}{origin})")
    if len(table):
        print(printable_frame(table.head(a.top)).to_string(index=False))
    if a.csv:
        refuse_overwrite([Path(a.csv)], a.force)
        atomic_write_text(a.csv, table.to_csv(index=False))
        print(f"wrote {a.csv}")
    return 0


def cmd_project(a: argparse.Namespace) -> int:
    """Project a run's embeddings to 2-D (task "projection_<method>"), cached in the run folder."""
    from cartomap.analysis.projection import project_run, projection_path
    from cartomap.runs.store import RunStore

    run = RunStore(a.cache).get(a.run)
    coords = project_run(run, a.method, seed=a.seed, force=a.force)
    print(
        f"{a.method} projection of run {run.id}: {coords.shape[0]} points in {projection_path(run, a.method)}"
    )
    return 0


def cmd_similarity(a: argparse.Namespace) -> int:
    """The similarity of the two texts of a run's training pairs (task "similarity", similarity.parquet)."""

    from cartomap.runs.store import RunStore
    from cartomap.training.similarity import similarity_path, similarity_run

    run = RunStore(a.cache).get(a.run)
    progress = CountBar(a.quiet, "sentence", f"similarity {run.id}")

    try:
        frame = similarity_run(
            run,
            model=a.model,
            batch_size=a.batch_size,
            max_length=a.max_length,
            device=a.device,
            progress=progress,
            force=a.force,
        )
    finally:
        progress.close()
    print(f"similarity of run {run.id}: {len(frame)} pairs in {similarity_path(run)}")
    return 0


def cmd_artifacts(a: argparse.Namespace) -> int:
    """WaNLI §4 artifact analysis of a dataset: lexical correlations, partial-input baselines, similarity."""
    from cartomap.analysis.artifacts import (
        lexical_correlations,
        partial_input_baselines,
        require_kind,
        side_column,
    )
    from cartomap.data.derived import balanced_sample
    from cartomap.data.loading import load_dataset

    named = data_config(a, a.dataset, a.split)
    require_kind(named.task_kind, named.path)  # before anything is loaded
    dataset = load_dataset(named)
    test = load_dataset(data_config(a, a.test, None), label_names=dataset.label_names) if a.test else None
    field = side_column(dataset.text_columns, a.field) if dataset.is_pair else dataset.text_columns[0]
    if field not in dataset.text_columns:
        raise CartomapError(f"--field {field}: the data has {', '.join(dataset.text_columns)}")
    out = Path(a.out)
    names = ["lexical_correlations.csv", "baselines.csv"]
    if dataset.is_pair and a.similarity:
        names += ["similarity.csv", "similarity_by_label.csv"]
    refuse_overwrite([out / n for n in names], a.force)
    out.mkdir(parents=True, exist_ok=True)
    sample = balanced_sample(dataset, seed=a.seed) if a.balance else dataset
    table = lexical_correlations(
        sample.frame[field].tolist(), sample.labels, dataset.label_names, min_count=a.min_count, alpha=a.alpha
    )
    table.to_csv(out / "lexical_correlations.csv", index=False)
    significant = table[table["significant"]]
    print(
        f"lexical correlations ({field}, {len(sample)} examples{', balanced' if a.balance else ''}): "
        f"{len(table)} (word, label) tests, {len(significant)} significant -> {out / 'lexical_correlations.csv'}"
    )
    for row in significant.head(10).itertuples():
        print(
            f"  {row.word!r:>16} -> {row.label}: p {row.p_label:.3f} in {row.count} examples (z {row.z:.1f})"
        )
    baselines = partial_input_baselines(dataset, test, seed=a.seed, balanced=a.balance)
    baselines.to_csv(out / "baselines.csv", index=False)
    print(f"partial-input baselines (TF-IDF + logistic regression) -> {out / 'baselines.csv'}")
    print(printable_frame(baselines.round(4)).to_string(index=False))
    if dataset.is_pair and a.similarity:
        from cartomap.training.similarity import pair_similarity, similarity_by_label

        first, second = dataset.task_kind.inputs(dataset.frame)
        sim = pair_similarity(
            first,
            second,
            model=a.model,
            batch_size=a.batch_size,
            device=a.device,
        )
        frame = dataset.frame[["id"]].assign(
            label=[dataset.label_names[i] for i in dataset.labels], similarity=sim
        )
        frame.to_csv(out / "similarity.csv", index=False)
        summary = similarity_by_label(sim, dataset.labels, dataset.label_names)
        summary.to_csv(out / "similarity_by_label.csv", index=False)
        print(f"{_PAIR_TEXTS} similarity ({a.model}) -> {out / 'similarity_by_label.csv'}")
        print(printable_frame(summary.round(4)).to_string(index=False))
    return 0


def cmd_subset(a: argparse.Namespace) -> int:
    from cartomap.data.derived import stratified_sample, write_jsonl
    from cartomap.data.loading import load_dataset

    dataset = load_dataset(data_config(a, a.data, a.split))
    sample, rest = stratified_sample(dataset, a.n, a.seed)
    refuse_overwrite([a.out] + ([a.rest] if a.rest else []), a.overwrite)
    write_jsonl(sample, a.out, overwrite=a.overwrite)
    print(f"{len(sample)} examples -> {a.out}")
    if a.rest:
        write_jsonl(rest, a.rest, overwrite=a.overwrite)
        print(f"{len(rest)} examples -> {a.rest}")
    return 0


def _add_embed(sub) -> None:
    """The `embed` command's parser and options."""
    em = sub.add_parser(
        "embed",
        help="compute a finished run's [CLS] embeddings (for nearest neighbours; a token run's: each word's, "
        "at its first sub-word)",
    )
    em.add_argument("run")
    em.add_argument("--batch-size", type=int, default=64)
    em.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    em.add_argument("--force", action="store_true", help="recompute even when saved")
    em.add_argument(
        "--model",
        default=None,
        help="a saved classifier's folder to embed with (a run recorded outside cartomap without its weights)",
    )
    em.add_argument("--quiet", action="store_true", help="no progress bar")
    em.set_defaults(func=cmd_embed)


def _add_project(sub) -> None:
    """The `project` command's parser and options."""
    pj = sub.add_parser("project", help="project a run's embeddings to 2-D (PCA or UMAP), cached")
    pj.add_argument("run")
    pj.add_argument("--method", choices=("umap", "pca"), default="umap")
    pj.add_argument("--seed", type=int, default=0)
    pj.add_argument("--force", action="store_true", help="recompute even when cached")
    pj.set_defaults(func=cmd_project)


def _add_similarity(sub) -> None:
    """The `similarity` command's parser and options."""
    si = sub.add_parser("similarity", help=f"{_PAIR_TEXTS} similarity of a run's pairs (sentence encoder)")
    si.add_argument("run")
    si.add_argument(
        "--model", default="default", help="sentence encoder: default (all-MiniLM-L6-v2), a folder or hub id"
    )
    si.add_argument("--batch-size", type=int, default=64)
    si.add_argument("--max-length", type=int, default=128)
    si.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    si.add_argument("--force", action="store_true", help="recompute even when saved")
    si.add_argument("--quiet", action="store_true", help="no progress bar")
    si.set_defaults(func=cmd_similarity)


def _add_artifacts(sub) -> None:
    """The `artifacts` command's parser and options."""
    ar = sub.add_parser(
        "artifacts", help="artifact analysis: lexical correlations, partial-input baselines, similarity"
    )
    ar.add_argument("dataset", help="file, saved HF dataset folder, hf:NAME, or demo:train")
    add_column_arguments(ar)
    ar.add_argument(
        "--test", default=None, help="test set of the baselines (default: a stratified 20%% split)"
    )
    ar.add_argument(
        "--field",
        choices=PAIR.text_fields[::-1],
        default=PAIR.text_fields[1],
        help="lexical correlations of (a pair's texts; data of single texts: the text)",
    )
    ar.add_argument("--min-count", type=int, default=20, help="leave out words in fewer examples")
    ar.add_argument("--alpha", type=float, default=0.01, help="significance level (Bonferroni-corrected)")
    ar.add_argument("--seed", type=int, default=0)
    ar.add_argument(
        "--no-balance", dest="balance", action="store_false", help="skip the label-balanced sample"
    )
    ar.add_argument(
        "--no-similarity", dest="similarity", action="store_false", help="skip the sentence encoder"
    )
    ar.add_argument("--model", default="default", help="sentence encoder of the similarity")
    ar.add_argument("--batch-size", type=int, default=64)
    ar.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    ar.add_argument("--out", default="artifacts", help="folder for the CSV files")
    ar.add_argument("--force", action="store_true", help="replace CSV files already in --out")
    ar.set_defaults(func=cmd_artifacts)


def add_commands(sub) -> None:
    """Every command of this module, in the order `cartomap --help` lists them."""
    _add_embed(sub)
    _add_project(sub)
    _add_similarity(sub)
    _add_artifacts(sub)

    tr = sub.add_parser(
        "truth",
        help="human judgement: data-map metrics vs vote entropy, detectors vs gold != majority",
        description="The truth report: data-map metrics vs vote entropy, and every registered detector the "
        f"run can feed ({detector_names()}) vs gold != the annotators' majority.",
    )
    tr.add_argument("run")
    tr.add_argument("--json", default=None, help="also write the report as JSON to this file")
    tr.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the 95%% intervals")
    tr.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples")
    tr.add_argument("--force", action="store_true", help="replace --json")
    tr.add_argument(
        "--source",
        choices=SOURCES,
        default=None,
        help="the recordings the map's metrics are from: the training pass or the eval-mode pass (default: "
        "the run's main recording; a run that recorded both has its training pass there); the report names it",
    )
    tr.set_defaults(func=cmd_truth)

    sw = sub.add_parser(
        "swaps", help="a token run's recurring tag swaps: (word, gold tag, predicted tag) with counts"
    )
    sw.add_argument("run")
    sw.add_argument(
        "--source",
        choices=("auto", "oof", "last"),
        default="auto",
        help="predictions: out-of-fold (a finished `cartomap prune --data run:RUN` on token data), the run's "
        "last recording, or auto: out-of-fold when there are some",
    )
    sw.add_argument("--min-count", type=int, default=1, help="leave out swaps seen fewer times")
    sw.add_argument("--top", type=int, default=30, help="rows printed")
    sw.add_argument("--csv", default=None, help="also write the whole table as CSV to this file")
    sw.add_argument("--force", action="store_true", help="replace --csv")
    sw.set_defaults(func=cmd_swaps)

    sb = sub.add_parser("subset", help="a stratified sample of a dataset (and the rest) as JSON Lines")
    add_data_arguments(sb)
    sb.add_argument("--n", type=int, required=True, help="sample size")
    sb.add_argument("--seed", type=int, default=0)
    sb.add_argument("--out", required=True, help="sample file (.jsonl)")
    sb.add_argument("--rest", default=None, help="also write the remaining examples here")
    sb.add_argument(
        "--force", "--overwrite", dest="overwrite", action="store_true", help="replace --out/--rest"
    )
    sb.set_defaults(func=cmd_subset)
