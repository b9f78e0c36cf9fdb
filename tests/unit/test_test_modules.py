"""No test module imports another test module: what tests share (worlds, builders, doubles, fixtures) lives in
modules of its own or in a ``conftest``, so a test module can be moved, split or deleted without breaking another,
and pytest never runs a test module's import side effects for a module it did not collect."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")


def imports_of_test_modules(path: Path) -> list[str]:
    """The ``tests.…test_*`` modules ``path`` imports (``import`` or ``from … import``, at any depth of the file)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            found += [name for name in names if _test_module(name)]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _test_module(alias.name)]
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imports_of_test_modules(path))
    }
    assert offenders == {}


def test_the_check_sees_both_import_forms(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(
        "from tests.unit.core import test_runpeak\n"
        "from tests.unit.core.test_runpeak import size\n"
        "import tests.unit.core.test_runpeak\n"
        "from tests.unit.core.run_plans import planned\n"
        "def f():\n    from tests.unit.charts.test_runrecord import x\n"
    )
    assert imports_of_test_modules(module) == [
        "tests.unit.core.test_runpeak",
        "tests.unit.core.test_runpeak",
        "tests.unit.core.test_runpeak",
        "tests.unit.charts.test_runrecord",
    ]
