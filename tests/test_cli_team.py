"""Team mode on the command line: a command that writes runs only for a person whose role allows it
(one line, exit 2), a decision is recorded under the person's own name, every command is known to
read or write, and `cartomap dashboard` refuses to listen beyond 127.0.0.1 without a login."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from curation_fixture import make_run  # noqa: E402

from cartomap.cli import build_parser, main  # noqa: E402
from cartomap.cli.team import READS, WRITES, command_of  # noqa: E402
from cartomap.curation import queue, sources  # noqa: E402
from cartomap.team.roles import TEAM_ENV, USER_ENV  # noqa: E402

TEAM = """
[users]
"alice" = "owner"
"bob" = { role = "annotator", queues = ["q"] }
"carol" = "viewer"
"""


@pytest.fixture()
def store(tmp_path, monkeypatch):
    """A finished run with a review queue ``q``, and a team file beside its runs."""
    monkeypatch.delenv(TEAM_ENV, raising=False)
    cache = tmp_path / "cache"
    run = make_run(cache)
    queue.create_queue(run, "q", sources.from_group(run, "lasso"), per_item=2)
    (cache / "team.toml").write_text(TEAM, encoding="utf-8")
    return cache, run


def cli(cache, user, *args, capsys=None):
    import os

    os.environ[USER_ENV] = user
    try:
        return main(["--cache", str(cache), *args])
    finally:
        os.environ.pop(USER_ENV, None)


def test_an_annotator_decides_on_their_queue_under_their_own_name(store, capsys):
    cache, run = store
    assert (
        cli(cache, "bob", "review-queue", "decide", run.id, "q", "--item", "c1", "--decision", "remove") == 0
    )
    assert "recorded: bob on c1: remove" in capsys.readouterr().out
    db = queue.open_queue(run, "q")
    assert db.decision_of("bob", "c1")["decision"] == "remove"
    # deciding as somebody else is refused, in one line
    code = cli(cache, "bob", "review-queue", "decide", run.id, "q", "--annotator", "alice", "--item", "n2",
               "--decision", "keep")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("cartomap: error: decisions are recorded under your own name")
    assert err.count("\n") == 1 and "you are bob, not alice" in err
    assert db.decision_of("alice", "n2") is None
    # --annotator repeating one's own name is fine
    assert cli(cache, "bob", "review-queue", "decide", run.id, "q", "--annotator", "BOB", "--item", "n2",
               "--decision", "keep") == 0  # fmt: skip
    assert set(db.history()["annotator"]) == {"bob"}
    # undo: one's own only
    assert cli(cache, "bob", "review-queue", "undo", run.id, "q", "--annotator", "alice", "--item", "c1") == 2
    assert "you are bob, not alice" in capsys.readouterr().err
    assert cli(cache, "bob", "review-queue", "undo", run.id, "q", "--item", "c1") == 0
    assert db.decision_of("bob", "c1") is None


def test_roles_refuse_the_writes_they_do_not_allow(store, capsys):
    cache, run = store
    queue.create_queue(run, "other", sources.from_group(run, "lasso"), per_item=1)
    refusals = {
        ("bob", "review-queue", "decide", run.id, "other", "--item", "c1", "--decision", "keep"): (
            "bob (annotator) is not assigned to the queue 'other'"
        ),
        (
            "carol",
            "review-queue",
            "decide",
            run.id,
            "q",
            "--item",
            "c1",
            "--decision",
            "keep",
        ): "may only read",
        ("bob", "review-queue", "create", run.id, "new", "--group", "lasso"): "make review queues",
        ("bob", "review-queue", "export", run.id, "q"): "write corrected sets",
        ("bob", "cancel", run.id): "cancel a job",
        ("bob", "experiment", "cancel", "x"): "cancel a job",
        ("carol", "train", "--data", "demo:dev"): "start or resume training",
        ("mallory", "delete", run.id, "--yes"): "mallory (viewer: not in the team file) may not delete",
        ("bob", "retrain", run.id, "--queue", "q"): "start experiments",
        ("bob", "embed", run.id): "start a job on a run",
    }
    for (user, *args), expected in refusals.items():
        assert cli(cache, user, *args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("cartomap: error: ") and expected in err and err.count("\n") == 1, (args, err)
    assert queue.list_queues(run) == ["other", "q"] and run.state == "done"
    assert not (cache / run.id / "cancel").exists()
    # reading is everybody's
    assert cli(cache, "carol", "review-queue", "show", run.id, "q") == 0
    assert cli(cache, "mallory", "runs") == 0


def test_an_owner_writes_and_is_kept_as_the_writer(store, capsys):
    cache, run = store
    assert cli(cache, "alice", "review-queue", "create", run.id, "new", "--group", "lasso") == 0
    assert queue.queue_summary(run, "new")["created_by"] == "alice"
    capsys.readouterr()
    assert cli(cache, "carol", "review-queue", "list", run.id) == 0
    listed = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert listed["new"].endswith(" by alice") and " by " not in listed["q"]
    assert (
        cli(cache, "alice", "review-queue", "decide", run.id, "new", "--item", "c1", "--decision", "remove")
        == 0
    )
    assert cli(cache, "alice", "review-queue", "export", run.id, "new") == 0
    writes = queue.open_queue(run, "new").writes()
    assert [(w["what"], w["by"]) for w in writes] == [("created", "alice"), ("corrected", "alice")]


def test_without_a_team_file_nothing_is_checked_and_names_are_given(store, capsys):
    cache, run = store
    (cache / "team.toml").unlink()
    assert (
        cli(cache, "carol", "review-queue", "decide", run.id, "q", "--item", "c1", "--decision", "keep") == 2
    )
    assert "--annotator NAME is needed" in capsys.readouterr().err
    assert cli(cache, "carol", "review-queue", "decide", run.id, "q", "--annotator", "zed", "--item", "c1",
               "--decision", "keep") == 0  # fmt: skip
    assert queue.open_queue(run, "q").decision_of("zed", "c1")["decision"] == "keep"
    assert queue.queue_summary(run, "q")["created_by"] == ""


def test_every_command_is_known_to_read_or_write():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = []
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:
            commands += [f"{name} {n}" for n in nested[0].choices]
        elif name == "experiment":
            action = next(a for a in p._actions if a.dest == "action")
            commands += [f"{name} {c}" for c in action.choices]
        else:
            commands.append(name)
    assert not set(WRITES) & READS
    assert sorted(set(commands) - set(WRITES) - READS) == [], "classify the new command in cartomap.cli.team"
    assert sorted((set(WRITES) | READS) - set(commands)) == []
    assert command_of(parser.parse_args(["review-queue", "list", "r"])) == "review-queue list"


# --------------------------------------------------------------------------- the dashboard's door
def test_the_dashboard_refuses_to_listen_beyond_this_machine_without_a_login(tmp_path, capsys, monkeypatch):
    from cartomap.cli.train import dashboard_access

    monkeypatch.delenv(TEAM_ENV, raising=False)
    cache = tmp_path / "cache"
    assert main(["--cache", str(cache), "dashboard", "--address", "0.0.0.0", "--headless"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cartomap: error: the dashboard would listen on 0.0.0.0 without a login")
    assert err.count("\n") == 1
    # a login needs the team file (roles) first
    args = [
        "--cache",
        str(cache),
        "dashboard",
        "--address",
        "0.0.0.0",
        "--trust-user-header",
        "X-Forwarded-User",
    ]
    assert main(args) == 2
    assert "no team file" in capsys.readouterr().err
    assert (
        main(["--cache", str(cache), "dashboard", "--login", "--secrets", str(tmp_path / "none.toml")]) == 2
    )
    assert "no team file" in capsys.readouterr().err
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "team.toml").write_text(TEAM, encoding="utf-8")
    assert (
        main(["--cache", str(cache), "dashboard", "--login", "--secrets", str(tmp_path / "none.toml")]) == 2
    )
    assert "[auth] table" in capsys.readouterr().err
    assert main(["--cache", str(cache), "dashboard", "--trust-user-header", "X User"]) == 2
    assert "header name" in capsys.readouterr().err
    # what the server would be given
    parse = build_parser().parse_args
    access = dashboard_access(parse([*args, "--trusted-proxy", "10.0.0.5,10.0.1.0/24"]))
    assert access.mode == "header" and access.proxies == ("10.0.0.5", "10.0.1.0/24")
    assert dashboard_access(
        parse(["--cache", str(cache), "dashboard", "--address", "0.0.0.0", "--open"])
    ).open
    assert dashboard_access(parse(["--cache", str(cache), "dashboard"])).mode == "local"


def test_guidelines_from_a_file_shown_to_all_and_replaced_by_the_queues_creator_only(store, capsys, tmp_path):
    cache, run = store
    text = tmp_path / "guide.txt"
    text.write_text("Relabel only when sure.\nRemove nonsense.\n", encoding="utf-8")
    assert (
        cli(
            cache,
            "alice",
            "review-queue",
            "create",
            run.id,
            "g",
            "--group",
            "lasso",
            "--guidelines-file",
            str(text),
        )
        == 0
    )
    assert queue.open_queue(run, "g").guidelines == "Relabel only when sure.\nRemove nonsense."
    capsys.readouterr()
    assert cli(cache, "carol", "review-queue", "show", run.id, "g") == 0  # a viewer reads them
    assert "guidelines:\n  Relabel only when sure.\n  Remove nonsense." in capsys.readouterr().out
    # another owner may make queues, not rewrite this one's guidelines
    (cache / "team.toml").write_text(TEAM + '"dave" = "owner"\n', encoding="utf-8")
    assert cli(cache, "dave", "review-queue", "guidelines", run.id, "g", "--text", "mine") == 2
    assert "only alice, who made review queue 'g', can edit its guidelines" in capsys.readouterr().err
    assert cli(cache, "bob", "review-queue", "guidelines", run.id, "g", "--text", "mine") == 2  # an annotator
    capsys.readouterr()
    assert cli(cache, "alice", "review-queue", "guidelines", run.id, "g", "--text", "Keep when unsure.") == 0
    assert queue.open_queue(run, "g").guidelines == "Keep when unsure."
    assert (
        cli(
            cache,
            "alice",
            "review-queue",
            "create",
            run.id,
            "h",
            "--group",
            "lasso",
            "--guidelines-file",
            "nope.txt",
        )
        == 2
    )
    assert "nope.txt: no such file" in capsys.readouterr().err


# --------------------------------------------------------------------------- fourth round
def test_a_job_checks_the_role_of_who_started_it_and_keeps_them(store, capsys, monkeypatch):
    """No hidden flag skips the check: `--job` acts as its CARTOMAP_USER (set by whoever spawned it)."""
    import cartomap.cli.train as train_cli
    from cartomap.runs.state import State

    cache, run = store
    run.set_status(state=State.QUEUED)
    trained = []
    monkeypatch.setattr(train_cli, "train_with_progress", lambda r, **kw: trained.append(r.id) or 0)
    assert cli(cache, "bob", "train", "--run", run.id, "--job", "--quiet") == 2
    err = capsys.readouterr().err
    assert "bob (annotator) may not start or resume training" in err and err.count("\n") == 1
    assert not trained and "started_by" not in run.status()
    for job in (["experiment", "run", "x", "--job"], ["generate", run.id, "--batch", "b", "--job"]):
        assert cli(cache, "bob", *job) == 2, job  # every job, not only training
        assert "bob (annotator) may not" in capsys.readouterr().err
    assert cli(cache, "alice", "train", "--run", run.id, "--job", "--quiet") == 0
    assert trained == [run.id] and run.status()["started_by"] == "alice"


def test_an_item_takes_k_decisions_from_the_command_line(store, capsys):
    cache, run = store  # q: 2 per item
    for user, item, decision in (("alice", "c1", "keep"), ("bob", "c1", "remove"), ("alice", "n2", "keep"),
                                 ("bob", "n2", "keep")):  # fmt: skip
        assert (
            cli(cache, user, "review-queue", "decide", run.id, "q", "--item", item, "--decision", decision)
            == 0
        )
    (cache / "team.toml").write_text(TEAM + '"dana" = "annotator"\n', encoding="utf-8")
    capsys.readouterr()
    assert (
        cli(cache, "dana", "review-queue", "decide", run.id, "q", "--item", "c1", "--decision", "keep") == 2
    )
    err = capsys.readouterr().err
    assert "has its 2 annotator(s) already (alice, bob)" in err and err.count("\n") == 1
    assert cli(cache, "dana", "review-queue", "show", run.id, "q") == 0
    assert "Fleiss' kappa -0.333" in capsys.readouterr().out  # two raters per item: defined


def test_next_works_out_who_asks_and_list_says_who_wrote_the_corrected_set(store, capsys):
    cache, run = store
    assert cli(cache, "bob", "review-queue", "next", run.id, "q", "--n", "2") == 0
    mine = capsys.readouterr().out.split()
    assert len(mine) == 2
    assert (
        cli(cache, "bob", "review-queue", "decide", run.id, "q", "--item", mine[0], "--decision", "keep") == 0
    )
    capsys.readouterr()
    assert cli(cache, "bob", "review-queue", "next", run.id, "q") == 0
    assert capsys.readouterr().out.split() == [mine[1]]
    assert cli(cache, "carol", "review-queue", "next", run.id, "q", "--annotator", "bob") == 0  # reading
    assert capsys.readouterr().out.split() == [mine[1]]
    assert cli(cache, "alice", "review-queue", "export", run.id, "q") == 0
    capsys.readouterr()
    assert cli(cache, "carol", "review-queue", "list", run.id) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("q:") and "; corrected set written " in line and line.endswith(" by alice")
    (cache / "team.toml").unlink()  # without a team: whose next examples must be said
    assert cli(cache, "carol", "review-queue", "next", run.id, "q") == 2
    assert "--annotator NAME is needed" in capsys.readouterr().err


def test_annotators_tag_and_tags_keep_a_tagger_without_a_team_too(store, capsys):
    from cartomap.runs.tags import tags_of

    cache, run = store
    assert cli(cache, "bob", "tags", "add", run.id, "later", "--id", "c1") == 0
    assert cli(cache, "carol", "tags", "add", run.id, "later", "--id", "n2") == 2
    assert "only an owner or an annotator can" in capsys.readouterr().err
    (cache / "team.toml").unlink()
    assert cli(cache, "zed", "tags", "add", run.id, "later", "--id", "n2") == 0
    assert dict(zip(tags_of(run)["id"], tags_of(run)["tagged_by"], strict=True)) == {"c1": "bob", "n2": "zed"}


def test_the_dashboard_refuses_a_proxy_anywhere_and_warns_of_a_local_one_without_a_secret(
    store, capsys, monkeypatch, tmp_path
):
    from cartomap.cli.train import dashboard_access
    from cartomap.team import access as ac

    cache, run = store
    monkeypatch.delenv(ac.SECRET_ENV, raising=False)
    parse = build_parser().parse_args
    base = ["--cache", str(cache), "dashboard", "--trust-user-header", "X-Forwarded-User"]
    wide = [*base, "--address", "0.0.0.0", "--trusted-proxy", "0.0.0.0/0"]
    assert main(wide) == 2
    err = capsys.readouterr().err
    assert "--trusted-proxy 0.0.0.0/0 covers public addresses" in err and err.count("\n") == 1
    assert dashboard_access(parse([*wide, "--open"])).proxies == ("0.0.0.0/0",)  # said plainly
    capsys.readouterr()
    assert dashboard_access(parse(base)).secret == ""
    warned = capsys.readouterr().err
    assert (
        warned.startswith("cartomap: warning: ")
        and "every user of this machine can sign in as anyone" in warned
    )
    secret = tmp_path / "proxy-secret"
    secret.write_text("0123456789abcdef0123456789abcdef\n", encoding="utf-8")
    access = dashboard_access(parse([*base, "--proxy-secret-file", str(secret)]))
    assert access.secret == "0123456789abcdef0123456789abcdef" and not capsys.readouterr().err
    assert ac.Access.from_env(access.to_env()).secret == access.secret  # what the server gets
    monkeypatch.setenv(ac.SECRET_ENV, "fedcba9876543210fedcba")
    assert dashboard_access(parse(base)).secret == "fedcba9876543210fedcba"
    secret.write_text("\n", encoding="utf-8")
    assert main([*base, "--proxy-secret-file", str(secret)]) == 2
    assert "the file is empty" in capsys.readouterr().err
