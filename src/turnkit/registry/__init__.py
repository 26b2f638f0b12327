"""What exists and what may run: tools, schemas, names, the registry and callers.

Nothing in this package imports LangGraph or LangChain; the graph layer builds on it.
"""

from turnkit.registry.caller import Caller, PermissionProvider, StaticPermissions
from turnkit.registry.confirmations import Decision
from turnkit.registry.context import CONTROL_FIELDS, CallContext
from turnkit.registry.executor import Executor
from turnkit.registry.ledger import (
    Confirmation,
    Ledger,
    MemoryLedger,
    SqliteLedger,
    open_ledger,
)
from turnkit.registry.ledger.postgres import PostgresLedger
from turnkit.registry.names import model_name, model_names
from turnkit.registry.registry import Module, ModuleWarning, Registry
from turnkit.registry.schema import CompiledSchema, Violation, check_schema, validate
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Annotations, Tool

__all__ = [
    "CONTROL_FIELDS",
    "Annotations",
    "CallContext",
    "Caller",
    "CompiledSchema",
    "Confirmation",
    "Decision",
    "Executor",
    "Ledger",
    "MemoryLedger",
    "Module",
    "ModuleWarning",
    "PermissionProvider",
    "PostgresLedger",
    "Registry",
    "Settings",
    "SqliteLedger",
    "StaticPermissions",
    "Tool",
    "Violation",
    "check_schema",
    "model_name",
    "model_names",
    "open_ledger",
    "validate",
]
