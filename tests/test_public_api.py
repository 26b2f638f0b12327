"""The public surface is a decision: a new public name must be added here on purpose."""

import turnkit

EXPECTED = [
    "CONTROL_FIELDS",
    "Agent",
    "AgentBusy",
    "AgentPool",
    "AgentTimeout",
    "Annotations",
    "AsyncStorage",
    "CallContext",
    "Caller",
    "CallerError",
    "CompiledSchema",
    "ConfigError",
    "Confirmation",
    "Decision",
    "Executor",
    "LeaseLost",
    "Ledger",
    "MemoryLedger",
    "MissingCallerError",
    "ModelError",
    "Module",
    "ModuleError",
    "ModuleWarning",
    "PendingConfirmation",
    "PermissionProvider",
    "PostgresLedger",
    "ProviderError",
    "Registry",
    "Response",
    "ResumeError",
    "SchemaError",
    "Settings",
    "SqliteLedger",
    "StaticPermissions",
    "Storage",
    "StorageError",
    "StructuredOutputError",
    "ThreadBusy",
    "Tool",
    "ToolCallRecord",
    "ToolDeclarationError",
    "ToolError",
    "TurnContext",
    "TurnState",
    "TurnkitError",
    "TurnkitMiddleware",
    "UnknownToolError",
    "Violation",
    "as_langchain_tool",
    "as_langchain_tools",
    "build_turn_graph",
    "chat",
    "check_schema",
    "model_name",
    "model_names",
    "open_async_storage",
    "open_ledger",
    "open_storage",
    "tool",
    "validate",
]


def test_all_is_pinned():
    assert turnkit.__all__ == EXPECTED


def test_all_is_sorted_and_unique():
    assert turnkit.__all__ == sorted(set(turnkit.__all__), key=lambda n: (not n.isupper(), n))


def test_every_public_name_resolves():
    for name in turnkit.__all__:
        assert getattr(turnkit, name) is not None


def test_import_turnkit_does_not_load_langchain_openai():
    import subprocess
    import sys

    code = (
        "import sys, turnkit;"
        " print('langchain_openai' in sys.modules, 'turnkit.agent' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_registry_package_does_not_import_langgraph_or_langchain():
    import pathlib
    import re

    root = pathlib.Path(turnkit.__file__).parent / "registry"
    pattern = re.compile(r"^\s*(from|import)\s+(langgraph|langchain)", re.MULTILINE)
    offenders = [p.name for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
