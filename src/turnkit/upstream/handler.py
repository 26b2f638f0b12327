"""The handler of an upstream tool: a ``tools/call`` to the upstream, sent once.

Before the call, the tool's declared input schema (the one the call was checked, and held,
against) is compared with the upstream's current one; when the upstream changed it (or no
longer offers the tool) the call is refused and never sent. The listing is read again first
when the upstream said its list changed, after each new session (the upstream may have
restarted as another version), and always before an **approved** write runs, so a write held
under one schema never runs under another.

The call carries in ``_meta`` turnkit's call id (``io.turnkit/call-id``) and, when the call has
one, an idempotency key (``io.turnkit/idempotency-key``) for upstreams that honour it: for an
approved write, derived from its confirmation (an approval runs once); else from the caller's
idempotency key, the caller and the tool (so two callers' keys never meet upstream).

Every failure is a ``ToolError`` whose message says what is known and what to do (its
``details``: ``upstream``, ``tool``, ``reason``, ``outcome``): an upstream that cannot be reached
ran nothing; a timeout or a connection lost during a **write** leaves its outcome unknown, and
it is never sent again by turnkit.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from turnkit.errors import ToolError
from turnkit.registry.context import CallContext
from turnkit.upstream.connection import Connection, NoAnswer
from turnkit.upstream.declarations import input_schema_of
from turnkit.upstream.listing import Listing
from turnkit.upstream.results import result_of

__all__ = ["IDEMPOTENCY_META", "UpstreamCall", "handler_for"]

IDEMPOTENCY_META = "io.turnkit/idempotency-key"
"""The ``_meta`` key of the idempotency key sent with a ``tools/call``."""
CALL_ID_META = "io.turnkit/call-id"
"""The ``_meta`` key of turnkit's call id (also in the call's audit row)."""
MARGIN = 0.9
"""An upstream timeout at or above the executor's ``handler_timeout`` is cut to this share of
it, so the upstream's own answer (saying whether a write may have run) comes first."""

log = logging.getLogger("turnkit.upstream")


class UpstreamCall:
    """One upstream tool, called for turnkit: what its handler runs.

    ``name`` (``"<key>:<upstream tool>"``) makes the handler's identity, and so the
    fingerprint a held write is decided by, differ per upstream and tool.
    """

    def __init__(
        self,
        key: str,
        where: str,
        tool: str,
        timeout: float,
        connection: Connection,
        listing: Listing,
    ) -> None:
        self.name = f"{key}:{tool}"
        self.key = key
        self.where = where
        self.tool = tool
        self.timeout = timeout
        self._connection = connection
        self._listing = listing

    def __repr__(self) -> str:
        return f"UpstreamCall({self.key!r}, {self.tool!r})"

    async def __call__(self, input: dict[str, Any], ctx: CallContext) -> Any:
        """Call the upstream tool with the checked ``input``; its answer (see ``results``)."""
        limit = self.timeout
        if limit >= ctx.settings.handler_timeout:
            limit = ctx.settings.handler_timeout * MARGIN
        try:
            return await self._connection.arun(lambda: self._on_loop(input, ctx, limit))
        except NoAnswer as closed:  # close() ended the call
            raise self._no_answer(closed, ctx.tool.is_write, limit, sent=True) from None

    async def _on_loop(self, input: dict[str, Any], ctx: CallContext, limit: float) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        write = ctx.tool.is_write
        try:
            await self._connection.connect(limit)  # a new session marks the listing stale
            if self._listing.stale or self._listing.tools is None or ctx.confirmation_id:
                await self._listing.relist()  # bounded by the upstream's own timeout
        except NoAnswer as failure:
            raise self._no_answer(failure, write, limit, sent=False) from None
        self._check_declaration(ctx)
        remaining = max(deadline - loop.time(), 0.001)
        try:
            result = await self._connection.call_tool(self.tool, input, _meta(ctx), remaining)
        except NoAnswer as failure:
            raise self._no_answer(failure, write, limit, sent=True) from None
        except MCPError as refused:
            raise self._refused(refused, write) from None
        except Exception as unreadable:  # the answer came, but not as a tools/call result
            raise self._unreadable(unreadable, write) from None
        return result_of(self.key, self.tool, result)

    def _check_declaration(self, ctx: CallContext) -> None:
        tools = self._listing.tools or {}
        current = tools.get(self.tool)
        if current is not None and input_schema_of(current) == ctx.tool.input_schema:
            return
        what = (
            f"no longer offers {self.tool!r}"
            if current is None
            else f"changed {self.tool!r} since it was declared here (its input schema differs)"
        )
        raise ToolError(
            f"upstream {self.key!r} {what}: it was not called. Its tools must be listed again"
            " and declared anew (McpUpstream.refresh() and a new Registry, or a restart of"
            " the server that fronts it); then make the call again",
            **self._details("changed", "not_run"),
        )

    def _no_answer(self, failure: NoAnswer, write: bool, limit: float, *, sent: bool) -> ToolError:
        tool, key = self.tool, self.key
        if failure.kind == "unreachable" or not sent:
            message = (
                f"upstream {key!r} ({self.where}) cannot be reached ({failure.reason}):"
                f" {tool!r} did not run. Check that the server is running and reachable at its"
                " address (or that its command starts), then call again"
            )
            outcome = "not_run"
        elif not write:
            said = (
                f"did not answer {tool!r} within {limit:g} s"
                if failure.kind == "timeout"
                else f"closed the connection during {tool!r} ({failure.reason})"
            )
            message = f"upstream {key!r} {said}. Nothing changed (it is a read): call again later"
            outcome = "not_run"
        else:
            said = (
                f"did not answer {tool!r} within {limit:g} s"
                if failure.kind == "timeout"
                else f"closed the connection during {tool!r} ({failure.reason})"
            )
            message = (
                f"upstream {key!r} {said}: the outcome is unknown, the write may have run. It"
                " was not retried: check its effect (with a read) before calling it again"
            )
            outcome = "unknown"
        log.warning("upstream %r, tool %r: %s", key, tool, message)
        return ToolError(message, **self._details(failure.kind, outcome))

    def _refused(self, refused: MCPError, write: bool) -> ToolError:
        message = f"upstream {self.key!r} refused {self.tool!r}: {refused.message}"
        message += f" (error {refused.code})"
        outcome = "not_run"
        if write and refused.code == INTERNAL_ERROR:
            message += "; it failed while running: check its effect before calling it again"
            outcome = "unknown"
        return ToolError(message[:2000], **self._details("refused", outcome))

    def _unreadable(self, error: Exception, write: bool) -> ToolError:
        log.warning("upstream %r, tool %r: unreadable answer", self.key, self.tool, exc_info=error)
        message = (
            f"upstream {self.key!r} answered {self.tool!r} with something this client cannot"
            f" read ({type(error).__name__}: {str(error)[:300]})"
        )
        if write:
            message += "; the write may have run: check its effect before calling it again"
        return ToolError(message, **self._details("unreadable", "unknown" if write else "not_run"))

    def _details(self, reason: str, outcome: str) -> dict[str, str]:
        return {"upstream": self.key, "tool": self.tool, "reason": reason, "outcome": outcome}


def handler_for(call: UpstreamCall) -> Callable[[dict[str, Any], CallContext], Awaitable[Any]]:
    """The handler of ``call``'s tool. A function closing over ``call``: where a handler lives
    (``registry/declaration.py``) names it with ``call.name``, so two upstreams' ``write_file``
    are two handlers."""

    async def upstream_tool(input: dict[str, Any], ctx: CallContext) -> Any:
        return await call(input, ctx)

    return upstream_tool


def _meta(ctx: CallContext) -> dict[str, Any]:
    meta: dict[str, Any] = {CALL_ID_META: ctx.call_id}
    if ctx.confirmation_id is not None:
        seed = f"confirmation\0{ctx.confirmation_id}"
    elif ctx.idempotency_key is not None:
        seed = f"key\0{ctx.caller.identity}\0{ctx.tool.name}\0{ctx.idempotency_key}"
    else:
        return meta
    meta[IDEMPOTENCY_META] = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return meta
