"""Benchmark: which label-error detector agrees with people, and does it still find planted flips?

Two parts, both printed as markdown for docs/benchmarks.md:

1. **Human judgement** (needs ``--mnli`` and ``--chaos``, e.g. MultiNLI dev matched and ChaosNLI's
   MultiNLI items): a training set of MultiNLI pairs holding every ChaosNLI item (their 100 votes as the
   ``votes`` column; the other pairs have none) plus others drawn with seed 0, a dev set of further
   pairs; a k-fold pruning experiment on it (Model 0 + k fold models, no Model 1); then the truth
   report of Model 0 (:func:`cartomap.experiments.truth.truth_of`; Model 0's [CLS] embeddings computed
   first, for the neighbour detector): AP, AUROC and P@k of every
   registered detector for "gold != majority of the 100 votes" on the voted items, with bootstrap
   intervals, and the paired bootstrap of each detector's AP minus cleanlab's (same resamples).
2. **Synthetic noise** (always; the bundled demo by default): the label-noise benchmark
   (:func:`cartomap.experiments.noise_benchmark.run_noise_benchmark`), where the new detectors sit beside
   cleanlab's out-of-fold ranking.

Every model goes through the run store: a rerun reloads finished runs, a killed one resumes.

    HF_HUB_OFFLINE=1 python bench/bench_truth.py --cache cache/bench-truth \\
        --mnli ../shared/data/mnli/dev_matched.jsonl.gz --chaos ../shared/data/chaosnli/mnli_matched.jsonl.gz \\
        [--n-train 3000] [--n-dev 1000] [--folds 5] [--noise-data ../shared/data/snli/dev.jsonl.gz]
        [--skip-noise] [--threads 1] [--weights cache/bench-noise/fitted_weights.json] [--model ID_OR_FOLDER]

Without ``--mnli``/``--chaos`` only part 2 runs (nothing here needs a folder outside the checkout).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "cleanlab_self_confidence"  # the detector the goal is measured against


def read_jsonl(path: str) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.rename(path)


def chaos_data(mnli: str, chaos: str, folder: Path, n_train: int, n_dev: int) -> tuple[str, str]:
    """(training file, dev file): every ChaosNLI item with its votes plus other pairs up to ``n_train``;
    ``n_dev`` further pairs as the dev (and test) set. Seed 0, so the files are the same on every machine."""
    rows = read_jsonl(mnli)
    votes = {r["id"]: r["votes"] for r in read_jsonl(chaos)}
    voted = [r for r in rows if r["id"] in votes]
    others = [r for r in rows if r["id"] not in votes]
    if n_train < len(voted):
        raise SystemExit(f"--n-train must hold the {len(voted)} voted items")
    order = np.random.default_rng(0).permutation(len(others))
    extra = n_train - len(voted)
    train = voted + [others[i] for i in order[:extra]]
    dev = [others[i] for i in order[extra : extra + n_dev]]
    keep = ("id", "premise", "hypothesis", "label")
    folder.mkdir(parents=True, exist_ok=True)
    train_path = folder / f"mnli_chaos_train_{n_train}.jsonl"
    dev_path = folder / f"mnli_chaos_dev_{n_dev}.jsonl"
    write_jsonl(
        train_path,
        [
            {**{k: r[k] for k in keep}, **({"votes": votes[r["id"]]} if r["id"] in votes else {})}
            for r in train
        ],
    )
    write_jsonl(dev_path, [{k: r[k] for k in keep} for r in dev])
    return str(train_path), str(dev_path)


def read_weights(path: str) -> dict[str, float]:
    """{detector: weight} of ``bench/fit_detector.py``'s JSON; SystemExit in one line for a missing or bad
    file, an unknown detector or a weight that is not a number."""
    from cartomap.errors import DataError
    from cartomap.scores import detectors

    try:
        weights = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(weights, dict) or not weights:
            raise ValueError("expected a JSON object {detector: weight}")
        for name, w in weights.items():
            detectors.get(name)
            if isinstance(w, bool) or not isinstance(w, int | float):
                raise ValueError(f"the weight of {name!r} is not a number")
    except (OSError, ValueError, DataError) as err:
        raise SystemExit(f"--weights {path}: {err}") from None
    return {str(k): float(v) for k, v in weights.items()}


def ap_differences(report_inputs: dict, names: list[str], n_boot: int, seed: int = 0) -> dict:
    """Each detector's AP minus the reference's, with a paired bootstrap 95 % interval (same resamples)."""
    from cartomap.scores import truth as stats

    truth = report_inputs["truth"]
    scores = report_inputs["scores"]
    ref = scores[REFERENCE]
    out = {}
    for name in names:
        s = scores[name]

        def diff(i, s=s):
            return stats.average_precision(truth[i], s[i]) - stats.average_precision(truth[i], ref[i])

        whole = np.arange(truth.size)
        low, high = stats.bootstrap(diff, truth.size, n_boot, seed)
        out[name] = (diff(whole), low, high)
    return out


def human_part(a) -> str:
    from cartomap.analysis import truth as analysis
    from cartomap.cli import main as cli
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset
    from cartomap.experiments.pruning import KIND, fold_table_of, oof_of_run
    from cartomap.experiments.pruning_analysis import MODEL0
    from cartomap.experiments.store import ExperimentStore
    from cartomap.experiments.truth import truth_of
    from cartomap.runs.store import RunStore
    from cartomap.scores import detectors

    # a combination fitted on planted flips (bench/fit_detector.py), never on these votes: read first, so
    # that a bad file stops the bench before its trainings
    weights = read_weights(a.weights) if a.weights else None
    train, dev = chaos_data(a.mnli, a.chaos, Path(a.cache) / "bench_truth_data", a.n_train, a.n_dev)
    name = f"bench truth mnli {a.n_train}"
    t0 = time.time()
    argv = [
        "--cache",
        a.cache,
        "prune",
        "--data",
        train,
        "--dev",
        dev,
        "--test",
        dev,
        "--folds",
        str(a.folds),
    ]
    argv += ["--no-model1", "--name", name]
    if a.model:  # e.g. a large encoder on a GPU; default: the bundled encoder
        argv += ["--model", a.model]
    if cli(argv) != 0:
        raise SystemExit("the pruning experiment failed (see above)")
    wall = time.time() - t0
    estore, rstore = ExperimentStore(a.cache), RunStore(a.cache)
    fingerprint = load_dataset(DataConfig(path=train)).fingerprint()
    exp = next(  # the experiment of these params (it may have been made earlier under another name)
        e
        for e in estore.list(KIND)
        if e.state == "done"
        and e.params.get("folds") == a.folds
        and (m0 := e.run(MODEL0, rstore)) is not None
        and m0.info.get("train_fingerprint") == fingerprint
        and m0.config.model.name_or_path == (a.model or "default")
    )
    run = exp.run(MODEL0, rstore)
    # the neighbour detector's [CLS] vectors (about 30 s at 3,000 pairs)
    if not run.embeddings_path.exists() and cli(["--cache", a.cache, "embed", run.id]) != 0:
        raise SystemExit("computing Model 0's embeddings failed (see above)")
    report = truth_of(run, a.cache, n_boot=a.bootstrap)
    # the paired AP differences, on the voted items
    examples = analysis.human_examples(run)
    ids = examples["id"].astype(str).tolist()
    voted = examples["human_n"].to_numpy() > 0
    found = oof_of_run(run, estore, rstore)
    metrics = run.metrics().set_index("id").loc[ids].reset_index()
    inputs = detectors.DetectorInputs(
        labels=examples["label"].to_numpy(dtype=np.int64),
        metrics=metrics,
        oof_logits=found[1],
        folds=fold_table_of(found[0], rstore, ids),
        embeddings=analysis.run_embeddings(run, ids),
    )
    table = detectors.score_all(inputs)
    fitted = None
    if weights:
        fitted = f"rank_logistic ({len(weights)} scores, fitted on planted flips)"
        table[fitted] = detectors.rank_logistic(inputs, weights)
    names = [n for n in table.columns if n != REFERENCE]
    diffs = ap_differences(
        {
            "truth": examples["gold_disagrees"].to_numpy(dtype=bool)[voted],
            "scores": {n: table[n].to_numpy()[voted] for n in table.columns},
        },
        names,
        a.bootstrap,
    )
    history = run.history()
    dev_acc = history[-1].get("dev_accuracy") if history else None
    lines = [
        f"### Human judgement: {int(voted.sum()):,} ChaosNLI items in {len(ids):,} MultiNLI training pairs",
        "",
        f"Pruning experiment {exp.id} ({a.folds} folds, Model 0 dev accuracy {dev_acc}); "
        f"{wall / 60:.1f} min for this call (0 when every run was reloaded).",
        "",
        analysis.truth_markdown(report),
        "",
        f"AP minus {REFERENCE}'s AP (paired bootstrap, {a.bootstrap:,} resamples, 95 %):",
        "",
        "| detector | ΔAP | 95 % interval |",
        "|---|---:|---|",
    ]
    for n, (d, low, high) in sorted(diffs.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"| {n} | {d:+.3f} | [{low:+.3f}, {high:+.3f}] |")
    if fitted is not None:
        from cartomap.scores import truth as stats

        truth = examples["gold_disagrees"].to_numpy(dtype=bool)[voted]
        row = stats.ranking_row(truth, table[fitted].to_numpy()[voted], [50, 100], a.bootstrap)
        lines += [
            "",
            f"{fitted} ({a.weights}: {', '.join(f'{k} {v:+.2f}' for k, v in weights.items())}): "
            f"AP {row['ap']:.3f} [{row['ap_low']:.3f}, {row['ap_high']:.3f}], "
            f"AUROC {row['auroc']:.3f} [{row['auroc_low']:.3f}, {row['auroc_high']:.3f}]",
        ]
    best = max(diffs.items(), key=lambda kv: kv[1][0])
    lines += ["", f"Best detector: {best[0]}, ΔAP {best[1][0]:+.3f} (goal: ≥ +0.05)."]
    return "\n".join(lines)


def noise_part(a) -> str:
    from cartomap.experiments.noise_benchmark import NoiseBenchmarkConfig, run_noise_benchmark, to_markdown

    cfg = NoiseBenchmarkConfig(data=a.noise_data, n=a.noise_n, folds=a.folds)
    t0 = time.time()
    table = run_noise_benchmark(cfg, a.cache, echo=lambda m: print(m, flush=True))
    wall = time.time() - t0
    ranking = table[table["average_precision"].notna()]
    lines = [f"### Synthetic noise: {a.noise_data}, n {cfg.n:,}, {wall / 60:.1f} min for this call", ""]
    lines.append(to_markdown(table))
    lines.append("")
    for (setting, rate), part in ranking.groupby(["setting", "rate"], sort=False):
        ref = part.set_index("method").loc["cleanlab_quality", "average_precision"]
        best = part.sort_values("average_precision", ascending=False).iloc[0]
        lines.append(
            f"- {setting} {rate:g}: best {best['method']} AP {best['average_precision']:.3f}, "
            f"cleanlab {ref:.3f} (Δ {best['average_precision'] - ref:+.3f})"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"), help="run store folder")
    p.add_argument("--mnli", default=None, help="MultiNLI pairs JSONL(.gz) holding the ChaosNLI items")
    p.add_argument("--chaos", default=None, help="ChaosNLI items JSONL(.gz) with 'votes'")
    p.add_argument("--n-train", type=int, default=3000)
    p.add_argument("--n-dev", type=int, default=1000)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--noise-data", default="demo:train", help="clean data of the synthetic-noise part")
    p.add_argument("--noise-n", type=int, default=2000)
    p.add_argument("--skip-noise", action="store_true")
    p.add_argument(
        "--model", default=None, help="encoder of the human-judgement part (default: the bundled one)"
    )
    p.add_argument(
        "--weights",
        default=None,
        help="JSON {detector: weight} of bench/fit_detector.py: also score rank_logistic with them",
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    a = p.parse_args(argv)

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    parts = []
    if a.mnli and a.chaos:
        parts.append(human_part(a))
    else:
        print("human-judgement part left out: --mnli and --chaos name its files", file=sys.stderr)
    if not a.skip_noise:
        parts.append(noise_part(a))
    print(
        f"\ntorch {torch.__version__} ({torch.get_num_threads()} threads), {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
