"""The public surface is a decision: a new public name must be added here on purpose."""

import turnkit

EXPECTED = [
    "CONTROL_FIELDS",
    "Annotations",
    "AsyncStorage",
    "CallContext",
    "Caller",
    "CallerError",
    "CompiledSchema",
    "Confirmation",
    "Decision",
    "Executor",
    "Ledger",
    "Module",
    "ModuleError",
    "ModuleWarning",
    "PermissionProvider",
    "PostgresLedger",
    "Registry",
    "SchemaError",
    "Settings",
    "SqliteLedger",
    "StaticPermissions",
    "Storage",
    "Tool",
    "ToolDeclarationError",
    "TurnkitError",
    "UnknownToolError",
    "Violation",
    "check_schema",
    "model_name",
    "model_names",
    "open_async_storage",
    "open_ledger",
    "open_storage",
    "validate",
]


def test_all_is_pinned():
    assert turnkit.__all__ == EXPECTED


def test_all_is_sorted_and_unique():
    assert turnkit.__all__ == sorted(set(turnkit.__all__), key=lambda n: (not n.isupper(), n))


def test_every_public_name_resolves():
    for name in turnkit.__all__:
        assert getattr(turnkit, name) is not None


def test_registry_package_does_not_import_langgraph_or_langchain():
    import pathlib
    import re

    root = pathlib.Path(turnkit.__file__).parent / "registry"
    pattern = re.compile(r"^\s*(from|import)\s+(langgraph|langchain)", re.MULTILINE)
    offenders = [p.name for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
