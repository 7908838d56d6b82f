"""The dependency rules of the packages, read from their import statements (module level and inside
functions alike): uda/ imports neither tasks/ nor augment/; augment/ imports uda/ but never tasks/;
tasks/ may import both; uda_compare/ (the uda-compare tool over tasks) may import all three, and
nothing imports it. So the core owns its interfaces and the loop is given its task by its caller.
Within tasks/, one task does not reach into another: the passages task imports nothing of the
squad_v2 task (tasks/qa/; what both read with lives in tasks/common/), and tasks/common/ imports no
task package."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("uda", "augment", "tasks", "uda_compare")
FORBIDDEN = {"uda": {"tasks", "augment", "uda_compare"}, "augment": {"tasks", "uda_compare"},
             "tasks": {"uda_compare"}, "uda_compare": set()}
# folder -> modules that no file in it may import (nor anything inside them)
FORBIDDEN_MODULES = {"tasks/passages": ("tasks.qa",),
                     "tasks/common": ("tasks.qa", "tasks.passages", "tasks.text")}


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


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module an import statement may name: ``from a.b import c`` gives
    ``a.b`` and ``a.b.c`` (c may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def test_imports_follow_one_direction():
    arrows = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for line, target in imported_packages(path):
                if target in FORBIDDEN[pkg]:
                    arrows.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not arrows, "imports against the rules (uda -> nothing; augment -> uda; tasks -> uda, augment; " \
        "uda_compare -> all three):\n" + \
        "\n".join(arrows)


def test_no_task_imports_another_task():
    arrows = []
    for folder, modules in FORBIDDEN_MODULES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            for line, name in imported_modules(path):
                if any(name == m or name.startswith(m + ".") for m in modules):
                    arrows.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not arrows, "imports of another task's modules (move what is shared to tasks/common):\n" + \
        "\n".join(arrows)


def test_the_rule_reader_sees_function_level_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom uda.config import Config\n\ndef f():\n    from tasks import get_task\n"
                 "    import augment.registry\n")
    assert imported_packages(f) == [(2, "uda"), (5, "tasks"), (6, "augment")]
    g = tmp_path / "n.py"
    g.write_text("def f():\n    from tasks.qa import task\n")
    assert (2, "tasks.qa.task") in imported_modules(g)


def test_no_script_shadows_a_package():
    # with scripts/ first on sys.path, scripts/augment.py would hide the augment package
    assert not [p.name for p in (REPO / "scripts").glob("*.py") if p.stem in PACKAGES]
