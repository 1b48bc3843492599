"""What cartomap does when the world misbehaves: OS errors (a full or read-only disk, a vanished file),
a closed pipe, run arguments that point outside the store, a reader racing a trainer."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import patience
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
            timeout=patience.WAIT_S,
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


# --------------------------------------------------------------------------- a read-only store


@pytest.fixture()
def read_only(monkeypatch):
    """Make a folder read-only the way a read-only mount is, for root too (root ignores `chmod a-w`):
    every call that would write under it (os.open/open for writing, rename, replace, unlink, mkdir,
    rmdir, chmod, utime) raises OSError(EROFS), and os.access(..., W_OK) says no. Reading is untouched,
    so the code paths a real read-only store takes are the ones exercised."""
    import builtins
    import io
    import shutil

    roots: list[Path] = []

    def inside(path) -> bool:
        try:
            path = Path(os.fsdecode(path)).absolute()
        except TypeError:  # a file descriptor
            return False
        return any(path == r or r in path.parents for r in roots)

    def erofs(path):
        return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    real_os_open, real_open, real_access = os.open, builtins.open, os.access

    def fake_os_open(path, flags, *args, **kwargs):
        if flags & writing_flags and inside(path):
            raise erofs(path)
        return real_os_open(path, flags, *args, **kwargs)

    def fake_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and inside(file):
            raise erofs(file)
        return real_open(file, mode, *args, **kwargs)

    def fake_access(path, mode, *args, **kwargs):
        if mode & os.W_OK and inside(path):
            return False
        return real_access(path, mode, *args, **kwargs)

    def refuse(real):
        def fake(path, *args, **kwargs):
            if inside(path):
                raise erofs(path)
            return real(path, *args, **kwargs)

        return fake

    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "access", fake_access)
    for name in ("rename", "replace", "unlink", "remove", "mkdir", "rmdir", "chmod", "utime"):
        monkeypatch.setattr(os, name, refuse(getattr(os, name)))
    monkeypatch.setattr(shutil, "rmtree", refuse(shutil.rmtree))
    return roots.append


def test_a_read_only_store_is_browsable_and_writing_commands_say_so(store, tmp_path, read_only, capsys):
    (run,) = store.list()
    out = tmp_path / "out"
    out.mkdir()
    read_only(store.root)
    assert run.is_locked() is False and run.status()["state"] == "done" and run.problems() == []
    assert cli(store, "runs") == 0
    captured = capsys.readouterr()
    assert run.id in captured.out and "done" in captured.out and "damaged" not in captured.out + captured.err
    assert cli(store, "show", run.id) == 0
    assert "(done)" in capsys.readouterr().out
    assert cli(store, "map", run.id, "--out", str(out / "map.png")) == 0
    assert cli(store, "export", run.id, "--out", str(out / "model")) == 0
    capsys.readouterr()
    for args in (
        ("repair", run.id),
        ("delete", run.id, "--yes"),
        ("cancel", run.id),
        ("train", "--run", run.id),
    ):
        assert cli(store, *args) == 2, args
        err = one_line_error(capsys)
        assert "is read-only" in err and f"`cartomap {args[0]}` needs to write there" in err, err
    assert (out / "map.png").exists() and store.list() == [run] and not run.cancel_requested()


def test_a_fixable_damaged_run_is_still_browsable_read_only(store, tmp_path, read_only, capsys):
    (run,) = store.list()
    data = run.metrics_path().read_bytes()
    run.metrics_path().write_bytes(data[: len(data) // 3])
    read_only(store.root)
    assert cli(store, "map", run.id, "--out", str(tmp_path / "map.png")) == 0  # recomputed, not kept


# --------------------------------------------------------------------------- readers never take the lock


def test_a_readers_status_check_never_refuses_a_trainer(store):
    """Readers check the run's state in a loop in a thread while a trainer takes and releases the
    run's lock again and again: no attempt is ever refused ("being trained by another process")."""
    import threading

    from cartomap.errors import RunError

    (run,) = store.list()
    reader = RunStore(store.root).get(run.id)  # its own handle, as another process has
    run.set_status(state="running")
    stop = threading.Event()
    seen = set()

    def read():
        while not stop.is_set():
            seen.add(reader.status()["state"])

    thread = threading.Thread(target=read)
    thread.start()
    refused = 0
    try:
        for _ in range(3000):
            try:
                handle = run.acquire_lock()
            except RunError:
                refused += 1
            else:
                handle.close()
    finally:
        stop.set()
        thread.join()
    assert refused == 0
    assert seen <= {"running", "interrupted"} and seen


def test_the_lock_is_seen_by_a_reader_while_held(store):
    (run,) = store.list()
    run.set_status(state="running")
    handle = run.acquire_lock()
    try:
        assert RunStore(store.root).get(run.id).status()["state"] == "running" and run.is_locked()
    finally:
        handle.close()
    assert run.status()["state"] == "interrupted" and not run.is_locked()


# --------------------------------------------------------------------------- RUN stays in the store


def test_a_run_argument_is_never_a_path(store, tmp_path, capsys):
    (run,) = store.list()
    outside = tmp_path / "my-model"
    outside.mkdir()
    (outside / "config.json").write_bytes(run.config_path.read_bytes())  # looks like a run folder
    (outside / "status.json").write_bytes(run.status_path.read_bytes())
    relative = f"{run.id}/../../../my-model"
    capsys.readouterr()
    for key in (str(outside), relative, "..", f"{run.id}/", "../runs/" + run.id):
        for command in ("cancel", "show", "delete"):
            assert cli(store, command, key, *(["--yes"] if command == "delete" else [])) == 2, (command, key)
            err = one_line_error(capsys)
            assert "is not a run of the store" in err and "no path separators" in err
    assert not (outside / "cancel").exists() and (outside / "config.json").exists()
    assert store.find_id(str(run.path)) is None and store.find_id(run.id) == run
    assert cli(store, "show", run.id[:6]) == 0  # ids and prefixes still work


# --------------------------------------------------------------------------- small things


def test_control_characters_in_a_name_are_printed_escaped(tmp_path, capsys):
    from cartomap.config import DataConfig, RunConfig
    from cartomap.data.loading import load_dataset

    store = RunStore(tmp_path / "cache")
    store.create(
        RunConfig(data=DataConfig(path="demo:dev"), dev=None, name="\x1b[31mred\x1b[0m\x07"),
        load_dataset(DataConfig(path="demo:dev")),
    )
    assert cli(store, "runs") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b[31mred" in out


def test_a_name_for_an_existing_config_is_not_dropped_silently(tmp_path, capsys):
    cache = tmp_path / "cache"
    run = finished_run(cache, seed=1)  # demo:dev, no dev set, 3 epochs, seed 1, no name
    store = RunStore(cache)
    args = [
        "train",
        "--data",
        "demo:dev",
        "--dev",
        "none",
        "--epochs",
        "3",
        "--seed",
        "1",
        "--record",
        "train",
    ]
    assert cli(store, *args, "--quiet", "--name", "mine") == 0
    err = capsys.readouterr().err
    assert (
        f"run {run.id} has this config already and keeps its name ''" in err
        and "--name 'mine' is not used" in err
    )


def test_experiment_list_counts_runs_from_their_own_states(tmp_path, capsys):
    from cartomap.config import DataConfig, RunConfig
    from cartomap.experiments.curriculum import CurriculumParams
    from cartomap.experiments.store import ExperimentStore

    cache = tmp_path / "cache"
    done = [finished_run(cache, seed=s) for s in (1, 2)]
    failed = finished_run(cache, seed=3)
    failed.set_status(state="failed", error="x")
    queued = finished_run(cache, seed=4)
    queued.set_status(state="queued")
    store = ExperimentStore(cache)
    params = CurriculumParams(base=RunConfig(tests=(DataConfig(path="demo:dev"),)), seeds=(0,))
    exp = store.create("curriculum", params.to_params(), name="fake")
    for role, run in zip(("a", "b", "c", "d"), (*done, failed, queued), strict=True):
        exp.record_run(role, run.id)
    exp.set_status(state="running", runs_done=0, runs_planned=4)  # the job died before it counted
    assert exp.status()["state"] == "interrupted"
    assert main(["--cache", str(cache), "experiment", "list"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if exp.id in line]
    assert "interrupted" in row and "2/4 done" in row
    summary = exp.summary(store.runs)
    assert (summary["runs"], summary["running"], summary["queued"], summary["failed"]) == (
        "2/4 done",
        0,
        1,
        1,
    )
