"""The catalogue: what exists and who may use it — tools, the schema subset, names, the registry,
callers and their permissions, visibility, and the settings.

Pure: nothing here imports LangGraph or LangChain, or any other turnkit package but ``errors``
(the import-linter contracts in ``pyproject.toml`` hold it to that).
"""

from turnkit.registry.caller import Caller, PermissionProvider, StaticPermissions
from turnkit.registry.context import CallContext
from turnkit.registry.control import CONTROL_FIELDS
from turnkit.registry.names import model_name, model_names
from turnkit.registry.registry import Module, ModuleWarning, Registry
from turnkit.registry.schema import CompiledSchema, Violation, check_schema, validate
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Annotations, Quorum, Tool

__all__ = [
    "CONTROL_FIELDS",
    "Annotations",
    "CallContext",
    "Caller",
    "CompiledSchema",
    "Module",
    "ModuleWarning",
    "PermissionProvider",
    "Quorum",
    "Registry",
    "Settings",
    "StaticPermissions",
    "Tool",
    "Violation",
    "check_schema",
    "model_name",
    "model_names",
    "validate",
]
