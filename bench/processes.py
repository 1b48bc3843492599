"""What a browser bench starts, and how it stops all of it: the dashboard's server and every job the
dashboard starts (a training job runs in a session of its own and outlives the server).

The server is started with a tag in its environment (:data:`TAG`); every process it starts inherits it, so
:func:`stop` finds them all in /proc (Linux) and stops them: SIGTERM, then SIGKILL. Imports nothing of
the other benches.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "CARTOMAP_BENCH_TAG"


def new_tag() -> str:
    return uuid.uuid4().hex


def start_dashboard(cache: str, port: int, log: Path, tag: str) -> subprocess.Popen:
    """``cartomap dashboard`` of this checkout on ``cache`` in a session of its own, tagged with ``tag``;
    returns once it answers."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cartomap.cli",
                "--cache",
                cache,
                "dashboard",
                "--headless",
                "--port",
                str(port),
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(os.environ, **{TAG: tag}, PYTHONPATH=str(ROOT)),
        )
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server exited: {log.read_text()[-2000:]}") from None
            time.sleep(0.3)


def tagged(tag: str) -> list[int]:
    """The pids of the live processes whose environment holds ``TAG=tag`` (Linux /proc)."""
    wanted = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def stop(server: subprocess.Popen | None, tag: str, grace: float = 30.0) -> list[int]:
    """Stop the server's process group and every process carrying ``tag``: SIGTERM, then SIGKILL after
    ``grace`` seconds; SystemExit if one is still there. Returns the pids stopped."""
    targets = set(tagged(tag))
    if server is not None and server.poll() is None:
        targets.add(server.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
    for pid in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.time() + grace
    while time.time() < end and (tagged(tag) or (server is not None and server.poll() is None)):
        time.sleep(0.2)
    for pid in tagged(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if server is not None:
        server.wait(timeout=grace)
    end = time.time() + grace
    while time.time() < end and tagged(tag):
        time.sleep(0.2)
    left = tagged(tag)
    if left:
        raise SystemExit(f"processes the bench started are still there: {left}")
    return sorted(targets)


#: Headless chromium for the benches that time a page (bench_first_map, bench_ner_first_map).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def chromium_options():
    """Selenium's options for headless Debian chromium with :data:`CHROMIUM_FLAGS` (what every browser
    bench opens)."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    return options
