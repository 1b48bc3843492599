"""The Review suspects page in a real browser (`streamlit run app.py` + headless chromium, Selenium):
the decision buttons' keyboard shortcuts (K keep, X remove, 1-9 relabel) record decisions."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import patience
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from curation_fixture import make_run  # noqa: E402
from test_browser import CHROMIUM, _wait, browser, serve  # noqa: E402, F401 - browser is a fixture

from cartomap.curation import queue, sources  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent"),
    pytest.mark.slow,  # a Streamlit server and a browser: about 20 s on 2 cores
]


def _card_text(driver) -> str:
    return driver.execute_script(
        "return [...document.querySelectorAll('[data-testid=stText]')].map(e => e.innerText).join('\\n')"
    )


def test_keyboard_shortcuts_decide(tmp_path, browser):  # noqa: F811 - the fixture
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    cache = tmp_path / "cache"
    run = make_run(cache)
    queue.create_queue(run, "keys", sources.from_detector(run, "aum", 3), per_item=1)
    db = queue.open_queue(run, "keys")
    with serve(cache, tmp_path, cli=True) as url:  # as a user starts it: `cartomap dashboard`
        browser.get(f"{url}/review_suspects?run={run.id}")
        name = _wait(
            lambda: browser.find_elements("css selector", 'input[aria-label="Your name"]'),
            what="the name box",
        )[0]
        name.send_keys("kbd" + Keys.ENTER)
        _wait(lambda: "Premise e1" in _card_text(browser), what="the first card")

        def idle() -> bool:  # no script run in flight (the status widget shows while one is)
            return not browser.execute_script(
                "return document.querySelector('[data-testid=stStatusWidget]') !== null"
            )

        def came(done) -> bool:
            """Whether what a key does came (``done()``): waited for while the app works, however long that
            takes on a busy machine; False once the app has been idle for 8 s without it (the key was not
            seen)."""
            idle_since = None
            deadline = time.monotonic() + patience.WAIT_S
            while time.monotonic() < deadline:
                if done():
                    return True
                if not idle():
                    idle_since = None
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > 8:
                    return False
                time.sleep(0.25)
            return False

        def press(key: str, before: int, after_text: str | None) -> None:
            # A key pressed while the page is still wiring its shortcuts (just after a run, on a loaded
            # machine) is not seen; a person presses again, and so does this test, only while no
            # decision was recorded (so one key never records two).
            for attempt in range(3):
                _wait(idle, what="the app to finish its run")
                time.sleep(0.5 + attempt)
                browser.find_element("css selector", "h1").click()  # focus out of the name box
                ActionChains(browser).send_keys(key).perform()
                if came(lambda: len(db.history()) > before):
                    break
                assert attempt < 2, f"the decision of key {key!r} was not recorded"
            if after_text:
                _wait(lambda: after_text in _card_text(browser), what=after_text)
            time.sleep(0.3)

        def page_text() -> str:
            return browser.execute_script("return document.body.innerText")

        def press_until(key: str, done, what: str) -> None:
            for attempt in range(3):
                _wait(idle, what="the app to finish its run")
                time.sleep(0.5 + attempt)
                browser.find_element("css selector", "h1").click()
                ActionChains(browser).send_keys(key).perform()
                if came(done):
                    return
                assert attempt < 2, f"{what} did not come"

        press("k", 0, "Premise n1")  # e1: keep
        press("x", 1, "Premise c1")  # n1: remove
        # c1's own class (contradiction, key 3): nothing recorded, and the page says so
        press_until("3", lambda: "nothing was recorded" in page_text(), "the own-class key's feedback")
        assert len(db.history()) == 2
        press("2", 2, None)  # c1 (gold contradiction): relabel to class 2, neutral
        # Z undoes the last decision (c1's): recorded as an undo, c1 is back on the card
        press_until("z", lambda: len(db.undone()) == 1, "the undo of key 'z'")
        _wait(lambda: "Premise c1" in _card_text(browser), what="c1 back")
    decided = {i: (db.decision_of("kbd", i) or {}) for i in ("e1", "n1", "c1")}
    assert decided["e1"]["decision"] == "keep" and decided["n1"]["decision"] == "remove"
    assert decided["c1"] == {} and len(db.history()) == 3
    undone = db.history().set_index("item_id").loc["c1"]
    assert (undone["decision"], undone["label"], bool(undone["undone"])) == ("relabel", "neutral", True)
    assert set(db.history()["annotator"]) == {"kbd"}


def test_after_picking_a_queue_a_key_decides_without_a_click(tmp_path, browser):  # noqa: F811 - the fixture
    """The queue box kept the keyboard focus after a pick: K typed "k" into it and recorded nothing until
    the page was clicked. Now the page takes the focus off it."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    cache = tmp_path / "cache"
    run = make_run(cache)
    queue.create_queue(run, "keys", sources.from_detector(run, "aum", 3), per_item=1)
    queue.create_queue(run, "other", sources.from_detector(run, "aum", 3), per_item=1)
    db = queue.open_queue(run, "keys")
    with serve(cache, tmp_path, cli=True) as url:
        browser.get(f"{url}/review_suspects?run={run.id}")
        name = _wait(
            lambda: browser.find_elements("css selector", 'input[aria-label="Your name"]'),
            what="the name box",
        )[0]
        name.send_keys("kbd" + Keys.ENTER)
        _wait(lambda: "Premise e1" in _card_text(browser), what="the first card of 'other'")
        box = _wait(
            lambda: browser.find_elements("css selector", 'input[aria-label="Queue"]'),
            what="the queue box",
        )[0]
        box.click()
        box.send_keys("keys" + Keys.ENTER)  # picked by keyboard: the focus stays where it was put

        def blurred() -> bool:
            return browser.execute_script(
                "const e = document.activeElement; return !e || e === document.body || e.tagName !== 'INPUT'"
            )

        _wait(blurred, what="the focus off the queue box")
        for attempt in range(3):  # a key while the page still wires its shortcuts is not seen: again
            time.sleep(1 + attempt)
            ActionChains(browser).send_keys("k").perform()  # to whatever has the focus: no click first
            deadline = time.monotonic() + patience.WAIT_S
            while time.monotonic() < deadline and db.history().empty:
                time.sleep(0.25)
            if not db.history().empty:
                break
        assert db.decision_of("kbd", "e1")["decision"] == "keep"
        assert queue.open_queue(run, "other").history().empty
