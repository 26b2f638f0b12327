"""``Tool``: one operation a module offers, checked against every rule when built (§1 of
docs/architecture.md)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias

from pydantic import BaseModel

from turnkit.errors import ToolDeclarationError
from turnkit.registry import tool_checks as checks
from turnkit.registry.schema import CompiledSchema, compile_schema

__all__ = ["Annotations", "Audience", "Built", "Quorum", "Tool"]

_REQUIRED = ("name", "handler")

Audience: TypeAlias = Literal["admin", "public"]
"""Who may call a tool: ``"admin"`` (a key with scopes, or a signed-in session) or ``"public"``."""

Handler: TypeAlias = Callable[[dict[str, Any], Any], Any | Awaitable[Any]]
"""``(input, ctx) -> JSON-able result``, sync or async."""


@dataclass(frozen=True, slots=True)
class Quorum:
    """What a danger check returns to hold a call for more than one person: ``approvals``
    distinct approvers, and with ``separate_duties`` never the person whose call it is.
    Truthy, like the True it stands for; it raises what the tool declares, never lowers it.

    Examples:
        >>> big = lambda input, ctx: Quorum(2, separate_duties=True) if input["n"] > 9 else False
        >>> bool(big({"n": 10}, None)), big({"n": 10}, None).approvals
        (True, 2)
    """

    approvals: int = 2
    """Distinct people who must approve."""
    separate_duties: bool = False
    """The person whose call is held may not approve it."""

    def __post_init__(self) -> None:
        problems = checks.approval_problems(self.approvals, self.separate_duties, None)
        if problems:
            raise ValueError("; ".join(problems))

    def __bool__(self) -> bool:
        return True


DangerCheck: TypeAlias = Callable[[dict[str, Any], Any], "bool | Quorum"]
"""``(input, dry-run ctx) -> bool | Quorum``: truthy when this call needs a person's
confirmation (a ``Quorum``: more than one person's)."""

PreviewFunction: TypeAlias = Callable[[dict[str, Any], Any], Any]
"""``(input, dry-run ctx) -> JSON``: what the write would change, computed without writing."""

CostFunction: TypeAlias = Callable[[dict[str, Any]], int]
"""``(raw input) -> units``; a failure or a non-positive answer falls back to the default rule."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Annotations:
    """Hints for clients about what a tool does. A tool is a write unless ``read_only``."""

    read_only: bool = False
    """The tool changes nothing."""
    destructive: bool = False
    """The tool may delete or overwrite data."""
    idempotent: bool = False
    """Calling it twice with the same input has the effect of calling it once."""
    open_world: bool = False
    """The tool reaches outside the application (the web, a third party)."""


class Built(NamedTuple):
    """What ``Tool.build`` returns: the tool, or None and every problem found."""

    tool: Tool | None
    problems: list[str]


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class Tool:
    """One operation a module offers, immutable once built.

    Building a ``Tool`` fills in the defaults and checks every rule; all problems are reported at
    once in one ``ToolDeclarationError``. ``Tool.build`` is the non-raising twin.

    Examples:
        >>> tool = Tool(
        ...     name="catalogue.list_products",
        ...     scope="catalogue.products:read",
        ...     permission="catalogue.view",
        ...     handler=lambda input, ctx: [],
        ...     annotations={"read_only": True},
        ... )
        >>> tool.title, tool.is_write
        ('catalogue.list_products', False)
    """

    name: str
    """``<namespace>.<verb>_<noun>``, lowercase, at most 100 characters; stable."""
    handler: Handler | str
    """``(input, ctx) -> result`` or ``"package.module:function"`` (imported when built)."""
    audience: Audience = "admin"
    """``"admin"`` needs a key or a session; ``"public"`` needs nothing."""
    scope: str | None = None
    """``<module>.<resource>:<action>`` a key must carry; None for public and ``system.*`` tools."""
    permission: str | None = None
    """The role permission the caller must hold when the call runs; None under the scope rule."""
    title: str | None = None
    """For a person and an agent; defaults to the name."""
    description: str = ""
    """What the tool does, written for a model to choose it well."""
    input_schema: Mapping[str, Any] | type[BaseModel] | None = None
    """JSON Schema of the input (subset, root ``type: object``) or a pydantic model class."""
    output_schema: Mapping[str, Any] | type[BaseModel] | None = None
    """JSON Schema of a success result, or None; a result that breaks it is an internal error."""
    module: str | None = None
    """Key of the module that declared the tool; filled in by the registry."""
    annotations: Annotations | Mapping[str, bool] | None = None
    """``read_only``, ``destructive``, ``idempotent``, ``open_world``; all False unless given."""
    danger: Literal["always"] | DangerCheck | None = None
    """When a call needs confirmation: None (only large batches), ``"always"``, or a check."""
    max_items: int | None = None
    """The longest list argument accepted, or None for no limit."""
    cost: int | CostFunction | None = None
    """Rate-limit units of one call: None (default rule), 1..1000, or a function of the input."""
    preview: PreviewFunction | None = None
    """``(input, dry-run ctx) -> JSON``: what a held call would change (each price before and
    after, the row that would go), computed without writing when the call is held and shown to
    approvers, never to the model. Sync or async; bounded in time (``preview_timeout``) and
    size (``agent_tool_result_chars``); one that fails leaves the call held without it."""
    approvals: int = 1
    """Distinct people who must approve a held call before it runs (four eyes: 2)."""
    separate_duties: bool = False
    """The person whose call is held may not approve it."""

    input_model: type[BaseModel] | None = field(default=None, init=False, compare=False)
    """The pydantic model the input schema came from, if any."""
    input_validator: CompiledSchema = field(init=False, repr=False, compare=False)
    """The compiled ``input_schema``."""
    output_validator: CompiledSchema | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The compiled ``output_schema``, or None."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        problems = checks.name_problems(self.name)
        problems += checks.rights_problems(self.name, self.audience, self.scope, self.permission)
        problems += checks.text_problems("title", self.title)
        problems += checks.text_problems("description", self.description)
        problems += checks.text_problems("module", self.module)

        if isinstance(self.input_schema, type) and issubclass(self.input_schema, BaseModel):
            set_(self, "input_model", self.input_schema)
        given = checks.DEFAULT_INPUT_SCHEMA if self.input_schema is None else self.input_schema
        input_schema, schema_problems = checks.resolve_schema("input_schema", given)
        problems += schema_problems
        if input_schema is not None:
            problems += checks.input_root_problems(input_schema)
        output_schema, schema_problems = (None, [])
        if self.output_schema is not None:
            output_schema, schema_problems = checks.resolve_schema(
                "output_schema", self.output_schema
            )
        problems += schema_problems

        handler, handler_problems = checks.resolve_handler(self.handler)
        problems += handler_problems
        if not isinstance(self.annotations, Annotations):
            problems += checks.annotation_problems(self.annotations)
        problems += checks.danger_problems(self.danger)
        problems += checks.max_items_problems(self.max_items)
        problems += checks.cost_problems(self.cost)
        problems += checks.approval_problems(self.approvals, self.separate_duties, self.preview)
        if problems:
            raise ToolDeclarationError(self.name, problems)

        set_(self, "title", self.title or self.name)
        set_(self, "description", self.description or "")
        set_(self, "handler", handler)
        if not isinstance(self.annotations, Annotations):
            set_(self, "annotations", Annotations(**(self.annotations or {})))
        input_schema = copy.deepcopy(input_schema)
        set_(self, "input_schema", input_schema)
        set_(self, "input_validator", compile_schema(input_schema))  # type: ignore[arg-type]  # checked
        if output_schema is not None:
            output_schema = copy.deepcopy(output_schema)
            set_(self, "output_schema", output_schema)
            set_(self, "output_validator", compile_schema(output_schema))

    @classmethod
    def build(cls, attrs: Mapping[str, Any] | None = None, /, **fields: Any) -> Built:
        """Build a tool without raising: ``Built(tool, [])`` or ``Built(None, problems)``.

        Accepts the fields as a mapping (a declaration read from data) or as keywords; an unknown
        field is reported as a problem too.
        """
        given = {**(attrs or {}), **fields}
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = [
            f"{key}: unknown field; known fields: {', '.join(sorted(known))}"
            for key in given
            if key not in known
        ]
        try:
            tool = cls(**{k: v for k, v in given.items() if k in known and k not in _REQUIRED},
                       name=given.get("name"), handler=given.get("handler"))  # type: ignore[arg-type]  # checked by the Tool's own rules  # fmt: skip
        except ToolDeclarationError as exc:
            return Built(None, unknown + list(exc.problems))
        if unknown:
            return Built(None, unknown)
        return Built(tool, [])

    @classmethod
    def problems(cls, attrs: Mapping[str, Any] | None = None, /, **fields: Any) -> list[str]:
        """Every problem of a declaration (empty when it builds); never raises."""
        return cls.build(attrs, **fields).problems

    @property
    def is_system(self) -> bool:
        """True for turnkit's own ``system.*`` tools (a module's tool of that name is ignored)."""
        return self.name.startswith("system.")

    @property
    def is_write(self) -> bool:
        """True unless the tool is annotated ``read_only``."""
        return not self.annotations.read_only  # type: ignore[union-attr]  # normalised when built

    @property
    def never_held(self) -> bool:
        """True when no caller, input or setting can hold a call of this tool for a person: a
        read (``read_only``) without a ``danger``. Such a call has nothing to do twice, so the
        turn graph runs it without an idempotency key."""
        return not self.is_write and self.danger is None

    def with_module(self, module: str) -> Tool:
        """A copy of this tool marked as declared by ``module``."""
        tool = dataclasses.replace(self, module=module)
        object.__setattr__(tool, "input_model", self.input_model)
        return tool
