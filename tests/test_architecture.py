"""The package layout is the architecture: imports point one way, with no cycle.

Every module's imports are parsed (module level and inside functions, relative ones resolved),
and checked against the layer order of docs/architecture.md:

    pages, app, cli                       (shells: one never imports another)
    experiments, wanli, curation
    analysis, integrations, executors
    training
    runs
    scores, data, team
    config, io                            (cartomap's top-level modules)
    tasks                                 (task kinds: the shape of a task, below the config)
    errors                                (imported by every layer)

A package may import its own modules and any package of a lower layer, never one of its own
layer or above. The module graph has no cycle, also through function-level imports. No private
name (``_x``) is imported from another module. The run folder's file names are spelled only in
``cartomap.runs``. The library never imports Streamlit.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cartomap.runs import layout

ROOT = Path(__file__).resolve().parent.parent

#: Layer of every package, higher imports lower; packages of one layer never import each other.
LAYERS = {
    "cartomap.errors": 0,  # the errors every layer raises
    "cartomap.plugins": 0,  # entry points of other packages, read by every registry
    "cartomap.tasks": 1,  # task kinds: the config's defaults come from them
    "cartomap": 2,  # config, io and the package itself
    "cartomap.scores": 3,
    "cartomap.data": 3,
    "cartomap.team": 3,  # the team file, roles and who a dashboard request is
    "cartomap.runs": 4,
    "cartomap.training": 5,
    "cartomap.analysis": 6,
    "cartomap.integrations": 6,
    "cartomap.executors": 6,
    "cartomap.experiments": 7,
    "cartomap.wanli": 7,
    "cartomap.curation": 7,
    "cartomap.cli": 8,
    "pages": 8,  # with app.py, their entry point
}


def _module_files() -> dict[str, Path]:
    files = {"app": ROOT / "app.py"}
    for base in ("cartomap", "pages"):
        for path in sorted((ROOT / base).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = path
    return files


MODULES = _module_files()


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every import of ours in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, path.name == "__init__.py")
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:  # a submodule imported from its package
                    found.append((sub, "", node.lineno))
                else:
                    found.append((target, alias.name, node.lineno))
    return found


def _ours(name: str) -> bool:
    return name in MODULES or name.split(".")[0] in ("cartomap", "pages")


def _package(module: str) -> str:
    """The layer key of a module: its subpackage (cartomap.runs), or cartomap / pages / app."""
    parts = module.split(".")
    if parts[0] == "app":  # the entry point of the pages
        return "pages"
    if parts[0] == "cartomap" and len(parts) > 1 and f"cartomap.{parts[1]}" in LAYERS:
        return f"cartomap.{parts[1]}"
    return parts[0]


GRAPH = {
    module: sorted({target for target, _, _ in _imports(module, path) if _ours(target) and target != module})
    for module, path in MODULES.items()
}


def test_every_module_has_a_layer():
    unknown = sorted(m for m in MODULES if _package(m) not in LAYERS)
    assert not unknown, f"modules outside the known packages (add them to LAYERS and the docs): {unknown}"
    top = sorted(
        m
        for m in MODULES
        if m.count(".") == 1 and m.startswith("cartomap.") and MODULES[m].name != "__init__.py"
    )
    assert top == ["cartomap.config", "cartomap.errors", "cartomap.io", "cartomap.plugins"], (
        f"cartomap's top level holds only config, io, errors and plugins; found {top}"
    )


def test_imports_follow_the_layer_order():
    bad = []
    for module, path in MODULES.items():
        source = _package(module)
        for target, _, line in _imports(module, path):
            if not _ours(target):
                continue
            dest = _package(target)
            if dest == source:
                continue
            if LAYERS[dest] >= LAYERS[source]:
                bad.append(f"{path.relative_to(ROOT)}:{line} {module} -> {target}")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), or a module importing itself."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(GRAPH) == [], "import cycles (function-level imports count)"


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def _bench_graph(folder: Path) -> dict[str, list[str]]:
    """The scripts of a folder run with it on ``sys.path`` (``bench/``), and the ones of them each
    imports (module level and inside functions)."""
    names = {path.stem for path in folder.glob("*.py")}
    graph = {}
    for path in sorted(folder.glob("*.py")):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
        graph[path.stem] = sorted((found & names) - {path.stem})
    return graph


def test_no_import_cycles_in_the_benchmarks():
    graph = _bench_graph(ROOT / "bench")
    assert "scale_harness" in graph["bench_scale"] and "scale_harness" in graph["scale_token"]
    assert _cycles(graph) == [], "import cycles among bench/'s scripts (function-level imports count)"


def test_the_bench_cycle_check_reads_function_level_imports(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    import b\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("from a import f\nimport json\n", encoding="utf-8")
    graph = _bench_graph(tmp_path)
    assert graph == {"a": ["b"], "b": ["a"]} and _cycles(graph) == [["a", "b"]]


def test_no_private_names_imported_across_modules():
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {name} from {target}"
        for module, path in MODULES.items()
        for target, name, line in _imports(module, path)
        if _ours(target) and name.startswith("_") and not name.startswith("__")
    ]
    assert not bad, "private names imported from other modules:\n" + "\n".join(bad)


def test_library_never_imports_streamlit():
    bad = [
        f"{path.relative_to(ROOT)}:{line}"
        for module, path in MODULES.items()
        if module.startswith("cartomap")
        for target, _, line in _imports(module, path)
        if target.split(".")[0] == "streamlit"
    ]
    assert not bad, "the library imports streamlit: " + ", ".join(bad)


def _code_strings(path: Path) -> list[tuple[str, int, bool]]:
    """(text, line, used as a path part) of every string constant of a file that is not a docstring.

    A path part is an operand of ``/`` or the first piece of an f-string that is one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings, path_parts = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if isinstance(side, ast.JoinedStr) and side.values:
                    side = side.values[0]
                path_parts.add(id(side))
    return [
        (node.value, node.lineno, id(node) in path_parts)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


#: A Hugging Face checkpoint folder shares two names with a run folder; the module that reads
#: checkpoints spells them once (HF_CONFIG, the default encoder's package folder).
HF_NAMES = {("cartomap.training.models", "config.json"), ("cartomap.training.models", "model")}


def _spells(text: str, name: str, path_part: bool) -> bool:
    """Whether a string spells a run-folder name: a file name anywhere in it (as a whole name, so
    ``tokenizer_config.json`` is not ``config.json``); a folder name or a template's prefix
    (``metrics_``) as a path part."""
    if "." in name:
        return re.search(rf"(?<![\w.-]){re.escape(name)}", text) is not None
    return path_part and (
        text == name or text.startswith(f"{name}/") or (name.endswith("_") and text.startswith(name))
    )


def test_run_folder_file_names_are_spelled_only_in_the_run_store():
    names = layout.file_names()
    assert {"metrics.parquet", "examples.parquet", "tasks", "job.log", "test_examples_"} <= names
    bad = []
    for module, path in MODULES.items():
        if module.startswith("cartomap.runs"):
            continue
        for text, line, path_part in _code_strings(path):
            for name in names:
                if (module, name) not in HF_NAMES and _spells(text, name, path_part):
                    bad.append(f"{path.relative_to(ROOT)}:{line} spells {name!r} in {text!r}")
    assert not bad, "run-folder file names outside cartomap.runs.layout:\n" + "\n".join(bad)


def test_the_spelling_check_catches_names():
    assert _spells("a run's metrics.parquet", "metrics.parquet", False)
    assert not _spells("tokenizer_config.json", "config.json", False)
    assert _spells("tasks", "tasks", True) and not _spells("tasks", "tasks", False)
    assert _spells("metrics_", "metrics_", True) and not _spells("metrics", "metrics_", True)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("cartomap")))
def test_every_library_module_has_a_docstring(module):
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{module} has no module docstring saying what it owns"


def test_docs_print_the_run_folder_layout_from_the_constants():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert layout.markdown_table() in doc, "docs/architecture.md: paste layout.markdown_table() again"
    for package in LAYERS:
        if package.startswith("cartomap."):
            folder = package.replace(".", "/")
            assert f"`{folder}/`" in doc or f"`{folder}.py`" in doc, (
                f"docs/architecture.md does not describe {package}"
            )


def test_the_command_line_starts_without_the_heavy_libraries():
    """Every `cartomap ...` command (and `cartomap dashboard` before Streamlit starts) parses its
    arguments before torch, pandas, scipy or plotly are imported: they cost seconds at each start."""
    code = (
        "import sys, cartomap.cli; "
        "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'pyarrow', 'scipy', 'sklearn', "
        "'plotly', 'matplotlib', 'streamlit') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


#: The text columns every task kind names (cartomap.tasks): spelled only there and in the WaNLI
#: pipeline, which is about premise-hypothesis pairs by nature.
TASK_COLUMN_OWNERS = ("cartomap.tasks", "cartomap.wanli")
#: Strings that equal a text column's name but are another format's own word or a message's: (module,
#: text) -> how many times the module may spell it.
FOREIGN_WORDS = {
    ("cartomap.data.interchange", "text"): 1,  # Label Studio's and Argilla's key (TEXT_KEY)
    ("cartomap.data.multilabel", "text"): 1,  # "missing text column": what a named column is for
}
#: The pair's text fields: spelled inside a longer string too ("premise/hypothesis pairs") they name
#: its columns.
PAIR_WORDS = {"premise", "hypothesis"}
#: Keyword arguments whose value is a plotting library's own word ("text": plotly's hover content).
FOREIGN_KEYWORDS = {"hoverinfo", "textinfo", "textposition"}


def _task_column_spellings(path: Path, columns: set[str]) -> list[tuple[str, int]]:
    """(text, line) of every string constant of a file (docstrings aside) that is a text column's name,
    or holds a pair's column name as a word ("premise/hypothesis pairs"); plotting keywords aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg in FOREIGN_KEYWORDS:
            skip.add(id(node.value))
    words = {c for c in columns if c in PAIR_WORDS}  # never an ordinary word here, unlike "text", "tokens"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            if text in columns or any(re.search(rf"\b{re.escape(w)}\b", text) for w in words):
                found.append((text, node.lineno))
    return found


def test_text_columns_are_spelled_only_by_the_task_kinds():
    """Which columns hold an example's texts is the task kinds' to say: a module that needs them asks
    cartomap.tasks (a kind's text_fields, registry.text_fields_in, ...), never spells them."""
    from cartomap.tasks import registry

    columns = set(registry.text_fields())
    assert {"premise", "hypothesis", "text"} <= columns and set(
        registry.kind("pair").text_fields
    ) == PAIR_WORDS
    bad = []
    for module, path in MODULES.items():
        if not module.startswith("cartomap") or module.startswith(TASK_COLUMN_OWNERS):
            continue
        counts: dict[str, int] = {}
        for text, line in _task_column_spellings(path, columns):
            counts[text] = counts.get(text, 0) + 1
            if counts[text] > FOREIGN_WORDS.get((module, text), 0):
                bad.append(f"{path.relative_to(ROOT)}:{line} spells {text!r}")
    assert not bad, "text column names outside cartomap.tasks (ask the task kind):\n" + "\n".join(bad)


def test_the_column_check_catches_spellings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""premise is fine in a docstring."""\n'
        'A = "premise"\n'
        'B = f"needs premise/hypothesis pairs {1}"\n'
        'C = dict(hoverinfo="text")\n'
        'D = "texts"\n'
        'E = frame["text"]\n',
        encoding="utf-8",
    )
    found = _task_column_spellings(source, {"premise", "hypothesis", "text"})
    assert [line for _, line in found] == [2, 3, 6]


#: The owner of the states of long work: the only module that spells a state's name.
STATE_OWNER = "cartomap.runs.state"


def _state_literals(node: ast.AST | None, names: set[str]) -> list[ast.Constant]:
    """The state names ``node`` spells as a value: a string constant, the items of a tuple, list or
    set of them, or either branch of a conditional expression."""
    if isinstance(node, ast.Constant):
        return [node] if isinstance(node.value, str) and node.value in names else []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [c for item in node.elts for c in _state_literals(item, names)]
    if isinstance(node, ast.IfExp):
        return _state_literals(node.body, names) + _state_literals(node.orelse, names)
    return []


def _is_state_target(node: ast.AST) -> bool:
    """A name, attribute or ``[...]`` key that holds a state: ``state``, ``run_state``, ``x["state"]``."""
    if isinstance(node, ast.Name):
        return node.id == "state" or node.id.endswith("_state")
    if isinstance(node, ast.Attribute):
        return node.attr == "state" or node.attr.endswith("_state")
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "state"
    return False


def _state_spellings(path: Path, names: set[str]) -> list[tuple[str, int]]:
    """(state name, line) of every state name a file compares with (``==``, ``!=``, ``in``) or writes
    (``state=...``, ``{"state": ...}``, ``x["state"] = ...``, ``state = ...``, a ``.get("state", ...)``
    default, a function returning one from ``def ..._state``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found += _state_literals(operand, names)
        elif isinstance(node, ast.keyword) and node.arg == "state":
            found += _state_literals(node.value, names)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "state":
                    found += _state_literals(value, names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_state_target(t) for t in targets):
                found += _state_literals(node.value, names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "state":
                found += [c for arg in node.args[1:] for c in _state_literals(arg, names)]
        elif isinstance(node, ast.FunctionDef) and node.name.endswith("state"):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return):
                    found += _state_literals(inner.value, names)
    return sorted({(c.value, c.lineno) for c in found}, key=lambda item: item[1])


def test_state_names_are_spelled_only_by_their_owner():
    """A run's, experiment's or task's state is :class:`cartomap.runs.state.State`'s to name: code that
    compares or writes one asks it (``State.DONE``, ``is_active(state)``), never spells the string."""
    from cartomap.runs.state import State

    names = {s.value for s in State}
    assert {"queued", "running", "done", "failed", "cancelled", "damaged"} <= names
    files = {**MODULES, "dashboard": ROOT / "dashboard.py"}
    bad = [
        f"{path.relative_to(ROOT)}:{line} spells {text!r}"
        for module, path in files.items()
        if module != STATE_OWNER
        for text, line in _state_spellings(path, names)
    ]
    assert not bad, "state names outside cartomap.runs.state (ask State):\n" + "\n".join(bad)


def test_the_state_check_catches_spellings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""done is fine in a docstring."""\n'
        'A = run.state == "done"\n'
        'B = state in ("queued", "running")\n'
        'run.set_status(state="failed", error="x")\n'
        'C = {"state": "queued"}\n'
        'status["state"] = "cancelled" if x else "failed"\n'
        'D = status.get("state", "queued")\n'
        'def run_state(run):\n    return "unknown"\n'
        'E = {"done": 1, "phase": "done"}\n'
        "F = run.state == State.DONE\n",
        encoding="utf-8",
    )
    found = _state_spellings(source, {"queued", "running", "done", "failed", "cancelled", "unknown"})
    assert [line for _, line in found] == [2, 3, 3, 4, 5, 6, 6, 7, 9]


#: The owner of the phases of long work (:class:`cartomap.runs.progress.Phase`).
PHASE_OWNER = "cartomap.runs.progress"


def _is_phase_holder(node: ast.AST) -> bool:
    """A name, attribute, ``[...]`` key or ``.get(...)`` that holds a phase: ``phase``, ``t.phase``,
    ``last_phase``, ``status["phase"]``, ``status.get("phase")``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "phase"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "phase"
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return last == "phase" or last.endswith("_phase")


def _phase_literals(node: ast.AST | None, names: set[str]) -> list[ast.Constant]:
    """The phases ``node`` spells: as :func:`_state_literals`, and an f-string that starts with one
    followed by a space (``f"test {k}/{n}"``)."""
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        head = str(node.values[0].value)
        return [node.values[0]] if any(head.startswith(f"{name} ") for name in names) else []
    return _state_literals(node, names)


def _is_phase_default(node: ast.AST) -> bool:
    """A ``.get("phase", ...)`` or ``.setdefault("phase", ...)`` call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
        return False
    first = node.args[0]
    return (
        node.func.attr in ("get", "setdefault") and isinstance(first, ast.Constant) and first.value == "phase"
    )


def _phase_spellings(path: Path, names: set[str]) -> list[tuple[str, int]]:
    """(phase, line) of every phase a file writes (``phase=...``, ``{"phase": ...}``, ``x["phase"] = ...``,
    ``phase = ...``, a ``.get("phase", ...)`` or ``.setdefault("phase", ...)`` default) or compares with a
    phase holder (``status["phase"] == "dev"``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_phase_holder(o) for o in operands):
                found += [c for o in operands for c in _phase_literals(o, names)]
        elif isinstance(node, ast.keyword) and node.arg == "phase":
            found += _phase_literals(node.value, names)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "phase":
                    found += _phase_literals(value, names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_phase_holder(t) for t in targets):
                found += _phase_literals(node.value, names)
        elif _is_phase_default(node):
            found += [c for arg in node.args[1:] for c in _phase_literals(arg, names)]
    return sorted({(str(c.value), c.lineno) for c in found}, key=lambda item: item[1])


def test_phases_are_spelled_only_by_their_owner():
    """The phase a status names (``status["phase"]``) is :class:`cartomap.runs.progress.Phase`'s to
    spell: code that writes or compares one uses its members (``phase=Phase.DEV``, ``Phase.TEST.of(k, n)``);
    the values in status.json stay the same strings."""
    from cartomap.runs.progress import Phase
    from cartomap.runs.state import State

    names = {p.value for p in Phase} | {s.value for s in State}  # a finished job's phase is its state
    assert {"train", "eval-pass", "dev", "saving", "starting", "loading the model", "collecting"} <= names
    files = {**MODULES, "dashboard": ROOT / "dashboard.py"}
    bad = [
        f"{path.relative_to(ROOT)}:{line} spells {text!r}"
        for module, path in files.items()
        if module not in (PHASE_OWNER, STATE_OWNER)
        for text, line in _phase_spellings(path, names)
    ]
    assert not bad, "phases spelled outside cartomap.runs.progress (ask Phase):\n" + "\n".join(bad)


def test_the_phase_check_catches_spellings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""phase="dev" is fine in a docstring."""\n'
        't.progress.update(force=True, phase="eval-pass")\n'
        'update(phase="stopped" if stopped else State.DONE)\n'
        'A = {"phase": "max variability", "state": "train"}\n'
        'B = status.get("phase", "starting")\n'
        'C = status["phase"] == "dev"\n'
        'D = phase in ("saving", other)\n'
        'status["phase"] = "train"\n'
        'fields.setdefault("phase", f"checkpoint {k}/{n}")\n'
        'update(phase=f"test {k}/{n}")\n'
        'update(phase=Phase.DEV, stage="dev")\n'
        'E = which == "train"\n'
        'F = status.get("phase") != "done"\n',
        encoding="utf-8",
    )
    names = {"train", "eval-pass", "dev", "stopped", "max variability", "starting", "saving", "test"}
    found = _phase_spellings(source, names | {"checkpoint", "done"})
    assert [line for _, line in found] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 13]


#: The one reader of a unit id ``<example id>#<k>`` (``word_key``) and its writer (``unit_id_of``).
UNIT_ID_OWNER = "cartomap.tasks.base"
_SPLITS = ("partition", "rpartition", "split", "rsplit")


def _unit_id_splits(path: Path) -> list[tuple[str, int]]:
    """(call, line) of every ``x.rpartition(UNIT_SEPARATOR)`` (or ``partition``, ``split``, ``rsplit``,
    the separator by its name or as ``base.UNIT_SEPARATOR``): a unit id parsed by hand."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SPLITS:
            for arg in node.args[:1]:
                name = arg.attr if isinstance(arg, ast.Attribute) else getattr(arg, "id", "")
                if name == "UNIT_SEPARATOR":
                    found.append((node.func.attr, node.lineno))
    return found


def test_unit_ids_are_parsed_only_by_word_key():
    """A word's or a label's unit id is split by :func:`cartomap.tasks.base.word_key` (at the last '#', an
    example id may hold one), never by hand."""
    bad = [
        f"{path.relative_to(ROOT)}:{line} .{call}(UNIT_SEPARATOR)"
        for module, path in MODULES.items()
        if module != UNIT_ID_OWNER
        for call, line in _unit_id_splits(path)
    ]
    assert not bad, "unit ids split outside cartomap.tasks.base (ask word_key):\n" + "\n".join(bad)


def test_the_unit_id_check_catches_splits(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""unit.rpartition(UNIT_SEPARATOR) is fine in a docstring."""\n'
        "a, _, k = str(unit).rpartition(UNIT_SEPARATOR)\n"
        "b = unit.split(base.UNIT_SEPARATOR)\n"
        "c = word_key(unit)\n"
        'd = unit.rpartition("-")\n'
        "e = unit.startswith(UNIT_SEPARATOR)\n",
        encoding="utf-8",
    )
    assert _unit_id_splits(source) == [("rpartition", 2), ("split", 3)]


#: The one owner of the data-source picker (demo, a path with its format and split, an upload, a run's
#: own copy) and of the pieces it is made of.
SOURCE_FORM_OWNER = "pages.components.forms"
SOURCE_FORM_PIECES = {"FORMAT_CHOICES", "upload_field", "file_uploader"}


def _source_form_pieces(path: Path) -> list[tuple[str, int]]:
    """(name, line) of every use of a piece of the data-source picker in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in SOURCE_FORM_PIECES:
            found.append((node.id, node.lineno))
        elif isinstance(node, ast.Attribute) and node.attr in SOURCE_FORM_PIECES:
            found.append((node.attr, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            found += [(a.name, node.lineno) for a in node.names if a.name in SOURCE_FORM_PIECES]
    return found


#: Files uploaded for something other than a dataset: a review tool's export to import.
OTHER_UPLOADS = {("pages.components.review_results", "file_uploader")}


def test_pages_pick_a_data_source_only_through_source_form():
    bad = [
        f"{path.relative_to(ROOT)}:{line} uses {name}"
        for module, path in MODULES.items()
        if module.split(".")[0] in ("pages", "app") and module != SOURCE_FORM_OWNER
        for name, line in _source_form_pieces(path)
        if (module, name) not in OTHER_UPLOADS
    ]
    assert not bad, "a page picks a data source by itself (use source_form):\n" + "\n".join(bad)


def test_the_source_form_check_catches_pieces(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from cartomap.data.forms import FORMAT_CHOICES\n"
        'f = st.selectbox("Format", FORMAT_CHOICES)\n'
        'u = st.file_uploader("Data")\n'
        "p = forms.upload_field('x')\n"
        "s = source_form('x', 'Data', {}, 'demo')\n",
        encoding="utf-8",
    )
    assert [line for _, line in _source_form_pieces(source)] == [1, 2, 3, 4]


#: The owner of task kinds: the only package that makes a kind or spells a kind's name.
KIND_OWNER = "cartomap.tasks"


def _kind_spellings(path: Path, names: set[str]) -> list[tuple[str, int]]:
    """(what, line) of every task kind a file makes (``TaskKind(...)``) and every kind name it compares a
    task with (``task == "token"``, ``kind.name in ("pair", "single")``, ``config.task != "multilabel"``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int]] = []

    def about_a_task(node: ast.AST) -> bool:
        last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        owner = node.value if isinstance(node, ast.Attribute) else None
        owner_name = (
            owner.attr
            if isinstance(owner, ast.Attribute)
            else owner.id
            if isinstance(owner, ast.Name)
            else ""
        )
        kindish = ("task", "kind", "task_kind")
        return (
            last in kindish or last.endswith(("_task", "_kind")) or (last == "name" and owner_name in kindish)
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if called == "TaskKind":
                found.append(("TaskKind(...)", node.lineno))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(about_a_task(o) for o in operands):
                found += [(c.value, c.lineno) for o in operands for c in _state_literals(o, names)]
    return sorted(set(found), key=lambda item: item[1])


def test_task_kinds_are_made_and_named_only_by_their_owner():
    """A task kind is :mod:`cartomap.tasks`' to make and to name: other code asks the registry (or the kind
    it was given) what a kind is, never builds one nor compares a task with a kind's name; so a new kind is
    its declaration and one ``register`` call (tests/test_kind_conformance.py declares one)."""
    from cartomap.tasks import registry

    names = set(registry.names())
    assert {"pair", "single", "token", "multilabel"} <= names
    bad = [
        f"{path.relative_to(ROOT)}:{line} {what!r}"
        for module, path in MODULES.items()
        if module != KIND_OWNER and not module.startswith(KIND_OWNER + ".")
        for what, line in _kind_spellings(path, names)
    ]
    assert not bad, "task kinds made or named outside cartomap.tasks (ask its registry):\n" + "\n".join(bad)


def test_the_kind_check_catches_spellings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""token is fine in a docstring."""\n'
        'A = config.task == "token"\n'
        'B = run.task_kind.name in ("pair", "single")\n'
        'K = TaskKind(name="x", description="", text_fields=("t",), noun="t")\n'
        'C = what == "token"\n'
        "D = run.task_kind is TOKEN\n",
        encoding="utf-8",
    )
    found = _kind_spellings(source, {"pair", "single", "token"})
    assert [line for _, line in found] == [2, 3, 3, 4]


def _unit_comparisons(path: Path) -> list[tuple[str, int]]:
    """(what, line) of every comparison with a kind's unit or a unit's member (``kind.unit == "word"``,
    ``task.unit in (...)``, ``unit is Unit.LABEL``, ``x == Unit.WORD``). A member named as a table's key
    (``{Unit.WORD: ...}``) is no comparison."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def about_a_unit(node: ast.AST) -> bool:
        if not isinstance(node, ast.Attribute):
            return False
        member = isinstance(node.value, ast.Name) and node.value.id == "Unit" and node.attr.isupper()
        return node.attr == "unit" or member

    found = [
        ("a comparison with a unit", node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(about_a_unit(o) for o in [node.left, *node.comparators])
    ]
    return sorted(set(found), key=lambda item: item[1])


def test_units_are_asked_not_compared_outside_their_owner():
    """A kind's unit is :mod:`cartomap.tasks.units`' to describe: other code asks its traits
    (``kind.unit.sentences``, ``kind.unit.per_example``) or the kind's methods (``kind.units``,
    ``kind.gold``), never compares it with a unit (by name or member); so what a unit means is written
    once."""
    bad = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for module, path in MODULES.items()
        if module != KIND_OWNER and not module.startswith(KIND_OWNER + ".")
        for what, line in _unit_comparisons(path)
    ]
    assert not bad, "units compared outside cartomap.tasks (ask the unit's traits):\n" + "\n".join(bad)


def test_the_unit_check_catches_comparisons(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""kind.unit == "word" is fine in a docstring."""\n'
        'A = kind.unit == "word"\n'
        'B = run.task_kind.unit in ("label",)\n'
        "C = kind.unit.sentences\n"
        "D = task.unit is Unit.LABEL\n"
        "E = f'{kind.unit}s'\n"
        "F = x == Unit.WORD\n"
        "G = {Unit.WORD: 1}\n",
        encoding="utf-8",
    )
    assert [line for _, line in _unit_comparisons(source)] == [2, 3, 5, 7]


#: The owners of the score columns: the registries of the ambiguity scores and the detectors, and the
#: metrics that compute them (:mod:`cartomap.scores`).
SCORE_COLUMN_OWNER = "cartomap.scores"


def _score_column_lists(path: Path, names: set[str]) -> list[tuple[str, int]]:
    """(the names, line) of every tuple, list or set literal of a file holding two or more strings of which
    one or more is a score column's or a detector's name: a hand-written list of score columns."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            hit = sorted(set(strings) & names)
            if hit and len(strings) >= 2:
                found.append((", ".join(hit), node.lineno))
    return found


def test_score_columns_are_listed_only_by_their_registries():
    """Which score columns a unit's map carries is the registries' to say (cartomap.scores.columns: the
    ambiguity scores on the map, the metric columns the detectors read; detectors.names(unit)): the map
    frames, the colour menu, the truth report, the tables and the export ask them, so a score or detector
    registered with its inputs and units reaches every one. A list that spells them elsewhere would leave
    a new one out."""
    from cartomap.scores import detectors
    from cartomap.scores.columns import score_columns
    from cartomap.scores.metrics import UNIT_METRICS

    names = (set(score_columns(None)) | set(detectors.names())) - set(UNIT_METRICS)
    assert {"aum", "el2n", "mean_entropy", "datamap_confidence"} <= names
    bad = []
    for module, path in MODULES.items():
        if module.startswith(SCORE_COLUMN_OWNER):
            continue
        for spelled, line in _score_column_lists(path, names):
            bad.append(f"{path.relative_to(ROOT)}:{line} lists {spelled}")
    assert not bad, "score columns listed outside cartomap.scores (ask the registries):\n" + "\n".join(bad)


def test_the_score_list_check_catches_lists(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        'A = ("confidence", "aum")\nB = frame["aum"]\nC = ["id", "label"]\nD = {"el2n", "x"}\nE = ("aum",)\n',
        encoding="utf-8",
    )
    assert _score_column_lists(source, {"aum", "el2n"}) == [("aum", 1), ("el2n", 4)]


#: The owner of a run's origin and what each implies (:class:`cartomap.config.Origin`).
ORIGIN_OWNER = "cartomap.config"


def _origin_comparisons(path: Path) -> list[tuple[str, int]]:
    """(what, line) of every comparison with a run's origin (``config.origin.kind == "cartomap"``,
    ``origin.kind in (...)``, ``x is Origin.TRAINER``); its traits are asked instead."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def about_an_origin(node: ast.AST) -> bool:
        if not isinstance(node, ast.Attribute):
            return False
        if isinstance(node.value, ast.Name) and node.value.id == "Origin" and node.attr.isupper():
            return True
        holder = node.value
        named = (isinstance(holder, ast.Attribute) and holder.attr == "origin") or (
            isinstance(holder, ast.Name) and holder.id == "origin"
        )
        return node.attr == "kind" and named

    found = [
        ("a comparison with a run's origin", node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(about_an_origin(o) for o in [node.left, *node.comparators])
    ]
    return sorted(set(found), key=lambda item: item[1])


def test_origins_are_asked_not_compared_outside_their_owner():
    """Where a run's dynamics come from is cartomap.config.Origin's to describe: other code asks its traits
    (``origin.kind.trains_here``, ``.resumable``, ``.scored_checkpoints``), never compares it by name."""
    bad = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for module, path in MODULES.items()
        if module != ORIGIN_OWNER
        for what, line in _origin_comparisons(path)
    ]
    assert not bad, "origins compared outside cartomap.config (ask the Origin's traits):\n" + "\n".join(bad)


def test_the_origin_check_catches_comparisons(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        'A = run.config.origin.kind == "cartomap"\n'
        'B = origin.kind in ("recorder", "reference")\n'
        "C = origin.kind.trains_here\n"
        "D = x is Origin.TRAINER\n"
        "E = OriginConfig(kind=Origin.REFERENCE)\n",
        encoding="utf-8",
    )
    assert [line for _, line in _origin_comparisons(source)] == [1, 2, 4]


#: Where a table's task kind may be guessed from its columns (``registry.of_columns``): only where a bare
#: table is read and no run (nor a dataset with its kind) is at hand. (module, function) pairs.
OF_COLUMNS_ALLOWED = {
    ("cartomap.data.dataset", "task_kind"),  # a loaded table: TextDataset.task_kind reads it once
    ("cartomap.data.interchange", "queue_text_columns"),  # a review-queue file
    ("cartomap.training.batching", "texts_of"),  # a bare frame given without its kind
    ("cartomap.training.batching", "tokenize"),  # likewise
    ("cartomap.training.embeddings", "compute_cls_embeddings"),  # likewise (embed_run passes the run's)
    ("cartomap.integrations.recorder", "examples"),  # a user's texts recorded with no task named
    ("cartomap.analysis.datamap", "unit_rows"),  # a map frame handed over without its run
    ("cartomap.analysis.datamap", "unit_of"),  # likewise
}


def _of_columns_calls(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call of ``of_columns`` (``task_kinds.of_columns(...)``,
    ``of_columns(...)``) in a file; "" outside any function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "of_columns":
                    found.append((function, child.lineno))
            visit(child, inner)

    visit(tree, "")
    return sorted(found, key=lambda item: item[1])


def test_task_kinds_are_asked_of_the_run_not_guessed_from_columns():
    """A run knows its task kind (``run.task_kind``, ``config.task_kind``, a dataset's ``task_kind``): the
    kind is guessed from a table's columns (``registry.of_columns``) only where a bare table is read with
    no run at hand (:data:`OF_COLUMNS_ALLOWED`, each with its reason)."""
    bad = [
        f"{path.relative_to(ROOT)}:{line} of_columns in {function or 'module level'}"
        for module, path in MODULES.items()
        for function, line in _of_columns_calls(path)
        if (module, function) not in OF_COLUMNS_ALLOWED
    ]
    assert not bad, "a task kind guessed from columns (ask the run's task_kind):\n" + "\n".join(bad)


def test_the_of_columns_check_finds_calls(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""of_columns(x) is fine in a docstring."""\n'
        "K = task_kinds.of_columns(frame.columns)\n"
        "def f(frame):\n"
        "    return of_columns(frame.columns)\n"
        "class A:\n"
        "    def g(self):\n"
        "        return registry.of_columns(self.frame.columns).unit\n"
        "    kind = run.task_kind\n",
        encoding="utf-8",
    )
    assert _of_columns_calls(source) == [("", 2), ("f", 4), ("g", 7)]


#: The owner of the recording modes and recorded sources (:class:`cartomap.config.Record`, ``Source``).
RECORDING_OWNER = "cartomap.config"
#: Names that hold a recording mode or a recorded source (or the sources a run records).
_RECORDING_HOLDERS = ("source", "record", "mode", "recording", "sources", "recorded")
_RECORDING_CALLS = ("recorded_source", "map_source", "recorded_sources")


def _about_a_recording(node: ast.AST) -> bool:
    """``node`` holds a recording mode or source: ``source``, ``a.record``, ``self.sources``,
    ``metrics_source``, ``t.recorded``, ``run.recorded_source()``, ``MODES[mode]``."""
    if isinstance(node, ast.Call):
        func = node.func
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _RECORDING_CALLS
    if isinstance(node, ast.Subscript):
        return _about_a_recording(node.slice)
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return last in _RECORDING_HOLDERS or last.endswith(tuple(f"_{name}" for name in _RECORDING_HOLDERS))


def _recording_spellings(path: Path, names: set[str]) -> list[tuple[str, int]]:
    """(name, line) of every recording mode or source a file spells in a comparison with one
    (``source == "eval"``, ``record in ("train", "both")``, ``"train" in self.sources``) or as an option's
    ``choices=("train", "eval")``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_about_a_recording(o) for o in operands):
                found += [(c.value, c.lineno) for o in operands for c in _state_literals(o, names)]
        elif isinstance(node, ast.keyword) and node.arg == "choices":
            found += [(c.value, c.lineno) for c in _state_literals(node.value, names)]
    return sorted(set(found), key=lambda item: item[1])


def test_recording_modes_and_sources_are_asked_not_spelled_outside_their_owner():
    """How a run records (``TrainConfig.record``) and which pass its dynamics come from are
    cartomap.config's ``Record`` and ``Source`` to describe: other code uses their members and traits
    (``Record(mode).sources``, ``Source(source).eval_mode``, ``SOURCES``), never compares one with its
    value spelled out. ("train" also names a data set and the main metrics file: not compared here.)"""
    from cartomap.config import Record, Source

    names = {str(m) for m in Record} | {str(s) for s in Source}
    assert names == {"train", "eval", "both", "none"}
    bad = [
        f"{path.relative_to(ROOT)}:{line} {what!r}"
        for module, path in MODULES.items()
        if module != RECORDING_OWNER
        for what, line in _recording_spellings(path, names)
    ]
    assert not bad, "recording modes or sources spelled outside cartomap.config (ask Record/Source):\n" + (
        "\n".join(bad)
    )


def test_the_recording_check_catches_spellings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""source == "eval" is fine in a docstring."""\n'
        'A = source == "eval"\n'
        'B = cfg.train.record in ("train", "both")\n'
        'C = "train" in self.sources\n'
        'p.add_argument("--source", choices=("train", "eval"))\n'
        'D = run.recorded_source() == "eval"\n'
        "E = source == Source.EVAL\n"
        'F = which == "train"\n'
        'G = access.mode == "header"\n',
        encoding="utf-8",
    )
    found = _recording_spellings(source, {"train", "eval", "both", "none"})
    assert [line for _, line in found] == [2, 3, 3, 4, 5, 5, 6]


#: The longest a function may be, counted from its ``def`` line to its last line.
MAX_FUNCTION_LINES = 100

#: (module, function) allowed over MAX_FUNCTION_LINES, each with its reason (keep this short).
LONG_FUNCTIONS: dict[tuple[str, str], str] = {}  # (module, function) -> why it may be longer (none now)


def _long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """(name, line, length) of every function (nested ones too) longer than ``limit`` lines, counted
    ``def`` to end."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_over_100_lines():
    """Small functions: none in cartomap/ or pages/ is over MAX_FUNCTION_LINES lines outside LONG_FUNCTIONS."""
    long = {
        (module, name): f"{path.relative_to(ROOT)}:{line} {name} is {length} lines"
        for module, path in MODULES.items()
        for name, line, length in _long_functions(path)
    }
    bad = [where for key, where in sorted(long.items()) if key not in LONG_FUNCTIONS]
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines (split them by what they do):\n" + "\n".join(
        bad
    )
    stale = sorted(set(LONG_FUNCTIONS) - set(long))
    assert not stale, f"LONG_FUNCTIONS names functions no longer over the limit (remove them): {stale}"


def test_the_length_check_catches_long_functions(tmp_path):
    source = tmp_path / "m.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(100))
    source.write_text(f"def long():\n{body}\n\ndef short():\n    return 1\n", encoding="utf-8")
    assert _long_functions(source) == [("long", 1, 101)]


#: Names compared only by their owners: a map's regions (scores.metrics), the variability axis
#: (scores.ambiguity), a token map's levels (analysis.tokens). Elsewhere a comparison asks the owner's
#: constant (``region == metrics.AMBIGUOUS``, ``axis == ambiguity.VARIABILITY``, ``level == tokens.SENTENCE_LEVEL``).
SPELLED_NAME_OWNERS = {
    "easy-to-learn": "cartomap.scores.metrics",
    "ambiguous": "cartomap.scores.metrics",
    "hard-to-learn": "cartomap.scores.metrics",
    "variability": "cartomap.scores.ambiguity",
    "sentence": "cartomap.analysis.tokens",
}


def _name_comparisons(path: Path, names: set[str]) -> list[tuple[str, int]]:
    """(name, line) of every comparison (``==``, ``!=``, ``in``, ``not in``) of something with a string
    literal of ``names`` (or a tuple, list or set of them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def spelled(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [n for e in node.elts for n in spelled(e)]
        return []

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found += [(name, node.lineno) for name in spelled(operand)]
    return sorted(set(found), key=lambda item: item[1])


def test_regions_axes_and_levels_are_compared_only_by_their_owners():
    """A region, the variability axis and a token map's level are compared with their owner's constant,
    never with the name spelled (so a renamed region or level cannot leave a comparison behind)."""
    bad = []
    for module, path in MODULES.items():
        names = {n for n, owner in SPELLED_NAME_OWNERS.items() if module != owner}
        bad += [
            f"{path.relative_to(ROOT)}:{line} compares {name!r}"
            for name, line in _name_comparisons(path, names)
        ]
    assert not bad, "names compared outside their owners (ask the owner's constant):\n" + "\n".join(bad)


def test_the_name_comparison_check_catches_comparisons(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        'A = region == "ambiguous"\n'
        'B = level in ("word", "sentence")\n'
        'C = {"ambiguous": 1}\n'
        "D = axis == ambiguity.VARIABILITY\n"
        'E = "variability" != axis\n',
        encoding="utf-8",
    )
    assert [line for _, line in _name_comparisons(source, set(SPELLED_NAME_OWNERS))] == [1, 2, 5]
