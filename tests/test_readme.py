"""The README's two set-up commands stay true, and CI runs the README's test command."""

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
