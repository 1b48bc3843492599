"""The ``cartomap`` command line: every long job the dashboard offers, plus run management."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from .config import (
    DEMO_DEV,
    DEMO_TRAIN,
    ORDERS,
    DataConfig,
    ModelConfig,
    OrderConfig,
    RunConfig,
    TrainConfig,
)
from .errors import CartomapError, RunError

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _columns(text: str) -> tuple[str, ...]:
    cols = tuple(c.strip() for c in text.split(",") if c.strip())
    if len(cols) not in (1, 2):
        raise argparse.ArgumentTypeError("expected one column (single text) or two (premise,hypothesis)")
    return cols


def _names(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument(
        "--data",
        default=DEMO_TRAIN,
        help="training data: file, saved HF dataset folder, hf:NAME, or demo:train",
    )
    g.add_argument(
        "--dev",
        default=None,
        help="dev data evaluated each epoch ('none' to skip; default demo:dev for the demo)",
    )
    g.add_argument("--format", default="auto", help="jsonl, csv, tsv, parquet, hf (default: from the suffix)")
    g.add_argument(
        "--text-columns",
        type=_columns,
        default=("premise", "hypothesis"),
        help="e.g. premise,hypothesis or text",
    )
    g.add_argument("--label-column", default="label")
    g.add_argument("--id-column", default="id", help="generated from the content when absent")
    g.add_argument(
        "--label-names", type=_names, default=None, help="class order, e.g. entailment,neutral,contradiction"
    )
    g.add_argument("--genre-column", default="genre")
    g.add_argument("--split", default=None, help="split of a Hugging Face DatasetDict")
    g.add_argument("--dev-split", default=None)


def data_config(a: argparse.Namespace, path: str, split: str | None) -> DataConfig:
    """The --data/--dev column mapping options as a DataConfig for ``path``."""
    return DataConfig(
        path=path,
        format=a.format,
        text_columns=a.text_columns,
        label_column=a.label_column,
        id_column=a.id_column,
        label_names=a.label_names,
        genre_column=a.genre_column,
        split=split,
    )


def config_from_args(a: argparse.Namespace) -> RunConfig:
    if a.config:
        return RunConfig.from_dict(json.loads(Path(a.config).read_text(encoding="utf-8")))
    data = data_config(a, a.data, a.split)
    dev_path = a.dev if a.dev is not None else (DEMO_DEV if a.data == DEMO_TRAIN else "none")
    dev = None if dev_path.lower() == "none" else data_config(a, dev_path, a.dev_split)
    train = TrainConfig(
        epochs=a.epochs,
        batch_size=a.batch_size,
        eval_batch_size=a.eval_batch_size,
        learning_rate=a.lr,
        weight_decay=a.weight_decay,
        warmup_ratio=a.warmup_ratio,
        max_grad_norm=a.max_grad_norm,
        seed=a.seed,
        group_by_length=a.group_by_length,
        early_stopping_patience=a.early_stopping,
        record=a.record,
        save_checkpoints=a.save_checkpoints,
        device=a.device,
        precision=a.precision,
    )
    tests = tuple(data_config(a, path, None) for path in a.test)
    order = OrderConfig(
        name=a.order,
        oversample=a.oversample,
        scores=a.scores or "",
        difficulty=getattr(a, "difficulty", "paper"),
        curriculum_share=a.curriculum_share,
    )
    return RunConfig(
        data=data,
        dev=dev,
        model=ModelConfig(a.model, a.max_length),
        train=train,
        order=order,
        tests=tests,
        name=a.name,
    )


def cmd_train(a: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from .store import RunStore
    from .train import prepare_run, train_or_load

    config = config_from_args(a)
    store = RunStore(a.cache)
    run = prepare_run(config, store)
    if run.state == "done":
        print(f"run {run.id} exists (done): {run.path}")
        _print_summary(run)
        return 0
    bar = None

    def on_step(s: dict) -> None:
        nonlocal bar
        if a.quiet:
            return
        if bar is None:
            bar = tqdm(total=s["total_steps"], initial=s["global_step"], unit="step", desc=f"run {run.id}")
        bar.n = s["global_step"]
        bar.set_postfix(
            epoch=f"{s['epoch']}/{s['epochs']}",
            loss=s.get("loss"),
            dev_acc=s.get("dev_accuracy"),
            refresh=False,
        )
        bar.refresh()

    print(f"run {run.id}: {run.path}", flush=True)
    try:
        train_or_load(config, store, on_step=on_step, as_job=a.job)
    finally:
        if bar is not None:
            bar.close()
    state = run.state
    print(f"run {run.id} {state}: {run.path}")
    if state == "done":
        _print_summary(run)
    return 0 if state == "done" else 3


def _print_summary(run) -> None:
    history = run.history()
    acc = history[-1].get("dev_accuracy") if history else None
    print(
        f"  {run.info.get('n_train')} examples, {len(history)} epochs"
        + (f", dev accuracy {acc:.4f}" if acc is not None else "")
    )
    best = run.best_epoch()
    for k, name in enumerate(run.test_names):
        value = history[best].get(f"test_{k}_accuracy") if best is not None else None
        if value is not None:
            print(f"  test {name}: accuracy {value:.4f} (epoch {best + 1})")
    if (run.path / "metrics.parquet").exists():
        counts = run.metrics()["region"].value_counts().to_dict()
        print("  regions: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def cmd_demo(a: argparse.Namespace) -> int:
    """Train (or load) the bundled demo with the default encoder and write its data map."""
    from .plots import save_data_map
    from .store import RunStore
    from .train import prepare_run

    config = RunConfig(name="demo")
    run = prepare_run(config, RunStore(a.cache))
    if run.state != "done":
        args = build_parser().parse_args(["--cache", a.cache, "train", "--name", "demo"])
        code = cmd_train(args)
        if code:
            return code
    else:
        print(f"demo run {run.id} exists: {run.path}")
        _print_summary(run)
    for suffix in ("png", "html"):
        out = Path(a.out_dir) / f"demo_map.{suffix}"
        save_data_map(run.metrics(), out, title="Data map: bundled NLI demo", label_names=run.label_names)
        print(f"wrote {out}")
    return 0


def cmd_dashboard(a: argparse.Namespace) -> int:
    """Open the Streamlit dashboard, bound to 127.0.0.1 unless --address says otherwise."""
    app = Path(__file__).resolve().parent.parent / "app.py"
    if not app.exists():
        print(f"cartomap: error: the dashboard needs a source checkout (no {app})", file=sys.stderr)
        return 2
    env = dict(os.environ, CARTOMAP_CACHE=str(Path(a.cache).resolve()))
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.address",
        a.address,
        "--server.port",
        str(a.port),
        "--browser.gatherUsageStats",
        "false",
        "--server.maxUploadSize",
        "200",
        "--server.showEmailPrompt",
        "false",  # a first-time Streamlit user would otherwise be asked for an e-mail address
    ]
    if a.headless:
        cmd += ["--server.headless", "true"]
    os.execvpe(cmd[0], cmd, env)  # become the server: signals (Ctrl-C, kill) reach it directly


def cmd_runs(a: argparse.Namespace) -> int:
    from .store import RunStore

    table = RunStore(a.cache).table()
    if table.empty:
        print(f"no runs in {RunStore(a.cache).runs_dir}")
    else:
        print(table.to_string(index=False))
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    status = run.status()
    print(f"run {run.id}  ({status['state']})  {run.path}")
    cfg = run.config
    print(
        f"  data   {cfg.data.path}  dev {cfg.dev.path if cfg.dev else '-'}  labels {', '.join(run.label_names)}"
    )
    print(
        f"  model  {cfg.model.name_or_path}  epochs {cfg.train.epochs}  batch {cfg.train.batch_size}  "
        f"lr {cfg.train.learning_rate}  record {cfg.train.record}"
    )
    if status["state"] in ("running", "interrupted", "cancelled", "failed"):
        print(
            f"  progress: epoch {status.get('epoch')}/{status.get('epochs')} step {status.get('global_step')}/"
            f"{status.get('total_steps')} eta {status.get('eta_s')}s"
            + (f"  error: {status['error']}" if status.get("error") else "")
        )
    for h in run.history():
        print("  " + "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in h.items()))
    if status["state"] == "done":
        _print_summary(run)
        m = run.metrics()
        print(
            m[["confidence", "variability", "correctness", "forgetfulness", "aum"]]
            .describe()
            .round(3)
            .to_string()
        )
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from .interop import write_reference_dynamics, write_reference_metrics
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    out = Path(a.out)
    ids, logits = run.dynamics(a.source)
    labels = run.examples()["label"].to_numpy()
    write_reference_dynamics(out, ids, logits, labels)
    write_reference_metrics(out / "td_metrics.jsonl", run.metrics(a.source))
    run.metrics(a.source).to_csv(out / "metrics.csv", index=False)
    print(f"wrote {logits.shape[0]} dynamics_epoch_*.jsonl, td_metrics.jsonl and metrics.csv to {out}")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from .importer import import_reference_run
    from .store import RunStore

    data = data_config(a, a.data, a.split) if a.data else None
    run = import_reference_run(a.folder, RunStore(a.cache), data=data, label_names=a.label_names, name=a.name)
    print(f"imported run {run.id}: {run.path}")
    _print_summary(run)
    return 0


def cmd_map(a: argparse.Namespace) -> int:
    from .plots import SAVE_SUFFIXES, save_data_map
    from .store import RunStore

    if Path(a.out).suffix.lower() not in SAVE_SUFFIXES:
        raise CartomapError(f"--out {a.out}: expected a file name ending in {' or '.join(SAVE_SUFFIXES)}")
    run = RunStore(a.cache).get(a.run)
    title = a.title or f"{run.config.data.path} ({run.id})"
    path = save_data_map(run.metrics(a.source), a.out, title=title, label_names=run.label_names)
    print(f"wrote {path}")
    return 0


def cmd_delete(a: argparse.Namespace) -> int:
    from .store import RunStore

    store = RunStore(a.cache)
    run = store.get(a.run)
    if not a.yes:
        if not sys.stdin.isatty():
            print(f"refusing to delete run {run.id} without --yes", file=sys.stderr)
            return 2
        if input(f"delete run {run.id} at {run.path}? [y/N] ").strip().lower() != "y":
            return 1
    store.delete(run.id)
    print(f"deleted run {run.id}")
    return 0


def cmd_cancel(a: argparse.Namespace) -> int:
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    run.request_cancel()
    print(f"cancel requested for run {run.id}; it stops after the current step and can be resumed")
    return 0


class CountBar:
    """A tqdm bar created on the first ``(done, total)`` update (nothing when quiet); close() is safe twice."""

    def __init__(self, quiet: bool, unit: str, desc: str):
        self.quiet, self.unit, self.desc, self.bar = quiet, unit, desc, None

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit=self.unit, desc=self.desc)
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def cmd_embed(a: argparse.Namespace) -> int:
    """Compute a finished run's [CLS] embeddings (task "embeddings")."""
    from .embeddings import embed_run
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    progress = CountBar(a.quiet, "ex", f"embed {run.id}")

    try:
        ids, array = embed_run(
            run, batch_size=a.batch_size, device=a.device, progress=progress, force=a.force
        )
    finally:
        progress.close()
    print(f"embeddings of run {run.id}: {array.shape[0]} x {array.shape[1]} in {run.path / 'embeddings.npy'}")
    return 0


def cmd_project(a: argparse.Namespace) -> int:
    """Project a run's embeddings to 2-D (task "projection_<method>"), cached in the run folder."""
    from .projection import project_run, projection_path
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    coords = project_run(run, a.method, seed=a.seed, force=a.force)
    print(
        f"{a.method} projection of run {run.id}: {coords.shape[0]} points in {projection_path(run, a.method)}"
    )
    return 0


def cmd_filter(a: argparse.Namespace) -> int:
    """WaNLI Stage 3 on a generated batch: heuristics, tidying, estimated max variability (task "filter-<batch>")."""
    from .filtering import FilterConfig, run_filter
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    cfg = FilterConfig(
        keep_fraction=a.keep_fraction, balance=a.balance, batch_size=a.batch_size, device=a.device
    )
    frame = run_filter(run, a.batch, cfg)
    counts = frame["removed_by"].value_counts().to_dict()
    print(f"filtered batch {a.batch} of run {run.id}: {int(frame['kept'].sum())} of {len(frame)} kept")
    print("  removed: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none"))
    return 0


def cmd_review_export(a: argparse.Namespace) -> int:
    """Aggregate a batch's two reviews per example and write the kept examples (JSONL or CSV)."""
    from .review import export_reviewed
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    path, rows = export_reviewed(run, a.batch, a.out, format=a.format, seed=a.seed, overwrite=a.overwrite)
    print(f"wrote {rows} reviewed examples to {path}")
    return 0


def _label_word(text: str) -> tuple[str, str]:
    label, sep, word = text.partition("=")
    if not sep or not label.strip() or not word.strip():
        raise argparse.ArgumentTypeError("expected LABEL=Word, e.g. contrastive=However")
    return label.strip(), word.strip()


def cmd_groups(a: argparse.Namespace) -> int:
    """WaNLI stage 1: collect (and with --save, store) a run's automatic groups; embeddings first if missing."""
    from .embeddings import embed_run, load_embeddings
    from .exemplars import collect_groups, save_auto_groups
    from .jobs import task
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    query = a.query if a.query > 0 else None
    settings = {"k": a.k, "quantile": a.quantile, "exclude_genres": list(a.exclude_genres), "query": query}
    if not a.save:
        embeddings = load_embeddings(run) or embed_run(run)
        groups = collect_groups(run, a.k, a.quantile, a.exclude_genres, query, embeddings=embeddings)
    else:
        with task(run, "auto-groups", phase="embeddings", **settings) as update:
            embeddings = load_embeddings(run) or embed_run(run)
            update(phase="collecting", progress=0.5)
            groups = collect_groups(run, a.k, a.quantile, a.exclude_genres, query, embeddings=embeddings)
            saved = save_auto_groups(run, groups, settings=settings)
            update(groups=saved)
    counts: dict[str, int] = {}
    for g in groups:
        counts[g["label_name"]] = counts.get(g["label_name"], 0) + 1
    print(
        f"{len(groups)} automatic groups of run {run.id} (k={a.k}, quantile {a.quantile}, "
        f"query {query or 'all'}, genres left out: {', '.join(a.exclude_genres) or 'none'})"
    )
    print("  per label: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none"))
    for g in groups[: a.show]:
        print(f"  {g['name']}: {' '.join(g['ids'])}")
    print("saved (source auto)" if a.save else "not saved: add --save to store them as groups")
    return 0


def cmd_generate(a: argparse.Namespace) -> int:
    """WaNLI stage 2: generate a batch of new pairs from groups (task "generate-<batch>")."""
    from .generation import (
        GenerationConfig,
        batch_dir,
        execute_generation,
        prepare_generation,
        resolve_groups,
    )
    from .prompts import DEFAULT_INSTRUCTION, PromptTemplate, label_words_for
    from .store import RunStore

    run = RunStore(a.cache).get(a.run)
    if not a.job:  # the dashboard prepares generation.json itself, then starts `generate --job`
        cfg = GenerationConfig(
            backend=a.backend,
            model=a.model,
            top_p=a.top_p,
            temperature=a.temperature,
            max_new_tokens=a.max_new_tokens,
            n=a.n,
            batch_size=a.batch_size,
            seed=a.seed,
            max_examples=a.max_examples,
            device=a.device,
            base_url=a.base_url,
            api_key_env=a.api_key_env,
        )
        template = PromptTemplate(
            instruction=a.instruction if a.instruction is not None else DEFAULT_INSTRUCTION,
            label_words=label_words_for(run.label_names, dict(a.label_word or [])),
        )
        names = resolve_groups(run, a.groups)
        if a.limit_groups:
            names = names[: a.limit_groups]
        prepare_generation(run, a.batch, names, cfg, template, overwrite=a.overwrite, name=a.batch)

    def progress(done: int, total: int) -> None:
        if not a.quiet:
            print(f"  {done}/{total} prompts", flush=True)

    frame = execute_generation(run, a.batch, progress=progress)
    print(f"batch {a.batch}: {len(frame)} generated pairs in {batch_dir(run, a.batch) / 'generated.parquet'}")
    return 0


def cmd_experiment(a: argparse.Namespace) -> int:
    from .experiments import ExperimentStore, start_experiment

    store = ExperimentStore(a.cache)
    if a.action == "list":
        table = store.table()
        print(table.to_string(index=False) if len(table) else "no experiments")
        return 0
    if not a.experiment:
        raise RunError(f"`cartomap experiment {a.action}` needs an experiment id")
    exp = store.get(a.experiment)
    if a.action == "show":
        print(json.dumps({"spec": exp.spec, "status": exp.status(), "runs": exp.run_ids()}, indent=2))
        return 0
    if a.action == "cancel":
        exp.request_cancel()
        print(f"asked experiment {exp.id} to stop")
        return 0
    if a.action == "delete":
        store.delete(exp.id)
        print(f"deleted experiment {exp.id} (its runs stay in the run store)")
        return 0
    if a.action == "start":
        start_experiment(exp, store)
        print(f"experiment {exp.id} started in the background: {exp.path / 'job.log'}")
        return 0
    return _run_experiment_foreground(exp, store, as_job=a.job)


def _run_experiment_foreground(exp, store, as_job: bool = False) -> int:
    from .experiments import run_experiment

    print(f"experiment {exp.id} ({exp.kind}): {exp.path}", flush=True)
    run_experiment(exp, store, as_job=as_job, echo=lambda msg: print(msg, flush=True))
    state = exp.state
    print(f"experiment {exp.id} {state}")
    return 0 if state == "done" else 3


def cmd_similarity(a: argparse.Namespace) -> int:
    """Premise-hypothesis similarity of a run's training pairs (task "similarity", similarity.parquet)."""

    from .similarity import similarity_path, similarity_run
    from .store import RunStore

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
    from .artifacts import lexical_correlations, partial_input_baselines
    from .data import load_dataset
    from .derived import balanced_sample

    dataset = load_dataset(data_config(a, a.dataset, a.split))
    test = load_dataset(data_config(a, a.test, None), label_names=dataset.label_names) if a.test else None
    field = a.field if dataset.is_pair else "text"
    if field not in dataset.text_columns:
        raise CartomapError(f"--field {field}: the data has {', '.join(dataset.text_columns)}")
    out = Path(a.out)
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
    print(baselines.round(4).to_string(index=False))
    if dataset.is_pair and a.similarity:
        from .similarity import pair_similarity, similarity_by_label

        sim = pair_similarity(
            dataset.frame["premise"].tolist(),
            dataset.frame["hypothesis"].tolist(),
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
        print(f"premise-hypothesis similarity ({a.model}) -> {out / 'similarity_by_label.csv'}")
        print(summary.round(4).to_string(index=False))
    return 0


def add_noise_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the label-noise benchmark (`cartomap noise-benchmark`, bench/bench_noise.py)."""
    p.add_argument(
        "--data", default=None, help="clean labelled dataset (default: SNLI dev from the shared data)"
    )
    p.add_argument("--n", type=int, default=2000, help="class-balanced sample size")
    p.add_argument("--rates", type=float, nargs="+", default=[0.1], help="fractions of labels flipped")
    p.add_argument(
        "--settings", nargs="+", default=["symmetric", "asymmetric"], choices=("symmetric", "asymmetric")
    )
    p.add_argument("--folds", type=int, default=5, help="k of the out-of-fold logits")
    p.add_argument("--epochs", type=int, default=2, help="epochs of Model 0 and of every fold model")
    p.add_argument(
        "--model", default="default", help="encoder: default (all-MiniLM-L6-v2), a folder or hub id"
    )
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threshold", type=float, default=2.0, help="consensus rule: model confidence above this")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, the flips and the folds")


def noise_config(a: argparse.Namespace):
    """The NoiseBenchmarkConfig of parsed :func:`add_noise_arguments` options."""
    from .noise_benchmark import DEFAULT_DATA, NoiseBenchmarkConfig

    return NoiseBenchmarkConfig(
        data=a.data or DEFAULT_DATA,
        n=a.n,
        seed=a.seed,
        rates=tuple(a.rates),
        settings=tuple(a.settings),
        folds=a.folds,
        epochs=a.epochs,
        model=a.model,
        max_length=a.max_length,
        batch_size=a.batch_size,
        learning_rate=a.lr,
        threshold=a.threshold,
    )


def cmd_noise_benchmark(a: argparse.Namespace) -> int:
    """Label-noise benchmark (issue 5): plant label flips and score suspect-ranking methods."""
    from .noise_benchmark import run_noise_benchmark, to_markdown

    cfg = noise_config(a)
    table = run_noise_benchmark(cfg, a.cache)
    print(to_markdown(table) if a.markdown else table.round(4).to_string(index=False))
    print(f"saved to {table.attrs['path']}")
    return 0


def _experiment_options(p: argparse.ArgumentParser, func) -> None:
    p.add_argument("--name", default="", help="a label for the experiment")
    p.add_argument("--background", action="store_true", help="run as a background job and return")
    p.set_defaults(func=func, config=None, order="shuffled", oversample=None, scores="", curriculum_share=0.5)


def add_training_arguments(p: argparse.ArgumentParser) -> None:
    """Model, training and test-set options shared by `train` and the experiment commands."""
    g = p.add_argument_group("model and training")
    d = TrainConfig()
    g.add_argument(
        "--model", default="default", help="local folder or hub id (default: bundled all-MiniLM-L6-v2)"
    )
    g.add_argument("--max-length", type=int, default=ModelConfig().max_length)
    g.add_argument("--epochs", type=int, default=d.epochs)
    g.add_argument("--batch-size", type=int, default=d.batch_size)
    g.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size)
    g.add_argument("--lr", type=float, default=d.learning_rate)
    g.add_argument("--weight-decay", type=float, default=d.weight_decay)
    g.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio)
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm)
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument(
        "--no-group-by-length",
        dest="group_by_length",
        action="store_false",
        help="plain random batches (default: shuffled batches of similar length, less padding)",
    )
    g.add_argument(
        "--early-stopping", type=int, default=d.early_stopping_patience, help="patience in epochs (0 = off)"
    )
    g.add_argument("--record", choices=("train", "eval", "both", "none"), default=d.record)
    g.add_argument(
        "--no-checkpoints",
        dest="save_checkpoints",
        action="store_false",
        help="do not keep end-of-epoch weights (saves disk; WaNLI filtering needs them)",
    )
    g.add_argument("--device", default=d.device, help="auto, cpu, cuda, cuda:N, mps")
    g.add_argument("--precision", default=d.precision, help="auto, fp32, bf16, fp16")
    p.add_argument(
        "--test", action="append", default=[], help="a test set evaluated after every epoch (repeatable)"
    )


def _experiment_base(a: argparse.Namespace) -> RunConfig:
    """The base RunConfig of an experiment command (train options; order and record set per run)."""
    if not a.test:
        raise RunError("give at least one test set with --test")
    return config_from_args(a)


def _start_or_run(exp, store, background: bool) -> int:
    from .experiments import start_experiment

    if background:
        start_experiment(exp, store)
        print(
            f"experiment {exp.id} started in the background; follow it with `cartomap experiment show {exp.id}`"
        )
        return 0
    code = _run_experiment_foreground(exp, store)
    if code == 0:
        print(experiment_report(exp, store))
    return code


def cmd_curriculum(a: argparse.Namespace) -> int:
    from .curriculum_experiment import CurriculumParams, create_curriculum
    from .experiments import ExperimentStore

    store = ExperimentStore(a.cache)
    params = CurriculumParams(
        base=_experiment_base(a),
        methods=tuple(a.methods),
        seeds=tuple(a.seeds),
        difficulty=a.difficulty,
        compare=tuple(a.compare) if a.compare else None,
        datamap_epochs=a.datamap_epochs,
    )
    return _start_or_run(create_curriculum(params, store, name=a.name), store, a.background)


def cmd_combine(a: argparse.Namespace) -> int:
    from .curriculum_experiment import CombinationParams, TrainingSet, create_combination, training_set_names
    from .experiments import ExperimentStore

    store = ExperimentStore(a.cache)
    base = _experiment_base(a)
    data_a = dataclasses.replace(data_config(a, a.a, None), name=a.a_name)
    data_b = data_config(a, a.b, None) if a.b else None
    names = training_set_names(a.a_name, a.b_name)
    sets = tuple(TrainingSet(names[m], data_a, data_b if m != "A" else None, m) for m in a.modes)
    params = CombinationParams(
        base=base, training_sets=sets, tests=base.tests, seeds=tuple(a.seeds), cache=str(store.root)
    )
    return _start_or_run(create_combination(params, store, name=a.name), store, a.background)


def experiment_report(exp, store) -> str:
    """The results of a finished experiment as markdown (tables and tests)."""
    from .reports import markdown_table

    out = [f"## Experiment {exp.id} ({exp.kind}) {exp.spec.get('name', '')}".rstrip()]
    if exp.kind == "curriculum":
        best = exp.result("best")
        cols = ["method", "seed", "epoch", "dev_accuracy", "accuracy", "micro_f1", "macro_f1", "run_id"]
        out += ["", "Best run on validation per method (test set: " + str(best["test_set"].iloc[0]) + ")", ""]
        out.append(markdown_table(best[cols]))
        out += ["", "All seeds (mean, std, min, max)", "", markdown_table(exp.result("aggregate"))]
        per_class = exp.result("per_class")
        wide = per_class.pivot_table(index="class", columns="method", values="f1", sort=False).reset_index()
        out += ["", "F1 per class (best run per method)", "", markdown_table(wide)]
        sig = exp.result("significance")
        if sig:
            q, mw = sig["cochran"], sig["mann_whitney"]
            out += [
                "",
                f"Cochran's Q over {len(sig['methods'])} methods: Q = {q['q']:.3f}, df = {q['df']}, "
                f"p = {q['p_value']:.4g}.",
                f"Mann-Whitney U ({sig['a']} vs {sig['b']}, macro F1 of every seed): U = {mw['u']}, "
                f"p = {mw['p_value']:.4g} (n = {mw['n_a']}, {mw['n_b']}).",
            ]
    elif exp.kind == "combination":
        out += ["", markdown_table(exp.result("table3"))]
    elif exp.kind == "pruning":
        from .pruning import load_results, report_text

        out += ["", report_text(load_results(exp))]
    else:
        summary = exp.result("summary")
        out += ["", json.dumps(summary, indent=2, default=str)]
    return "\n".join(out)


def cmd_subset(a: argparse.Namespace) -> int:
    from .data import load_dataset
    from .derived import stratified_sample, write_jsonl

    dataset = load_dataset(data_config(a, a.data, a.split))
    sample, rest = stratified_sample(dataset, a.n, a.seed)
    for path in [a.out] + ([a.rest] if a.rest else []):
        if Path(path).exists() and not a.overwrite:
            raise RunError(f"{path} exists; pass --overwrite to replace it")
    write_jsonl(sample, a.out, overwrite=a.overwrite)
    print(f"{len(sample)} examples -> {a.out}")
    if a.rest:
        write_jsonl(rest, a.rest, overwrite=a.overwrite)
        print(f"{len(rest)} examples -> {a.rest}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .experiments import ExperimentStore

    store = ExperimentStore(a.cache)
    exp = store.get(a.experiment)
    if exp.state != "done":
        raise RunError(f"experiment {exp.id} is {exp.state}; a report needs a finished experiment")
    print(experiment_report(exp, store.runs))
    return 0


def cmd_prune(a: argparse.Namespace) -> int:
    """The k-fold consensus pruning experiment (issue 5): Model 0, k folds, Model 1 on the pruned set."""
    from .experiments import ExperimentStore
    from .pruning import PruningParams, create_pruning, export_pruned

    if a.train:
        if a.data not in (DEMO_TRAIN, a.train):
            raise RunError("give the training set once: TRAIN or --data")
        a.data = a.train
    if a.dev is None:
        a.dev = "none"  # no demo dev set by default: it is often the test set, and it picks Model 0's epoch
    store = ExperimentStore(a.cache)
    params = PruningParams(
        base=_experiment_base(a),
        folds=a.folds,
        fold_seed=a.fold_seed,
        categories=tuple(a.categories),
        threshold=a.threshold,
        train_model1=a.model1,
    )
    exp = create_pruning(params, store, name=a.name)
    code = _start_or_run(exp, store, a.background)
    if code == 0 and a.export and not a.background:
        data_path, ids_path = export_pruned(exp, store.runs, a.export, overwrite=a.overwrite)
        print(f"wrote {data_path} and {ids_path}")
    elif a.export and a.background:
        print(f"export later with `cartomap prune ... --export {a.export}` once experiment {exp.id} is done")
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cartomap", description="Data maps for text-classification datasets."
    )
    parser.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"), help="run store folder")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train or load a run and record its training dynamics")
    add_data_arguments(t)
    t.add_argument("--config", default=None, help="a RunConfig JSON file (replaces the other options)")
    t.add_argument("--name", default="", help="a label for the run (not part of its identity)")
    add_training_arguments(t)
    o = t.add_argument_group("training order (curricula)")
    od = OrderConfig()
    o.add_argument("--order", choices=ORDERS, default=od.name)
    o.add_argument(
        "--oversample",
        action=argparse.BooleanOptionalAction,
        default=od.oversample,
        help="repeat minority classes (default: on for every order but shuffled)",
    )
    o.add_argument("--scores", default="", help="a baseline run's metrics.parquet (cartography orders)")
    o.add_argument("--difficulty", choices=("paper", "code"), default=od.difficulty)
    o.add_argument("--curriculum-share", type=float, default=od.curriculum_share)
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # started by the dashboard
    t.set_defaults(func=cmd_train)

    cu = sub.add_parser("curriculum", help="compare training orders x seeds (cartography curricula)")
    add_data_arguments(cu)
    add_training_arguments(cu)
    cu.add_argument("--methods", nargs="+", choices=ORDERS, default=["oversampled", "cart-stra++"])
    cu.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    cu.add_argument("--difficulty", choices=("paper", "code"), default="paper", help="Cart-CL++ score")
    cu.add_argument("--compare", nargs=2, default=None, help="the two methods of the Mann-Whitney test")
    cu.add_argument(
        "--datamap-epochs", type=int, default=None, help="epochs of the data-map baseline (default: --epochs)"
    )
    _experiment_options(cu, cmd_curriculum)

    co = sub.add_parser("combine", help="train on A, A + B, A ◇ B and evaluate on many test sets (Table 3)")
    add_data_arguments(co)
    add_training_arguments(co)
    co.add_argument("--a", required=True, help="dataset A")
    co.add_argument("--b", default=None, help="dataset B")
    co.add_argument("--a-name", default="A")
    co.add_argument("--b-name", default="B")
    co.add_argument("--modes", nargs="+", choices=("A", "A+B", "A◇B"), default=["A", "A+B", "A◇B"])
    co.add_argument("--seeds", nargs="+", type=int, default=[0])
    _experiment_options(co, cmd_combine)

    sb = sub.add_parser("subset", help="a stratified sample of a dataset (and the rest) as JSON Lines")
    add_data_arguments(sb)
    sb.add_argument("--n", type=int, required=True, help="sample size")
    sb.add_argument("--seed", type=int, default=0)
    sb.add_argument("--out", required=True, help="sample file (.jsonl)")
    sb.add_argument("--rest", default=None, help="also write the remaining examples here")
    sb.add_argument("--overwrite", action="store_true")
    sb.set_defaults(func=cmd_subset)

    rp = sub.add_parser("report", help="print a finished experiment's results as markdown")
    rp.add_argument("experiment")
    rp.set_defaults(func=cmd_report)

    pr = sub.add_parser(
        "prune", help="find and prune suspected label errors: the k-fold consensus experiment"
    )
    pr.add_argument("train", nargs="?", default=None, metavar="TRAIN", help="training data (same as --data)")
    add_data_arguments(pr)
    add_training_arguments(pr)
    pg = pr.add_argument_group("pruning")
    pg.add_argument("--folds", type=int, default=10, help="k of the k-fold split (paper: 10)")
    pg.add_argument("--fold-seed", type=int, default=0)
    pg.add_argument(
        "--categories", nargs="+", default=["P1G0"], help="mismatch categories PXGY to prune (paper: P1G0)"
    )
    pg.add_argument(
        "--threshold",
        type=float,
        default=2.0,
        help="prune model confidence above this (paper: 2.0; 4.0 stricter)",
    )
    pg.add_argument(
        "--no-model1", dest="model1", action="store_false", help="do not retrain on the pruned set"
    )
    pg.add_argument(
        "--export", default=None, metavar="DIR", help="write pruned_train.jsonl and removed_ids.txt"
    )
    pg.add_argument("--overwrite", action="store_true", help="replace files in the --export folder")
    _experiment_options(pr, cmd_prune)
    pr.set_defaults(difficulty="paper")

    ex = sub.add_parser("experiment", help="list, show, run (resume), cancel or delete experiments")
    ex.add_argument("action", choices=("list", "show", "run", "start", "cancel", "delete"))
    ex.add_argument("experiment", nargs="?", help="experiment id, id prefix or name")
    ex.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    ex.set_defaults(func=cmd_experiment)

    dm = sub.add_parser("demo", help="train or load the bundled demo and write demo_map.png/.html")
    dm.add_argument("--out-dir", default=".")
    dm.set_defaults(func=cmd_demo)

    db = sub.add_parser("dashboard", help="open the dashboard in the browser (Streamlit)")
    db.add_argument("--address", default="127.0.0.1", help="interface to bind (default: this machine only)")
    db.add_argument("--port", type=int, default=8501)
    db.add_argument("--headless", action="store_true", help="do not open a browser")
    db.set_defaults(func=cmd_dashboard)

    sub.add_parser("runs", help="list runs").set_defaults(func=cmd_runs)
    s = sub.add_parser("show", help="a run's config, progress, history and metric summary")
    s.add_argument("run")
    s.set_defaults(func=cmd_show)

    e = sub.add_parser("export", help="write dynamics_epoch_*.jsonl and td_metrics.jsonl (reference format)")
    e.add_argument("run")
    e.add_argument("--out", required=True)
    e.add_argument("--source", default="train", choices=("train", "eval"))
    e.set_defaults(func=cmd_export)

    i = sub.add_parser("import-dynamics", help="make a run from a folder of reference dynamics_epoch_*.jsonl")
    i.add_argument("folder")
    i.add_argument("--name", default="")
    add_data_arguments(i)
    i.set_defaults(func=cmd_import, data=None)

    m = sub.add_parser("map", help="draw the data map of a run to PNG or HTML")
    m.add_argument("run")
    m.add_argument("--out", required=True, help="map.png or map.html")
    m.add_argument("--source", default="train", choices=("train", "eval"))
    m.add_argument("--title", default="")
    m.set_defaults(func=cmd_map)

    x = sub.add_parser("delete", help="delete a run folder")
    x.add_argument("run")
    x.add_argument("--yes", action="store_true")
    x.set_defaults(func=cmd_delete)

    c = sub.add_parser("cancel", help="ask a running training job to stop after its current step")
    c.add_argument("run")
    c.set_defaults(func=cmd_cancel)

    em = sub.add_parser("embed", help="compute a finished run's [CLS] embeddings (for nearest neighbours)")
    em.add_argument("run")
    em.add_argument("--batch-size", type=int, default=64)
    em.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    em.add_argument("--force", action="store_true", help="recompute even when saved")
    em.add_argument("--quiet", action="store_true", help="no progress bar")
    em.set_defaults(func=cmd_embed)

    pj = sub.add_parser("project", help="project a run's embeddings to 2-D (PCA or UMAP), cached")
    pj.add_argument("run")
    pj.add_argument("--method", choices=("umap", "pca"), default="umap")
    pj.add_argument("--seed", type=int, default=0)
    pj.add_argument("--force", action="store_true", help="recompute even when cached")
    pj.set_defaults(func=cmd_project)

    gr = sub.add_parser("groups", help="WaNLI stage 1: collect a run's automatic groups (seed + neighbours)")
    gr.add_argument("run")
    gr.add_argument("--k", type=int, default=4, help="neighbours per seed (WaNLI: 4)")
    gr.add_argument("--quantile", type=float, default=0.75, help="seeds: above this variability quantile")
    gr.add_argument(
        "--exclude-genres",
        type=_names,
        default=("telephone",),
        help="comma-separated genres that are neither seeds nor neighbours ('' for none)",
    )
    gr.add_argument(
        "--query",
        type=int,
        default=15,
        help="nearest examples searched before keeping the seed's label (0: all of that label)",
    )
    gr.add_argument(
        "--save", action="store_true", help="store them as groups (replaces earlier automatic ones)"
    )
    gr.add_argument("--show", type=int, default=10, help="groups listed")
    gr.set_defaults(func=cmd_groups)

    ge = sub.add_parser(
        "generate", help="WaNLI stage 2: generate new pairs from groups with a language model"
    )
    ge.add_argument("run")
    ge.add_argument("--batch", required=True, help="a short name for the batch (folder under wanli/)")
    ge.add_argument("--groups", default="auto", help="all, auto, or comma-separated group names")
    ge.add_argument("--limit-groups", type=int, default=0, help="only the first N groups (0: all)")
    ge.add_argument("--backend", choices=("local", "openai"), default="local")
    ge.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (bundled SmolLM2-135M-Instruct), a local folder, a hub id, or a server's model",
    )
    ge.add_argument("--n", type=int, default=5, help="samples per prompt (WaNLI: 5)")
    ge.add_argument("--top-p", type=float, default=0.5)
    ge.add_argument("--temperature", type=float, default=1.0)
    ge.add_argument("--max-new-tokens", type=int, default=120)
    ge.add_argument(
        "--batch-size", type=int, default=8, help="prompts per batch (local) or parallel requests"
    )
    ge.add_argument("--seed", type=int, default=0)
    ge.add_argument(
        "--max-examples", type=int, default=5, help="in-context examples per prompt, seed included"
    )
    ge.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    ge.add_argument(
        "--base-url", default="", help="openai backend: default env OPENAI_BASE_URL or api.openai.com"
    )
    ge.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="NAME of the env variable holding the key"
    )
    ge.add_argument("--instruction", default=None, help="the prompt's first line (default: WaNLI's)")
    ge.add_argument(
        "--label-word",
        type=_label_word,
        action="append",
        metavar="LABEL=WORD",
        help="separator word of a label (repeatable; WaNLI's words by default)",
    )
    ge.add_argument("--overwrite", action="store_true", help="replace a batch of the same name")
    ge.add_argument("--quiet", action="store_true")
    ge.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # prepared by the dashboard
    ge.set_defaults(func=cmd_generate)

    fl = sub.add_parser(
        "filter", help="WaNLI stage 3: filter a generated batch (heuristics, max variability)"
    )
    fl.add_argument("run")
    fl.add_argument("--batch", required=True, help="name of the generated batch (folder under wanli/)")
    fl.add_argument("--keep-fraction", type=float, default=0.5, help="fraction kept by max variability")
    fl.add_argument(
        "--no-balance",
        dest="balance",
        action="store_false",
        help="keep the top fraction overall instead of the same number per intended label",
    )
    fl.add_argument("--batch-size", type=int, default=64)
    fl.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    fl.set_defaults(func=cmd_filter)

    rx = sub.add_parser(
        "review-export", help="WaNLI stage 4: aggregate the reviews of a batch and export them"
    )
    rx.add_argument("run")
    rx.add_argument("--batch", required=True)
    rx.add_argument("--out", required=True, help="final.jsonl or final.csv")
    rx.add_argument("--format", default="auto", choices=("auto", "jsonl", "csv"))
    rx.add_argument("--seed", type=int, default=0, help="seed of the random picks of the aggregation")
    rx.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    rx.set_defaults(func=cmd_review_export)
    si = sub.add_parser(
        "similarity", help="premise-hypothesis similarity of a run's pairs (sentence encoder)"
    )
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

    ar = sub.add_parser(
        "artifacts", help="artifact analysis: lexical correlations, partial-input baselines, similarity"
    )
    ar.add_argument("dataset", help="file, saved HF dataset folder, hf:NAME, or demo:train")
    ar.add_argument(
        "--format", default="auto", help="jsonl, csv, tsv, parquet, hf (default: from the suffix)"
    )
    ar.add_argument("--text-columns", type=_columns, default=("premise", "hypothesis"))
    ar.add_argument("--label-column", default="label")
    ar.add_argument("--id-column", default="id", help="generated from the content when absent")
    ar.add_argument(
        "--label-names", type=_names, default=None, help="class order, e.g. entailment,neutral,contradiction"
    )
    ar.add_argument("--genre-column", default="genre")
    ar.add_argument("--split", default=None, help="split of a Hugging Face DatasetDict")
    ar.add_argument(
        "--test", default=None, help="test set of the baselines (default: a stratified 20%% split)"
    )
    ar.add_argument(
        "--field", choices=("hypothesis", "premise"), default="hypothesis", help="lexical correlations of"
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
    ar.set_defaults(func=cmd_artifacts)
    nb = sub.add_parser(
        "noise-benchmark", help="plant label flips and measure how well each method finds them (issue 5)"
    )
    add_noise_arguments(nb)
    nb.add_argument("--markdown", action="store_true", help="print the table as markdown")
    nb.set_defaults(func=cmd_noise_benchmark)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CartomapError as err:
        print(f"cartomap: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cartomap: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
