"""Record a bundled demo's run for the package: ``python scripts/record_demo.py [--task pair|token]``.

Trains the demo exactly as ``cartomap demo --train`` does (the default encoder, the demo's config:
``cartomap.config.demo_run_config``; same data, seed and version give bit-identical dynamics on a CPU),
computes the embeddings of the run's own model (what the Neighbours page needs without the weights)
and writes the run without its weights to ``cartomap/data/demo/recorded/<task>/<run id>/``
(``cartomap.runs.shipped.record``), replacing the older recording. Run it again whenever the demo's
training, its data or the recorded files change: the slow test ``tests/test_slow_demo_recording.py``
fails until the recording equals a fresh training. ``--cache`` reuses a store where the demo is
trained already (default: a new temporary store).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from cartomap.config import DEMO_TASKS, demo_run_config
    from cartomap.runs import shipped
    from cartomap.runs.store import RunStore
    from cartomap.training.embeddings import embed_run
    from cartomap.training.prepare import prepare_run

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=DEMO_TASKS, default=DEMO_TASKS[0])
    p.add_argument("--cache", default=None, help="the run store to train in (default: a temporary one)")
    p.add_argument("--out", default=str(shipped.RECORDED_DIR), help="where recordings are shipped")
    a = p.parse_args(argv)
    cache = Path(a.cache or tempfile.mkdtemp(prefix="cartomap-record-"))
    maps = cache / "maps"
    t0 = time.time()
    cmd = [sys.executable, "-m", "cartomap.cli", "--cache", str(cache), "demo", "--train", "--task", a.task]
    subprocess.run([*cmd, "--out-dir", str(maps), "--force"], check=True)
    trained = time.time() - t0
    run = prepare_run(demo_run_config(a.task), RunStore(cache))
    if shipped.is_recording(run):
        raise SystemExit(f"run {run.id} in {cache} is an installed recording, not a training")
    embed_run(run)
    out = shipped.record(run, Path(a.out))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(
        f"recorded run {run.id} in {out}: {size / 1e6:.2f} MB; `cartomap demo --train` took {trained:.0f} s"
    )
    for f in sorted(out.rglob("*")):
        if f.is_file():
            print(f"  {f.relative_to(out)}  {f.stat().st_size / 1e3:.1f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
