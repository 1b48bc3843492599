"""Token label-error detectors side by side: which finds planted entity errors in WikiGold NER?

The bundled WikiGold demo (``demo:ner_train``, never /work/shared), a subset of its sentences, with
realistic tag noise planted (:func:`cartomap.scores.tag_noise.plant_entity_noise`: entity type swaps,
boundary shifts, dropped and spurious entities, ``--rate`` of the gold entities, one error per sentence)
for each noise seed. On each noisy set:

* **Model 0**: one training on the whole noisy set, its training pass recorded: the dynamics detectors
  (1 − confidence, −AUM, EL2N, forgetting) read its per-word metrics; no folds.
* **k fold models** (folds of whole sentences, :mod:`cartomap.experiments.token_folds`): their held-out
  word logits are the out-of-fold probabilities of cleanlab's token classification (the detectors
  ``cleanlab_token_issue``, ``cleanlab_sentence_quality``, ``cleanlab_sentence_softmin``) and of the other
  out-of-fold detectors; their own training passes give the fold detectors (in sample).

Every registered detector the inputs can feed is scored (:func:`cartomap.scores.detectors.score_all`) and
judged by AP, AUROC and P@k (k = the number of corrupted units) at two levels: the corrupted **words**
(whose tag the noise changed) and the corrupted **sentences** (a sentence scored by its most suspect
word), and at sentence level by kind of error (the sentences of one kind against the clean ones). Training compute is measured per model (wall seconds and the process's CPU seconds): a detector
that needs out-of-fold inputs costs the k fold trainings, one of the dynamics Model 0's, both k + 1.

Runs go through the run store (``--cache``), so a rerun reloads the models it trained; the compute of a
reloaded model is the one saved in its run (``history.json``'s seconds). The machine is shared: size it
with ``--sentences``, ``--epochs``, ``--folds``, ``--seeds``.

    HF_HUB_OFFLINE=1 python bench/bench_token_detectors.py --sentences 600 --epochs 2 --folds 3 \\
        --batch-size 8 --lr 3e-4 --seeds 0 1 2 --cache /tmp/tokbench/cache600 --markdown

(the defaults; 16 minutes on the shared 2-core machine, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cartomap.config import (  # noqa: E402
    DEMO_NER_MAX_LENGTH,
    DEMO_NER_TRAIN,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainConfig,
)
from cartomap.data.dataset import TextDataset  # noqa: E402
from cartomap.data.loading import load_dataset  # noqa: E402
from cartomap.experiments.token_folds import (  # noqa: E402
    TokenFoldsParams,
    fold_config,
    held_out_words,
    save_sentences,
    sentence_folds,
)
from cartomap.runs.store import RunStore  # noqa: E402
from cartomap.scores import detectors, tag_noise  # noqa: E402
from cartomap.scores import truth as stats  # noqa: E402
from cartomap.scores.token_quality import sentence_keys  # noqa: E402
from cartomap.tasks.token import TOKEN  # noqa: E402
from cartomap.training.loop import train_or_load  # noqa: E402

#: Detectors left out: the consensus rule's category P1G0 is NLI's (predicted neutral, gold entailment).
NOT_FOR_TAGS = ("consensus_p1g0",)


def clean_subset(n: int, seed: int = 0) -> TextDataset:
    """``n`` sentences of the WikiGold demo drawn at random (seeded), in their order; all for n <= 0."""
    data = load_dataset(
        DataConfig(path=DEMO_NER_TRAIN, text_columns=TOKEN.text_fields, label_column=TOKEN.label_field)
    )
    if n <= 0 or n >= len(data):
        return data
    picked = np.sort(np.random.default_rng(seed).choice(len(data), size=n, replace=False))
    return data.subset(picked)


def with_tags(data: TextDataset, tags: list[np.ndarray], source: str) -> TextDataset:
    """``data`` with every sentence's tags replaced (same ids and words)."""
    frame = data.frame.copy()
    frame[TOKEN.label_field] = [np.asarray(t, dtype=np.int64) for t in tags]
    return TextDataset(frame=frame, label_names=data.label_names, source=source)


def base_config(args) -> RunConfig:
    return RunConfig(
        dev=None,
        model=ModelConfig(args.model, max_length=args.max_length),
        train=TrainConfig(
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            record="train",
            save_checkpoints=False,
        ),
    )


def train(config: RunConfig, store: RunStore, what: str) -> tuple:
    """(run, wall seconds, CPU seconds of this process) of training ``config``; a run trained before is
    reloaded with the seconds this bench saved when it trained it (``<cache>/bench_compute.json``)."""
    ledger = Path(store.root) / "bench_compute.json"
    saved = json.loads(ledger.read_text()) if ledger.exists() else {}
    wall, cpu = time.time(), time.process_time()
    run = train_or_load(config, store)
    wall, cpu = time.time() - wall, time.process_time() - cpu
    if run.id in saved:
        wall, cpu = saved[run.id]
    else:
        saved[run.id] = [wall, cpu]
        ledger.write_text(json.dumps(saved))
    print(f"  {what}: run {run.id}, {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    return run, wall, cpu


def noisy_models(clean: TextDataset, seed: int, args, store: RunStore, cache: Path) -> dict:
    """Plant the noise of ``seed``, train Model 0 and the k fold models: the detectors' inputs and truths."""
    words = clean.frame[TOKEN.text_fields[0]].tolist()
    planted = tag_noise.plant_entity_noise(
        clean.frame[TOKEN.label_field].tolist(), clean.label_names, rate=args.rate, seed=seed, words=words
    )
    noisy = with_tags(clean, planted.tags, f"wikigold noise seed {seed}")
    print(
        f"seed {seed}: {planted.counts()} in {int(planted.sentence_changed.sum())} sentences, "
        f"{int(planted.word_changed.sum())} words changed",
        flush=True,
    )
    base = base_config(args)
    unit_ids, gold, _ = TOKEN.units(noisy.frame, noisy.label_names)
    model0, wall0, cpu0 = train(base.replace(data=save_sentences(noisy, cache, "noisy")), store, "Model 0")
    metrics = model0.metrics().set_index("id").loc[unit_ids].reset_index()
    params = TokenFoldsParams(base=base, folds=args.folds, fold_seed=seed)
    folds = sentence_folds(len(noisy), args.folds, seed)
    runs, wall_k, cpu_k = [], 0.0, 0.0
    for f in range(args.folds):
        kept = save_sentences(noisy.subset(folds != f), cache, f"fold {f} train")
        held = save_sentences(noisy.subset(folds == f), cache, f"fold {f}")
        run, wall, cpu = train(fold_config(params, kept, held, f), store, f"fold {f + 1}/{args.folds}")
        runs.append(run)
        wall_k, cpu_k = wall_k + wall, cpu_k + cpu
    oof = held_out_words(runs, unit_ids)
    fold_frames = [r.metrics(columns=("id", "confidence", "aum")) for r in runs]
    inputs = detectors.DetectorInputs(
        labels=gold,
        metrics=metrics,
        oof_logits=oof[[f"logit_{c}" for c in range(len(noisy.label_names))]].to_numpy(np.float64),
        folds=detectors.fold_table(fold_frames, unit_ids),
        sentences=sentence_keys(unit_ids),
    )
    return {
        "inputs": inputs,
        "planted": planted,
        "compute": {detectors.DYNAMICS: (wall0, cpu0), detectors.OOF: (wall_k, cpu_k)},
        "oof_accuracy": float(np.mean(inputs.oof().argmax(1) == gold)),
        "model0_accuracy": float(np.mean(metrics["correctness"] > 0.5)) if "correctness" in metrics else None,
    }


def judged(truth: np.ndarray, scores: np.ndarray) -> dict:
    k = int(truth.sum())
    return {
        "ap": stats.average_precision(truth, scores),
        "auroc": stats.auroc(truth, scores),
        "p_at_k": stats.precision_at_k(truth, scores, k),
        "prevalence": float(truth.mean()),
    }


def score_seed(models: dict, seed: int) -> list[dict]:
    """One row per (detector, level) of one noise seed."""
    inputs, planted = models["inputs"], models["planted"]
    table = detectors.score_all(inputs).drop(columns=list(NOT_FOR_TAGS), errors="ignore")
    keys = pd.Series(inputs.sentences)
    rows = []
    for name in table.columns:
        needs = detectors.get(name).needs
        folded = detectors.OOF in needs or detectors.FOLDS in needs
        used = [
            models["compute"][n]
            for n, on in ((detectors.DYNAMICS, detectors.DYNAMICS in needs), (detectors.OOF, folded))
            if on
        ]
        wall, cpu = sum(u[0] for u in used), sum(u[1] for u in used)
        scores = table[name].to_numpy(np.float64)
        sentence_scores = pd.Series(scores).groupby(keys, sort=False).max().to_numpy()
        common = {
            "seed": seed,
            "detector": name,
            "needs": "+".join(needs),
            "train_wall_s": wall,
            "train_cpu_s": cpu,
        }
        rows.append({**common, "level": "word", **judged(planted.word_changed, scores)})
        rows.append({**common, "level": "sentence", **judged(planted.sentence_changed, sentence_scores)})
        kinds = np.asarray(planted.kind)
        for kind in tag_noise.NOISE_KINDS:  # each kind of error against the clean sentences alone
            keep = (kinds == kind) | ~planted.sentence_changed
            truth = kinds[keep] == kind
            rows.append({**common, "level": f"sentence: {kind}", **judged(truth, sentence_scores[keep])})
    return rows


def summary(rows: pd.DataFrame, folds: int, sentences: int, epochs: int) -> pd.DataFrame:
    """Mean and standard deviation over the seeds of every (level, detector), with the training each
    detector needs: ``trainings`` (Model 0, k folds) and ``passes``, the sentences trained on times the
    epochs (Model 0: n E; the folds: (k - 1) n E, each fold on (k - 1) / k of the sentences)."""
    grouped = rows.groupby(["level", "detector", "needs"], sort=False)
    out = grouped[["ap", "auroc", "p_at_k", "prevalence", "train_wall_s", "train_cpu_s"]].mean()
    out["ap_sd"] = grouped["ap"].std(ddof=0)
    needs = out.index.get_level_values("needs")
    dyn = ["dynamics" in n for n in needs]
    folded = ["oof" in n or "folds" in n for n in needs]
    out["trainings"] = [
        " + ".join([*(["Model 0"] if d else []), *([f"{folds} folds"] if f else [])])
        for d, f in zip(dyn, folded, strict=True)
    ]
    out["passes"] = [
        sentences * epochs * (int(d) + (folds - 1) * int(f)) for d, f in zip(dyn, folded, strict=True)
    ]
    out = out.reset_index()
    out["order"] = [0 if lv == "word" else 1 if lv == "sentence" else 2 for lv in out["level"]]
    return out.sort_values(["order", "level", "ap"], ascending=[True, True, False], kind="stable")


def to_markdown(table: pd.DataFrame) -> str:
    cols = ["level", "detector", "trainings", "passes", "ap", "ap_sd", "auroc", "p_at_k", "train_cpu_s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table[cols].to_dict(orient="records"):
        cells = [
            f"{v:.0f}" if c.startswith("train_") else f"{v:.3f}" if isinstance(v, float) else str(v)
            for c, v in row.items()
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=600, help="sentences of demo:ner_train (0: all 1,454)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--folds", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="noise seeds")
    p.add_argument("--rate", type=float, default=0.05, help="share of gold entities corrupted")
    p.add_argument("--model", default="default", help="encoder (all-MiniLM-L6-v2 by default)")
    p.add_argument("--max-length", type=int, default=DEMO_NER_MAX_LENGTH, help="sub-words (the demo's)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--cache", default="/tmp/cartomap-token-bench")
    p.add_argument("--out", default=None, help="write the per-seed rows and the summary as JSON here")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    cache = Path(args.cache)
    store = RunStore(cache)
    clean = clean_subset(args.sentences)
    t0 = time.time()
    print(
        f"{len(clean)} sentences, {sum(len(t) for t in clean.frame[TOKEN.label_field])} words; "
        f"{args.epochs} epochs, {args.folds} folds, seeds {args.seeds}",
        flush=True,
    )
    rows, diag = [], []
    for seed in args.seeds:
        models = noisy_models(clean, seed, args, store, cache)
        rows += score_seed(models, seed)
        diag.append({"seed": seed, "oof_word_accuracy": models["oof_accuracy"], **models["planted"].counts()})
    frame = pd.DataFrame(rows)
    table = summary(frame, args.folds, len(clean), args.epochs)
    print(pd.DataFrame(diag).to_string(index=False))
    print(to_markdown(table) if args.markdown else table.to_string(index=False))
    print(f"total {time.time() - t0:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows, "diag": diag}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
