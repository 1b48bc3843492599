"""A full disk at every write of a training and of a review: one line (`cartomap: error: ...`, exit 2),
no traceback, no temporary file or folder left behind, and the run resumes once there is space again.

The disk is a real one where this process may mount it (a small tmpfs, as root): it is filled up right
before the write under test, so the error is the one the library really raises (safetensors' Rust
error, torch's "unexpected pos", pyarrow's, SQLite's "database or disk is full"). Elsewhere the same
writes fail by injection: safetensors' own error type and a torch file whose writes fail with ENOSPC.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_damaged_runs import finished_run

import cartomap.io
import cartomap.training.loop as loop
from cartomap.cli import main
from cartomap.runs.state import StatusFolder
from cartomap.runs.store import RunStore


class Disk:
    """A mounted tmpfs that :meth:`fill` fills up to the last byte and :meth:`free` empties again."""

    def __init__(self, path: Path):
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as handle:
            for size in (1 << 20, 1 << 12, 1):
                try:
                    while True:
                        handle.write(b"\0" * size)
                except OSError as err:
                    assert err.errno == errno.ENOSPC

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture()
def disk(tmp_path):
    """A 48 MiB tmpfs of its own (needs root: ``mount -t tmpfs``); skipped where it cannot be mounted,
    :func:`test_a_library_disk_error_is_one_line_without_a_mount` covers those writes there."""
    path = tmp_path / "disk"
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(path)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield Disk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def leftovers(root: Path) -> list[str]:
    """Temporary files and folders of atomic writes (``.NAME.*.tmp``, ``.tmp-NAME``) under ``root``."""
    return [str(p) for p in root.rglob("*") if p.name.startswith(".tmp") or p.name.endswith(".tmp")]


def one_error_line(err: str) -> str:
    """The single line cartomap said (other output, such as a library's progress bar, aside)."""
    assert "Traceback" not in err, err
    said = [line for line in err.splitlines() if line.startswith("cartomap")]
    assert len(said) == 1 and said[0].startswith("cartomap: error: "), err
    return said[0]


def small_data(folder: Path) -> str:
    """48 pairs of the demo as a JSONL file: a training of a few steps, so that many can fail."""
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    demo = load_dataset(DataConfig(path="demo:dev"))
    frame = demo.frame.head(48).copy()
    frame["label"] = [demo.label_names[k] for k in frame["label"]]
    path = folder / "small.jsonl"
    frame.to_json(path, orient="records", lines=True)
    return str(path)


def train_args(cache: Path, tiny_model: str, data: str) -> list[str]:
    return [
        "--cache", str(cache), "train", "--data", data, "--dev", "none", "--model", tiny_model,
        "--epochs", "2", "--batch-size", "16", "--max-length", "32", "--quiet",
    ]  # fmt: skip


#: Every write of a training, in the order they happen; each fills the disk right before it.
WRITES = {
    "dynamics": lambda path: "dynamics" in Path(path).parts,
    "checkpoint": lambda path: Path(path).parent.name == "checkpoints",
    "history": lambda path: Path(path).name == "history.json",
    "state": lambda path: Path(path).parent.name == "state" and Path(path).name.startswith("epoch_"),
    "metrics": lambda path: Path(path).name == "metrics.parquet",
    "model": lambda path: Path(path).name == "model",
    "status": None,  # the final status.json ("done")
}


def fill_before(disk: Disk, monkeypatch) -> dict[str, str | None]:
    """Fill ``disk`` right before the write named by the returned ``{"write": name}`` (:data:`WRITES`),
    once: the name is set back to None when it happened."""
    target: dict[str, str | None] = {"write": None}

    def due(path) -> None:
        name = target["write"]
        if name is not None and WRITES[name] is not None and WRITES[name](path):
            disk.fill()
            target["write"] = None

    atomic, save_state, save_folder = cartomap.io._atomic, loop.save_state, loop.save_pretrained_atomic
    real_status = StatusFolder.set_status

    def atomic_write(path, write):
        due(path)
        return atomic(path, write)

    def state_write(run, epoch, *args):
        due(run.state_epoch_dir(epoch))
        return save_state(run, epoch, *args)

    def folder_write(model, tokenizer, folder):
        due(folder)
        return save_folder(model, tokenizer, folder)

    def set_status(self, **fields):
        if target["write"] == "status" and fields.get("state") == "done":
            disk.fill()
            target["write"] = None
        return real_status(self, **fields)

    monkeypatch.setattr(cartomap.io, "_atomic", atomic_write)
    monkeypatch.setattr(loop, "save_state", state_write)
    monkeypatch.setattr(loop, "save_pretrained_atomic", folder_write)
    monkeypatch.setattr(StatusFolder, "set_status", set_status)
    return target


def fail_then_resume(disk, writes, args, target, capsys) -> None:
    """Train with ``args`` once per write of ``writes``, the disk filled right before it: each attempt
    ends in one line, leaves no temporary file or folder, and the run reads failed (or interrupted when
    not even its status could be saved); with space again the same command finishes the run."""
    cache = disk.path / "cache"
    for name in writes:
        disk.free()
        target["write"] = name
        assert main(args) == 2, name
        assert target["write"] is None, f"the {name} write was never reached"
        line = one_error_line(capsys.readouterr().err)
        assert "No space left on device" in line, (name, line)
        assert leftovers(cache) == [], name
        (run,) = RunStore(cache).list()
        assert run.state in ("failed", "interrupted"), (name, run.state)
    disk.free()
    assert main(args) == 0
    (run,) = RunStore(cache).list()
    assert run.state == "done" and len(run.metrics()) == 48 and leftovers(cache) == []
    assert not run.state_dir.exists()  # the resume points go once the run is done


def test_a_full_disk_at_the_resume_point_is_one_line_twice_then_resumes(
    disk, tiny_model, monkeypatch, capsys
):
    """The case as it was found: `cartomap train` into a full store failed at the resume point with a
    29-line traceback and left state/.tmp-epoch_1/ behind; the same on resume."""
    target = fill_before(disk, monkeypatch)
    args = train_args(disk.path / "cache", tiny_model, small_data(disk.path))
    fail_then_resume(disk, ["state", "state"], args, target, capsys)


@pytest.mark.slow
def test_a_full_disk_at_every_write_of_training_is_one_line_and_resumes(
    disk, tiny_model, monkeypatch, capsys
):
    target = fill_before(disk, monkeypatch)
    args = train_args(disk.path / "cache", tiny_model, small_data(disk.path))
    fail_then_resume(disk, list(WRITES), args, target, capsys)


def test_a_full_disk_in_a_review_is_one_line(disk, capsys):
    cache = disk.path / "cache"
    run = finished_run(cache, seed=1)
    ids = disk.path / "ids.txt"
    ids.write_text("\n".join(run.metrics()["id"].astype(str).head(5)) + "\n")
    create = [
        "--cache",
        str(cache),
        "review-queue",
        "create",
        run.id,
        "q",
        "--ids",
        str(ids),
        "--per-item",
        "1",
    ]
    disk.fill()
    assert main(create) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "full" in line and "free some space" in line, line
    assert not run.review_queue_dir("q").exists() and leftovers(cache) == []  # no half-made queue
    disk.free()
    assert main(create) == 0
    item = ids.read_text().split()[0]
    decide = [
        "--cache",
        str(cache),
        "review-queue",
        "decide",
        run.id,
        "q",
        "--annotator",
        "ann",
        "--item",
        item,
    ]
    disk.fill()
    capsys.readouterr()
    assert main([*decide, "--decision", "remove"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "the review database: database or disk is full" in line and "review.sqlite" in line, line
    assert "(the disk is full: free some space and run the command again)" in line
    disk.free()
    assert main([*decide, "--decision", "remove"]) == 0
    assert "recorded: ann on" in capsys.readouterr().out


# --------------------------------------------------------------------------- without a mount


class FullFile:
    """A real file whose writes fail with ENOSPC after ``room`` bytes."""

    def __init__(self, handle, room: int):
        self.handle, self.room = handle, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


@pytest.mark.parametrize("library", ["safetensors", "torch"])
def test_a_library_disk_error_is_one_line_without_a_mount(tmp_path, tiny_model, monkeypatch, capsys, library):
    """The two libraries whose disk errors are no OSError: safetensors' SafetensorError (the model of a
    resume point) and torch's RuntimeError "unexpected pos" (its optimizer state)."""
    if library == "safetensors":
        import safetensors.torch
        from safetensors import SafetensorError

        def save_model(model, filename, *args, **kwargs):
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

        monkeypatch.setattr(safetensors.torch, "save_model", save_model)
    else:
        real_open = open

        def full_open(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            return FullFile(handle, room=64) if "w" in mode else handle

        monkeypatch.setattr(cartomap.io, "open", full_open, raising=False)
    cache = tmp_path / "cache"
    assert main(train_args(cache, tiny_model, small_data(tmp_path))) == 2
    line = one_error_line(capsys.readouterr().err)
    (run,) = RunStore(cache).list()
    assert f"{run.state_epoch_dir(0)}" in line and "No space left on device (the disk is full" in line, line
    assert leftovers(cache) == [] and run.state == "failed"
    assert "No space left on device" in run.status()["error"]
