"""The README's two set-up commands stay true, and CI runs the README's test command."""

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    return [line for block in blocks[:2] for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_launch_and_test_commands():
    launch, tests = readme_commands()
    assert launch.startswith("pip install") and "cartomap" in launch.split("&&")[-1]
    assert tests.startswith("pip install") and "pytest" in tests


def test_ci_runs_the_readme_test_command():
    _, tests = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()


def test_no_tracker_numbers_where_a_user_reads():
    """A user has no issue tracker: CLI help, module docstrings, README and docs name the feature."""
    from cartomap.cli import build_parser

    pattern = re.compile(r"\bissues? ?(#?\d|:)|\(issue", re.IGNORECASE)
    parser = build_parser()
    texts = {"cartomap --help": parser.format_help()}
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        texts[f"cartomap {name} --help"] = command.format_help()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    for folder in ("cartomap", "pages", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    found = [f"{where}: {m.group(0)}" for where, text in texts.items() for m in pattern.finditer(text)]
    assert not found, found
