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
    Caller,
    CompiledSchema,
    Module,
    ModuleWarning,
    PermissionProvider,
    Registry,
    StaticPermissions,
    Tool,
    Violation,
    check_schema,
    model_name,
    model_names,
    validate,
)

__all__ = [
    "CONTROL_FIELDS",
    "Annotations",
    "Caller",
    "CallerError",
    "CompiledSchema",
    "Module",
    "ModuleError",
    "ModuleWarning",
    "PermissionProvider",
    "Registry",
    "SchemaError",
    "StaticPermissions",
    "Tool",
    "ToolDeclarationError",
    "TurnkitError",
    "UnknownToolError",
    "Violation",
    "check_schema",
    "model_name",
    "model_names",
    "validate",
]

__version__ = "0.1.0"
