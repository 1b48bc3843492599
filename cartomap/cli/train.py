"""Training runs, the demo and the dashboard: ``cartomap train``, ``demo``, ``dashboard``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cartomap.cli.options import (
    add_data_arguments,
    add_schedule_arguments,
    add_training_arguments,
    config_from_args,
)
from cartomap.cli.printing import print_run_summary, printable
from cartomap.cli.team import acting
from cartomap.config import DEMO_TASKS, ORDERS, OrderConfig, demo_run_config
from cartomap.errors import RunError
from cartomap.runs import cpu, layout
from cartomap.runs.state import State


def cmd_train(a: argparse.Namespace) -> int:
    """Train (or load, or resume) the run of the options, or with ``--run`` an existing run by id."""
    from cartomap.runs.store import RunStore
    from cartomap.training.prepare import prepare_run

    store = RunStore(a.cache)
    store.require_writable("`cartomap train`")
    # A job started for a prepared run opens it by id: the data is not loaded and fingerprinted again.
    config = None if a.run else config_from_args(a)
    run = store.get(a.run) if a.run else prepare_run(config, store)
    if config is not None and config.name and run.config.name != config.name:
        print(
            f"cartomap: note: run {run.id} has this config already and keeps its name "
            f"{printable(run.config.name)!r}; --name {printable(config.name)!r} is not used "
            "(a name is no part of a run's identity)",
            file=sys.stderr,
        )
    origin = run.config.origin.kind
    if not origin.resumable and run.state != State.DONE:
        raise RunError(
            f"run {run.id} was recorded by {origin}, not trained by cartomap: it cannot be trained here"
        )
    print_warnings(run)
    cpu.allow_restart(continuation(a, run))  # it may restart as the CPUs' load changes (runs/cpu.py)
    by = acting(a)  # a job acts as the person who started it (its CARTOMAP_USER), checked again
    if by and run.state not in (State.DONE, State.DAMAGED):  # team mode: who trains it, kept with its status
        run.set_status(started_by=by)
    return train_with_progress(run, quiet=a.quiet, as_job=a.job)


def continuation(a: argparse.Namespace, run) -> list[str] | None:
    """The command line that continues this training: this one with ``--run`` (None: its own), else
    ``train --run ID`` in the same store (the options' data is not read again: it could have changed)."""
    if a.run:
        return None
    flags = [flag for flag, on in (("--quiet", a.quiet), ("--job", a.job)) if on]
    cache = str(Path(a.cache).resolve())
    return [sys.executable, "-m", "cartomap.cli", "--cache", cache, "train", "--run", run.id, *flags]


def print_warnings(run) -> None:
    """What looked wrong in the run's data (a class of one example, ...): one line each on stderr."""
    for warning in run.warnings:
        print(f"cartomap: warning: {printable(warning)}", file=sys.stderr, flush=True)


def train_with_progress(run, *, quiet: bool = False, as_job: bool = False) -> int:
    """Train ``run`` to completion with a tqdm bar (none when ``quiet``); 0 when done, 3 otherwise."""
    from tqdm.auto import tqdm

    from cartomap.training.loop import continue_run, process_rank

    if process_rank() > 0:  # another process of a torchrun / accelerate launch: rank 0 reports
        continue_run(run, as_job=as_job)
        return 0 if run.state == State.DONE else 3
    if run.state == State.DONE:
        print(f"run {run.id} exists (done): {run.path}")
        print_run_summary(run)
        return 0
    bar = None

    def on_step(s: dict) -> None:
        nonlocal bar
        if quiet:
            return
        if bar is None:
            bar = tqdm(total=s["total_steps"], initial=s["global_step"], unit="step", desc=f"run {run.id}")
        bar.n = s["global_step"]
        bar.set_postfix(
            epoch=f"{s['epoch']}/{s['epochs']}",
            loss=s.get("loss"),
            dev_acc=s.get("dev_accuracy"),
            refresh=False,
        )
        bar.refresh()

    print(f"run {run.id}: {run.path}", flush=True)
    try:
        continue_run(run, on_step=on_step, as_job=as_job)
    finally:
        if bar is not None:
            bar.close()
    state = run.state
    print(f"run {run.id} {state}: {run.path}")
    if state == State.DONE:
        print_run_summary(run)
    return 0 if state == State.DONE else 3


#: What each bundled demo's map files are called and titled, by task kind (``cartomap demo --task``).
DEMO_MAPS = {
    "pair": ("demo_map", "Bundled NLI demo:"),
    "token": ("ner_demo_map", "Bundled NER demo (words):"),
}


def cmd_demo(a: argparse.Namespace) -> int:
    """Write a bundled demo's data map (a token run's: the word map, a point per word) from its run: the
    recorded run shipped with cartomap (installed into the store on first use, no training), or with
    ``--train`` the same run trained here live (an installed recording is removed first: it is ours, and
    the trained run takes its id)."""
    from cartomap.io import refuse_overwrite
    from cartomap.runs import shipped
    from cartomap.runs.store import RunStore
    from cartomap.training.launch import prepare_demo_to_train
    from cartomap.training.prepare import prepare_run

    stem, _ = DEMO_MAPS[a.task]
    outs = [Path(a.out_dir) / f"{stem}.{suffix}" for suffix in ("png", "html")]
    refuse_overwrite(outs, a.force)  # before training: no surprise after minutes of work
    store = RunStore(a.cache)
    if a.train:
        cpu.allow_restart()  # this command again goes on with the training (runs/cpu.py), then the map
        run, removed = prepare_demo_to_train(store, a.task)
        if removed is not None:
            print(f"removed the installed recording of run {removed.id}: training it here", flush=True)
    else:
        shipped.install(store, a.task)
        run = prepare_run(demo_run_config(a.task), store)
    if shipped.is_recording(run):
        print(f"run {run.id}: {shipped.NOTE} Train the demo yourself: `cartomap demo --train`.", flush=True)
    else:
        code = train_with_progress(run)
        if code:
            return code
    write_demo_maps(run, a.task, outs)
    return 0


def write_demo_maps(run, task: str, outs: list[Path]) -> None:
    """Write the demo run's map files ``outs`` (PNG, HTML), titled by :data:`DEMO_MAPS`."""
    from cartomap.analysis.datamap import map_frame
    from cartomap.analysis.map_files import save_data_map
    from cartomap.runs import shipped

    title = DEMO_MAPS[task][1] + (" (recorded run)" if shipped.is_recording(run) else "")
    frame = map_frame(run)
    for out in outs:
        save_data_map(frame, out, title=title)
        print(f"wrote {out}")


def dashboard_access(a: argparse.Namespace):
    """How people get into the dashboard (:class:`cartomap.team.access.Access`) from the options, checked:
    beyond this machine only with a login or --open; a login needs a team file (and --login its
    provider in the secrets). CartomapError (one line) otherwise."""
    from cartomap.errors import CartomapError
    from cartomap.team.access import Access, listen_refusal, login_problem, proxy_refusal, proxy_warning
    from cartomap.team.roles import load_team, team_path

    mode = "header" if a.trust_user_header else "login" if a.login else "local"
    proxies = tuple(p.strip() for value in (a.trusted_proxy or []) for p in value.split(",") if p.strip())
    access = Access(
        mode=mode,
        header=a.trust_user_header or "",
        open=a.open,
        secret=proxy_secret(a),
        **({"proxies": proxies} if proxies else {}),
    )
    why = listen_refusal(a.address, access) or proxy_refusal(access)
    if why is not None:
        raise CartomapError(why)
    warning = proxy_warning(access)
    if warning is not None:
        print(f"cartomap: warning: {warning}", file=sys.stderr, flush=True)
    if access.mode != "local" and load_team(a.cache) is None:
        raise CartomapError(
            f"{team_path(a.cache)}: no team file: people who sign in need roles; write one naming at least "
            'one owner ([users] "you@example.org" = "owner")'
        )
    if access.mode == "login":
        why = login_problem(a.secrets)
        if why is not None:
            raise CartomapError(why)
    return access


def proxy_secret(a: argparse.Namespace) -> str:
    """The secret the sign-in proxy shares with the dashboard: the first line of ``--proxy-secret-file``,
    else env ``CARTOMAP_PROXY_SECRET``, else "" (none). CartomapError (one line) for a file that cannot
    be read or is empty."""
    from cartomap.errors import CartomapError
    from cartomap.team.access import SECRET_ENV

    if not a.proxy_secret_file:
        return os.environ.get(SECRET_ENV, "").strip()
    from cartomap.io import read_user_text  # the checked reader of a file a person edits (a BOM read through)

    lines = read_user_text(a.proxy_secret_file, "the sign-in proxy's secret on its first line").splitlines()
    secret = lines[0].strip() if lines else ""
    if not secret:
        raise CartomapError(
            f"--proxy-secret-file {a.proxy_secret_file}: the file is empty: write the secret in it"
        )
    return secret


def cmd_dashboard(a: argparse.Namespace) -> int:
    """Open the Streamlit dashboard, bound to 127.0.0.1 unless --address says otherwise."""
    from cartomap.team.roles import TEAM_ENV, team_path

    root = Path(__file__).resolve().parents[2]  # the source checkout
    app, launcher = root / "app.py", root / "dashboard.py"
    for needed in (app, launcher):
        if not needed.exists():
            print(f"cartomap: error: the dashboard needs a source checkout (no {needed})", file=sys.stderr)
            return 2
    access = dashboard_access(a)
    env = dict(os.environ, CARTOMAP_CACHE=str(Path(a.cache).resolve()), **access.to_env())
    if os.environ.get(TEAM_ENV, "").strip():
        env[TEAM_ENV] = str(team_path(a.cache).resolve())
    # dashboard.py: `streamlit run app.py` in the server process, Streamlit's legacy pages/ mode off
    cmd = [
        sys.executable,
        str(launcher),
        "--server.address",
        a.address,
        "--server.port",
        str(a.port),
        "--browser.gatherUsageStats",
        "false",
        "--server.maxUploadSize",
        "200",
        "--server.showEmailPrompt",
        "false",  # a first-time Streamlit user would otherwise be asked for an e-mail address
    ]
    if a.headless:
        cmd += ["--server.headless", "true"]
    if a.secrets:
        cmd += ["--secrets.files", str(Path(a.secrets).resolve())]
    os.execvpe(cmd[0], cmd, env)  # become the server: signals (Ctrl-C, kill) reach it directly


def add_commands(sub) -> None:
    t = sub.add_parser("train", help="train or load a run and record its training dynamics")
    add_data_arguments(t)
    t.add_argument("--config", default=None, help="a RunConfig JSON file (replaces the other options)")
    t.add_argument(
        "--run", default=None, help="train or resume an existing run by id (replaces the other options)"
    )
    t.add_argument("--name", default="", help="a label for the run (not part of its identity)")
    add_training_arguments(t)
    o = t.add_argument_group("training order (curricula)")
    od = OrderConfig()
    o.add_argument("--order", choices=ORDERS, default=od.name)
    o.add_argument(
        "--oversample",
        action=argparse.BooleanOptionalAction,
        default=od.oversample,
        help="repeat minority classes (default: on for every order but shuffled)",
    )
    o.add_argument("--scores", default="", help=f"a baseline run's {layout.METRICS} (cartography orders)")
    o.add_argument(
        "--difficulty",
        choices=("paper", "code"),
        default=od.difficulty,
        help="Cart-CL++ score: the paper's, or the public code's (on the count of correct epochs)",
    )
    o.add_argument("--curriculum-share", type=float, default=od.curriculum_share)
    add_schedule_arguments(o)
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # started by the dashboard
    t.set_defaults(func=cmd_train)

    dm = sub.add_parser(
        "demo",
        help="write a bundled demo's map from its recorded run (--train: train it here): demo_map.png/.html (NLI pairs), "
        "ner_demo_map.png/.html (--task token: WikiGold named entities, a point per word)",
    )
    dm.add_argument(
        "--task",
        choices=DEMO_TASKS,
        default=DEMO_TASKS[0],
        help="pair: 3,198 SNLI pairs (default); token: 1,454 WikiGold sentences tagged PER/LOC/ORG/MISC",
    )
    dm.add_argument("--out-dir", default=".")
    dm.add_argument("--force", action="store_true", help="replace the map files in --out-dir")
    dm.add_argument(
        "--train",
        action="store_true",
        help="train the demo here live (minutes) instead of using the recorded run shipped with cartomap "
        "(an installed recording is removed first; a run trained here is kept and reused)",
    )
    dm.set_defaults(func=cmd_demo)

    db = sub.add_parser("dashboard", help="open the dashboard in the browser (Streamlit)")
    db.add_argument("--address", default="127.0.0.1", help="interface to bind (default: this machine only)")
    db.add_argument("--port", type=int, default=8501)
    db.add_argument("--headless", action="store_true", help="do not open a browser")
    team = db.add_argument_group(
        "team mode",
        "people sign in and act under their own names, with the roles of the team file (team.toml in the "
        "run store, or env CARTOMAP_TEAM); beyond 127.0.0.1 the dashboard needs one of these or --open",
    )
    how = team.add_mutually_exclusive_group()
    how.add_argument(
        "--trust-user-header",
        metavar="NAME",
        default="",
        help="an authenticating reverse proxy (oauth2-proxy, Authelia, Caddy forward_auth) signs people in "
        "and passes the user in header NAME (e.g. X-Forwarded-User); honoured only from --trusted-proxy",
    )
    how.add_argument(
        "--login",
        action="store_true",
        help="sign people in with Streamlit's OpenID Connect login: the provider in the [auth] table of "
        ".streamlit/secrets.toml (or --secrets)",
    )
    team.add_argument(
        "--trusted-proxy",
        metavar="ADDR",
        action="append",
        help="the proxy's address or network the user header is honoured from (repeatable; default 127.0.0.1)",
    )
    team.add_argument(
        "--proxy-secret-file",
        metavar="FILE",
        default="",
        help="a secret shared with the proxy (its first line; else env CARTOMAP_PROXY_SECRET): the user header "
        "counts only with the secret in header X-Cartomap-Proxy-Secret, so other programs on the proxy's "
        "machine cannot sign in as anyone",
    )
    team.add_argument("--secrets", metavar="FILE", default="", help="Streamlit's secrets file for --login")
    team.add_argument(
        "--open",
        action="store_true",
        help="say that whoever reaches the dashboard may act as anyone: serve beyond 127.0.0.1 without a "
        "login, or trust a --trusted-proxy that covers public addresses (0.0.0.0/0)",
    )
    db.set_defaults(func=cmd_dashboard)
