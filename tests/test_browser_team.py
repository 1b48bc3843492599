"""Team mode in a real browser: two people sign in through an OpenID Connect provider (the
``oidc-provider-mock`` package, started here on 127.0.0.1) into `cartomap dashboard --login`, decide on
the same review queue under their own names (no name to type: nobody can decide as the other), and an
annotator cannot start or cancel training."""

from __future__ import annotations

import contextlib
import secrets
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from curation_fixture import make_run  # noqa: E402
from test_app_train import make_run as make_training_run  # noqa: E402
from test_browser import ARTIFACTS, CHROMIUM, _free_port, _wait, new_browser, serve  # noqa: E402

from cartomap.curation import queue, sources  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent"),
    pytest.mark.slow,  # a Streamlit server, an OpenID Connect provider and two browsers
]

TEAM = """
[users]
"olivia@example.org" = "owner"
"alice@example.org" = { role = "annotator", queues = ["q"] }
"bob@example.org" = { role = "annotator", queues = ["q"] }
"""


@contextlib.contextmanager
def oidc_provider():
    """An OpenID Connect provider on 127.0.0.1 (any client; a person signs in by typing their name);
    yields its address, stops it afterwards."""
    import werkzeug.serving

    mock = pytest.importorskip("oidc_provider_mock")
    server = werkzeug.serving.make_server("127.0.0.1", 0, mock.app(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)  # patience: cleanup of a daemon thread, no check
        server.server_close()


@contextlib.contextmanager
def screenshots(drivers: list):
    """On a failure, what each person saw (tests/artifacts/), taken while the server still runs."""
    try:
        yield
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        for k, driver in enumerate(drivers):
            driver.save_screenshot(str(ARTIFACTS / f"browser_team_failed_{k}.png"))
        raise


def buttons(driver, label: str) -> list:
    """The buttons reading ``label`` (a keyboard shortcut's hint after it: "Keep K")."""
    found = driver.find_elements("css selector", "button")
    return [
        b
        for b in found
        if b.text.split()[: len(label.split())] == label.split()
        and len(b.text.split()) <= len(label.split()) + 1
    ]


def click(driver, label: str) -> None:
    """Click the enabled button ``label`` once it is there (a page rerun may replace it: tried again)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt():
        try:
            found = [b for b in buttons(driver, label) if b.is_enabled()]
            if found:
                found[0].click()
                return True
        except StaleElementReferenceException:
            return False
        return False

    _wait(attempt, what=f"the button {label!r}")


def page_text(driver) -> str:
    return driver.execute_script("return document.body ? document.body.innerText : ''")


def sign_in(driver, url: str, who: str) -> None:
    """Open the dashboard, press Sign in, type ``who`` at the provider, come back signed in."""
    driver.get(f"{url}/")
    click(driver, "Sign in")
    name = _wait(
        lambda: driver.find_elements("css selector", 'input[name="sub"]'), what="the provider's form"
    )[0]
    name.send_keys(who)
    click(driver, "Authorize")
    _wait(lambda: f"Signed in as {who}" in page_text(driver), what=f"{who} signed in")


def decide(driver, url: str, run_id: str, who: str, decision: str, db, before: int) -> None:
    driver.get(f"{url}/review_suspects?run={run_id}")
    _wait(lambda: f"Deciding as {who}" in page_text(driver), what=f"the card for {who}")
    assert not driver.find_elements("css selector", 'input[aria-label="Your name"]')  # no name to type
    _wait(lambda: "Premise c1" in page_text(driver), what="the first card")
    click(driver, decision)
    _wait(lambda: len(db.history()) > before, what=f"{who}'s decision")


def test_two_people_sign_in_and_review_one_queue_under_their_own_names(tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_WARM_UP", "0")  # the server starts sooner on a busy machine
    cache = tmp_path / "cache"
    run = make_run(cache)
    queue.create_queue(run, "q", sources.from_group(run, "lasso"), per_item=2)  # c1, n2, e0
    db = queue.open_queue(run, "q")
    training = make_training_run(cache, state="running", name="training")
    (cache / "team.toml").write_text(TEAM, encoding="utf-8")
    port = _free_port()
    people = []
    lock = training.acquire_lock()  # the run trains (its lock is held): Cancel training is offered
    try:
        with oidc_provider() as issuer:
            secrets_file = tmp_path / "secrets.toml"
            secrets_file.write_text(
                "[auth]\n"
                f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
                f'cookie_secret = "{secrets.token_hex(16)}"\n'
                'client_id = "cartomap"\nclient_secret = "not-a-secret"\n'
                f'server_metadata_url = "{issuer}/.well-known/openid-configuration"\n',
                encoding="utf-8",
            )
            args = ("--login", "--secrets", str(secrets_file))
            with serve(cache, tmp_path, cli=True, args=args, port=port) as url, screenshots(people):
                alice, bob = new_browser(), new_browser()
                people += [alice, bob]
                sign_in(alice, url, "alice@example.org")
                sign_in(bob, url, "bob@example.org")
                decide(alice, url, run.id, "alice@example.org", "Keep", db, 0)
                decide(bob, url, run.id, "bob@example.org", "Remove", db, 1)
                # each carries on with the next example under their own name
                _wait(
                    lambda: "Premise n2" in page_text(alice) or alice.refresh() or False,
                    what="alice's next card",
                )
                click(alice, "Unsure")
                _wait(lambda: len(db.history()) > 2, what="alice's second decision")

                # an annotator can neither start nor cancel training
                bob.get(f"{url}/train?run={training.id}")
                _wait(
                    lambda: buttons(bob, "Cancel training") and buttons(bob, "Start training"),
                    what="the Train page",
                )
                for label in ("Start training", "Cancel training"):
                    assert not buttons(bob, label)[0].is_enabled(), label
                text = page_text(bob)
                assert (
                    "bob@example.org (annotator) may not start or resume training: only an owner can" in text
                )
                assert "may not cancel a job" in text
                ARTIFACTS.mkdir(exist_ok=True)
                bob.save_screenshot(str(ARTIFACTS / "browser_team_annotator_train.png"))
    finally:
        lock.close()
        for driver in people:
            driver.quit()
    decided = db.history()[["item_id", "annotator", "decision"]].values.tolist()
    assert decided == [
        ["c1", "alice@example.org", "keep"],
        ["c1", "bob@example.org", "remove"],
        ["n2", "alice@example.org", "unsure"],
    ]
    assert not training.cancel_path.exists()
