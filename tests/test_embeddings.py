"""[CLS] embeddings of a run under a tiny random BERT."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cartomap.config import DataConfig, RunConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import RunError
from cartomap.runs.store import RunStore
from cartomap.runs.tasks import task_status
from cartomap.training.embeddings import compute_cls_embeddings, embed_run, load_embeddings


@pytest.fixture()
def run_with_model(tmp_path, tiny_model):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(data=DataConfig(path="demo:dev"), dev=None)
    run = RunStore(tmp_path / "cache").create(config, data, None)
    AutoModelForSequenceClassification.from_pretrained(tiny_model).save_pretrained(run.model_dir)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(run.model_dir)
    return run, data


def test_embed_run_unit_norm_and_saved(run_with_model):
    run, data = run_with_model
    seen = []
    ids, emb = embed_run(run, batch_size=37, device="cpu", progress=lambda d, t: seen.append((d, t)))
    assert emb.shape == (len(data), 32) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert ids == data.ids
    assert seen[-1] == (len(data), len(data))
    loaded_ids, loaded = load_embeddings(run)
    assert loaded_ids == ids
    np.testing.assert_array_equal(loaded, emb)
    assert json.loads((run.path / "embeddings_ids.json").read_text()) == ids
    assert task_status(run, "embeddings")["state"] == "done"
    assert not list(run.path.glob(".*.tmp"))  # atomic writes left nothing behind


def test_embeddings_match_unbatched_cls(run_with_model, tiny_model):
    """Batching and padding change nothing: each row equals its own unpadded forward pass."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    run, data = run_with_model
    frame = data.frame.iloc[:12]
    emb = compute_cls_embeddings(run.model_dir, frame, batch_size=5, device="cpu")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModel.from_pretrained(tiny_model).eval()
    for row in (0, 7, 11):
        enc = tokenizer(
            frame["premise"].iloc[row],
            frame["hypothesis"].iloc[row],
            truncation=True,
            max_length=128,
            return_tensors="pt",
        )
        with torch.no_grad():
            cls = model(**enc).last_hidden_state[0, 0]
        np.testing.assert_allclose(emb[row], (cls / cls.norm()).numpy(), atol=1e-5)


def test_embed_cli(run_with_model, capsys):
    from cartomap.cli import main

    run, data = run_with_model
    code = main(
        [
            "--cache",
            str(run.path.parent.parent),
            "embed",
            run.id,
            "--batch-size",
            "64",
            "--device",
            "cpu",
            "--quiet",
        ]
    )
    assert code == 0
    assert load_embeddings(run)[1].shape == (len(data), 32)
    assert main(["--cache", str(run.path.parent.parent), "project", run.id, "--method", "pca"]) == 0
    assert (run.path / "projection_pca.npy").exists()


def test_embed_run_needs_model(tmp_path):
    data = load_dataset(DataConfig(path="demo:dev"))
    run = RunStore(tmp_path / "c").create(RunConfig(data=DataConfig(path="demo:dev"), dev=None), data, None)
    with pytest.raises(RunError):
        embed_run(run)
    assert task_status(run, "embeddings")["state"] == "failed"  # the page shows the error


def test_job_for_existing_embeddings_ends(run_with_model):
    """A job started while the embeddings exist ends at once instead of staying queued."""
    from cartomap.runs.tasks import task_update

    run, _ = run_with_model
    embed_run(run, device="cpu")
    task_update(run, "embeddings", state="queued")
    embed_run(run, device="cpu")
    assert task_status(run, "embeddings")["state"] == "done"
