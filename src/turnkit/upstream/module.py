"""``McpUpstream``: an MCP server you do not own, as a turnkit module."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from turnkit.registry.tool import Tool
from turnkit.upstream.config import (
    Target,
    ToolSettings,
    check_key,
    check_timeout,
    check_tools,
    parse_spec,
    settings_for,
)
from turnkit.upstream.connection import Connection, NoAnswer
from turnkit.upstream.declarations import declaration, tool_name
from turnkit.upstream.handler import UpstreamCall, handler_for
from turnkit.upstream.listing import Listing, ToolChanges

__all__ = ["McpUpstream"]

DEFAULT_TIMEOUT = 30.0
"""Seconds an upstream has to answer a call (connecting included), unless told otherwise."""


class McpUpstream:
    """An upstream MCP server as a turnkit module: one declaration per tool it lists, each
    called upstream with ``tools/call`` through one session per process.

    Over Streamable HTTP (``url``, with ``headers`` and a bearer token read from the
    environment variable ``token_env`` at each connection) or stdio (``command``, a program and
    its arguments, run as a child with ``env`` over the SDK's minimal environment, in ``cwd``).
    What the defaults are (names, annotations, scopes, permissions) and how ``tools=`` changes
    them: ``turnkit/upstream/declarations.py``. How answers and failures come back:
    ``results.py`` and ``handler.py``.

    Args:
        key: the module's key and the namespace of its tools (``files.read_file``).
        url: the upstream's Streamable HTTP endpoint.
        command: the program and its arguments (a list, or one string split like a shell).
        headers: HTTP headers sent with every request (never from the model).
        token_env: the environment variable of a bearer token (``Authorization: Bearer ...``).
        env: extra environment of the stdio child.
        cwd: the stdio child's working directory.
        tools: per upstream tool name or fnmatch pattern (the exact name first, else the first
            matching pattern): ``danger``, ``scope``, ``permission``, ``cost``, ``read_only``,
            ``audience``, ``description``, ``title``, ``timeout`` and ``name``.
        timeout: seconds a call may take, connecting included (cut to 90 % of the executor's
            ``handler_timeout`` when it is not below it).

    Raises:
        ConfigError: the configuration names nothing usable; the message says what to write.

    Example:
        >>> files = McpUpstream("files", url="http://127.0.0.1:9000/mcp",
        ...                     tools={"write_*": {"danger": "always"}})
        >>> files.key
        'files'
    """

    def __init__(
        self,
        key: str,
        *,
        url: str | None = None,
        command: Sequence[str] | str | None = None,
        headers: Mapping[str, str] | None = None,
        token_env: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.key = check_key(key)
        self.target = Target.of(
            key, url=url, command=command, headers=headers, token_env=token_env, env=env, cwd=cwd
        )
        """Where the upstream is (``describe()`` shows it without credentials)."""
        self.timeout = check_timeout(f"upstream {key!r}", timeout)
        self._tools = check_tools(key, tools)
        self._connection = Connection(self.target)
        self._listing = Listing(self._connection, self.timeout)
        self._connection.on_tools_changed = self._listing.mark_stale  # not self: collectable
        self._connection.on_connected = self._listing.mark_stale
        self._calls: dict[tuple[str, float], UpstreamCall] = {}
        weakref.finalize(self, self._connection.close)

    @classmethod
    def parse(cls, spec: str, **options: Any) -> McpUpstream:
        """An upstream from ``NAME=URL`` (http or https) or ``NAME=command args`` (split like a
        shell); ``options`` are the other keywords (``headers``, ``tools``, ``timeout``...).

        Example:
            >>> McpUpstream.parse("files=http://127.0.0.1:9000/mcp").target.url
            'http://127.0.0.1:9000/mcp'
        """
        key, where = parse_spec(spec)
        return cls(key, **where, **options)

    # --- the module -----------------------------------------------------------------------

    def api_tools(self) -> list[dict[str, Any]]:
        """One declaration per upstream tool, listing the upstream first if it was not yet
        (or if it said its list changed). Those that cannot be declared are in ``left_out``;
        they are returned too, so the registry reports them in its one warning per module.

        Raises:
            ConnectionError: the upstream could not be listed (the registry keeps it as the
                module's warning): nothing is declared for it until it answers.
        """
        return self._declared()[0]

    @property
    def left_out(self) -> list[tuple[str, str]]:
        """``(upstream tool name, why)`` for each tool that is not declared."""
        return self._declared()[1]

    def refresh(self) -> ToolChanges:
        """List the upstream's tools again now; what changed since the last listing. A new
        ``Registry`` declares what it lists; calls of a tool whose schema changed are refused
        until then.

        Raises:
            ConnectionError: the upstream did not answer; the last listing stays.
        """
        try:
            return self._connection.run(self._listing.relist)
        except NoAnswer as failure:
            raise self._unlisted(failure) from None

    async def arefresh(self) -> ToolChanges:
        """Async twin of ``refresh`` (call it before building a ``Registry`` from async code:
        ``api_tools()`` then has the listing and does not wait)."""
        try:
            return await self._connection.arun(self._listing.relist)
        except NoAnswer as failure:
            raise self._unlisted(failure) from None

    def close(self) -> None:
        """End the session (and a stdio child); the next call connects again."""
        self._connection.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await self._connection.aclose()

    def __enter__(self) -> McpUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpUpstream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        where = "url" if self.target.url is not None else "command"
        return f"McpUpstream({self.key!r}, {where}={self.target.describe()!r})"

    # --- inside ---------------------------------------------------------------------------

    def _declared(self) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        if self._listing.tools is None or self._listing.stale:
            self.refresh()
        declared: list[dict[str, Any]] = []
        left_out: list[tuple[str, str]] = []
        taken: dict[str, str] = {}
        for upstream, tool in (self._listing.tools or {}).items():
            settings = settings_for(upstream, self._tools)
            name = settings.name or tool_name(upstream)
            call = self._call(upstream, settings)
            item = declaration(self.key, name or upstream, tool, settings, handler_for(call))
            declared.append(item)
            why = _why_unnamed(upstream) if name is None else None
            if why is None and item["name"] in taken:
                why = _why_taken(upstream, item["name"], taken[item["name"]])
            if why is None:
                why = "; ".join(Tool.problems(item)) or None
            if why is not None:
                left_out.append((upstream, why))
                continue
            taken[item["name"]] = upstream
        return declared, left_out

    def _call(self, upstream: str, settings: ToolSettings) -> UpstreamCall:
        """The one ``UpstreamCall`` of a tool and its timeout (kept, so a handler's identity is
        stable from one ``api_tools()`` to the next)."""
        timeout = settings.timeout or self.timeout
        call = self._calls.get((upstream, timeout))
        if call is None:
            call = UpstreamCall(
                self.key, self.target.describe(), upstream, timeout, self._connection, self._listing
            )
            self._calls[(upstream, timeout)] = call
        return call

    def _unlisted(self, failure: NoAnswer) -> ConnectionError:
        return ConnectionError(
            f"upstream {self.key!r} ({self.target.describe()}) could not be listed"
            f" ({failure.reason}); its tools are declared once it answers (McpUpstream.refresh())"
        )


def _why_unnamed(upstream: str) -> str:
    return (
        "its name cannot be made a turnkit name ('<verb>_<noun>' in lowercase letters, digits"
        f" and underscores): name it with tools={{{upstream!r}: {{'name': 'verb_noun'}}}}"
    )


def _why_taken(upstream: str, name: str, by: str) -> str:
    return (
        f"its turnkit name {name!r} is taken by upstream tool {by!r}: name it with"
        f" tools={{{upstream!r}: {{'name': 'verb_noun'}}}}"
    )
