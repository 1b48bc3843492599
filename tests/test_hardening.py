"""What cartomap does when the world misbehaves: OS errors (a full or read-only disk, a vanished file),
a closed pipe, run arguments that point outside the store, a reader racing a trainer."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_damaged_runs import cli, finished_run, one_line_error

from cartomap.cli import main
from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def store(tmp_path) -> RunStore:
    cache = tmp_path / "cache"
    finished_run(cache, seed=1)
    return RunStore(cache)


# --------------------------------------------------------------------------- OS errors in the CLI


@pytest.mark.parametrize(
    "code, words",
    [
        (errno.ENOSPC, "No space left on device (the disk is full"),
        (errno.EROFS, "Read-only file system (the folder is read-only"),
        (errno.EACCES, "Permission denied"),
    ],
)
def test_an_os_error_in_any_command_is_one_line_naming_the_path(
    store, tmp_path, monkeypatch, capsys, code, words
):
    """The OSError is raised where the map's file is saved (the library's atomic write)."""
    import cartomap.io

    target = tmp_path / "map.png"

    def refuse(path, save):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(cartomap.io, "_atomic", refuse)
    (run,) = store.list()
    assert cli(store, "map", run.id, "--out", str(target)) == 2
    err = one_line_error(capsys)
    assert err.startswith("cartomap: error: ") and str(target) in err and words in err


def test_a_vanished_file_is_one_line(store, tmp_path, capsys):
    """A real OSError: the folder of --out is a file."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    (run,) = store.list()
    assert cli(store, "export", run.id, "--out", str(blocker / "model")) == 2
    err = one_line_error(capsys)
    assert str(blocker) in err


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`cartomap runs | head -0`: the reader is gone before the first line is written."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write gets EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "cartomap.cli", "--cache", str(tmp_path / "c"), "runs"],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write)
    assert b"Traceback" not in proc.stderr and b"BrokenPipe" not in proc.stderr, proc.stderr.decode()
    assert proc.returncode == 1


# --------------------------------------------------------------------------- a full disk while training


def train_args(cache, tiny_model) -> list[str]:
    return [
        "--cache",
        str(cache),
        "train",
        "--data",
        "demo:dev",
        "--dev",
        "none",
        "--model",
        tiny_model,
        "--epochs",
        "2",
        "--batch-size",
        "32",
        "--max-length",
        "32",
        "--quiet",
    ]


def disk_full(monkeypatch, *, status_too: bool):
    """ENOSPC (by monkeypatching) on every epoch file, every log line, and (``status_too``) on every
    status write once the first failed."""
    import builtins

    import cartomap.runs.state as state
    from cartomap.runs.store import Run

    def full(path="?"):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    def write_epoch(self, source, epoch, ids, logits):
        raise full(self.epoch_path(source, epoch))

    real_open = builtins.open

    def log_open(file, mode="r", *args, **kwargs):
        if str(file).endswith("log.txt") and "a" in mode:
            raise full(file)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(Run, "write_epoch", write_epoch)
    monkeypatch.setattr(state, "open", log_open, raising=False)
    if status_too:
        real_write = state.atomic_write_json

        def write_status(path, obj):
            if obj.get("state") == "failed":
                raise full(path)
            return real_write(path, obj)

        monkeypatch.setattr(state, "atomic_write_json", write_status)


def test_a_full_disk_during_training_fails_the_run_before_any_log_write(
    tiny_model, tmp_path, monkeypatch, capsys
):
    disk_full(monkeypatch, status_too=False)
    assert main(train_args(tmp_path / "cache", tiny_model)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "No space left on device" in err
    assert err.strip().splitlines()[-1].startswith("cartomap: error: ")
    (run,) = RunStore(tmp_path / "cache").list()
    status = run.status()
    assert status["state"] == "failed" and "No space left on device" in status["error"]


def test_when_not_even_the_status_can_be_written_the_user_still_gets_one_line(
    tiny_model, tmp_path, monkeypatch, capsys
):
    disk_full(monkeypatch, status_too=True)
    assert main(train_args(tmp_path / "cache", tiny_model)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "failed (OSError" in last and "status.json could not be saved" in last
    (run,) = RunStore(tmp_path / "cache").list()
    assert run.status()["state"] not in ("queued", "running")
