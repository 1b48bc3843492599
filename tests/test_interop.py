import json
import math
from pathlib import Path

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.runs.interop import (
    read_reference_dynamics,
    read_reference_metrics,
    write_reference_dynamics,
    write_reference_metrics,
)
from cartomap.scores.metrics import compute_metrics

# Probabilities per epoch for two examples; the logits written are log(p), so softmax gives p back.
# guid 7 (gold 0): epochs [.5 .25 .25], [.25 .5 .25], [.8 .1 .1]
# guid "b" (gold 2): epochs [.6 .2 .2], [.1 .6 .3], [.4 .4 .2]  (never correct)
P = {
    "7": ([0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.8, 0.1, 0.1]),
    "b": ([0.6, 0.2, 0.2], [0.1, 0.6, 0.3], [0.4, 0.4, 0.2]),
}


def _line(guid, epoch, logits, gold):
    return json.dumps({"guid": guid, f"logits_epoch_{epoch}": logits, "gold": gold})


def _logits(guid, epoch):
    return [math.log(p) for p in P[guid][epoch]]


def make_folder(folder: Path, epochs=(0, 1, 2)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k, epoch in enumerate(epochs):
        lines = [_line(7, epoch, _logits("7", k), 0), _line("b", epoch, _logits("b", k), 2)]
        if k == 1:
            lines.reverse()  # order differs between files
        (folder / f"dynamics_epoch_{epoch}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_read_hand_made_folder_and_reference_metrics(tmp_path):
    dyn = read_reference_dynamics(make_folder(tmp_path / "dyn"))
    assert dyn.ids == ["7", "b"]
    assert dyn.epochs == [0, 1, 2]
    assert dyn.logits.shape == (3, 2, 3) and dyn.logits.dtype == np.float32
    assert dyn.gold.tolist() == [0, 2]
    np.testing.assert_allclose(dyn.logits[1, 1], np.log([0.1, 0.6, 0.3]), rtol=1e-6)

    frame = compute_metrics(dyn.logits, dyn.gold, dyn.ids)
    # by hand: gold probs 7 -> .5 .25 .8 ; b -> .2 .3 .2
    # confidence = mean; variability = sqrt(mean((p - mean)^2))
    np.testing.assert_allclose(frame["confidence"], [0.5166667, 0.2333333], atol=1e-6)
    np.testing.assert_allclose(frame["variability"], [0.2248456, 0.0471405], atol=1e-6)
    np.testing.assert_allclose(frame["threshold_closeness"], [0.2497222, 0.1788889], atol=1e-6)
    assert frame["correct_count"].tolist() == [2, 0]
    assert frame["forgetfulness"].tolist() == [1, 0]

    out = write_reference_metrics(tmp_path / "td_metrics.jsonl", frame)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["guid"] == 7 and rows[1]["guid"] == "b"  # integer guids stay integers, as the reference's
    assert [r["index"] for r in rows] == [0, 1]
    assert [r["correctness"] for r in rows] == [2, 0]
    assert [r["forgetfulness"] for r in rows] == [1, 1000]
    assert [r["never_learned"] for r in rows] == [False, True]
    assert set(rows[0]) == {
        "guid",
        "index",
        "threshold_closeness",
        "confidence",
        "variability",
        "correctness",
        "forgetfulness",
        "never_learned",
    }
    assert rows[0]["confidence"] == pytest.approx(0.5166667, abs=1e-6)
    back = read_reference_metrics(tmp_path)
    assert back["guid"].tolist() == ["7", "b"]


def test_epochs_sorted_numerically(tmp_path):
    dyn = read_reference_dynamics(make_folder(tmp_path / "dyn", epochs=(2, 10, 9)))
    assert dyn.epochs == [2, 9, 10]
    # epoch 9 file holds the third probability set (k=2)
    np.testing.assert_allclose(dyn.logits[1, 0], np.log([0.8, 0.1, 0.1]), rtol=1e-6)


def test_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4, 25, 3)).astype(np.float32)
    gold = rng.integers(0, 3, 25)
    ids = [f"id-{i}" for i in range(25)]
    paths = write_reference_dynamics(tmp_path, ids, logits, gold, epochs=[1, 3, 5, 7])
    assert [p.name for p in paths] == [f"dynamics_epoch_{e}.jsonl" for e in (1, 3, 5, 7)]
    assert not list(tmp_path.glob("*.tmp"))
    dyn = read_reference_dynamics(tmp_path)
    assert dyn.ids == ids and dyn.epochs == [1, 3, 5, 7]
    np.testing.assert_array_equal(dyn.logits, logits)
    np.testing.assert_array_equal(dyn.gold, gold)
    write_reference_dynamics(tmp_path / "default", ids, logits, gold)
    assert read_reference_dynamics(tmp_path / "default").epochs == [0, 1, 2, 3]


def _break(folder, name, lines):
    (folder / name).write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "name, lines, location, field, words",
    [
        (
            "dynamics_epoch_1.jsonl",
            [_line(7, 1, [0, 0, 0], 0), "{not json"],
            "dynamics_epoch_1.jsonl:2",
            None,
            "malformed JSON",
        ),
        (
            "dynamics_epoch_2.jsonl",
            [json.dumps({"guid": 7, "logits_epoch_3": [0, 0, 0], "gold": 0})],
            "dynamics_epoch_2.jsonl:1",
            "logits_epoch_2",
            "missing key",
        ),
        (
            "dynamics_epoch_1.jsonl",
            [_line(7, 1, [0, 0, 0], 0), _line("b", 1, [0, 0], 2)],
            "dynamics_epoch_1.jsonl:2",
            "logits_epoch_1",
            "2 logits",
        ),
        (
            "dynamics_epoch_2.jsonl",
            [_line(7, 2, [0, 0, 0], 0)],
            "dynamics_epoch_2.jsonl",
            "guid",
            "missing",
        ),
        (
            "dynamics_epoch_1.jsonl",
            [_line(7, 1, [0, 0, 0], 0), _line("b", 1, [0, 0, 0], 2), _line("c", 1, [0, 0, 0], 2)],
            "dynamics_epoch_1.jsonl:3",
            "guid",
            "'c'",
        ),
        (
            "dynamics_epoch_0.jsonl",
            [_line(7, 0, [0, 0, 0], 0), _line("7", 0, [0, 0, 0], 0)],
            "dynamics_epoch_0.jsonl:2",
            "guid",
            "duplicate",
        ),
        (
            "dynamics_epoch_2.jsonl",
            [_line("b", 2, [0, 0, 0], 2), _line(7, 2, [0, 0, 0], 1)],
            "dynamics_epoch_2.jsonl:2",
            "gold",
            "differs",
        ),
        (
            "dynamics_epoch_0.jsonl",
            [_line(7, 0, [0, 0, 0], 3)],
            "dynamics_epoch_0.jsonl:1",
            "gold",
            "label index",
        ),
        (
            "dynamics_epoch_0.jsonl",
            [_line(7, 0, ["x", 0, 0], 0)],
            "dynamics_epoch_0.jsonl:1",
            "logits_epoch_0",
            "numbers",
        ),
    ],
)
def test_validation_errors(tmp_path, name, lines, location, field, words):
    folder = make_folder(tmp_path / "dyn")
    _break(folder, name, lines)
    with pytest.raises(DataError) as info:
        read_reference_dynamics(folder)
    err = info.value
    assert err.location == location
    assert err.field == field
    assert words in str(err)


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(DataError, match="folder not found"):
        read_reference_dynamics(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "dynamics.jsonl").write_text("")
    with pytest.raises(DataError, match=r"dynamics_epoch_0\.jsonl"):
        read_reference_dynamics(tmp_path / "empty")


def test_write_metrics_requires_columns(tmp_path):
    with pytest.raises(DataError):
        write_reference_metrics(
            tmp_path / "td_metrics.jsonl",
            compute_metrics(np.zeros((1, 2, 2)), [0, 1]).drop(columns="never_learned"),
        )


def test_reference_model_folder_export_and_read(tmp_path):
    from cartomap.errors import CartomapError
    from cartomap.runs.interop import write_reference_export

    rng = np.random.default_rng(2)
    logits = rng.normal(size=(3, 6, 3)).astype(np.float32)
    gold = rng.integers(0, 3, 6)
    ids = ["10", "11", "007", "x", "-3", "12"]
    metrics = compute_metrics(logits, gold, ids)
    written = write_reference_export(tmp_path, ids, logits, gold, metrics)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "training_dynamics/dynamics_epoch_0.jsonl",
        "training_dynamics/dynamics_epoch_1.jsonl",
        "training_dynamics/dynamics_epoch_2.jsonl",
        "td_metrics.jsonl",
        "metrics.csv",
    ]
    guids = [
        json.loads(x)["guid"] for x in (tmp_path / "training_dynamics" / "dynamics_epoch_0.jsonl").open()
    ]
    assert guids == [10, 11, "007", "x", -3, 12]  # canonical integers as integers, the rest as strings
    dyn = read_reference_dynamics(tmp_path)  # the model folder: its training_dynamics/ is found
    assert dyn.ids == ids and dyn.epochs == [0, 1, 2]
    np.testing.assert_array_equal(dyn.logits, logits)
    with pytest.raises(CartomapError, match="pass --force"):
        write_reference_export(tmp_path, ids, logits, gold, metrics)
    assert len(write_reference_export(tmp_path, ids, logits, gold, metrics, force=True)) == 5
