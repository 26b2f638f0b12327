"""turnkit: governed tool-calling turns for LLM agents on LangGraph.

The model only sees what the caller may use, every argument is checked, big results fit the
context, and no write happens without a person's yes.

The registry and executor are imported at once; the LangGraph/LangChain layer (the turn graph,
``Agent``, ``chat``, storage) and ``McpUpstream`` (the ``mcp`` SDK) are imported on first use,
so ``import turnkit`` stays quick.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from turnkit.errors import (
    AgentBusy,
    AgentTimeout,
    CallerError,
    ConfigError,
    LeaseLost,
    MissingCallerError,
    ModelError,
    ModuleError,
    ProviderError,
    ResumeError,
    SchemaError,
    StorageError,
    ThreadBusy,
    ToolDeclarationError,
    ToolError,
    TurnkitError,
    UnknownToolError,
)
from turnkit.executor import Decision, Executor
from turnkit.ledger import Confirmation, Ledger, MemoryLedger, SqliteLedger, open_ledger
from turnkit.ledger.postgres import PostgresLedger
from turnkit.registry import (
    CONTROL_FIELDS,
    Annotations,
    CallContext,
    Caller,
    CompiledSchema,
    Module,
    ModuleWarning,
    PermissionProvider,
    Quorum,
    Registry,
    Settings,
    StaticPermissions,
    Tool,
    Violation,
    check_schema,
    model_name,
    model_names,
    validate,
)
from turnkit.storage import AsyncStorage, Storage, open_async_storage, open_storage

if TYPE_CHECKING:
    from turnkit.agent import Agent, AgentPool, chat
    from turnkit.agent.langchain_tools import as_langchain_tool, as_langchain_tools
    from turnkit.agent.local_tools import tool
    from turnkit.agent.response import PendingConfirmation, Response, ToolCallRecord
    from turnkit.agent.structured import StructuredOutputError
    from turnkit.graph import TurnContext, TurnState, build_turn_graph
    from turnkit.middleware import TurnkitMiddleware
    from turnkit.upstream import McpUpstream

_LAZY = {
    "Agent": "turnkit.agent",
    "AgentPool": "turnkit.agent",
    "chat": "turnkit.agent",
    "TurnContext": "turnkit.graph",
    "TurnState": "turnkit.graph",
    "build_turn_graph": "turnkit.graph",
    "TurnkitMiddleware": "turnkit.middleware",
    "as_langchain_tool": "turnkit.agent.langchain_tools",
    "as_langchain_tools": "turnkit.agent.langchain_tools",
    "tool": "turnkit.agent.local_tools",
    "PendingConfirmation": "turnkit.agent.response",
    "Response": "turnkit.agent.response",
    "ToolCallRecord": "turnkit.agent.response",
    "StructuredOutputError": "turnkit.agent.structured",
    "McpUpstream": "turnkit.upstream",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'turnkit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
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

__version__ = "0.1.0"
