"""Benchmark: batched vs one-prompt-at-a-time local generation with the bundled SmolLM2-135M-Instruct.

Prompts: WaNLI prompts (cartomap.wanli.prompts.build_prompt) of groups of 5 real pairs of the bundled
demo training set, each group one label (entailment, neutral, contradiction in turn), so the
prompts look like the ones the pipeline sends. Generation: ``cartomap.wanli.generators.LocalLM`` with the
paper's sampling (top_p 0.5, temperature 1.0, stop at a blank line) and ``--max-new-tokens``.

* batched: ``batch_size = --batch-size`` prompts per ``generate`` call (left padding; a batch runs
  until every sequence has produced a blank line or hit the token limit).
* one at a time: ``batch_size = 1``.
* with n > 1, also batched the way ``generate(num_return_sequences=n)`` does it (every prompt
  copied n times before its first forward pass) instead of LocalLM's shared prompt cache.

Throughput is new tokens per second, counting only the tokens each sequence generated up to its
stop (padding after a sequence finished is not counted). Modes alternate within each repeat
(same machine load); reported are medians. Also timed: loading the model (the dequantised
safetensors copy under ``<cache>/models/``; ``--conversion`` also times the one-off conversion
from the GGUF into a temporary folder).

    python bench/bench_generation.py [--prompts 16] [--n 1] [--max-new-tokens 60] [--batch-size 16]
        [--repeats 2] [--threads 1] [--cache cache] [--conversion] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time


def demo_prompts(count: int, per_group: int = 5, seed: int = 0) -> list[str]:
    import numpy as np

    from cartomap.config import DEMO_TRAIN, DataConfig
    from cartomap.data.loading import load_dataset
    from cartomap.wanli.prompts import build_prompt

    data = load_dataset(DataConfig(path=DEMO_TRAIN))
    frame = data.frame
    rng = np.random.default_rng(seed)
    prompts = []
    for i in range(count):
        label = i % data.num_labels
        rows = frame[frame["label"] == label].iloc[
            rng.choice((frame["label"] == label).sum(), per_group, replace=False)
        ]
        pairs = list(zip(rows["premise"], rows["hypothesis"], strict=True))
        prompts.append(build_prompt(pairs, data.label_names[label]))
    return prompts


def measure(lm, prompts, cfg, seed: int) -> tuple[float, int]:
    import torch

    torch.manual_seed(seed)
    lm._seeded = cfg.seed  # the bench seeds each measurement itself
    before = lm.new_tokens
    t0 = time.perf_counter()
    lm.generate(prompts, cfg)
    return time.perf_counter() - t0, lm.new_tokens - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=1, help="samples per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=16, help="prompts per batch in batched mode")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"))
    parser.add_argument("--conversion", action="store_true", help="also time the GGUF conversion")
    parser.add_argument("--markdown", action="store_true")
    a = parser.parse_args()

    import torch
    import transformers

    from cartomap.wanli.generators import GenerationConfig, LocalLM, ensure_smollm2
    from cartomap.wanli.prompts import count_tokens

    if a.threads:
        torch.set_num_threads(a.threads)
    conversion_s = None
    if a.conversion:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            ensure_smollm2(tmp)
            conversion_s = time.perf_counter() - t0
    ensure_smollm2(a.cache)  # converted once; not part of the load time below
    t0 = time.perf_counter()
    lm = LocalLM("smollm2", cache_root=a.cache, device="cpu")
    load_s = time.perf_counter() - t0
    prompts = demo_prompts(a.prompts)
    prompt_tokens = [count_tokens(p, lm.tokenizer) for p in prompts]
    batched = GenerationConfig(n=a.n, max_new_tokens=a.max_new_tokens, batch_size=a.batch_size)
    single = GenerationConfig(n=a.n, max_new_tokens=a.max_new_tokens, batch_size=1)
    modes = {"batched": (batched, True), "one at a time": (single, True)}
    if a.n > 1:  # transformers' own num_return_sequences: every prompt computed n times
        modes["batched, prompt computed n times"] = (batched, False)
    results: dict[str, list[tuple[float, int]]] = {m: [] for m in modes}
    for r in range(a.repeats):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            lm.share_prefill = modes[mode][1]
            seconds, tokens = measure(lm, prompts, modes[mode][0], seed=r)
            results[mode].append((seconds, tokens))
            print(
                f"repeat {r + 1} {mode}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s",
                flush=True,
            )

    rows = []
    for mode, (cfg, _) in modes.items():
        secs = statistics.median(s for s, _ in results[mode])
        rate = statistics.median(t / s for s, t in results[mode])
        tokens = statistics.median(t for _, t in results[mode])
        rows.append((mode, cfg.batch_size, secs, tokens, rate))
    ratio = rows[0][4] / rows[1][4]
    env = (
        f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} thread{'s' if torch.get_num_threads() > 1 else ''}), "
        f"transformers {transformers.__version__}, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print()
    print(
        f"{a.prompts} prompts ({min(prompt_tokens)}-{max(prompt_tokens)} tokens), n = {a.n}, "
        f"max {a.max_new_tokens} new tokens, top_p 0.5, temperature 1.0, stop at a blank line; "
        f"median of {a.repeats}"
    )
    print("| mode | prompts per batch | seconds | new tokens | tokens/s |")
    print("|---|---:|---:|---:|---:|")
    for mode, bs, secs, tokens, rate in rows:
        print(f"| {mode} | {bs} | {secs:.1f} | {tokens:.0f} | {rate:.1f} |")
    print(f"\nbatched / one at a time: **{ratio:.2f}x** tokens per second")
    if len(rows) > 2:
        print(
            f"prompt computed once / n times (batched): **{rows[0][4] / rows[2][4]:.2f}x** tokens per second"
        )
    print(f"model load (dequantised safetensors): {load_s:.2f} s", end="")
    print(f"; GGUF conversion (once): {conversion_s:.1f} s" if conversion_s is not None else "")
    print(env)


if __name__ == "__main__":
    main()
