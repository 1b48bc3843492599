"""How stable is a data map across seeds, and how true? The study behind cartomap's recording defaults
(docs/stability.md).

For each dataset and training setting it trains the same run with several seeds, recording both the
training pass (Cartography) and an eval-mode pass over the training set at ``--points`` evenly spaced
moments of every epoch. Recording changes nothing in training (tests/test_train.py checks that the
training-pass logits are bit-identical), so one run per (setting, seed) gives every *recording view*
at once:

  train          the training pass's logits, one per epoch (Cartography; cartomap's default so far)
  eval k=1       an eval-mode pass at the end of every epoch (WaNLI)
  eval k=2, k=4  eval-mode passes at 2 or 4 evenly spaced points of every epoch
  ... skip=s     the same, leaving out the first s epochs' recordings

Per view it reports, averaged over seed pairs: Spearman of variability, confidence and correctness
between seeds, region agreement (cartomap's rule by rank, and the threshold rule), the share of
examples with the same region in every seed; the dev accuracy; the compute relative to training
alone (train seconds + the eval passes the view uses, from history.json); and, never stability alone,
the map's agreement with people: on the ChaosNLI MultiNLI items (100 votes each) in the training set,
Spearman of confidence and variability with the votes' entropy and AUROC / AP of low confidence for
"gold label != majority of the 100", with 95 % bootstrap intervals, single seed (mean over seeds of
the per-seed figure) and the multi-seed mean map; and Spearman with MultiNLI's
``bert_runs_correct_of_100`` (how many of 100 BERT fine-tunings got the item right).

Datasets: ``snli`` is the bundled demo (3,198 SNLI dev pairs, 400 SNLI test pairs as dev), always
available. ``mnli`` needs ``--mnli`` (MultiNLI dev matched, JSONL with bert_runs_correct_of_100) and
``--chaos`` (ChaosNLI's MultiNLI items with votes): 3,000 training pairs = every ChaosNLI item plus
others drawn from dev matched (seed 0), and 1,000 further dev-matched pairs as dev.

    HF_HUB_OFFLINE=1 python bench/bench_stability.py --store ~/stability \\
        --mnli ../shared/data/mnli/dev_matched.jsonl.gz --chaos ../shared/data/chaosnli/mnli_matched.jsonl.gz
    python bench/bench_stability.py --datasets snli --settings lr5e-5 --seeds 1,2   # the demo only

Runs live in an ordinary cartomap run store (``--store``), so a second call trains nothing it has.
``--analyse-only`` reports on the runs that exist.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

#: Training settings compared (changes to cartomap's TrainConfig defaults).
SETTINGS: dict[str, dict] = {
    "lr5e-5": {},  # today's default: 4 epochs, lr 5e-5, warmup 0.1, batch 16
    "lr2e-5": {"learning_rate": 2e-5},
    "lr1e-4": {"learning_rate": 1e-4},
    "lr5e-5-nowarmup": {"warmup_ratio": 0.0},
    "lr2e-5-6ep": {"learning_rate": 2e-5, "epochs": 6},
    "lr5e-5-6ep": {"epochs": 6},
    "lr5e-5-2ep": {"epochs": 2},  # S seeds x 2 epochs against 1 seed x 4 epochs at equal compute
}
#: Recording views: (name, source, eval points per epoch used, epochs skipped).
VIEWS: tuple[tuple[str, str, int, int], ...] = (
    ("train", "train", 1, 0),
    ("train skip=1", "train", 1, 1),
    ("eval k=1", "eval", 1, 0),
    ("eval k=1 skip=1", "eval", 1, 1),
    ("eval k=2", "eval", 2, 0),
    ("eval k=2 skip=1", "eval", 2, 1),
    ("eval k=4", "eval", 4, 0),
    ("eval k=4 skip=1", "eval", 4, 1),
    ("eval k=2 skip=2", "eval", 2, 2),  # the last two epochs, twice each: 1.28x on 4 epochs, as k=1
    ("eval k=4 skip=2", "eval", 4, 2),
    ("eval k=4 skip=3", "eval", 4, 3),  # the last epoch, four times: 1.28x on 4 epochs
)
#: Second-axis statistics compared (cartomap.scores.ambiguity; higher = more ambiguous).
STATISTICS: tuple[str, ...] = (
    "variability",
    "mean_entropy",
    "gold_bernoulli",
    "margin_gap",
    "entropy_of_mean",
    "last_entropy",
    "epoch_disagreement",
    "margin_spread",
    "forgetting",
    "learned_late",
)
BOOTSTRAP = 1000


# --------------------------------------------------------------------------- data
def read_jsonl(path: str) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def mnli_data(mnli: str, chaos: str, folder: Path, n_train: int = 3000, n_dev: int = 1000):
    """Training and dev JSONL files of MultiNLI dev matched (every ChaosNLI item in training) and the side
    table of human judgement: id, entropy, majority, gold != majority, bert_runs_correct_of_100."""
    rows = read_jsonl(mnli)
    votes = {r["id"]: r for r in read_jsonl(chaos)}
    rng = np.random.default_rng(0)
    others = [r for r in rows if r["id"] not in votes]
    order = rng.permutation(len(others))
    chaos_rows = [r for r in rows if r["id"] in votes]
    train = chaos_rows + [others[i] for i in order[: n_train - len(chaos_rows)]]
    dev = [others[i] for i in order[n_train - len(chaos_rows) : n_train - len(chaos_rows) + n_dev]]
    folder.mkdir(parents=True, exist_ok=True)
    keep = ("id", "premise", "hypothesis", "label")
    for name, part in (("mnli_train.jsonl", train), ("mnli_dev.jsonl", dev)):
        path = folder / name
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps({k: r[k] for k in keep}) + "\n" for r in part))
            tmp.rename(path)
    human = pd.DataFrame(
        {
            "id": [r["id"] for r in train],
            "bert_correct": [r.get("bert_runs_correct_of_100") for r in train],
            "entropy": [votes[r["id"]]["entropy"] if r["id"] in votes else np.nan for r in train],
            "error": [
                (votes[r["id"]]["majority"] != r["label"]) if r["id"] in votes else np.nan for r in train
            ],
        }
    )
    return str(folder / "mnli_train.jsonl"), str(folder / "mnli_dev.jsonl"), human


def run_config(train_path: str, dev_path: str, setting: str, seed: int, points: int):
    from cartomap.config import DataConfig, RunConfig, TrainConfig

    train = TrainConfig(
        **{**SETTINGS[setting], "seed": seed, "record": "both", "record_points": points},
        save_checkpoints=False,
    )
    return RunConfig(
        data=DataConfig(path=train_path),
        dev=DataConfig(path=dev_path),
        train=train,
        name=f"stability {Path(train_path).stem} {setting} seed {seed}",
    )


# --------------------------------------------------------------------------- one view of one run
def view_logits(logits: np.ndarray, source: str, points: int, used: int, skip: int) -> np.ndarray:
    """The recordings a view uses out of a run's [E * per, N, C] dynamics."""
    per = points if source == "eval" else 1
    epochs = logits.shape[0] // per
    keep = [e * per + j for e in range(skip, epochs) for j in range(per) if (j + 1) % (per // used) == 0]
    return logits[keep]


def view_metrics(run, source: str, points: int, used: int, skip: int) -> pd.DataFrame:
    from cartomap.scores.metrics import compute_metrics

    ids, logits = run.dynamics(source)
    labels = run.examples(columns=["id", "label"]).set_index("id").loc[ids, "label"].to_numpy()
    return compute_metrics(view_logits(logits, source, points, used, skip), labels, ids).set_index("id")


def view_scores(run, source: str, points: int, used: int, skip: int) -> pd.DataFrame:
    """Confidence, correctness and every statistic of :data:`STATISTICS` of one view of one run, by id."""
    from cartomap.scores import ambiguity
    from cartomap.scores.metrics import correctness, gold_probabilities, softmax

    ids, logits = run.dynamics(source)
    labels = run.examples(columns=["id", "label"]).set_index("id").loc[ids, "label"].to_numpy()
    logits = view_logits(logits, source, points, used, skip).astype(np.float64)
    probs = softmax(logits)
    frame = pd.DataFrame(
        {
            "confidence": gold_probabilities(probs, labels).mean(axis=0),
            "correctness": correctness(probs, labels),
        },
        index=pd.Index(ids, name="id"),
    )
    for name in STATISTICS:
        frame[name] = ambiguity.score(name, probs, labels, logits)
    return frame


def compute_share(run, source: str, points: int, used: int, skip: int, ratio: float | None) -> float:
    """Training plus the eval-mode passes the view uses, over training alone, as cartomap runs it now: an
    eval pass costs ``ratio`` of a training epoch (``--eval-ratio``, from ``--timing``; else this run's
    history, epochs after the first) and none is made in a skipped epoch."""
    if source != "eval":
        return 1.0
    if ratio is None:
        history = run.history()[1:] or run.history()
        ratio = (
            sum(h.get("record_seconds", 0.0) for h in history)
            / points
            / sum(h["train_seconds"] for h in history)
        )
    epochs = run.config.train.epochs
    return 1.0 + used * ratio * (epochs - skip) / epochs


# --------------------------------------------------------------------------- statistics
def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def bootstrap(stat, *arrays, n: int | None = None, seed: int = 0) -> tuple[float, float, float]:
    """stat on the data, and the 2.5 / 97.5 percentiles of stat over ``n`` (default :data:`BOOTSTRAP`)
    resamples of the items."""
    n = n or BOOTSTRAP
    rng = np.random.default_rng(seed)
    size = len(arrays[0])
    values = []
    for _ in range(n):
        pick = rng.integers(0, size, size)
        try:
            values.append(stat(*(a[pick] for a in arrays)))
        except ValueError:
            continue
    return float(stat(*arrays)), float(np.nanpercentile(values, 2.5)), float(np.nanpercentile(values, 97.5))


def human_figures(metrics: pd.DataFrame, human: pd.DataFrame, intervals: bool) -> dict:
    from sklearn.metrics import average_precision_score, roc_auc_score

    joined = metrics.join(human.set_index("id"), how="inner")
    voted = joined.dropna(subset=["entropy"])
    error = voted["error"].astype(bool).to_numpy()
    low_conf = -voted["confidence"].to_numpy()
    out = {
        "rho_conf_entropy": spearman(voted["confidence"], voted["entropy"]),
        "rho_var_entropy": spearman(voted["variability"], voted["entropy"]),
        "rho_conf_bert": spearman(joined["confidence"], joined["bert_correct"]),
        "rho_corr_bert": spearman(joined["correctness"], joined["bert_correct"]),
        "n_voted": int(len(voted)),
        "error_rate": float(error.mean()),
    }
    if intervals:
        out["auroc"] = bootstrap(roc_auc_score, error, low_conf)
        out["ap"] = bootstrap(average_precision_score, error, low_conf)
        out["rho_conf_entropy_ci"] = bootstrap(
            spearman, voted["confidence"].to_numpy(), voted["entropy"].to_numpy()
        )
    else:
        out["auroc"] = float(roc_auc_score(error, low_conf))
        out["ap"] = float(average_precision_score(error, low_conf))
    return out


def regions(metrics: pd.DataFrame, rule: str) -> np.ndarray:
    from cartomap.scores.metrics import region_partition

    return region_partition(metrics["confidence"], metrics["variability"], method=rule)


def view_row(frames: dict[int, pd.DataFrame], human: pd.DataFrame | None) -> dict:
    """Stability (and truth, with ``human``) of one view over its seeds' metrics frames."""
    seeds = sorted(frames)
    pairs = list(itertools.combinations(seeds, 2))
    row: dict = {"seeds": len(seeds)}
    for m in ("variability", "confidence", "correctness", "aum"):
        row[f"rho_{m}"] = float(np.mean([spearman(frames[a][m], frames[b][m]) for a, b in pairs]))
    for rule in ("rank", "threshold"):
        reg = {s: regions(frames[s], rule) for s in seeds}
        row[f"regions_{rule}"] = float(np.mean([(reg[a] == reg[b]).mean() for a, b in pairs]))
        row[f"all_same_{rule}"] = float(np.mean(np.all([reg[s] == reg[seeds[0]] for s in seeds], axis=0)))
        row[f"ambiguous_{rule}"] = float(np.mean([(reg[s] == "ambiguous").mean() for s in seeds]))
        # of the examples one seed calls ambiguous, the share the other calls ambiguous too (mean over pairs)
        row[f"ambiguous_kept_{rule}"] = float(
            np.mean(
                [
                    ((reg[a] == "ambiguous") & (reg[b] == "ambiguous")).sum()
                    / max((reg[a] == "ambiguous").sum(), 1)
                    for a, b in pairs
                ]
            )
        )
    rho = row["rho_variability"]
    row["rho_variability_mean_of_seeds"] = len(seeds) * rho / (1 + (len(seeds) - 1) * rho)  # Spearman-Brown
    if human is not None:
        singles = [human_figures(frames[s], human, intervals=False) for s in seeds]
        for key in ("rho_conf_entropy", "rho_var_entropy", "rho_conf_bert", "rho_corr_bert", "auroc", "ap"):
            row[f"h1_{key}"] = float(np.mean([f[key] for f in singles]))
        mean = sum(frames[s][["confidence", "variability", "correctness"]] for s in seeds) / len(seeds)
        multi = human_figures(mean, human, intervals=True)
        row.update({f"hm_{k}": v for k, v in multi.items()})
    return row


def axis_regions(frame: pd.DataFrame, statistic: str) -> np.ndarray:
    """cartomap's rule on the axis ``statistic``: the third with the highest value is ambiguous (ties by
    index), the rest split at confidence 0.5."""
    from cartomap.scores.metrics import region_partition

    return region_partition(frame["confidence"].to_numpy(), frame[statistic].to_numpy(), method="rank")


def axis_row(maps: dict, statistic: str, human: pd.DataFrame | None) -> dict:
    """Stability and truth of one second-axis ``statistic`` over ``maps`` (key: a seed, or a group of seeds
    whose maps were averaged; value: a frame by id with confidence, correctness and the statistic).

    Pairwise figures are means over the pairs of maps: Spearman of the statistic, regions (rank rule on the
    statistic), ambiguous kept; ``all_same``: the share of examples with one region in every map. With
    ``human`` (ChaosNLI items): per map, then averaged, Spearman of the statistic with the votes' entropy,
    AUROC / AP of the statistic for "gold != majority", Spearman with bert_runs_correct_of_100; for the
    mean of the maps, the same with 95 % bootstrap intervals; confidence's beside it."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    keys = sorted(maps)
    pairs = list(itertools.combinations(keys, 2))
    row: dict = {"maps": len(keys), "statistic": statistic}
    row["rho"] = float(np.mean([spearman(maps[a][statistic], maps[b][statistic]) for a, b in pairs]))
    row["rho_confidence"] = float(
        np.mean([spearman(maps[a]["confidence"], maps[b]["confidence"]) for a, b in pairs])
    )
    reg = {k: axis_regions(maps[k], statistic) for k in keys}
    amb = {k: reg[k] == "ambiguous" for k in keys}
    row["regions"] = float(np.mean([(reg[a] == reg[b]).mean() for a, b in pairs]))
    row["ambiguous_kept"] = float(np.mean([(amb[a] & amb[b]).sum() / max(amb[a].sum(), 1) for a, b in pairs]))
    row["all_same"] = float(np.mean(np.all([reg[k] == reg[keys[0]] for k in keys], axis=0)))
    if human is None:
        return row
    table = human.set_index("id")

    def figures(frame: pd.DataFrame, intervals: bool) -> dict:
        joined = frame.join(table, how="inner")
        voted = joined.dropna(subset=["entropy"])
        error = voted["error"].astype(bool).to_numpy()
        stat, conf, ent = (voted[c].to_numpy() for c in (statistic, "confidence", "entropy"))
        if intervals:
            return {
                "rho_h": bootstrap(spearman, stat, ent),
                "auroc": bootstrap(roc_auc_score, error, stat),
                "ap": bootstrap(average_precision_score, error, stat),
                "rho_conf_h": bootstrap(spearman, conf, ent),
            }
        return {
            "rho_h": spearman(stat, ent),
            "auroc": float(roc_auc_score(error, stat)),
            "ap": float(average_precision_score(error, stat)),
            "rho_conf_h": spearman(conf, ent),
            "rho_bert": spearman(joined[statistic], joined["bert_correct"]),
            "rho_conf_bert": spearman(joined["confidence"], joined["bert_correct"]),
        }

    singles = [figures(maps[k], intervals=False) for k in keys]
    for key in singles[0]:
        row[f"h1_{key}"] = float(np.mean([f[key] for f in singles]))
    mean = sum(maps[k][["confidence", statistic]] for k in keys) / len(keys)
    row.update({f"hm_{k}": v for k, v in figures(mean, intervals=True).items()})
    return row


def mean_maps(frames: dict[int, pd.DataFrame], group: int) -> dict[str, pd.DataFrame]:
    """Consecutive seeds in groups of ``group`` ("1+2", "3+4", ...), each group's maps averaged (every
    column: the map of the means, as a seeds experiment draws it); a last incomplete group is left out."""
    seeds = sorted(frames)
    groups = [seeds[i : i + group] for i in range(0, len(seeds) - group + 1, group)]
    return {"+".join(map(str, g)): sum(frames[s] for s in g) / len(g) for g in groups}


# --------------------------------------------------------------------------- the study
def fmt_ci(value) -> str:
    if isinstance(value, (list, tuple)):
        return f"{value[0]:.3f} [{value[1]:.2f}, {value[2]:.2f}]"
    return f"{value:.3f}"


def markdown(rows: list[dict]) -> str:
    head = (
        "| data | setting | view | dev acc. | compute × | ρ var | ρ conf | ρ corr | regions (rank) | "
        "ambiguous kept (rank) | regions (threshold) | ambiguous share / kept (threshold) | same in all seeds | "
        "ρ(conf, H) | ρ(var, H) | AUROC gold≠maj | AP | "
        "ρ(conf, BERT×100) | multi-seed: AUROC | AP | ρ(conf, H) |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        human = r.get("h1_auroc") is not None
        cells = [
            r["dataset"],
            r["setting"],
            r["view"],
            f"{r['dev_accuracy']:.3f}",
            f"{r['compute']:.2f}",
            f"{r['rho_variability']:.2f}",
            f"{r['rho_confidence']:.2f}",
            f"{r['rho_correctness']:.2f}",
            f"{r['regions_rank']:.0%}",
            f"{r['ambiguous_kept_rank']:.0%}",
            f"{r['regions_threshold']:.0%}",
            f"{r['ambiguous_threshold']:.0%} / {r['ambiguous_kept_threshold']:.0%}",
            f"{r['all_same_rank']:.0%}",
        ]
        if human:
            cells += [
                f"{r['h1_rho_conf_entropy']:.2f}",
                f"{r['h1_rho_var_entropy']:.2f}",
                f"{r['h1_auroc']:.3f}",
                f"{r['h1_ap']:.3f}",
                f"{r['h1_rho_conf_bert']:.2f}",
                fmt_ci(r["hm_auroc"]),
                fmt_ci(r["hm_ap"]),
                fmt_ci(r["hm_rho_conf_entropy_ci"]),
            ]
        else:
            cells += ["n/a"] * 8
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def axis_markdown(rows: list[dict]) -> str:
    """The second-axis table: one row per (data, setting, view, statistic)."""
    head = (
        "| data | setting | maps | view | statistic | dev acc. | compute × | seed ρ | regions | ambiguous kept | "
        "same in all | ρ conf | ρ(stat, H) | AUROC gold≠maj | AP | ρ(stat, BERT×100) | "
        "mean map: ρ(stat, H) | ρ(conf, H) |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [
            r["dataset"],
            r["setting"],
            r["members"],
            r["view"],
            r["statistic"],
            f"{r['dev_accuracy']:.3f}",
            f"{r['compute']:.2f}",
            f"{r['rho']:.2f}",
            f"{r['regions']:.1%}",
            f"{r['ambiguous_kept']:.1%}",
            f"{r['all_same']:.1%}",
            f"{r['rho_confidence']:.2f}",
        ]
        if "h1_rho_h" in r:
            cells += [
                f"{r['h1_rho_h']:+.2f}",
                f"{r['h1_auroc']:.3f}",
                f"{r['h1_ap']:.3f}",
                f"{r['h1_rho_bert']:+.2f}",
                fmt_ci(r["hm_rho_h"]),
                fmt_ci(r["hm_rho_conf_h"]),
            ]
        else:
            cells += ["n/a"] * 6
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def timing(n: int, eval_batch_size: int = 128) -> int:
    """The cost of one eval-mode recording pass relative to one training epoch, from cartomap's own loop
    (history.json's train_seconds and record_seconds), on ``n`` demo pairs; the first epoch is left out
    (start-up). A view's compute is then 1 + (recordings per epoch) x ratio."""
    import tempfile

    import pandas as pd

    from cartomap.config import DEMO_TRAIN, DataConfig, RunConfig, TrainConfig
    from cartomap.data.loading import load_dataset
    from cartomap.runs.store import RunStore
    from cartomap.training.loop import train_or_load

    with tempfile.TemporaryDirectory() as tmp:
        demo = load_dataset(DataConfig(path=DEMO_TRAIN))
        frame, names = demo.frame.head(n), demo.label_names
        path = Path(tmp) / "pairs.parquet"
        pd.DataFrame(
            {"id": frame["id"], "premise": frame["premise"], "hypothesis": frame["hypothesis"],
             "label": [names[i] for i in frame["label"]]}
        ).to_parquet(path)  # fmt: skip
        config = RunConfig(
            data=DataConfig(path=str(path)),
            dev=None,
            train=TrainConfig(
                epochs=3, record="eval", save_checkpoints=False, eval_batch_size=eval_batch_size
            ),
        )
        run = train_or_load(config, RunStore(Path(tmp) / "store"))
        rows = run.history()[1:]
        train_s = sum(h["train_seconds"] for h in rows)
        record_s = sum(h["record_seconds"] for h in rows)
    print(
        f"{n} pairs, epochs 2-3: training {train_s:.1f} s, eval-mode passes {record_s:.1f} s, ratio {record_s / train_s:.3f}"
    )
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", default="cache/stability", help="run store of the study's runs")
    p.add_argument(
        "--datasets", default="snli,mnli", help="snli (the bundled demo), mnli (needs --mnli, --chaos)"
    )
    p.add_argument(
        "--mnli", default=None, help="MultiNLI dev matched JSONL(.gz) with bert_runs_correct_of_100"
    )
    p.add_argument("--chaos", default=None, help="ChaosNLI MultiNLI items JSONL(.gz) with votes")
    p.add_argument("--settings", default="lr5e-5,lr2e-5", help=f"comma list of {', '.join(SETTINGS)}")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument(
        "--points", type=int, default=4, help="eval-mode recordings per epoch (views use 1, 2 or 4)"
    )
    p.add_argument("--analyse-only", action="store_true", help="report on the runs that exist, train none")
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    p.add_argument(
        "--axes",
        default=None,
        metavar="JSON",
        help="also compare every second-axis statistic (cartomap.scores.ambiguity) in every view, and write "
        "those rows as JSON here",
    )
    p.add_argument(
        "--group",
        type=int,
        default=1,
        help="with --axes: average the maps of this many consecutive seeds into one map (2 seeds x 2 epochs "
        "against 1 seed x 4 epochs at equal compute: --settings lr5e-5-2ep --seeds 1,2,3,4,5,6 --group 2)",
    )
    p.add_argument("--views", default=None, help="with --axes: comma list of view names (default: all)")
    p.add_argument(
        "--timing",
        type=int,
        default=0,
        metavar="N",
        help="only time one eval-mode pass against one training epoch on N demo pairs (cartomap's loop, "
        "3 epochs, this process's threads) and print their ratio",
    )
    p.add_argument("--eval-batch-size", type=int, default=32, help="with --timing")
    p.add_argument(
        "--eval-ratio",
        type=float,
        default=None,
        help="cost of one eval-mode pass over the training set relative to a training epoch (from --timing); "
        "default: from the runs' own history",
    )
    a = p.parse_args(argv)
    if a.timing:
        return timing(a.timing, a.eval_batch_size)

    from cartomap.config import DEMO_DEV, DEMO_TRAIN
    from cartomap.runs.store import RunStore
    from cartomap.training.loop import train_or_load
    from cartomap.training.prepare import load_data

    store = RunStore(a.store)
    seeds = [int(s) for s in a.seeds.split(",")]
    settings = [s for s in a.settings.split(",") if s]
    for s in settings:
        if s not in SETTINGS:
            p.error(f"unknown setting {s!r}; known: {', '.join(SETTINGS)}")
    data: dict[str, tuple[str, str, pd.DataFrame | None]] = {}
    for name in a.datasets.split(","):
        if name == "snli":
            data["snli"] = (DEMO_TRAIN, DEMO_DEV, None)
        elif name == "mnli":
            if not (a.mnli and a.chaos):
                print("mnli left out: --mnli and --chaos name its files", file=sys.stderr)
                continue
            data["mnli"] = mnli_data(a.mnli, a.chaos, Path(a.store) / "data")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; torch threads: default")

    rows, axis_rows = [], []
    views = VIEWS if not a.views else [v for v in VIEWS if v[0] in a.views.split(",")]
    for (dname, (train_path, dev_path, human)), setting in itertools.product(data.items(), settings):
        runs = {}
        for seed in seeds:
            config = run_config(train_path, dev_path, setting, seed, a.points)
            if a.analyse_only:
                run = store.find(config, *load_data(config))
                if run is None or run.state != "done":
                    continue
            else:
                t0 = time.time()
                run = train_or_load(config, store)
                print(f"{dname} {setting} seed {seed}: run {run.id} ({time.time() - t0:.0f} s)", flush=True)
            runs[seed] = run
        if len(runs) < 2 * a.group:
            continue
        dev = float(np.mean([r.history()[-1]["dev_accuracy"] for r in runs.values()]))
        if a.axes:
            epochs = SETTINGS[setting].get("epochs", 4)
            for view, source, used, skip in views:
                if skip >= epochs:
                    continue
                frames = {s: view_scores(r, source, a.points, used, skip) for s, r in runs.items()}
                maps = mean_maps(frames, a.group) if a.group > 1 else frames
                compute = a.group * float(
                    np.mean(
                        [compute_share(r, source, a.points, used, skip, a.eval_ratio) for r in runs.values()]
                    )
                )
                for statistic in STATISTICS:
                    row = {"dataset": dname, "setting": setting, "view": view, "dev_accuracy": dev}
                    row["members"] = f"{a.group} seed{'s' if a.group > 1 else ''} × {epochs} ep"
                    row["compute"] = compute * epochs / 4  # relative to one 4-epoch run without recording
                    row.update(axis_row(maps, statistic, human))
                    axis_rows.append(row)
                print(f"{dname} {setting} {view}: axes done", file=sys.stderr, flush=True)
            continue
        for view, source, used, skip in VIEWS:
            if skip >= SETTINGS[setting].get("epochs", 4):
                continue
            frames = {s: view_metrics(r, source, a.points, used, skip) for s, r in runs.items()}
            row = {"dataset": dname, "setting": setting, "view": view, "dev_accuracy": dev}
            row["compute"] = float(
                np.mean([compute_share(r, source, a.points, used, skip, a.eval_ratio) for r in runs.values()])
            )
            row.update(view_row(frames, human))
            rows.append(row)
    if a.axes:
        print(axis_markdown(axis_rows))
        Path(a.axes).write_text(json.dumps(axis_rows, indent=1, default=float))
        return 0
    print(markdown(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
