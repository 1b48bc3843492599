"""Fit a combination of label-error detectors on planted label flips, and say how well it carries.

The label-noise benchmark's models (:func:`cartomap.experiments.noise_benchmark.setting_models`: Model 0
and k fold models per noisy set, trained or reloaded from the run store) give every example the scores of
``--features`` (registered detectors; default :data:`cartomap.scores.detectors.FITTED_FEATURES`); a
logistic regression of "label flipped" on their normalised ranks
(:func:`cartomap.scores.detectors.fit_rank_weights`) over every setting together gives weights, written
to ``--out`` as JSON for ``bench/bench_truth.py --weights``, which scores the ChaosNLI items with them
(:func:`cartomap.scores.detectors.rank_logistic`). Nothing here sees human labels.

Prints, as markdown for docs/benchmarks.md: the weights; and, for each setting, the average precision of
the weights fitted on the *other* setting(s) only (out of sample) and on all settings (in sample), beside
cleanlab's ranking and ``rank_oof_dynamics`` (the unsupervised rank mean of out-of-fold margin and AUM).

    HF_HUB_OFFLINE=1 python bench/fit_detector.py --cache cache/bench-noise \\
        --data ../shared/data/snli/dev.jsonl.gz [--c 1.0] [--features oof_margin,aum,...] \\
        [--out cache/bench-noise/fitted_weights.json] [the options of bench/bench_noise.py]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing
    import numpy as np
    import pandas as pd

    from cartomap.cli.experiments import add_noise_arguments, noise_config
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset
    from cartomap.experiments.noise_benchmark import class_balanced_sample, setting_models
    from cartomap.io import atomic_write_json
    from cartomap.runs.store import RunStore
    from cartomap.scores import detectors, noise

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"), help="run store folder")
    parser.add_argument("--c", type=float, default=1.0, help="inverse L2 strength of the logistic regression")
    parser.add_argument(
        "--features",
        default=",".join(detectors.FITTED_FEATURES),
        help="registered detectors, comma-separated",
    )
    parser.add_argument("--out", default=None, help="weights JSON (default <cache>/fitted_weights.json)")
    add_noise_arguments(parser)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    a = parser.parse_args()

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    features = tuple(f.strip() for f in a.features.split(",") if f.strip())
    from cartomap.errors import DataError

    for name in features:
        try:
            detectors.get(name)
        except DataError as err:  # the registry's error, listing the known ones
            raise SystemExit(f"--features: {err}") from None
    if not features:
        raise SystemExit("--features: name one or more registered detectors")
    cfg = noise_config(a)
    cache = Path(a.cache)
    store = RunStore(cache)
    clean = class_balanced_sample(load_dataset(DataConfig(path=cfg.data)), cfg.n, seed=cfg.seed)
    sets = {}
    for setting in cfg.settings:
        for rate in cfg.rates:
            models = setting_models(clean, setting, rate, cfg, cache, store, echo=print)
            inputs = models.inputs()
            sets[f"{setting} {rate:g}"] = (detectors.feature_ranks(inputs, features), models.flipped, inputs)

    def fit(keys) -> dict[str, float]:
        ranks = pd.concat([sets[k][0] for k in keys], ignore_index=True)
        return detectors.fit_rank_weights(ranks, np.concatenate([sets[k][1] for k in keys]), c=a.c)

    def ap(scores, flipped) -> float:
        return noise.ranking_report(np.asarray(scores), flipped)["average_precision"]

    weights = fit(list(sets))
    out = Path(a.out) if a.out else cache / "fitted_weights.json"
    atomic_write_json(out, weights)
    print(f"\nweights (C = {a.c:g}; fitted on {', '.join(sets)} of {cfg.data}, n {cfg.n:,}), saved to {out}:")
    print(", ".join(f"{n} {w:+.2f}" for n, w in weights.items()))
    print()
    print(
        "| setting | fitted on the other setting(s) | fitted on all (in sample) | "
        "cleanlab_self_confidence | rank_oof_dynamics |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, (_, flipped, inputs) in sets.items():
        others = [k for k in sets if k != name]
        held = f"{ap(detectors.rank_logistic(inputs, fit(others)), flipped):.3f}" if others else "–"
        print(
            f"| {name} | {held} | {ap(detectors.rank_logistic(inputs, weights), flipped):.3f} | "
            f"{ap(detectors.score('cleanlab_self_confidence', inputs), flipped):.3f} | "
            f"{ap(detectors.score('rank_oof_dynamics', inputs), flipped):.3f} |"
        )
    print(json.dumps({"weights": weights}))


if __name__ == "__main__":
    main()
