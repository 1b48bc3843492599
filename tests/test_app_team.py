"""Team mode on the pages (AppTest): the annotator is the signed-in person, roles refuse the controls
that write in one line (also a click that reaches the server anyway), app.py's door (sign in, who is
signed in, a proxy's missing user, a server open beyond 127.0.0.1), and who made every write."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import patience
import pytest
from streamlit.testing.v1 import AppTest

sys.path.insert(0, str(Path(__file__).parent))
from curation_fixture import make_run  # noqa: E402

from cartomap.curation import queue, sources  # noqa: E402
from cartomap.team import access as ac  # noqa: E402
from cartomap.team.roles import TEAM_ENV, USER_ENV  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEAM = """
[users]
"alice@example.org" = "owner"
"bob@example.org" = { role = "annotator", queues = ["q"] }
"carol@example.org" = "viewer"
"""


@pytest.fixture()
def env(tmp_path, monkeypatch):
    """A finished run with review queues ``q`` (bob's) and ``other``, a team file, the pages importable."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    for name in (TEAM_ENV, USER_ENV, ac.AUTH_ENV, ac.HEADER_ENV, ac.PROXY_ENV, ac.OPEN_ENV, ac.SECRET_ENV):
        monkeypatch.delenv(name, raising=False)
    run = make_run(cache)
    queue.create_queue(run, "q", sources.from_group(run, "lasso"), per_item=2)
    queue.create_queue(run, "other", sources.from_group(run, "lasso"), per_item=2)
    (cache / "team.toml").write_text(TEAM, encoding="utf-8")
    return cache, run


@pytest.fixture()
def spawned(monkeypatch) -> list:
    """Start no job: record each job's arguments and who started it (``spawned.by``)."""
    import cartomap.runs.jobs

    class Calls(list):
        by: list = []

    calls = Calls()
    calls.by = []

    def fake_spawn(cli_args, log_path, cache=None, env=None, by=None):
        calls.append(cli_args)
        calls.by.append(by)
        return os.getpid()

    monkeypatch.setattr(cartomap.runs.jobs, "spawn", fake_spawn)
    return calls


def page(name: str, run_id: str, queue_name: str = "q", **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run_id
    at.session_state["rs_queue"] = queue_name
    at.session_state["rs_new"] = False
    for key, value in state.items():
        at.session_state[key] = value
    return at


def as_user(name: str) -> None:
    os.environ[USER_ENV] = name  # the person at this machine (local mode with a team file)


def locks(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if ":material/lock:" in c.value]


def test_an_annotator_decides_under_their_own_name_and_writes_nothing_else(env, monkeypatch):
    cache, run = env
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = page("review_suspects.py", run.id).run()
    assert not at.exception, at.exception
    assert not [t for t in at.text_input if t.label == "Your name"]  # no typed name in team mode
    assert any("Deciding as bob@example.org" in c.value for c in at.caption)
    at.button(key="rs_remove").click().run()
    db = queue.open_queue(run, "q")
    assert set(db.history()["annotator"]) == {"bob@example.org"}
    # the owner's controls: drawn disabled, each with its one-line reason
    for key in ("rs_write", "rs_retrain"):
        assert at.button(key=key).disabled, key
    reasons = locks(at)
    assert any("may not write corrected sets: only an owner can" in r for r in reasons)
    assert any("may not start experiments" in r for r in reasons)
    at.toggle(key="_kept_rs_new").set_value(True).run()
    assert at.button(key="rs_create").disabled
    assert queue.list_queues(run) == ["other", "q"] and not run.corrected_path("q").exists()


def test_a_queue_not_assigned_and_a_viewer_get_no_card(env, monkeypatch):
    cache, run = env
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = page("review_suspects.py", run.id, "other").run()
    assert any("is not assigned to the queue 'other'" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "rs_keep"]
    monkeypatch.setenv(USER_ENV, "carol@example.org")
    at = page("review_suspects.py", run.id).run()
    assert any("carol@example.org (viewer) may only read" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "rs_keep"]
    monkeypatch.setenv(USER_ENV, "mallory")  # not in the team file: the least role, and told so
    at = page("review_suspects.py", run.id).run()
    assert any("mallory (viewer: not in the team file)" in i.value for i in at.info)
    assert len(queue.open_queue(run, "q").history()) == 0


def test_a_decision_recorded_in_a_callback_is_checked_again(env, monkeypatch):
    """bob's card is drawn, then his role changes (the team file is edited): the click is refused."""
    cache, run = env
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = page("review_suspects.py", run.id).run()
    (cache / "team.toml").write_text(TEAM.replace('queues = ["q"]', 'queues = ["other"]'), encoding="utf-8")
    os.utime(cache / "team.toml", (1e10, 1e10))
    at.button(key="rs_keep").click().run()
    assert len(queue.open_queue(run, "q").history()) == 0
    assert any("not assigned to the queue 'q'" in e.value for e in at.error)


def test_the_owner_writes_and_every_write_keeps_who(env, monkeypatch):
    cache, run = env
    monkeypatch.setenv(USER_ENV, "alice@example.org")
    at = page("review_suspects.py", run.id).run()
    at.button(key="rs_keep").click().run()
    assert queue.open_queue(run, "q").decision_of("alice@example.org", "c1")["decision"] == "keep"
    assert not locks(at)
    at.button(key="rs_write").click().run()
    assert not at.exception, at.exception
    assert run.corrected_path("q").exists()
    assert [(w["what"], w["by"]) for w in queue.open_queue(run, "q").writes()] == [
        ("created", None),  # made by the fixture, without a team
        ("corrected", "alice@example.org"),
    ]
    at.toggle(key="_kept_rs_new").set_value(True).run()
    at.radio(key="_kept_rs_source").set_value("Saved group").run()
    at.text_input(key="rs_new_name_group-lasso").set_value("mine").run()
    at.button(key="rs_create").click().run()
    assert queue.queue_summary(run, "mine")["created_by"] == "alice@example.org"


def test_without_a_team_file_the_page_is_as_it_was(env):
    cache, run = env
    (cache / "team.toml").unlink()
    at = page("review_suspects.py", run.id).run()
    assert [t for t in at.text_input if t.label == "Your name"]
    assert not locks(at)
    at.toggle(key="_kept_rs_new").set_value(True).run()
    assert not at.button(key="rs_create").disabled


def test_the_wanli_review_page_reviews_as_the_signed_in_person(env, monkeypatch, tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from test_app_wanli_review import filtered_batch
    from test_app_wanli_review import make_run as wanli_run

    cache = tmp_path / "wanli"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    run, batch = wanli_run(cache, n=40), "b1"
    filtered_batch(run, batch)
    (cache / "team.toml").write_text(
        TEAM.replace('queues = ["q"]', f'queues = ["{batch}"]'), encoding="utf-8"
    )
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = AppTest.from_file(str(ROOT / "pages" / "review.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception, at.exception
    assert not [s for s in at.selectbox if s.label == "Annotator"] and not at.get("form")
    assert any("Reviewing as bob@example.org" in c.value for c in at.caption)
    at.button(key="rv_discard").click().run()
    from cartomap.wanli.review import open_review

    assert set(open_review(run, batch).actions()["annotator"]) == {"bob@example.org"}
    monkeypatch.setenv(USER_ENV, "carol@example.org")
    at = AppTest.from_file(str(ROOT / "pages" / "review.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert any("may only read" in i.value for i in at.info) and not [
        b for b in at.button if b.key == "rv_discard"
    ]


# --------------------------------------------------------------------------- training: start and cancel
def test_an_annotator_cannot_start_or_cancel_training(env, monkeypatch, spawned):
    cache, run = env
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = AppTest.from_file(str(ROOT / "pages" / "train.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert at.button(key="train_start").disabled
    assert any("may not start or resume training: only an owner can" in r for r in locks(at))
    assert spawned == []
    # a running run: its Cancel is the owner's
    run.set_status(state="running")
    handle = run.acquire_lock()
    try:
        at = AppTest.from_file(str(ROOT / "pages" / "train.py"), default_timeout=patience.WAIT_S)
        at.session_state["run_id"] = run.id
        at.run()
        cancel = at.button(key=f"cancel_{run.id}")
        assert cancel.label == "Cancel training" and cancel.disabled
        assert any("may not cancel a job" in r for r in locks(at))
        assert not run.cancel_path.exists()
        monkeypatch.setenv(USER_ENV, "alice@example.org")
        at.run()
        assert not at.button(key=f"cancel_{run.id}").disabled
        at.button(key=f"cancel_{run.id}").click().run()
        assert run.cancel_path.exists()
    finally:
        handle.close()


def test_the_owner_starts_training_as_themselves(env, monkeypatch, spawned):
    cache, run = env
    monkeypatch.setenv(USER_ENV, "alice@example.org")
    at = AppTest.from_file(str(ROOT / "pages" / "train.py"), default_timeout=patience.WAIT_S)
    at.run()
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    assert spawned and spawned[-1][:2] == ["train", "--run"] and spawned.by == ["alice@example.org"]
    from cartomap.runs.store import RunStore

    started = next(r for r in RunStore(cache).list() if r.id != run.id)
    assert started.status()["started_by"] == "alice@example.org"


# --------------------------------------------------------------------------- the helpers and app.py's door
def helper_script() -> AppTest:
    def body():
        import streamlit as st

        from cartomap.team.roles import Action
        from pages.common import write_button, write_submit

        if write_button("Go", Action.TRAIN, key="go"):
            st.session_state["went"] = True
        with st.form("f"):
            st.text_input("Name", key="n")
            if write_submit("Save", Action.GROUP):
                st.session_state["saved"] = True

    return AppTest.from_function(body, default_timeout=patience.WAIT_S)


def test_write_controls_are_checked_by_the_one_owner(env, monkeypatch):
    monkeypatch.setenv(USER_ENV, "carol@example.org")
    at = helper_script().run()
    assert at.button(key="go").disabled and len(locks(at)) == 2
    monkeypatch.setenv(USER_ENV, "alice@example.org")
    at = helper_script().run()
    assert not at.button(key="go").disabled and not locks(at)
    # drawn for the owner, clicked once the role is gone (a click that reaches the server anyway): refused
    monkeypatch.setenv(USER_ENV, "carol@example.org")
    at.button(key="go").click().run()
    assert "went" not in at.session_state and at.button(key="go").disabled
    monkeypatch.setenv(USER_ENV, "alice@example.org")
    at.run()
    at.button(key="go").click().run()
    assert at.session_state["went"]


def app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=patience.WAIT_S)


def test_the_door_asks_people_to_sign_in_and_says_who_is_signed_in(env, monkeypatch):
    cache, run = env
    monkeypatch.setenv(ac.AUTH_ENV, "login")
    at = app().run()
    assert not at.exception, at.exception
    assert at.button(key="team_sign_in").label == "Sign in"
    assert not at.title or [t.value for t in at.title] == ["cartomap"]  # no page drawn
    at = app()
    at.user = {"is_logged_in": True, "email": "bob@example.org", "name": "Bob"}
    at.run()
    assert not at.exception, at.exception
    assert any("Signed in as bob@example.org (annotator)" in c.value for c in at.sidebar.caption)
    assert at.sidebar.button(key="team_sign_out").label == "Sign out"


def test_the_door_refuses_a_proxy_request_without_a_user_and_an_open_server(env, monkeypatch):
    monkeypatch.setenv(ac.AUTH_ENV, "header")
    monkeypatch.setenv(ac.HEADER_ENV, "X-Forwarded-User")
    at = app().run()  # AppTest's connection has no real address: not the proxy's, so refused
    assert any("opened through its sign-in proxy only (127.0.0.1)" in e.value for e in at.error)
    assert not at.title and not at.sidebar.selectbox  # no page, no run picker
    monkeypatch.setenv(ac.AUTH_ENV, "local")
    at = app()
    at.run()
    from streamlit import config

    old = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        at = app().run()
        assert any("would listen on 0.0.0.0 without a login" in e.value for e in at.error)
        monkeypatch.setenv(ac.OPEN_ENV, "1")
        at = app().run()
        assert not at.error
    finally:
        config.set_option("server.address", old)


def test_a_broken_team_file_refuses_every_write(env, monkeypatch):
    cache, run = env
    (cache / "team.toml").write_text("[users\n", encoding="utf-8")
    at = app().run()
    assert any("team.toml: not valid TOML" in e.value for e in at.error)
    at = page("review_suspects.py", run.id).run()
    assert any("not valid TOML" in i.value for i in at.info)  # no card: nobody decides
    at.toggle(key="_kept_rs_new").set_value(True).run()
    assert at.button(key="rs_create").disabled and any("not valid TOML" in r for r in locks(at))


def test_only_the_queues_creator_edits_its_guidelines_on_the_page(env):
    cache, run = env
    queue.create_queue(
        run, "guided", sources.from_group(run, "lasso"), by="alice@example.org", guidelines="Be careful."
    )
    (cache / "team.toml").write_text(TEAM + '"dave@example.org" = "owner"\n', encoding="utf-8")
    as_user("dave@example.org")  # another owner: reads them, cannot edit them
    try:
        at = page("review_suspects.py", run.id, "guided").run()
        assert not at.exception, at.exception
        assert not any(t.key == "rs_guidelines_guided" for t in at.text_area)
        assert any("written by alice@example.org, who made this queue" in c.value for c in at.caption)
        assert "Be careful." in [t.value for t in at.text]  # on the card
        as_user("alice@example.org")
        at = page("review_suspects.py", run.id, "guided").run()
        at.text_area(key="rs_guidelines_guided").input("Be quick.").run()
        at.button(key="rs_save_guidelines").click().run()
        assert not at.exception, at.exception
        assert queue.open_queue(run, "guided").guidelines == "Be quick."
    finally:
        os.environ.pop(USER_ENV, None)


def _messages(at: AppTest) -> list[str]:
    return [m.value for kind in (at.error, at.info, at.warning) for m in kind]


def test_an_annotator_opens_on_a_queue_of_theirs_and_a_revoked_one_is_told_once(env, monkeypatch):
    cache, run = env
    queue.create_queue(run, "zz", sources.from_group(run, "lasso"), per_item=2)  # newest: not bob's
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = AppTest.from_file(str(ROOT / "pages" / "review_suspects.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="_kept_rs_queue").value == "q" and at.button(key="rs_keep")
    monkeypatch.setenv(USER_ENV, "dana@example.org")  # not listed: a viewer opens on the newest
    at = AppTest.from_file(str(ROOT / "pages" / "review_suspects.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    assert at.run().selectbox(key="_kept_rs_queue").value == "zz"
    # bob's queue is taken away while his card is open: his next click is refused, and said once
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = page("review_suspects.py", run.id).run()
    (cache / "team.toml").write_text(TEAM.replace('queues = ["q"]', 'queues = ["other"]'), encoding="utf-8")
    at.button(key="rs_keep").click().run()
    said = [m for m in _messages(at) if "is not assigned to the queue 'q'" in m]
    assert len(said) == 1, _messages(at)
    assert queue.open_queue(run, "q").history().empty


def test_picking_a_queue_takes_the_focus_off_the_queue_box(env, monkeypatch):
    """After a pick the page's shortcuts (K, X, U, digits) must reach the card, not the select box."""
    cache, run = env
    monkeypatch.setenv(USER_ENV, "alice@example.org")
    at = page("review_suspects.py", run.id).run()

    def blurs() -> list[str]:
        return [h.proto.body for h in at.get("html") if "activeElement" in h.proto.body]

    assert not blurs()  # nothing picked: the focus is left alone
    at.selectbox(key="_kept_rs_queue").set_value("other").run()
    assert not at.exception, at.exception
    assert len(blurs()) == 1 and "blur()" in blurs()[0]
    at.run()
    assert not blurs()


def test_signing_in_with_an_unreachable_provider_is_one_line(env, monkeypatch, caplog):
    monkeypatch.setenv(ac.AUTH_ENV, "login")
    at = app()
    closed = "http://127.0.0.1:9/.well-known/openid-configuration"  # nothing listens there
    at.secrets["auth"] = {
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "server_metadata_url": closed,
    }
    at.run()
    with caplog.at_level("WARNING", logger="cartomap.dashboard"):
        at.button(key="team_sign_in").click().run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert (
        len(errors) == 1 and "the sign-in provider cannot be reached" in errors[0] and "\n" not in errors[0]
    )
    logged = [r for r in caplog.records if r.name == "cartomap.dashboard"]
    assert len(logged) == 1 and logged[0].exc_info is None and "cannot be reached" in logged[0].getMessage()


def test_the_door_refuses_a_proxy_anywhere_unless_open(env, monkeypatch):
    """A plain `streamlit run app.py` with the settings in env is refused as `cartomap dashboard` is."""
    monkeypatch.setenv(ac.AUTH_ENV, "header")
    monkeypatch.setenv(ac.HEADER_ENV, "X-Forwarded-User")
    monkeypatch.setenv(ac.PROXY_ENV, "::/0")
    at = app().run()
    assert any("--trusted-proxy ::/0 covers public addresses" in e.value for e in at.error)
    assert not at.sidebar.selectbox  # no page
    monkeypatch.setenv(ac.OPEN_ENV, "1")
    at = app().run()
    assert not any("covers public addresses" in e.value for e in at.error)


def test_streamlits_sign_in_errors_are_one_line_in_the_log(monkeypatch):
    """Streamlit logs a traceback when the provider cannot be reached; the launcher makes it one line."""
    import io
    import logging

    monkeypatch.syspath_prepend(str(ROOT))
    import dashboard

    dashboard.quiet_auth_errors()
    dashboard.quiet_auth_errors()  # once is enough: no second filter
    logger = logging.getLogger(dashboard.AUTH_LOGGER)
    assert sum(isinstance(f, dashboard._OneLine) for f in logger.filters) == 1
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    try:
        try:
            raise ConnectionError("[Errno 111] Connection\nrefused")
        except ConnectionError:
            logger.warning("Error during OAuth authorization redirect.", exc_info=True)
    finally:
        logger.removeHandler(handler)
    assert out.getvalue() == (
        "Error during OAuth authorization redirect. (ConnectionError: [Errno 111] Connection refused)\n"
    )


def test_a_decision_on_an_item_that_filled_up_meanwhile_is_refused_on_the_page(env, monkeypatch):
    """Two others decided the example while bob's card was open (k = 2): his click is refused in one line."""
    cache, run = env
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    at = page("review_suspects.py", run.id).run()
    db = queue.open_queue(run, "q")
    (item,) = db.next_items("bob@example.org", 1)
    db.record("alice@example.org", item, "keep")
    db.record("dana@example.org", item, "remove")
    at.button(key="rs_keep").click().run()
    assert not at.exception, at.exception
    said = [e.value for e in at.error if "annotator(s) already" in e.value]
    assert len(said) == 1 and "\n" not in said[0]
    assert db.decision_of("bob@example.org", item) is None
    assert db.latest().groupby("item_id")["annotator"].nunique().max() == 2


def test_the_recorded_demo_is_installed_only_for_someone_who_may_train(tmp_path, monkeypatch):
    """A fresh store in team mode: the dashboard's first visit installs the recorded demo run (a write)
    only for a person whose role may train; a viewer's visit writes nothing."""
    from cartomap.runs.store import RunStore

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "team.toml").write_text(TEAM, encoding="utf-8")
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.setenv("CARTOMAP_RECORDED_DEMO", "1")
    monkeypatch.syspath_prepend(str(ROOT))
    for name in (TEAM_ENV, ac.AUTH_ENV, ac.HEADER_ENV, ac.PROXY_ENV, ac.OPEN_ENV, ac.SECRET_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(USER_ENV, "carol@example.org")  # a viewer
    at = app().run()
    assert not at.exception, at.exception
    assert RunStore(cache).list() == []
    monkeypatch.setenv(USER_ENV, "alice@example.org")  # the owner
    at = app().run()
    assert not at.exception, at.exception
    assert len(RunStore(cache).list()) == 1
