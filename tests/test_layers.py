"""The layers hold where import-linter cannot look: no package below ``cli/`` loads the demo by a
string (``resolve``, ``import_module``, ``pkgutil.resolve_name``, ``__import__``), which would be an
import of ``turnkit.demo`` that the contracts in ``pyproject.toml`` do not see."""

from __future__ import annotations

import ast
from pathlib import Path

import turnkit

PACKAGE = Path(turnkit.__file__).parent
LOADERS = {"resolve", "import_module", "resolve_name", "__import__"}
ALLOWED = {"cli", "demo"}


def string_loads(source: str, prefix: str = "turnkit.demo") -> list[int]:
    """The lines of ``source`` that load a module under ``prefix`` by a string: a loader called
    with that string, or a module constant holding it that a loader could be given."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _loader(node.func) in LOADERS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith(prefix):
                found.append(node.lineno)
        if isinstance(node, ast.Assign | ast.AnnAssign) and _names(node.value, prefix + ":"):
            found.append(node.lineno)
    return found


def _loader(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _names(value: ast.expr | None, prefix: str) -> bool:
    return isinstance(value, ast.Constant) and str(value.value).startswith(prefix)


def test_no_package_below_the_cli_loads_the_demo_by_a_string():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ALLOWED:
            continue
        offenders += [f"{relative}:{line}" for line in string_loads(path.read_text())]
    assert offenders == []


def test_the_check_finds_a_load_by_a_string_and_a_constant_naming_one():
    source = (
        "from turnkit.registry.references import resolve\n"
        "MODEL = 'turnkit.demo:scripted_demo_model'\n"
        "def load():\n"
        "    return resolve('turnkit.demo:scripted_demo_model')()\n"
        "def fine():\n"
        "    raise ValueError('set X=turnkit.demo:scripted_demo_model instead')\n"
    )
    assert string_loads(source) == [2, 4]
