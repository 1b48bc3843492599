"""The command × kind matrix: every ``cartomap`` command on a run of every kind does what is declared.

As scikit-learn's ``check_estimator`` crosses each estimator with every check, this crosses each command
(``cartomap.cli.matrix.COMMANDS``) with every registered task kind and with three kinds declared here
alone, of one, two and three texts under names of their own (a headline, a claim and its evidence, a
premise and hypothesis with a context). Each cell either works (exit 0, and an oracle where one exists) or
refuses in one line that names the kind (exit 2), as the work's need says (``cartomap.tasks.support``).
The table in docs/architecture.md is written from the same declarations, so a cell that changes shows.

Every kind's run trains once per module on a tiny random BERT (a few rows, 2 epochs). The cells that
train more (experiments, the benchmark) are in the slow suite; the rest run by default.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cartomap.cli import build_parser, main
from cartomap.cli.matrix import COMMANDS, PAGES, command_names, markdown_table, works_of
from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.runs.store import RunStore
from cartomap.tasks import registry
from cartomap.tasks.base import TaskKind
from cartomap.training.loop import train_or_load

ROOT = Path(__file__).resolve().parents[1]

#: Kinds declared here alone: one, two and three texts under names of their own.
HEADLINE = TaskKind(
    name="headline", description="a news headline and its topic", text_fields=("headline",), noun="headline"
)
FACT_CHECK = TaskKind(
    name="fact-check",
    description="a claim and the evidence it is judged against, labelled with a verdict",
    text_fields=("claim", "evidence"),
    noun="claim",
)
CONTEXT_NLI = TaskKind(
    name="context-nli",
    description="a premise and a hypothesis read against a background passage",
    text_fields=("premise", "hypothesis", "background"),
    noun="pair",
)
TEST_KINDS = (HEADLINE, FACT_CHECK, CONTEXT_NLI)
KINDS = [*registry.KINDS.values(), *TEST_KINDS]

CLASSES = ("entailment", "neutral", "contradiction")
WORDS = [
    (["Anna", "Smith", "lives", "in", "Paris"], ["B-PER", "I-PER", "O", "O", "B-LOC"]),
    (["Bob", "visited", "Rome"], ["B-PER", "O", "B-LOC"]),
    (["the", "cat", "sat"], ["O", "O", "O"]),
    (["Oslo", "is", "cold"], ["B-LOC", "O", "O"]),
    (["Mary", "met", "Anna", "Smith"], ["B-PER", "O", "B-PER", "I-PER"]),
    (["it", "rained", "in", "Rome"], ["O", "O", "O", "B-LOC"]),
]
SETS = [["sports"], ["politics", "tech"], [], ["tech"], ["sports", "politics", "tech"], ["politics"]]
N_ROWS = 9


def rows_of(kind: TaskKind) -> list[dict]:
    """A few rows in the kind's own columns, whatever its unit."""
    if kind.unit.sentences:
        return [{kind.text_fields[0]: w, kind.label_field: t} for w, t in WORDS]
    animals = ("cat", "dog", "bird")
    rows = []
    for i in range(N_ROWS):
        texts = {f: f"{f} {i}: the {animals[i % 3]} sat on mat {i % 4}" for f in kind.text_fields}
        gold = SETS[i % len(SETS)] if kind.unit.label_sets else CLASSES[i % 3]
        rows.append({"id": f"r{i}", **texts, kind.label_field: gold})
    return rows


def data_options(kind: TaskKind, path: Path) -> list[str]:
    return [
        "--data",
        str(path),
        "--task",
        kind.name,
        "--text-columns",
        ",".join(kind.text_fields),
        "--label-column",
        kind.label_field,
    ]


def train_options(model: str) -> list[str]:
    return ["--model", model, "--epochs", "2", "--batch-size", "4", "--max-length", "32"]


@dataclass
class World:
    """One kind's data file, its finished run and its store."""

    kind: TaskKind
    folder: Path
    data: Path
    cache: Path
    run_id: str
    model: str

    def cli(self, *argv: str) -> tuple[int, str, str]:
        """``cartomap --cache CACHE ARGV`` in this process: (exit code, stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["--cache", str(self.cache), *argv])
            except SystemExit as exit_:  # argparse
                code = exit_.code
        return code, out.getvalue(), err.getvalue()

    def ok(self, *argv: str) -> str:
        code, out, err = self.cli(*argv)
        assert code == 0, f"setup `cartomap {' '.join(argv)}` failed: {err}"
        return out


@pytest.fixture(scope="module", autouse=True)
def test_kinds_registered():
    """The kinds of this module registered while it runs (a plug-in's one ``register`` call)."""
    with pytest.MonkeyPatch.context() as mp:
        for kind in TEST_KINDS:
            mp.setitem(registry.KINDS, kind.name, kind)
        yield


@pytest.fixture(scope="module")
def worlds(tmp_path_factory, tiny_model, test_kinds_registered) -> dict[str, World]:
    made = {}
    for kind in KINDS:
        folder = tmp_path_factory.mktemp(kind.name)
        path = folder / "data.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows_of(kind)), encoding="utf-8")
        data = DataConfig(
            path=str(path), task=kind.name, text_columns=kind.text_fields, label_column=kind.label_field
        )
        config = RunConfig(
            data=data,
            dev=data,
            model=ModelConfig(tiny_model, max_length=32),
            train=TrainConfig(epochs=2, batch_size=4, learning_rate=1e-3, warmup_ratio=0.0, record="both"),
        )
        run = train_or_load(config, RunStore(folder / "cache"))
        made[kind.name] = World(kind, folder, path, folder / "cache", run.id, tiny_model)
    return made


# ---------------------------------------------------------------------------------------------------------
# The recipes: what each command is asked on a kind's world (with whatever it needs made first).


def a_queue(w: World) -> str:
    """A review queue of the run's 3 most suspect units by AUM (made once)."""
    from cartomap.curation.queue import list_queues

    if "q" not in list_queues(RunStore(w.cache).get(w.run_id)):
        w.ok("review-queue", "create", w.run_id, "q", "--detector", "aum", "--top", "3", "--per-item", "4")
    return "q"


def first_item(w: World) -> str:
    from cartomap.curation.queue import open_queue

    queue = open_queue(RunStore(w.cache).get(w.run_id), a_queue(w))
    return str(queue.items()["item_id"].iloc[0])


def label_studio_export(w: World) -> str:
    """Label Studio's JSON export of the queue's tasks, every task answered "keep" by one annotator."""
    tasks_path = w.folder / "ls-tasks.json"
    w.ok(
        "review-queue",
        "export",
        w.run_id,
        a_queue(w),
        "--to",
        "labelstudio",
        "--out",
        str(tasks_path),
        "--force",
    )
    tasks = json.loads(tasks_path.read_text(encoding="utf-8"))
    result = [{"from_name": "decision", "to_name": "text", "type": "choices", "value": {"choices": ["keep"]}}]
    exported = [
        {"id": n + 1, "data": t["data"], "annotations": [{"id": n, "completed_by": 1, "result": result}]}
        for n, t in enumerate(tasks)
    ]
    path = w.folder / "ls-export.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    return str(path)


def a_view(w: World) -> str:
    from cartomap.runs.views import save_view

    save_view(RunStore(w.cache).get(w.run_id), "v", {"colour": "label"}, overwrite=True)
    return "v"


def a_tag(w: World) -> str:
    w.ok("tags", "add", w.run_id, "look", "--id", first_unit_example(w))
    return "look"


def first_unit_example(w: World) -> str:
    return str(RunStore(w.cache).get(w.run_id).examples()["id"].iloc[0])


def a_seeds_experiment(w: World) -> str:
    name = f"seeds-{w.kind.name}"
    code, out, _ = w.cli("experiment", "list")
    if name not in out:
        w.ok("seeds", w.run_id, "--seeds", "2", "--name", name)
    return name


def reference_folder(w: World) -> str:
    out = w.folder / "reference"
    if not out.exists():
        w.ok("export", w.run_id, "--out", str(out))
    return str(out)


def checkpoints(w: World) -> list[str]:
    """The run's epoch checkpoints, in order (what score-checkpoints scores)."""
    return [str(p) for p in RunStore(w.cache).get(w.run_id).checkpoint_dirs()]


def doomed_store(w: World) -> str:
    """A copy of the kind's store to delete from."""
    copy = w.folder / "doomed"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(w.cache, copy)
    return str(copy)


Recipe = Callable[[World], list[str]]

#: command -> (argv on a world, whether it is slow, the exit codes it may end with when it serves the kind)
RECIPES: dict[str, tuple[Recipe, bool]] = {
    "train": (lambda w: ["train", *data_options(w.kind, w.data), *train_options(w.model), "--quiet"], False),
    "curriculum": (
        lambda w: [
            "curriculum",
            *data_options(w.kind, w.data),
            "--dev",
            str(w.data),
            "--test",
            str(w.data),
            *train_options(w.model),
            "--methods",
            "shuffled",
            "--seeds",
            "1",
            "--datamap-epochs",
            "2",
        ],  # fmt: skip
        True,
    ),
    "combine": (
        lambda w: [
            "combine",
            *data_options(w.kind, w.data),
            *train_options(w.model),
            "--a",
            str(w.data),
            "--test",
            str(w.data),
            "--modes",
            "A",
            "--seeds",
            "1",
        ],
        True,
    ),
    "seeds": (lambda w: ["seeds", w.run_id, "--seeds", "2", "--name", f"seeds-{w.kind.name}"], True),
    "retrain": (lambda w: ["retrain", w.run_id, "--queue", a_queue(w), "--seeds", "1"], True),
    "report": (lambda w: ["report", a_seeds_experiment(w)], True),
    "prune": (
        lambda w: [
            "prune",
            *data_options(w.kind, w.data),
            *train_options(w.model),
            "--folds",
            "2",
            *([] if w.kind.unit.sentences else ["--test", str(w.data), "--categories", "P1G0"]),
        ],
        True,
    ),
    "experiment list": (lambda w: ["experiment", "list"], False),
    "experiment show": (lambda w: ["experiment", "show", a_seeds_experiment(w)], True),
    "experiment run": (lambda w: ["experiment", "run", a_seeds_experiment(w)], True),
    "experiment start": (lambda w: ["experiment", "start", a_seeds_experiment(w)], True),
    "experiment cancel": (lambda w: ["experiment", "cancel", a_seeds_experiment(w)], True),
    "experiment delete": (lambda w: ["experiment", "delete", a_seeds_experiment(w)], True),
    "noise-benchmark": (
        lambda w: [
            "noise-benchmark",
            "--data",
            str(w.data),
            "--task",
            w.kind.name,
            "--n",
            "9",
            "--rates",
            "0.2",
            "--settings",
            "symmetric",
            "--folds",
            "2",
            "--epochs",
            "1",
            "--model",
            w.model,
            "--max-length",
            "32",
        ],  # fmt: skip
        True,
    ),
    "runs": (lambda w: ["runs"], False),
    "show": (lambda w: ["show", w.run_id], False),
    "export": (lambda w: ["export", w.run_id, "--out", str(w.folder / "export"), "--force"], False),
    "import-dynamics": (
        lambda w: [
            "import-dynamics",
            reference_folder(w),
            *data_options(w.kind, w.data),
            "--name",
            "imported",
        ],
        False,
    ),
    "map": (lambda w: ["map", w.run_id, "--out", str(w.folder / "map.html"), "--force"], False),
    "repair": (lambda w: ["repair", w.run_id], False),
    "delete": (lambda w: ["--cache", doomed_store(w), "delete", w.run_id, "--yes"], False),
    "cancel": (lambda w: ["cancel", w.run_id], False),
    "views list": (lambda w: ["views", "list", w.run_id], False),
    "views show": (lambda w: ["views", "show", w.run_id, a_view(w)], False),
    "views delete": (lambda w: ["views", "delete", w.run_id, a_view(w)], False),
    "tags list": (lambda w: ["tags", "list", w.run_id], False),
    "tags show": (lambda w: ["tags", "show", w.run_id, a_tag(w)], False),
    "tags add": (lambda w: ["tags", "add", w.run_id, "later", "--id", first_unit_example(w)], False),
    "tags remove": (lambda w: ["tags", "remove", w.run_id, a_tag(w), "--all"], False),
    "embed": (lambda w: ["embed", w.run_id, "--quiet"], False),
    "project": (
        lambda w: (w.ok("embed", w.run_id, "--quiet"), ["project", w.run_id, "--method", "pca"])[1],
        False,
    ),
    "similarity": (lambda w: ["similarity", w.run_id, "--model", w.model, "--quiet"], False),
    "artifacts": (
        lambda w: [
            "artifacts",
            f"run:{w.run_id}",
            "--no-similarity",
            "--out",
            str(w.folder / "art"),
            "--force",
        ],
        False,
    ),
    "truth": (lambda w: ["truth", w.run_id], False),
    "swaps": (lambda w: ["swaps", w.run_id, "--source", "last"], False),
    "subset": (
        lambda w: [
            "subset",
            *data_options(w.kind, w.data),
            "--n",
            "3",
            "--out",
            str(w.folder / "sub.jsonl"),
            "--force",
        ],
        False,
    ),
    "groups": (lambda w: ["groups", w.run_id, "--k", "2"], False),
    "generate": (lambda w: ["generate", w.run_id, "--batch", "b", "--model", "x", "--n", "1"], False),
    "filter": (lambda w: ["filter", w.run_id, "--batch", "b"], False),
    "review-export": (
        lambda w: ["review-export", w.run_id, "--batch", "b", "--out", str(w.folder / "r.jsonl")],
        False,
    ),
    "review-queue create": (
        lambda w: ["review-queue", "create", w.run_id, "fresh", "--detector", "aum", "--top", "3"],
        False,
    ),
    "review-queue guidelines": (
        lambda w: ["review-queue", "guidelines", w.run_id, a_queue(w), "--text", "be kind"],
        False,
    ),
    "review-queue list": (lambda w: ["review-queue", "list", w.run_id], False),
    "review-queue show": (lambda w: ["review-queue", "show", w.run_id, a_queue(w)], False),
    "review-queue next": (
        lambda w: ["review-queue", "next", w.run_id, a_queue(w), "--annotator", "ann"],
        False,
    ),
    "review-queue decide": (
        lambda w: [
            "review-queue",
            "decide",
            w.run_id,
            a_queue(w),
            "--annotator",
            "ann",
            "--item",
            first_item(w),
            "--decision",
            "keep",
        ],
        False,
    ),
    "review-queue undo": (
        lambda w: (
            w.ok(
                "review-queue",
                "decide",
                w.run_id,
                a_queue(w),
                "--annotator",
                "undoer",
                "--item",
                first_item(w),
                "--decision",
                "remove",
            ),
            ["review-queue", "undo", w.run_id, a_queue(w), "--annotator", "undoer", "--item", first_item(w)],
        )[1],
        False,
    ),
    "review-queue import": (
        lambda w: [
            "review-queue",
            "import",
            w.run_id,
            a_queue(w),
            label_studio_export(w),
            "--tool",
            "labelstudio",
        ],
        False,
    ),
    "review-queue export": (
        lambda w: [
            "review-queue",
            "export",
            w.run_id,
            a_queue(w),
            "--out",
            str(w.folder / "dec.jsonl"),
            "--force",
        ],
        False,
    ),
    "score-checkpoints": (
        lambda w: [
            "score-checkpoints",
            *checkpoints(w),
            *data_options(w.kind, w.data),
            "--batch-size",
            "4",
            "--max-length",
            "32",
            "--quiet",
        ],  # fmt: skip
        True,
    ),
}
#: What a cell that serves its kind may also end with where the command's own state says no (not the kind):
#: cancelling a finished run; a run with no votes has no truth report; WaNLI's later stages before a batch.
NOT_ABOUT_THE_KIND = {
    "cancel": "finished",
    "truth": "no human judgement",
    "generate": "",
    "filter": "",
    "review-export": "",
    "score-checkpoints": "",
}


def cells(slow: bool) -> list:
    out = []
    for command, work in COMMANDS.items():
        if work is None:
            continue
        recipe, is_slow = RECIPES[command]
        if is_slow == slow:
            out += [pytest.param(command, kind, id=f"{command}-{kind.name}") for kind in KINDS]
    return out


def check_cell(worlds, command: str, kind: TaskKind) -> None:
    w = worlds[kind.name]
    work = COMMANDS[command]
    argv = RECIPES[command][0](w)
    if argv[0] == "--cache":  # a recipe with a store of its own
        code, out, err = World(w.kind, w.folder, w.data, Path(argv[1]), w.run_id, w.model).cli(*argv[2:])
    else:
        code, out, err = w.cli(*argv)
    assert "Traceback" not in err, err
    if refusal := work.refusal(kind):
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, f"{command} on {kind.name}: expected one line, exit 2: {err}"
        assert kind.name in lines[0] and refusal in lines[0], lines[0]
        return
    if code != 0 and command in NOT_ABOUT_THE_KIND:
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and NOT_ABOUT_THE_KIND[command] in lines[0], err
        assert f"this is {kind.name} data" not in lines[0], lines[0]
        return
    assert code == 0, f"`cartomap {' '.join(argv)}` on {kind.name}: exit {code}: {err}"


@pytest.mark.parametrize(("command", "kind"), cells(slow=False))
def test_cell(worlds, command, kind):
    check_cell(worlds, command, kind)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "kind"), cells(slow=True))
def test_slow_cell(worlds, command, kind):
    check_cell(worlds, command, kind)


def test_every_command_is_declared_and_has_a_recipe():
    """A new command names its work in cartomap.cli.matrix and gets a cell here."""
    names = command_names(build_parser())
    assert set(names) == set(COMMANDS), set(names) ^ set(COMMANDS)
    assert {c for c, w in COMMANDS.items() if w is not None} == set(RECIPES)


def test_every_page_is_declared():
    pages = {p.name for p in (ROOT / "pages").glob("*.py") if p.name != "common.py"}
    assert pages == set(PAGES)


def test_the_docs_print_the_matrix_from_the_declarations():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    registered = [k for k in registry.KINDS.values() if k not in TEST_KINDS]  # not this module's own
    assert markdown_table(registered) in doc, (
        "docs/architecture.md: paste cartomap.cli.matrix.markdown_table() again"
    )


def test_a_refusal_names_the_kind_and_the_need():
    from cartomap.tasks import support

    line = support.PRUNING.refusal(registry.kind("token"))
    assert line.startswith("pruning suspected label errors works on examples with one label each")
    assert "this is token data" in line and support.PRUNING.refusal(registry.kind("pair")) == ""
    assert support.WANLI.refusal(FACT_CHECK) and not support.SIMILARITY.refusal(FACT_CHECK)


# ---------------------------------------------------------------------------------------------------------
# The pages: each opens on a run of every kind (``?run=ID``) without an exception; where its work does not
# serve the kind, it says so in the work's own refusal.


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(PAGES))
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_page_cell(worlds, page, kind, monkeypatch):
    import patience
    from streamlit.testing.v1 import AppTest

    w = worlds[kind.name]
    monkeypatch.setenv("CARTOMAP_CACHE", str(w.cache))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=patience.WAIT_S)
    at.query_params["run"] = w.run_id
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(str(m.value) for m in (*at.markdown, *at.caption, *at.info, *at.warning, *at.error))
    assert "Traceback" not in shown
    for work in works_of(PAGES[page]):
        if refusal := work.refusal(kind):
            assert refusal in shown, f"page {page} on a {kind.name} run does not say: {refusal}"
