"""Files a person can edit and stores that cannot be written (issue 40, the files-and-faults half): a
hand-edited saved view, an ids file, a tool's export, a team file; a read-only or full store; temporary
files a killed process left. Every case is one line (`cartomap: error: ...`, exit 2) naming the file
and what was expected, one bad file never hides the good ones beside it, and the tools can delete or
replace what they refused to read."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from curation_fixture import make_run  # noqa: E402

from cartomap import io  # noqa: E402
from cartomap.analysis import search  # noqa: E402
from cartomap.cli import main  # noqa: E402
from cartomap.errors import CartomapError  # noqa: E402
from cartomap.runs import views  # noqa: E402
from cartomap.team.roles import TEAM_ENV, USER_ENV  # noqa: E402

DEEP = "[" * 100_000


@pytest.fixture()
def run(tmp_path, monkeypatch):
    monkeypatch.delenv(TEAM_ENV, raising=False)
    monkeypatch.delenv(USER_ENV, raising=False)
    return make_run(tmp_path / "cache", embeddings=False, group=False)


def cli(run, *args) -> int:
    return main(["--cache", str(run.path.parents[1]), *args])


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("cartomap: error: "), err
    return err.strip()


# --------------------------------------------------------------------------- the checked readers


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (DEEP.encode(), "JSON nested too deeply; expected a thing"),
        (b'{"a": 1e400}', "the number 1e400 is out of range; expected a thing"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": ' + b"9" * 5000 + b"}", "Exceeds the limit (4300 digits)"),
        (b'{"a":\n  }', "line 2: not valid JSON (Expecting value at column 3); expected a thing"),
        (b'{"a": "\xff"}', "line 1: bytes are not valid UTF-8 (byte 0xff"),
    ],
    ids=["nested", "1e400", "NaN", "5000 digits", "malformed", "not UTF-8"],
)
def test_the_json_reader_is_one_error_naming_the_file(tmp_path, body, words):
    path = tmp_path / "f.json"
    path.write_bytes(body)
    with pytest.raises(CartomapError) as caught:
        io.read_json_file(path, "a thing")
    assert str(caught.value).startswith(str(path)) and words in str(caught.value), caught.value
    assert "\n" not in str(caught.value)


def test_the_json_reader_drops_a_byte_order_mark_and_reads_plain_json(tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(io.UTF8_BOM + b'{"a": [1, 2.5, "x"]}')
    assert io.read_json_file(path, "a thing") == {"a": [1, 2.5, "x"]}


def test_the_toml_reader_refuses_deep_nesting_in_one_line(tmp_path):
    with pytest.raises(CartomapError, match="TOML nested too deeply; expected a team"):
        io.parse_toml_text("a = " + DEEP, "team.toml", "a team")


# --------------------------------------------------------------------------- saved views


DAMAGE = {
    "a date in words": lambda v: {**v, "created_at": "yesterday"},
    "a number out of range": lambda v: {**v, "created_at": 1e300},
    "a time past any date": lambda v: {**v, "created_at": 99999999999999999},
    "a focus that is a list": lambda v: {**v, "focus": [1]},
    "a setting that is a mapping": lambda v: {**v, "settings": {"conf": {"lo": 1}}},
    "nested 100,000 deep": lambda v: DEEP,
    "not JSON": lambda v: "{not json",
}


def damage(run, name: str, how: str) -> Path:
    path = views.view_path(run, name)
    view = DAMAGE[how](json.loads(path.read_text()))
    text = view if isinstance(view, str) else json.dumps(view)
    path.write_text(text.replace("1e+300", "1e400"), encoding="utf-8")
    return path


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_view_hides_no_other_and_can_be_deleted_or_replaced(run, capsys, how):
    views.save_view(run, "good", {"a": 1}, ["n1"])
    views.save_view(run, "bad one", {"a": 2}, [])
    path = damage(run, "bad one", how)
    assert cli(run, "views", "list", run.id) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and any(line.startswith("good: 1 settings, 1 selected") for line in lines)
    (bad,) = [line for line in lines if not line.startswith("good")]
    assert str(path) in bad and f"cartomap views delete {run.id} bad-one" in bad, bad
    assert cli(run, "views", "show", run.id, "good") == 0
    capsys.readouterr()
    assert cli(run, "views", "show", run.id, "bad one") == 2
    assert str(path) in one_line(capsys)
    with pytest.raises(CartomapError, match="damaged saved view is in the place of 'bad one'"):
        views.save_view(run, "bad one", {}, [])
    views.save_view(run, "bad one", {"b": 3}, [], overwrite=True)  # replaced
    assert views.load_view(run, "bad one")["settings"] == {"b": 3}
    damage(run, "bad one", how)
    assert cli(run, "views", "delete", run.id, "bad one") == 0  # by its name
    assert [v["name"] for v in views.list_views(run)] == ["good"]


def test_a_damaged_view_is_deleted_by_the_name_it_is_listed_under(run, capsys):
    views.save_view(run, "good", {}, [])
    (run.views_dir / "junk.json").write_text("[1, 2", encoding="utf-8")
    assert any(v["name"] == "junk" and "problem" in v for v in views.list_views(run))
    assert cli(run, "views", "delete", run.id, "junk") == 0
    assert [v["name"] for v in views.list_views(run)] == ["good"]


def test_a_view_saved_on_a_full_disk_is_one_line_and_changes_nothing(run, monkeypatch):
    views.save_view(run, "kept", {"a": 1}, [])

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io, "atomic_write_bytes", full)
    with pytest.raises(CartomapError) as caught:
        views.save_view(run, "kept", {"a": 2}, [], overwrite=True)
    message = str(caught.value)
    assert str(views.view_path(run, "kept")) in message and "the disk is full" in message, message
    assert views.load_view(run, "kept")["settings"] == {"a": 1}


def test_a_views_address_is_percent_encoded(run, capsys):
    name = "x&view=y#z ?"
    views.save_view(run, name, {}, [])
    assert cli(run, "views", "show", run.id, name) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "address:" in ln]
    assert f"?run={run.id}&view=x%26view%3Dy%23z%20%3F " in line
    from urllib.parse import parse_qs, urlsplit

    address = views.address(run.id, name)
    assert parse_qs(urlsplit(address).query) == {"run": [run.id], "view": [name]}
    assert "#" not in address and " " not in address


# --------------------------------------------------------------------------- ids files, search


def test_a_non_utf8_ids_file_is_one_line(run, tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"n0\nn1\xff\n")
    assert cli(run, "tags", "add", run.id, "typo", "--ids", str(ids)) == 2
    err = one_line(capsys)
    assert f"{ids}: line 2: bytes are not valid UTF-8 (byte 0xff" in err, err
    assert cli(run, "review-queue", "create", run.id, "q", "--ids", str(ids)) == 2
    assert f"{ids}: line 2: bytes are not valid UTF-8" in one_line(capsys)
    assert cli(run, "tags", "add", run.id, "typo", "--ids", str(tmp_path / "none.txt")) == 2
    assert "none.txt: no such file (expected one example id per line)" in one_line(capsys)
    ids.write_bytes(io.UTF8_BOM + b"n0\n\n n1 \n")
    assert cli(run, "tags", "add", run.id, "typo", "--ids", str(ids)) == 0
    assert "tagged 2 examples" in capsys.readouterr().out


def test_a_search_for_a_lone_surrogate_is_one_line():
    import pandas as pd

    frame = pd.DataFrame({"id": ["a"], "premise": ["cat"], "hypothesis": ["dog"]})
    with pytest.raises(CartomapError, match="U\\+D800, half of a character"):
        search.search_ids(frame, "ca\ud800")
    assert search.search_ids(frame, "CAT") == ["a"]


# --------------------------------------------------------------------------- repair


KILLED_WRITE = """
import sys, time
from pathlib import Path
from cartomap import io

def write(tmp):
    Path(tmp).write_bytes(b"x" * (4 << 20))
    print("written", flush=True)
    time.sleep(600)

io.atomic_save(sys.argv[1], write)
"""


def test_repair_removes_what_a_killed_write_left_and_only_that(run, capsys):
    """A process killed (SIGKILL) while it writes a 5 MB view leaves its temporary file; `cartomap repair`
    removes it (once it is older than a write in progress could be) and keeps every real file."""
    import subprocess
    import time

    import patience

    from cartomap.runs import repair

    views.save_view(run, "kept", {}, [])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    target = views.view_path(run, "big")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITE, str(target)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        proc.kill()
        proc.wait(timeout=patience.WAIT_S)
    (left,) = repair.temporaries(run.path)
    assert left.parent == run.views_dir and left.stat().st_size == 4 << 20 and io.is_temporary(left)
    assert cli(run, "repair", run.id) == 0
    assert f"note: kept views/{left.name}: written" in capsys.readouterr().out  # young: maybe a write
    old = time.time() - 2 * repair.TEMPORARY_AGE
    os.utime(left, (old, old))
    assert cli(run, "repair", run.id) == 0
    out = capsys.readouterr().out
    assert f"fixed: removed views/{left.name} (4.0 MB), left by a write that never finished" in out
    assert not left.exists() and repair.temporaries(run.path) == []
    assert [v["name"] for v in views.list_views(run)] == ["kept"] and run.problems() == []
    assert cli(run, "repair", run.id) == 0
    assert f"run {run.id}: nothing wrong" in capsys.readouterr().out


def test_every_temporary_name_of_an_atomic_write_is_told(tmp_path):
    def look(folder):
        seen.extend(p.name for p in tmp_path.iterdir())
        (folder / "f").write_text("x")

    seen: list[str] = []
    io.atomic_folder(tmp_path / "model", look)
    io.atomic_save(tmp_path / "a.json", lambda tmp: seen.append(Path(tmp).name) or Path(tmp).write_text("{}"))
    assert len(seen) == 2 and all(io.is_temporary(name) for name in seen), seen
    assert not any(io.is_temporary(p) for p in tmp_path.iterdir())  # the files they became
    assert not io.is_temporary("a.tmp") and not io.is_temporary(".hidden.json")


# --------------------------------------------------------------------------- a read-only or full store


@pytest.fixture()
def mounted(tmp_path):
    """A 16 MiB tmpfs of its own (needs root: ``mount -t tmpfs``), remounted read-only or filled up by the
    test; skipped where it cannot be mounted (SQLite opens files itself: no Python-level injection can make
    them read-only)."""
    import shutil
    import subprocess

    path = tmp_path / "disk"
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def store_with_tags_and_a_queue(disk: Path, monkeypatch) -> tuple:
    """A run on ``disk`` with a tag, a review queue with one decision and a saved view, every SQLite
    connection of this process closed (a fresh process reads the store)."""
    from cartomap.runs import sqlite as run_sqlite

    monkeypatch.delenv(TEAM_ENV, raising=False)
    monkeypatch.delenv(USER_ENV, raising=False)
    run = make_run(disk / "cache", embeddings=False, group=False)
    ids = disk / "ids.txt"
    ids.write_text("n0\nn1\n")
    assert cli(run, "tags", "add", run.id, "typo", "--id", "n0") == 0
    assert cli(run, "review-queue", "create", run.id, "q", "--ids", str(ids), "--per-item", "1") == 0
    assert cli(run, "review-queue", "decide", run.id, "q", "--annotator", "ann", "--item", "n0",
               "--decision", "remove") == 0  # fmt: skip
    views.save_view(run, "mine", {"a": 1}, ["n0"])
    for key in list(run_sqlite._OPEN):  # as a new process: no idle connection keeps the WAL files
        run_sqlite._OPEN.pop(key).close()
    return run


READS = [
    ("tags", "list"),
    ("tags", "show", "{run}", "typo"),
    ("review-queue", "show", "{run}", "q"),
    ("review-queue", "next", "{run}", "q", "--annotator", "bob"),
    ("views", "list"),
]


def reads_work(run, out: Path, capsys) -> None:
    import pandas as pd

    for args in READS:
        args = [a.format(run=run.id) for a in args] + ([run.id] if len(args) == 2 else [])
        assert cli(run, *args) == 0, (args, capsys.readouterr().err)
    said = capsys.readouterr()
    assert "typo" in said.out and "n1" in said.out and "mine: 1 settings" in said.out, said
    assert cli(run, "export", run.id, "--out", str(out)) == 0, capsys.readouterr().err
    exported = pd.read_parquet(next(out.rglob("tags.parquet")))
    assert exported[["id", "tag"]].values.tolist() == [["n0", "typo"]]


def test_a_read_only_store_with_tags_and_queues_is_readable(mounted, tmp_path, monkeypatch, capsys):
    import subprocess

    run = store_with_tags_and_a_queue(mounted, monkeypatch)
    untagged = make_run(mounted / "other", embeddings=False, group=False)  # no tags.sqlite yet
    subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
    capsys.readouterr()
    reads_work(run, tmp_path / "export", capsys)
    for which in (run, untagged):
        assert cli(which, "tags", "add", which.id, "later", "--id", "n1") == 2
        assert "read-only: tags can be read here, not changed" in one_line(capsys)


def test_a_store_on_a_full_disk_is_readable(mounted, tmp_path, monkeypatch, capsys):
    run = store_with_tags_and_a_queue(mounted, monkeypatch)
    with open(mounted / "filler", "ab", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError as err:
                assert err.errno == errno.ENOSPC
    capsys.readouterr()
    reads_work(run, tmp_path / "export", capsys)  # the export to another filesystem too
    assert cli(run, "tags", "add", run.id, "later", "--id", "n1") == 2
    assert "the disk is full: free some space and tag again" in one_line(capsys)


# --------------------------------------------------------------------------- tools' files, the team file


@pytest.mark.parametrize("tool", ["labelstudio", "argilla"])
def test_a_deeply_nested_import_is_one_line(run, tmp_path, capsys, tool):
    from cartomap.curation import exchange

    ids = tmp_path / "ids.txt"
    ids.write_text("n0\n")
    assert cli(run, "review-queue", "create", run.id, "q", "--ids", str(ids)) == 0
    export = tmp_path / "export.json"
    export.write_text(DEEP)
    capsys.readouterr()
    assert cli(run, "review-queue", "import", run.id, "q", str(export), "--tool", tool) == 2
    assert f"{export}: JSON nested too deeply; expected a Label Studio JSON export" in one_line(capsys)
    with pytest.raises(CartomapError, match="upload.json: JSON nested too deeply"):
        exchange.import_upload(run, "q", DEEP.encode(), tool, "upload.json")


def test_a_team_file_with_a_byte_order_mark_is_read_and_a_deep_one_is_one_line(run, capsys, monkeypatch):
    team = run.path.parents[1] / "team.toml"
    team.write_bytes(io.UTF8_BOM + b'[users]\n"alice" = "owner"\n"bob" = "viewer"\n')
    monkeypatch.setenv(USER_ENV, "bob")
    assert cli(run, "tags", "add", run.id, "typo", "--id", "n0") == 2  # read: bob is a viewer
    assert "bob" in one_line(capsys)
    monkeypatch.setenv(USER_ENV, "alice")
    assert cli(run, "tags", "add", run.id, "typo", "--id", "n0") == 0
    capsys.readouterr()
    team.write_text('[users]\n"alice" = ' + DEEP)
    assert cli(run, "tags", "add", run.id, "typo", "--id", "n1") == 2
    assert f"{team}: TOML nested too deeply; expected a team file" in one_line(capsys)


# --------------------------------------------------------------------------- rough edges


def test_cancelling_a_finished_run_says_so_and_leaves_nothing(run, capsys):
    assert run.status()["state"] == "done"
    assert cli(run, "cancel", run.id) == 2
    assert f"run {run.id} is done (finished): there is nothing to cancel" in one_line(capsys)
    assert not run.cancel_requested()
    run.set_status(state="queued")  # waiting for its job: a cancel is kept for it
    assert cli(run, "cancel", run.id) == 0
    assert "cancel requested" in capsys.readouterr().out and run.cancel_requested()


# --------------------------------------------------------------------------- messages that name the right thing


def test_a_01_row_of_another_width_is_named_not_the_first_line():
    from cartomap.data import multilabel as ml

    rows = [[0, 1, 1], [1, 0, 0], [1, 0], [0, 0, 1]]
    text = "\n".join(json.dumps({"text": f"t{i}", "labels": r}) for i, r in enumerate(rows))
    with pytest.raises(CartomapError) as caught:
        ml.parse_multilabel_jsonl(text, "d.jsonl", label_names=["x", "y", "z"], text_fields=["text"])
    message = str(caught.value)
    assert message.startswith("d.jsonl: line 3: field 'labels': a list of 2 numbers 0/1"), message
    assert "needs 3 numbers in every row" in message
    # label positions of several lengths (no number repeated in a row) are still label positions
    positions = "\n".join(
        json.dumps({"text": f"t{i}", "labels": r}) for i, r in enumerate([[0, 1], [1], [0]])
    )
    data = ml.parse_multilabel_jsonl(positions, "p.jsonl", label_names=["x", "y", "z"], text_fields=["text"])
    assert data.indicator.tolist() == [[True, True, False], [False, True, False], [True, False, False]]


@pytest.mark.parametrize(
    "votes", [{"neutral": float("nan")}, {"neutral": float("nan"), "entailment": 2}, [1, float("nan"), 0]]
)
def test_a_nan_vote_is_named_as_nan_not_as_no_votes(tmp_path, votes):
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    rows = [
        {
            "premise": f"p{i}",
            "hypothesis": f"h{i}",
            "label": ["entailment", "neutral", "contradiction"][i],
            "votes": v,
        }
        for i, v in enumerate([{"neutral": 1}, votes, {"neutral": 1}])
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(CartomapError) as caught:
        load_dataset(DataConfig(path=str(path), votes_column="votes"))
    message = str(caught.value)
    assert f"{path}: line 2" in message and "is NaN; expected a whole number of votes" in message, message


@pytest.mark.parametrize(
    ("folds", "words"),
    [(31, "30 examples cannot be split into 31 folds"), (12, "every class needs at least k=12 examples")],
)
def test_too_many_folds_for_the_data_names_folds(tmp_path, capsys, folds, words):
    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    demo = load_dataset(DataConfig(path="demo:dev"))
    frame = demo.frame.groupby("label").head(10).head(30).copy()
    frame["label"] = [demo.label_names[k] for k in frame["label"]]
    data = tmp_path / "thirty.jsonl"
    frame.to_json(data, orient="records", lines=True)
    args = ["--cache", str(tmp_path / "cache"), "prune", "--data", str(data), "--test", str(data)]
    assert main([*args, "--folds", str(folds)]) == 2
    err = one_line(capsys)
    assert err.startswith(f"cartomap: error: --folds: {words}"), err
    assert str(data) in err and "labels" not in err


def test_a_deeply_nested_run_file_is_a_damaged_run_not_a_traceback(run, capsys):
    run.status_path.write_text(DEEP)
    assert cli(run, "runs") == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "status.json cannot be read" in captured.err
    assert "JSON nested too deeply" in captured.err


def test_a_deeply_nested_config_file_is_one_line(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(DEEP)
    assert main(["--cache", str(tmp_path / "cache"), "train", "--config", str(config)]) == 2
    assert f"{config}: JSON nested too deeply; expected a run config" in one_line(capsys)


def test_a_proxy_secret_saved_with_a_byte_order_mark_still_matches(tmp_path):
    """The secret file is read by the checked reader of files people edit: a BOM (Notepad's) is read
    through, so the proxy's header matches; an unreadable file is one line."""
    import argparse

    from cartomap.cli.train import proxy_secret
    from cartomap.errors import CartomapError

    path = tmp_path / "secret.txt"
    path.write_bytes("\ufeffa-long-shared-secret-0123\n".encode())
    assert proxy_secret(argparse.Namespace(proxy_secret_file=str(path))) == "a-long-shared-secret-0123"
    path.write_bytes(b"\xff\xfe bad")
    with pytest.raises(CartomapError, match="not valid UTF-8"):
        proxy_secret(argparse.Namespace(proxy_secret_file=str(path)))


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True])
def test_a_fold_seed_out_of_range_is_one_line_naming_it(seed):
    """A fold seed that numpy or scikit-learn would refuse with a traceback is refused when the experiment's
    parameters are made, naming the field (the CLI names --fold-seed)."""
    from cartomap.errors import DataError
    from cartomap.experiments.pruning import PruningParams
    from cartomap.experiments.token_folds import TokenFoldsParams

    for params in (PruningParams, TokenFoldsParams):
        with pytest.raises(DataError, match="whole number between 0 and 4294967295") as err:
            params(fold_seed=seed)
        assert err.value.field == "fold_seed"
