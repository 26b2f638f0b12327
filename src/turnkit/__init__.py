"""turnkit: governed tool-calling turns for LLM agents on LangGraph.

The model only sees what the caller may use, every argument is checked, big results fit the
context, and no write happens without a person's yes.
"""

from turnkit.errors import (
    CallerError,
    ModuleError,
    SchemaError,
    ToolDeclarationError,
    TurnkitError,
    UnknownToolError,
)
from turnkit.registry import (
    CONTROL_FIELDS,
    Annotations,
    CallContext,
    Caller,
    CompiledSchema,
    Confirmation,
    Decision,
    Executor,
    Ledger,
    Module,
    ModuleWarning,
    PermissionProvider,
    PostgresLedger,
    Registry,
    Settings,
    SqliteLedger,
    StaticPermissions,
    Tool,
    Violation,
    check_schema,
    model_name,
    model_names,
    open_ledger,
    validate,
)
from turnkit.storage import AsyncStorage, Storage, open_async_storage, open_storage

__all__ = [
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

__version__ = "0.1.0"
