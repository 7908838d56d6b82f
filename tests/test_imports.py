"""The dependency rules of the packages, read from their import statements (module level and inside
functions alike): uda/ imports neither tasks/ nor augment/; augment/ imports uda/ but never tasks/;
tasks/ may import both. So the core owns its interfaces and the loop is given its task by its caller."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("uda", "augment", "tasks")
FORBIDDEN = {"uda": {"tasks", "augment"}, "augment": {"tasks"}, "tasks": set()}


def imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, top-level project package) of every import statement in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out += [(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in PACKAGES]
    return out


def test_imports_follow_one_direction():
    arrows = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for line, target in imported_packages(path):
                if target in FORBIDDEN[pkg]:
                    arrows.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not arrows, "imports against the rules (uda -> nothing; augment -> uda; tasks -> uda, augment):\n" + \
        "\n".join(arrows)


def test_the_rule_reader_sees_function_level_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom uda.config import Config\n\ndef f():\n    from tasks import get_task\n"
                 "    import augment.registry\n")
    assert imported_packages(f) == [(2, "uda"), (5, "tasks"), (6, "augment")]


def test_no_script_shadows_a_package():
    # with scripts/ first on sys.path, scripts/augment.py would hide the augment package
    assert not [p.name for p in (REPO / "scripts").glob("*.py") if p.stem in PACKAGES]
