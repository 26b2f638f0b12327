"""Tests take public names from the public place, so a file moved inside the package breaks none.

A name in ``turnkit.__all__`` is imported from ``turnkit``, and a name in a public package's
``__all__`` (``turnkit.graph``, ``turnkit.storage``, ...) from that package, never from the module
that defines it: when ``tests/conftest.py`` took ``Executor`` and ``Settings`` from leaf modules,
moving one file broke the collection of every test. A test that must reach an internal module says
why: one sentence with "Reaches" in its module docstring, or an ``# internal: ...`` comment on the
import line.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

TESTS = Path(__file__).parent
PUBLIC_PACKAGES = (
    "turnkit",
    "turnkit.graph",
    "turnkit.storage",
    "turnkit.testing",
    "turnkit.server",
    "turnkit.deploy",
    "turnkit.demo",
    "turnkit.middleware",
    "turnkit.notify",
    "turnkit.observe",
    "turnkit.upstream",
)
REASON_IN_DOCSTRING = re.compile(r"\bReaches\b")
REASON_ON_LINE = "# internal:"


def _public(package: str) -> list[str]:
    return list(importlib.import_module(package).__all__)


def public_home(module: str, name: str) -> str | None:
    """The public package that offers ``name`` as imported from ``module``, else None.

    A public name counts only when ``module``'s attribute is that very object (a leaf module may
    hold another thing of the same name); a module that cannot be imported here is taken at its
    word."""
    homes = [package for package in PUBLIC_PACKAGES if name in _public(package)]
    if not homes:
        return None
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return homes[0]
    for package in homes:
        if getattr(importlib.import_module(package), name) is found:
            return package
    return None


def _from_turnkit(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.ImportFrom)
        and node.level == 0
        and node.module is not None
        and node.module.startswith("turnkit.")
    )


def _states_a_reason(tree: ast.Module) -> bool:
    return bool(REASON_IN_DOCSTRING.search(ast.get_docstring(tree) or ""))


def leaf_imports_of_public_names(source: str, filename: str) -> list[str]:
    """``file:line`` for every name ``source`` imports from a turnkit module other than the public
    place that offers it; none when its module docstring says why it "Reaches" inside."""
    tree = ast.parse(source, filename)
    if _states_a_reason(tree):
        return []
    found = []
    for node in sorted(filter(_from_turnkit, ast.walk(tree)), key=lambda n: n.lineno):
        assert isinstance(node, ast.ImportFrom)
        module = node.module or ""
        for alias in node.names:
            if module in PUBLIC_PACKAGES and alias.name in _public(module):
                continue
            home = public_home(module, alias.name)
            if home is not None:
                found.append(
                    f"{filename}:{node.lineno}: from {module} import {alias.name}"
                    f" -> from {home} import {alias.name}"
                )
    return found


def unexplained_internal_imports(source: str, filename: str) -> list[str]:
    """``file:line`` for every import of an internal turnkit name or module that says no reason:
    neither "Reaches" in the module docstring nor ``# internal: ...`` on the import's lines."""
    tree = ast.parse(source, filename)
    if _states_a_reason(tree):
        return []
    lines = source.splitlines()
    found = []
    for node in sorted(ast.walk(tree), key=lambda n: getattr(n, "lineno", 0)):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.startswith("turnkit.")]
            internal = [m for m in modules if m not in PUBLIC_PACKAGES]
        elif _from_turnkit(node):
            assert isinstance(node, ast.ImportFrom)
            module = node.module or ""
            internal = [
                f"{module}.{a.name}"
                for a in node.names
                if not (module in PUBLIC_PACKAGES and a.name in _public(module))
                and public_home(module, a.name) is None
            ]
        else:
            continue
        said = any(REASON_ON_LINE in line for line in lines[node.lineno - 1 : node.end_lineno])
        if internal and not said:
            found.append(f"{filename}:{node.lineno}: {', '.join(internal)} without a reason")
    return found


def _test_files() -> list[Path]:
    files = sorted(TESTS.glob("*.py"))
    assert len(files) > 50  # the folder is where it was
    return files


def test_tests_import_public_names_from_the_public_place():
    found = [
        finding
        for path in _test_files()
        for finding in leaf_imports_of_public_names(path.read_text(), path.name)
    ]
    assert found == []


def test_a_test_that_reaches_an_internal_module_says_why():
    found = [
        finding
        for path in _test_files()
        for finding in unexplained_internal_imports(path.read_text(), path.name)
    ]
    assert found == []


def test_a_public_name_from_a_leaf_module_is_found_with_its_file_and_line(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        '"""A test that takes its names from where they are defined."""\n'
        "\n"
        "from turnkit import Caller\n"
        "from turnkit.executor.executor import Executor\n"
        "from turnkit.graph.build import builder\n"
        "\n"
        "\n"
        "def test_it():\n"
        "    from turnkit.ledger import MemoryLedger, open_ledger\n"
    )
    assert leaf_imports_of_public_names(bad.read_text(), str(bad)) == [
        f"{bad}:4: from turnkit.executor.executor import Executor -> from turnkit import Executor",
        f"{bad}:5: from turnkit.graph.build import builder -> from turnkit.graph import builder",
        f"{bad}:9: from turnkit.ledger import MemoryLedger -> from turnkit import MemoryLedger",
        f"{bad}:9: from turnkit.ledger import open_ledger -> from turnkit import open_ledger",
    ]


def test_public_places_and_a_stated_reason_are_not_findings():
    public = (
        "from turnkit import Executor, Settings\n"
        "from turnkit.graph import TurnContext, build_turn_graph\n"
        "from turnkit.deploy import caller_of_user\n"
        "from turnkit.testing import ScriptedModel\n"
    )
    assert leaf_imports_of_public_names(public, "test_public.py") == []
    assert unexplained_internal_imports(public, "test_public.py") == []
    reaching = (
        '"""Reaches ``turnkit.executor`` directly: it tests the executor module itself."""\n'
        "from turnkit.executor.executor import Executor\n"
        "from turnkit.executor.steps import window_start\n"
    )
    assert leaf_imports_of_public_names(reaching, "test_reaching.py") == []
    assert unexplained_internal_imports(reaching, "test_reaching.py") == []


def test_an_internal_import_needs_a_reason_on_its_line_or_in_the_docstring():
    source = (
        '"""A test."""\n'
        "from turnkit.executor.steps import window_start\n"
        "from turnkit.turn.keys import idempotency_key  # internal: the key a turn gives a call\n"
        "from turnkit.graph import TurnContext, build\n"
        "import turnkit.threads.fenced\n"
    )
    assert unexplained_internal_imports(source, "test_x.py") == [
        "test_x.py:2: turnkit.executor.steps.window_start without a reason",
        "test_x.py:4: turnkit.graph.build without a reason",
        "test_x.py:5: turnkit.threads.fenced without a reason",
    ]
