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
    "McpUpstream",
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
    "Quorum",
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


def test_the_pure_packages_do_not_import_langgraph_or_langchain():
    import pathlib
    import re

    package = pathlib.Path(turnkit.__file__).parent
    pattern = re.compile(r"^\s*(from|import)\s+(langgraph|langchain)", re.MULTILINE)
    offenders = [
        str(path.relative_to(package))
        for pure in ("registry", "ledger", "executor")  # lint-imports checks the rest in CI
        for path in (package / pure).rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert offenders == []


def test_the_executor_package_names_the_typed_answers_its_methods_return():
    """``Executor.call`` and ``decide`` answer typed values; ``turnkit.executor`` is where they are
    imported from (a decision too, pinned here)."""
    import turnkit.executor  # internal: the package whose names this pins

    assert turnkit.executor.__all__ == [
        "Answer",
        "Decision",
        "DryRun",
        "Executor",
        "Held",
        "Ran",
        "Refused",
        "Rejected",
        "answer_from_json",
    ]
    assert turnkit.executor.Executor is turnkit.Executor
    assert turnkit.executor.Decision is turnkit.Decision
