"""``--upstream``: MCP servers you don't own, served and decided as turnkit modules.

Each ``--upstream`` is one of:

- ``NAME=URL``: a Streamable HTTP server (``http://`` or ``https://``);
- ``NAME=COMMAND ARGS``: a server on stdio, started by turnkit (split as a POSIX shell would);
- ``FILE.toml``: a file of upstreams, one table each, for what a line cannot say (headers, a
  token's environment variable, the timeout, and per-tool rights)::

      [files]
      command = "npx -y @modelcontextprotocol/server-filesystem /srv/shared"
      timeout = 20

      [files.tools."write_*"]
      permission = "files.write"

      [tickets]
      url = "https://tickets.example/mcp"
      token_env = "TICKETS_TOKEN"
      headers = { X-Team = "ops" }

Nothing is connected here: ``load`` only builds the modules (``turnkit.upstream.McpUpstream``),
which connect when the registry first lists their tools.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from turnkit.errors import ConfigError

__all__ = ["FILE_KEYS", "load"]

NAMED = re.compile(r"^\s*[A-Za-z][A-Za-z0-9_-]*=")
"""A ``NAME=...`` value (else a file of upstreams)."""
FILE_KEYS = ("url", "command", "env", "cwd", "headers", "token_env", "timeout", "tools")
"""What a table of an upstreams file may set (``McpUpstream``'s options of the same names)."""


def load(specs: list[str]) -> list[Any]:
    """The upstream modules of a command's ``--upstream`` options, in order.

    Raises:
        ConfigError: a value that is neither ``NAME=URL``, ``NAME=COMMAND`` nor a readable
            ``.toml`` file of upstreams, or two upstreams of one name (the message says which).
    """
    if not specs:  # the MCP client is imported only for an upstream
        return []
    from turnkit.upstream import McpUpstream

    made: list[Any] = []
    for spec in specs:
        if not NAMED.match(spec):
            made += _from_file(spec, McpUpstream)
            continue
        try:
            made.append(McpUpstream.parse(spec))
        except (ConfigError, ValueError) as exc:
            raise ConfigError(f"--upstream {spec!r}: {exc}") from None
    names = [upstream.key for upstream in made]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--upstream: {', '.join(map(repr, twice))} is named twice; give each"
                         " upstream a name of its own")  # fmt: skip
    try:
        for upstream in made:  # listed now: a person learns at once that one cannot be reached
            _listed(upstream)
    except BaseException:
        for upstream in made:
            upstream.close()
        raise
    return made


def _listed(upstream: Any) -> None:
    """List ``upstream``'s tools (the registry declares them from this listing).

    Raises:
        ConfigError: it cannot be reached or listed; the message says what to do.
    """
    try:
        upstream.api_tools()
    except ConnectionError as exc:
        raise ConfigError(
            f"--upstream {upstream.key}: {exc} (start it, or leave out --upstream {upstream.key})"
        ) from None


def _from_file(spec: str, make: Any) -> list[Any]:
    """The upstreams of a ``.toml`` file: one table per upstream, named by its key."""
    path = Path(spec)
    if path.suffix != ".toml":
        raise ConfigError(
            f"--upstream {spec!r}: give NAME=URL, NAME='COMMAND ARGS' or a .toml file of"
            " upstreams (e.g. --upstream files=http://127.0.0.1:9000/mcp)"
        )
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--upstream {spec!r}: cannot read it ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--upstream {spec!r}: not TOML ({exc})") from None
    if not tables:
        raise ConfigError(f"--upstream {spec!r}: no upstream in it (a [name] table each)")
    return [_from_table(spec, name, table, make) for name, table in tables.items()]


def _from_table(spec: str, name: str, table: Any, make: Any) -> Any:
    where = f"--upstream {spec!r}, [{name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: a table of options, not a {type(table).__name__}")
    unknown = sorted(set(table) - set(FILE_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown {', '.join(unknown)}; it takes {', '.join(FILE_KEYS)}")
    options = dict(table)
    command = options.get("command")
    if isinstance(command, str):
        options["command"] = shlex.split(command)
    try:
        return make(name, **options)
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
