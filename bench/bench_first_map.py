"""Time from launching the dashboard on an empty run store to the first data map, in a real browser.

Starts ``cartomap dashboard`` on a fresh cache, opens it in headless Debian chromium (selenium),
clicks "Train the demo", and waits until the plotly map is drawn. Then restarts the server on
the same cache and times the map of the existing run. Needs chromium + chromium-driver.

    python bench/bench_first_map.py [--port 8611]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]
ROOT = Path(__file__).resolve().parent.parent


def start_server(cache: str, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["cartomap", "--cache", cache, "dashboard", "--headless", "--port", str(port)],
        cwd=ROOT,
        stdout=open(log, "wb"),  # noqa: SIM115 - the server keeps it
        stderr=subprocess.STDOUT,
    )
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server exited: {log.read_text()[-2000:]}") from None
            time.sleep(0.3)


def wait_for(predicate, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8611)
    args = parser.parse_args()
    cache, logs = tempfile.mkdtemp(prefix="first-map-"), Path(tempfile.mkdtemp())
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    url = f"http://127.0.0.1:{args.port}"
    has_map = lambda: driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")  # noqa: E731
    t0 = time.time()
    server = start_server(cache, args.port, logs / "server.log")
    try:
        driver.get(url)
        button = wait_for(
            lambda: [b for b in driver.find_elements(By.TAG_NAME, "button") if "Train the demo" in b.text],
            60,
            "the Train the demo button",
        )[0]
        button.click()
        clicked = time.time()
        wait_for(has_map, 1800, "the data map")
        first = time.time()
        server.terminate()
        server.wait()
        driver.get("about:blank")
        t1 = time.time()
        server = start_server(cache, args.port, logs / "server2.log")
        driver.get(url)
        wait_for(has_map, 120, "the data map of the existing run")
        again = time.time() - t1
    finally:
        driver.quit()
        server.terminate()
    print(
        f"| fresh install: launch to first map (demo training included) | {first - t0:.0f} s "
        f"({first - clicked:.0f} s after the click) |"
    )
    print(f"| existing run: launch to map | {again:.1f} s |")
    print(f"cache left in {cache}")


if __name__ == "__main__":
    main()
