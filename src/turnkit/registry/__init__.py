"""What exists and what may run: tools, schemas, names, the registry and callers.

Nothing in this package imports LangGraph or LangChain; the graph layer builds on it.
"""

from turnkit.registry.caller import Caller, PermissionProvider, StaticPermissions
from turnkit.registry.control import CONTROL_FIELDS
from turnkit.registry.names import model_name, model_names
from turnkit.registry.registry import Module, ModuleWarning, Registry
from turnkit.registry.schema import CompiledSchema, Violation, check_schema, validate
from turnkit.registry.tool import Annotations, Tool

__all__ = [
    "CONTROL_FIELDS",
    "Annotations",
    "Caller",
    "CompiledSchema",
    "Module",
    "ModuleWarning",
    "PermissionProvider",
    "Registry",
    "StaticPermissions",
    "Tool",
    "Violation",
    "check_schema",
    "model_name",
    "model_names",
    "validate",
]
