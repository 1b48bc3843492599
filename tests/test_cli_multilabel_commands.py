"""Every command on a multi-label run: it works per (example, label) or says in one line why it takes
examples with one label each, naming the kind, before it asks for anything else (test sets, embeddings,
decisions). The run is :mod:`multilabel_fixture`'s (3 texts, 2 labels, hand-set recordings; no training)."""

from __future__ import annotations

import pytest
from multilabel_fixture import make_multilabel_run

from cartomap.cli import main


@pytest.fixture()
def ml(cache, tmp_path):
    return make_multilabel_run(cache, tmp_path)


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "command, what",
    [
        (["prune", "--data", "run:{id}"], "pruning suspected label errors works on examples with one label"),
        (["prune", "run:{id}", "--export", "{tmp}"], "pruning suspected label errors works on examples"),
        (["curriculum", "--data", "run:{id}"], "a curriculum of training orders works on examples with one"),
        (["combine", "--a", "run:{id}"], "a dataset combination (its table: the accuracy on each test set)"),
        (["combine", "--a", "demo:train", "--b", "run:{id}"], "a dataset combination"),
        (["retrain", "{id}"], "a retrain after review prunes and relabels examples with one label each"),
        (["groups", "{id}"], "WaNLI's automatic groups (a seed and its nearest neighbours of the same gold"),
        (["artifacts", "run:{id}"], "artifact analysis (p(label | word) against 1/|labels|"),
    ],
)
def test_a_command_of_one_label_per_example_refuses_a_multilabel_run_first(
    ml, cache, tmp_path, capsys, command, what
):
    """No test set, export folder, decisions or embeddings asked for first: the kind is the first refusal."""
    argv = [part.format(id=ml.id, tmp=tmp_path) for part in command]
    assert main(["--cache", str(cache), *argv]) == 2
    err = _error(capsys)
    assert what in err and "multilabel" in err
    assert not (ml.path / "embeddings.npy").exists()  # groups stopped before computing them
