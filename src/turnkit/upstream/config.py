"""What an upstream is configured with: where it is (``Target``), the ``NAME=URL`` /
``NAME=command args`` grammar (``parse_spec``), and the per-tool settings of ``tools=``
(``ToolSettings``, ``settings_for``).

Every mistake raises ``ConfigError`` naming the upstream and the fix: an upstream is a
deployment's configuration, like ``TURNKIT_MODULES``.
"""

from __future__ import annotations

import fnmatch
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from turnkit.errors import ConfigError

__all__ = ["TOOL_FIELDS", "Target", "ToolSettings", "check_key", "parse_spec", "settings_for"]

KEY = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
"""An upstream's key: the namespace of its tools' names (``files`` in ``files.read_file``)."""

TOOL_FIELDS = (
    "danger",
    "scope",
    "permission",
    "cost",
    "read_only",
    "audience",
    "description",
    "title",
    "timeout",
    "name",
)
"""What ``tools=`` may set for a tool (by its upstream name or an fnmatch pattern)."""


def check_key(key: object) -> str:
    """``key`` when it can name an upstream's tools, else a ``ConfigError`` saying why."""
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise ConfigError(
            f"upstream key {key!r}: must be lowercase letters, digits and single underscores,"
            " starting with a letter (it names the tools: 'files' gives 'files.read_file')"
        )
    return key


def check_timeout(where: str, value: object) -> float:
    """``value`` as seconds when it is a positive finite number, else a ``ConfigError``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{where}: timeout must be a number of seconds above 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """Where an upstream MCP server is and what it is sent: a Streamable HTTP ``url`` with
    ``headers`` (and a bearer token read from ``token_env`` when connecting), or a stdio
    ``command`` with its ``env`` and ``cwd``."""

    key: str
    """The upstream's key, for messages."""
    url: str | None = None
    """The Streamable HTTP endpoint (``http`` or ``https``)."""
    command: tuple[str, ...] = ()
    """The program and its arguments, started as a child speaking MCP over stdin and stdout."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent with every HTTP request; never taken from a model's input."""
    token_env: str | None = None
    """The environment variable holding a bearer token, read at each connection."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment of the stdio child (over the SDK's minimal default environment)."""
    cwd: str | None = None
    """The stdio child's working directory."""

    @classmethod
    def of(
        cls,
        key: str,
        *,
        url: str | None,
        command: Sequence[str] | str | None,
        headers: Mapping[str, str] | None,
        token_env: str | None,
        env: Mapping[str, str] | None,
        cwd: str | Path | None,
    ) -> Target:
        """The target these options describe, checked (``ConfigError`` names what is wrong)."""
        where = f"upstream {key!r}"
        if (url is None) == (command is None):
            raise ConfigError(
                f"{where}: give either url='http://host:port/mcp' (Streamable HTTP) or"
                " command=['program', 'arg', ...] (stdio), not both and not neither"
            )
        if url is not None:
            if env or cwd is not None:
                raise ConfigError(f"{where}: env and cwd are for a command (stdio), not a url")
            return cls(
                key=key,
                url=_check_url(where, url),
                headers=_check_headers(where, headers or {}),
                token_env=_check_token_env(where, token_env),
            )
        if headers or token_env:
            raise ConfigError(
                f"{where}: headers and token_env are for a url (HTTP); give a command its"
                " secrets through env"
            )
        args = shlex.split(command) if isinstance(command, str) else list(command or ())
        if not args or not all(isinstance(arg, str) and arg for arg in args):
            raise ConfigError(f"{where}: command must name a program and its arguments (strings)")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in (env or {}).items()):
            raise ConfigError(f"{where}: env must map names to strings")
        return cls(
            key=key, command=tuple(args), env=dict(env or {}), cwd=None if cwd is None else str(cwd)
        )

    def describe(self) -> str:
        """The target for a person and a log, without credentials: the URL without its user
        part and query, or the program's name."""
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.netloc.rpartition("@")[2]
            return urlunsplit((parts.scheme, host, parts.path, "", ""))
        return Path(self.command[0]).name + (" ..." if len(self.command) > 1 else "")


def _check_url(where: str, url: object) -> str:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"{where}: url {url!r} must start with http:// or https://")
    if not urlsplit(url).hostname:
        raise ConfigError(f"{where}: url {url!r} names no host; e.g. http://127.0.0.1:9000/mcp")
    return url


def _check_headers(where: str, headers: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ConfigError(f"{where}: headers must map header names to strings")
    return dict(headers)


def _check_token_env(where: str, token_env: object) -> str | None:
    if token_env is not None and (not isinstance(token_env, str) or not token_env):
        raise ConfigError(f"{where}: token_env must name an environment variable")
    return token_env


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME=URL`` or ``NAME=command args`` as the key and ``url=`` or ``command=``.

    Examples:
        >>> parse_spec("files=http://127.0.0.1:9000/mcp")
        ('files', {'url': 'http://127.0.0.1:9000/mcp'})
        >>> parse_spec("fs=npx -y @modelcontextprotocol/server-filesystem /srv")
        ('fs', {'command': ['npx', '-y', '@modelcontextprotocol/server-filesystem', '/srv']})
    """
    name, sep, rest = spec.partition("=") if isinstance(spec, str) else ("", "", "")
    rest = rest.strip()
    if not sep or not rest:
        raise ConfigError(
            f"upstream {spec!r}: write NAME=URL (files=http://127.0.0.1:9000/mcp) or"
            " NAME='command args' (git='uvx mcp-server-git')"
        )
    key = check_key(name.strip())
    if urlsplit(rest).scheme in ("http", "https"):
        return key, {"url": rest}
    try:
        command = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"upstream {key!r}: cannot split the command {rest!r}: {exc}") from None
    return key, {"command": command}


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSettings:
    """What the configuration says about one upstream tool (None: the default)."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    """Declaration fields to set: ``danger``, ``scope``, ``permission``, ``cost``,
    ``read_only``, ``audience``, ``description``, ``title``."""
    timeout: float | None = None
    """Seconds to wait for this tool's answer, instead of the upstream's ``timeout``."""
    name: str | None = None
    """The tool's turnkit name after the key (``read_text`` for ``files.read_text``)."""


def check_tools(key: str, tools: Mapping[str, Mapping[str, Any]] | None) -> dict[str, ToolSettings]:
    """``tools=`` checked: each key an upstream tool name or fnmatch pattern, each value a
    mapping of ``TOOL_FIELDS``. The values' own rules (a scope's form, a cost's range) are the
    declaration's: a tool they break is left out, saying why."""
    checked: dict[str, ToolSettings] = {}
    if tools is None:
        return checked
    if not isinstance(tools, Mapping):
        raise ConfigError(f"upstream {key!r}: tools must map tool names or patterns to settings")
    for pattern, given in tools.items():
        where = f"upstream {key!r}, tools[{pattern!r}]"
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"upstream {key!r}: a tools key must be a tool name or a pattern")
        if not isinstance(given, Mapping):
            raise ConfigError(f"{where}: must be a mapping of {', '.join(TOOL_FIELDS)}")
        unknown = sorted(str(name) for name in given if name not in TOOL_FIELDS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown setting(s) {unknown}; known: {', '.join(TOOL_FIELDS)}"
            )
        name = given.get("name")
        if name is not None and (not isinstance(name, str) or "*" in pattern or "?" in pattern):
            raise ConfigError(f"{where}: name must be a string, given for one tool (no pattern)")
        timeout = given.get("timeout")
        fields = {k: v for k, v in given.items() if k not in ("timeout", "name")}
        checked[pattern] = ToolSettings(
            fields=fields,
            timeout=None if timeout is None else check_timeout(where, timeout),
            name=name,
        )
    return checked


def settings_for(tool: str, tools: Mapping[str, ToolSettings]) -> ToolSettings:
    """The settings of the upstream tool named ``tool``: its exact name's, else the first
    pattern's that matches it (``fnmatch``, case-sensitive), else none."""
    exact = tools.get(tool)
    if exact is not None:
        return exact
    found = (given for pattern, given in tools.items() if fnmatch.fnmatchcase(tool, pattern))
    return next(found, ToolSettings())
