"""Benchmark: do the label-error detectors agree better with 100 human votes when the model is stronger?

``bench/bench_truth.py`` trains on 3,000 MultiNLI pairs (dev accuracy 0.56). Here the models see six
times as much: every MultiNLI dev pair (matched and mismatched) but 1,000 mismatched pairs kept as the dev
set, about 18,600 pairs holding the 1,599 ChaosNLI items (their 100 votes as ``votes``).

* **Model 0** trains on all of them, recording its training pass: the data-map detectors (confidence,
  AUM, EL2N, forgetting), and its [CLS] embeddings for the neighbour vote.
* **The held-out model** trains on the same pairs without the ChaosNLI items and scores them (a test
  set): their out-of-sample logits for cleanlab, the out-of-fold margin and the consensus rule (a 2-fold
  split whose second fold is the voted items; the other pairs get no out-of-sample score, and only the
  voted items are judged).

Then AP and AUROC of every detector for "gold != majority of the 100 votes" on the voted items, with
bootstrap intervals, and each detector's AP minus cleanlab's on the same resamples; Spearman's rho of
confidence with the votes' entropy. Every model goes through the run store (train or load).

    HF_HUB_OFFLINE=1 python bench/bench_truth_holdout.py --cache cache/bench-big \\
        --matched ../shared/data/mnli/dev_matched.jsonl.gz --mismatched ../shared/data/mnli/dev_mismatched.jsonl.gz \\
        --chaos ../shared/data/chaosnli/mnli_matched.jsonl.gz [--epochs 2] [--model ID] [--only model0|heldout]

``--only`` trains one of the two models and stops (run it twice at once on two cores, then once without).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_truth import REFERENCE, ap_differences, read_jsonl, write_jsonl  # noqa: E402

KEEP = ("id", "premise", "hypothesis", "label")
LABELS = ("entailment", "neutral", "contradiction")


def make_data(a) -> dict[str, str]:
    """The four files (train_all, train_heldout, voted, dev) in the cache folder; seed 0, so they are
    the same on every machine, and an existing file is never overwritten."""
    for option, path in (("--chaos", a.chaos), ("--matched", a.matched), ("--mismatched", a.mismatched)):
        if not Path(path).is_file():
            raise SystemExit(f"{option} {path}: no such file")
    votes = {r["id"]: r["votes"] for r in read_jsonl(a.chaos)}
    mismatched = read_jsonl(a.mismatched)
    order = np.random.default_rng(0).permutation(len(mismatched))
    dev = [mismatched[i] for i in order[: a.n_dev]]
    rest = [mismatched[i] for i in order[a.n_dev :]] + read_jsonl(a.matched)
    rest = [r for r in rest if r["label"] in LABELS]

    def row(r):
        return {**{k: r[k] for k in KEEP}, **({"votes": votes[r["id"]]} if r["id"] in votes else {})}

    folder = Path(a.cache)
    folder.mkdir(parents=True, exist_ok=True)
    parts = {
        "train_all": rest,
        "train_heldout": [r for r in rest if r["id"] not in votes],
        "voted": [r for r in rest if r["id"] in votes],
        "dev": dev,
    }
    paths = {}
    for name, rows in parts.items():
        paths[name] = str(folder / f"{name}.jsonl")
        write_jsonl(Path(paths[name]), [row(r) for r in rows])
    return paths


def train(a, paths: dict[str, str], which: str):
    from cartomap.cli import main as cli
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset
    from cartomap.runs.store import RunStore

    data = paths["train_all"] if which == "model0" else paths["train_heldout"]
    argv = ["--cache", a.cache, "train", "--data", data, "--dev", paths["dev"]]
    argv += ["--epochs", str(a.epochs), "--lr", str(a.lr), "--batch-size", "16", "--max-length", "128"]
    argv += ["--name", f"big {which}", "--quiet"]
    if a.model:  # e.g. a large encoder on a GPU; default: the bundled encoder
        argv += ["--model", a.model]
    if which == "heldout":
        argv += ["--test", paths["voted"]]
    if cli(argv) != 0:
        raise SystemExit(f"training {which} failed (see above)")
    fingerprint = load_dataset(DataConfig(path=data)).fingerprint()
    return next(
        r
        for r in RunStore(a.cache).list()
        if r.state == "done"
        and r.info.get("train_fingerprint") == fingerprint
        and len(r.history()) == a.epochs
        and bool(r.config.tests) == (which == "heldout")
        and r.config.model.name_or_path == (a.model or "default")
    )


def report(a, model0, heldout) -> str:
    import pandas as pd

    from cartomap.analysis import truth as analysis
    from cartomap.cli import main as cli
    from cartomap.scores import detectors
    from cartomap.scores import truth as stats
    from cartomap.training.embeddings import load_embeddings

    examples = analysis.human_examples(model0)
    examples["id"] = examples["id"].astype(str)
    ids = examples["id"].tolist()
    voted = examples["human_n"].to_numpy() > 0
    metrics = model0.metrics().assign(id=lambda f: f["id"].astype(str)).set_index("id").loc[ids].reset_index()
    frame, logits = heldout.test_logits(0, epoch=len(heldout.history()) - 1)
    held = pd.DataFrame(logits, index=frame["id"].astype(str))
    vid = examples["id"][voted].tolist()
    labels = examples["label"].to_numpy(dtype=np.int64)
    # detectors of one example's own arrays: scored on the voted items alone
    sub = detectors.DetectorInputs(
        labels=labels[voted],
        metrics=metrics[voted].reset_index(drop=True),
        oof_logits=held.loc[vid].to_numpy(),
    )
    table = detectors.score_all(sub)
    if not a.no_neighbours:  # the neighbour vote among every pair of the training set
        if load_embeddings(model0) is None and cli(["--cache", a.cache, "embed", model0.id, "--quiet"]) != 0:
            raise SystemExit("computing Model 0's embeddings failed (see above)")
        found = load_embeddings(model0)
        vectors = pd.DataFrame(found[1], index=[str(i) for i in found[0]]).loc[ids].to_numpy()
        whole = detectors.DetectorInputs(labels=labels, embeddings=vectors)
        table["neighbour_disagreement"] = detectors.score("neighbour_disagreement", whole)[voted]
    truth = examples["gold_disagrees"].to_numpy(dtype=bool)[voted]
    rows = {n: stats.ranking_row(truth, table[n].to_numpy(), [50, 100], a.bootstrap) for n in table.columns}
    diffs = ap_differences(
        {"truth": truth, "scores": {n: table[n].to_numpy() for n in table.columns}},
        [n for n in table.columns if n != REFERENCE],
        a.bootstrap,
    )
    entropy = examples["human_entropy"].to_numpy(dtype=np.float64)[voted]
    rho = stats.spearman_row(metrics["confidence"].to_numpy(dtype=np.float64)[voted], entropy, a.bootstrap)

    def acc(run) -> str:
        h = run.history()
        return f"{h[-1].get('dev_accuracy', float('nan')):.3f}" if h else "–"

    lines = [
        f"### Held-out model: {int(voted.sum()):,} ChaosNLI items in {len(ids):,} MultiNLI training pairs",
        "",
        f"Model 0 {model0.id} (dev accuracy {acc(model0)}), held-out model {heldout.id} (dev accuracy "
        f"{acc(heldout)}, accuracy on the voted items {float(np.mean(held.loc[vid].to_numpy().argmax(1) == labels[voted])):.3f}); "
        f"{int(truth.sum())} of {truth.size} voted items have a gold label that is not the majority "
        f"(chance AP {truth.mean():.3f}).",
        "",
        "| detector | AP [95 %] | AUROC [95 %] | ΔAP vs cleanlab [95 %] |",
        "|---|---|---|---|",
    ]
    for n in sorted(rows, key=lambda n: -rows[n]["ap"]):
        r = rows[n]
        d = "–" if n == REFERENCE else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*diffs[n])
        lines.append(
            f"| {n} | {r['ap']:.3f} [{r['ap_low']:.3f}, {r['ap_high']:.3f}] | "
            f"{r['auroc']:.3f} [{r['auroc_low']:.3f}, {r['auroc_high']:.3f}] | {d} |"
        )
    lines += [
        "",
        f"Spearman's rho of Model 0's confidence with the votes' entropy: {rho['spearman']:.3f} "
        f"[{rho['low']:.3f}, {rho['high']:.3f}] (n = {rho['n']:,}).",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"), help="run store folder")
    p.add_argument(
        "--matched", required=True, help="MultiNLI dev matched JSONL(.gz) (holds the ChaosNLI items)"
    )
    p.add_argument("--mismatched", required=True, help="MultiNLI dev mismatched JSONL(.gz)")
    p.add_argument("--chaos", required=True, help="ChaosNLI items JSONL(.gz) with 'votes'")
    p.add_argument("--n-dev", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--model", default=None, help="encoder of both models (default: the bundled one)")
    p.add_argument("--no-neighbours", action="store_true", help="skip the embeddings and the neighbour vote")
    p.add_argument("--only", choices=("model0", "heldout"), default=None, help="train this model and stop")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    a = p.parse_args(argv)

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    paths = make_data(a)
    t0 = time.time()
    if a.only:
        train(a, paths, a.only)
        print(f"{a.only}: {(time.time() - t0) / 60:.1f} min")
        return 0
    model0, heldout = train(a, paths, "model0"), train(a, paths, "heldout")
    text = report(a, model0, heldout)
    print(
        f"\n{(time.time() - t0) / 60:.1f} min for this call; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
