"""The bundled demos' recorded runs: shipped with the package, installed into a run store on first use.

``scripts/record_demo.py`` trains a bundled demo exactly as ``cartomap demo`` does (the default encoder,
:func:`cartomap.config.demo_run_config`) and writes its run folder under ``cartomap/data/demo/recorded/
<task>/<run id>/`` without the model's weights: the config, status, history and loss curve, the run's
own copies of its data, the recorded dynamics (the exact float32 logits: a fresh training gives them bit
for bit, ``tests/test_slow_demo_recording.py``), the metrics, and the embeddings of the run's own model
in float16 (what the Neighbours page needs without the weights; float32 again once installed).

A run's id hashes its config identity and data fingerprints, so the recording copied into a store under
its id is the demo's run: ``cartomap demo`` finds it done and writes the map at once, and the dashboard
opens on it. Installing never replaces a folder that is there (:meth:`FolderStore.create_folder`: an
atomic rename). An installed recording is marked in its config.json (:data:`MARK`); where the weights
are needed (embeddings of the run's own model, WaNLI's filter) it says so in one line
(:data:`NO_WEIGHTS`). ``cartomap demo --train`` (and the dashboard's **Train the demo yourself**)
removes the installed recording, which is ours, not the user's, and trains the same run live.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from cartomap.data.loading import DEMO_DIR
from cartomap.io import atomic_write_json, read_json, writable
from cartomap.runs import layout
from cartomap.runs.store import Run, RunStore

#: Where the recorded runs are shipped: ``recorded/<task kind>/<run id>/``.
RECORDED_DIR = DEMO_DIR / "recorded"
#: The key of an installed recording's config.json: what it is, in words.
MARK = "recorded_demo"
#: What a recorded run says where its model's weights are needed.
NO_WEIGHTS = (
    "recorded demo run: its model weights are not shipped; train it yourself with `cartomap demo --train`"
)
#: The note the dashboard and ``cartomap demo`` give with a recorded run's map.
NOTE = (
    "This is the recorded demo run, shipped with cartomap and trained by `scripts/record_demo.py` exactly "
    "as `cartomap demo --train` trains it (its model's weights are not shipped)."
)
#: The run folder's files a recording ships as they are, beside its config.json and status.json (the
#: weights, resume state, locks, logs and task records stay behind).
SHIPPED_FILES = (
    layout.HISTORY,
    layout.STEPS,
    layout.EXAMPLES,
    layout.DEV_EXAMPLES,
    layout.METRICS,
    layout.EMBEDDING_IDS,
)
#: The recorded dynamics, every source and epoch, shipped as they are (float32 logits).
SHIPPED_FOLDERS = (layout.DYNAMICS,)
#: The run's embeddings in the package: float16 (half the size; neighbours read them as float32).
HALF_EMBEDDINGS = "embeddings.float16.npy"
#: Set to "0" to keep a fresh store empty: the dashboard then installs no recorded run (``cartomap demo``
#: still does: it asks for the demo). The test suite sets it (tests/conftest.py), tests of a fresh
#: install turn it on.
FRESH_ENV = "CARTOMAP_RECORDED_DEMO"
#: The status fields a recording leaves out: the recording machine's process, person and times of the job.
MACHINE_STATUS = ("pid", "host", "started_by", "queued_at", "started_at")


def recorded_folder(task: str = "pair") -> Path | None:
    """The shipped recording of the demo of ``task`` (``recorded/<task>/<run id>``), None when none is."""
    folder = RECORDED_DIR / task
    runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return runs[0] if len(runs) == 1 else None


def installed(store: RunStore, task: str = "pair") -> Run | None:
    """The run in ``store`` under the id of the demo's recording of ``task`` (installed, or trained here),
    None when there is none or nothing is shipped."""
    source = recorded_folder(task)
    return store.find_id(source.name) if source is not None else None


def is_recording(run: Run) -> bool:
    """Whether ``run`` is an installed recording (its config.json carries :data:`MARK`)."""
    try:
        return bool(run.info.get(MARK))
    except Exception:  # noqa: BLE001 - a damaged run is no recording; its own checks say what is wrong
        return False


def _write_installed(source: Path, tmp: Path) -> None:
    """Copy the recording ``source`` into the run folder ``tmp``: the shipped files, the dynamics, the
    float16 embeddings as float32; config.json last (the marker of a complete run)."""
    for name in SHIPPED_FOLDERS:
        if (source / name).is_dir():
            shutil.copytree(source / name, tmp / name)
    for name in (*SHIPPED_FILES, layout.STATUS):
        if (source / name).exists():
            shutil.copy2(source / name, tmp / name)
    if (source / HALF_EMBEDDINGS).exists():
        np.save(tmp / layout.EMBEDDINGS, np.load(source / HALF_EMBEDDINGS).astype(np.float32))
    shutil.copy2(source / layout.CONFIG, tmp / layout.CONFIG)


def install(store: RunStore, task: str = "pair") -> Run | None:
    """Install the demo's recording of ``task`` into ``store`` under its run id, unless a folder of that
    id is there (never replaced) or the store cannot be written; returns the run of that id (installed
    or already there), None when nothing is shipped or the store is read-only."""
    source = recorded_folder(task)
    if source is None:
        return None
    existing = installed(store, task)
    if existing is not None:
        return existing
    try:
        store.dir.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only store: browsable, nothing installed
        return None
    if not writable(store.dir):
        return None
    run = store.create_folder(source.name, lambda tmp: _write_installed(source, tmp))
    if is_recording(run):
        run.log(f"installed the recorded demo run shipped in {source}")
    return run


def install_if_fresh(store: RunStore) -> Run | None:
    """On a fresh install (a store without any run) install the NLI demo's recording: the dashboard then
    opens on its map at once. None when the store holds runs already (a user's store is left alone) or
    env :data:`FRESH_ENV` is "0"."""
    if os.environ.get(FRESH_ENV, "1") == "0":
        return None
    if store.dir.is_dir() and any(not p.name.startswith(".") for p in store.dir.iterdir()):
        return None
    return install(store)


def remove_recording(store: RunStore, run: Run) -> bool:
    """Remove ``run`` when it is an installed recording (so that the same run can be trained live);
    True when it was removed. A run trained here is never removed."""
    if not is_recording(run):
        return False
    store.delete(run.id)
    return True


def record(run: Run, out_root: Path = RECORDED_DIR) -> Path:
    """Write the finished run ``run`` as its demo's shipped recording, ``out_root/<task>/<run id>/``
    (replacing an older recording of that task): the shipped files, the dynamics, the embeddings in
    float16, a status without the machine's details, a config.json marked :data:`MARK` without the
    recording machine's folders. Returns the folder written."""
    task_dir = Path(out_root) / run.task_kind.name
    shutil.rmtree(task_dir, ignore_errors=True)
    out = task_dir / run.id
    out.mkdir(parents=True)
    for name in SHIPPED_FOLDERS:
        shutil.copytree(run.path / name, out / name)
    for name in SHIPPED_FILES:
        if (run.path / name).exists():
            shutil.copy2(run.path / name, out / name)
    if run.embeddings_path.exists():
        np.save(out / HALF_EMBEDDINGS, np.load(run.embeddings_path).astype(np.float16))
    status = read_json(run.status_path)
    atomic_write_json(out / layout.STATUS, {k: v for k, v in status.items() if k not in MACHINE_STATUS})
    info = dict(run.info)
    info["provenance"] = {k: v for k, v in info.get("provenance", {}).items() if k != "cwd"}
    info[MARK] = NOTE
    atomic_write_json(out / layout.CONFIG, info)
    return out
