"""The registry as MCP shows it: tools as ``tools/list`` entries, answers as ``tools/call`` results.

No transport and no authentication here (``turnkit.server.mcp`` brings both): every function takes
the request's API key and asks the executor, so an MCP client sees exactly what the same key sees
over REST, with rights checked now.

- A tool is listed under its model name (``shop.list_products`` -> ``shop_list_products``), valid
  for MCP and for model APIs alike; its annotations become the four MCP hints, each set.
- Every executor error is a result with ``isError`` and the executor's message, never a protocol
  error: a model reads it and can act on it.
- A held write answers with its confirmation id, its expiry and where a person decides it; the
  caller learns the outcome with ``system_get_confirmation``, which this module adds for keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp import types

from turnkit.executor.answers import Answer, DryRun, Held, Ran, Refused
from turnkit.executor.calls import Resolved
from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKey
from turnkit.ledger.records import Confirmation, iso
from turnkit.registry.caller import Caller
from turnkit.registry.json_text import compact
from turnkit.registry.names import model_name, model_names
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Annotations, Tool

__all__ = ["CONTROL_META", "GET_CONFIRMATION", "McpTools", "control_of"]

GET_CONFIRMATION = "system_get_confirmation"
"""The MCP name of the tool that tells a key what became of a write it made that was held."""

NO_KEY = (
    "this MCP server needs an API key: send the header 'Authorization: Bearer tk_...'"
    " (create a key with 'turnkit keys create')"
)
HELD = (
    "Not done yet: this call waits for a person's confirmation {id} (until {expires_at})."
    " A person decides it outside this conversation: {inbox}with 'turnkit confirmations"
    " approve {id} --module package.module:object' (the module that declares the tool), or"
    " 'POST {base}/v1/confirmations/{id}/approve'"
    " (or /reject) on this server with a key allowed to decide."
    ' Call {tool} with {{"confirmation_id": "{id}"}} to learn the outcome.'
)
UNKNOWN_CONFIRMATION = (
    "no confirmation {id!r} made with this key: pass the confirmation_id a held call answered"
)

_HELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["status", "confirmation_id", "expires_at"],
    "properties": {
        "executed": {"const": False},
        "status": {"const": "confirmation_required"},
        "confirmation_id": {"type": "string"},
        "expires_at": {"type": "string", "format": "date-time"},
        "decide": {"type": "object"},
    },
}
_CONFIRMATION_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["confirmation_id"],
    "additionalProperties": False,
    "properties": {
        "confirmation_id": {"type": "string", "description": "The id a held call answered with."}
    },
}
_CONFIRMATION_OUTPUT: dict[str, Any] = {
    "type": "object",
    "required": ["confirmation_id", "tool", "status", "expires_at", "outcome"],
    "properties": {
        "confirmation_id": {"type": "string"},
        "tool": {"type": "string", "description": "The MCP name of the held tool."},
        "status": {"enum": ["pending", "running", "done", "rejected", "expired", "forbidden"]},
        "expires_at": {"type": "string", "format": "date-time"},
        "decided_at": {"type": ["string", "null"], "format": "date-time"},
        "outcome": {
            "type": ["object", "null"],
            "description": "The held call's answer once decided: what it returned, or why not.",
        },
    },
}
_GET_CONFIRMATION_TOOL = types.Tool(
    name=GET_CONFIRMATION,
    title="Get a confirmation",
    description=(
        "The status of a write that waited for a person's confirmation, and its outcome once a"
        " person decided it (pending, running, done, rejected or expired). Pass the"
        " confirmation_id a held call answered with."
    ),
    input_schema=_CONFIRMATION_INPUT,
    output_schema=_CONFIRMATION_OUTPUT,
    annotations=types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)


class McpTools:
    """What one executor's registry looks like to MCP clients holding API keys."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        by_model = model_names(executor.registry.tools, name_of=lambda tool: tool.name)
        by_model.pop(GET_CONFIRMATION, None)  # ours: the registry cannot name a tool system.*
        self._by_model = by_model
        self._name_of = {tool.name: name for name, tool in by_model.items()}
        """Each tool's MCP name, settled over the whole registry: the name a key is listed is
        the name its call resolves, whatever other tools the key sees."""

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of the tool MCP calls ``name`` (no I/O), or None for no such tool."""
        if name == GET_CONFIRMATION:
            return _CONFIRMATION_INPUT
        tool = self._by_model.get(name)
        return None if tool is None else Executor.input_schema(tool)

    async def list_tools(
        self, key: ApiKey | None, settings: Settings | None = None
    ) -> types.ListToolsResult:
        """The tools ``key`` may use now, in the registry's order (none without a key);
        ``settings``: those in force, when they were read with the key."""
        if key is None:
            return types.ListToolsResult(tools=[])
        if settings is None:
            settings = await self.executor.asettings_now()  # the hold rule reads them too
        visible = await self.executor.avisible_for(key.caller, key.allowed, settings=settings)
        shown = [
            _listed(
                self._name_of[tool.name], tool, self.executor.hold_rule(key.caller, tool, settings)
            )
            for tool in visible
            if tool.name in self._name_of
        ]
        return types.ListToolsResult(tools=[_GET_CONFIRMATION_TOOL, *shown])

    async def call_tool(
        self,
        key: ApiKey | None,
        name: str,
        arguments: dict[str, Any] | None,
        control: dict[str, Any] | None = None,
        base: str = "",
        inbox: bool = True,
        *,
        settings: Settings | None = None,
    ) -> types.CallToolResult:
        """Run ``name`` for ``key`` through the executor; its answer as an MCP result.
        ``control``: the call's control fields (``control_of`` the request's ``_meta``);
        ``base``: where the REST API and the inbox are (a host app's mount prefix, or "");
        ``inbox``: whether the app serves the web inbox; ``settings``: those in force, when
        they were read with the key (else the call reads them)."""
        if key is None:
            return _error_result(Refused("forbidden", NO_KEY))
        if name == GET_CONFIRMATION:
            return await self._get_confirmation(key, arguments or {})
        tool = self._by_model.get(name)
        answer = await self.executor.acall(
            key.caller,
            name if tool is None else tool.name,  # an unknown name: the executor answers (audited)
            {} if arguments is None else arguments,
            control,
            allow=key.allowed,
            settings=settings,
            wait=False,  # a repeat of a running call: in_progress at once, the client retries
        )
        return _result(answer, structured=_structured(tool, key.caller), base=base, inbox=inbox)

    async def call_tool_as(
        self,
        find: Callable[[], Resolved | str],
        name: str,
        arguments: dict[str, Any] | None,
        control: dict[str, Any] | None = None,
        base: str = "",
        inbox: bool = True,
    ) -> types.CallToolResult:
        """``call_tool`` for a key not looked up yet: ``find()`` looks it up in the worker
        thread that runs the call (``Executor.acall_as``: one thread hop for both). A refused
        key (``find`` says why) is an error result, and nothing was called or audited."""
        found: list[Resolved] = []

        def resolve() -> Resolved | str:
            result = find()
            if isinstance(result, Resolved):
                found.append(result)
            return result

        tool = self._by_model.get(name)
        answer = await self.executor.acall_as(
            resolve,
            name if tool is None else tool.name,
            {} if arguments is None else arguments,
            control,
            wait=False,
        )
        if isinstance(answer, str):
            return _error_result(Refused("forbidden", answer))
        structured = _structured(tool, found[0].caller)
        return _result(answer, structured=structured, base=base, inbox=inbox)

    async def _get_confirmation(
        self, key: ApiKey, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        confirmation_id = arguments.get("confirmation_id")
        if not isinstance(confirmation_id, str) or set(arguments) != {"confirmation_id"}:
            return _error_result(
                Refused(
                    "invalid_input",
                    "give exactly one argument, 'confirmation_id': the id (a string) a held call"
                    " answered with",
                )
            )
        found = await self.executor.aconfirmation(confirmation_id)
        if found is None or await self.executor.arefusal_to_decide(key.caller, found, key.allowed):
            message = UNKNOWN_CONFIRMATION.format(id=confirmation_id[:100])
            return _error_result(Refused("not_found", message))
        status = _confirmation_status(found)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=compact(status))],
            structured_content=status,
        )


CONTROL_META = {"io.turnkit/idempotency_key": "idempotency_key", "io.turnkit/dry_run": "dry_run"}
"""The ``_meta`` fields of a ``tools/call`` that carry control fields: a client that retries a
call with the same idempotency key gets the first answer again, never a second write."""


def control_of(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The control fields a ``tools/call``'s ``_meta`` carries (the executor checks them)."""
    found = {field: meta[key] for key, field in CONTROL_META.items() if meta and key in meta}
    return found or None


def _listed(name: str, tool: Tool, hold: str) -> types.Tool:
    annotations: Annotations = tool.annotations  # type: ignore[assignment]  # normalised when built
    return types.Tool(
        name=name,
        title=tool.title,
        description=tool.description or tool.title,
        input_schema=Executor.input_schema(tool),
        output_schema=_schema_for(tool, hold),
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=annotations.read_only,
            destructive_hint=annotations.destructive,
            idempotent_hint=annotations.idempotent,
            open_world_hint=annotations.open_world,
        ),
        _meta={"turnkit/name": tool.name, "turnkit/hold": hold},
    )


def _structured(tool: Tool | None, caller: Caller) -> bool:
    """Whether ``caller``'s answer of ``tool`` carries structured content (it is listed with an
    output schema)."""
    return tool is not None and _schema_for(tool, Executor.hold_rule(caller, tool)) is not None


def _schema_for(tool: Tool, hold: str) -> dict[str, Any] | None:
    """The declared output schema; where a call may be held, that or a held answer."""
    if tool.output_schema is None:
        return None
    declared: Mapping[str, Any] = tool.output_schema  # type: ignore[assignment]  # a dict once built
    if hold == "never":
        return dict(declared)
    either: dict[str, Any] = {"anyOf": [dict(declared), _HELD_SCHEMA]}
    if declared.get("type") == "object":
        either["type"] = "object"  # what clients of protocol 2025-11-25 require at the root
    return either


def _result(
    answer: Answer, *, structured: bool, base: str = "", inbox: bool = True
) -> types.CallToolResult:
    match answer:
        case Ran(result=result):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=compact(result))],
                structured_content=result if structured else None,
            )
        case Held(confirmation_id=confirmation_id, expires_at=expires_at):
            held = {**answer.to_json(), "decide": _decide(confirmation_id, base, inbox)}
            text = HELD.format(
                id=confirmation_id,
                expires_at=expires_at,
                tool=GET_CONFIRMATION,
                base=base,
                inbox=f"in the web inbox at {base}/ui/, " if inbox else "",
            )
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=held if structured else None,
            )
        case Refused():
            return _error_result(answer)
        case DryRun():  # what the call would do; nothing was done
            text = compact(answer.to_json())
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    return types.CallToolResult(  # a rejection or a replay of one: the answer as it stands
        content=[types.TextContent(type="text", text=compact(answer.to_json()))], is_error=True
    )


def _error_result(refused: Refused) -> types.CallToolResult:
    """The executor's message for a model to read; the whole error as structured content."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=refused.message)],
        structured_content={"error": refused.error_json()},
        is_error=True,
    )


def _decide(confirmation_id: str, base: str, inbox: bool) -> dict[str, str]:
    page = {"inbox": f"{base}/ui/"} if inbox else {}
    return page | {
        "approve": f"POST {base}/v1/confirmations/{confirmation_id}/approve",
        "reject": f"POST {base}/v1/confirmations/{confirmation_id}/reject",
        "cli": f"turnkit confirmations approve {confirmation_id} --module package.module:object",
        "outcome": GET_CONFIRMATION,
    }


def _confirmation_status(confirmation: Confirmation) -> dict[str, Any]:
    return {
        "confirmation_id": confirmation.id,
        "tool": model_name(confirmation.tool) or confirmation.tool,
        "status": confirmation.status,
        "expires_at": confirmation.expires_at_iso,
        "decided_at": None if confirmation.decided_at is None else iso(confirmation.decided_at),
        "outcome": confirmation.outcome,
    }
