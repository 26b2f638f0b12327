"""The price of governing an MCP server you don't own: turnkit as a gateway in front of it.

The upstream is the SDK's own ``MCPServer`` serving the benchmarks' read (``bench.server``'s
``mcp_peer_app``, stateless JSON) under uvicorn in a process of its own. Two ways to call it, each
through the SDK's ``Client`` over Streamable HTTP, one call at a time, batches interleaved:

- **direct**: the client calls the upstream itself (no key, no ledger: what an agent does today);
- **governed**: the client calls ``turnkit serve --upstream up=URL`` (another process) on
  ``/mcp`` with an API key; turnkit checks the key, the caller's rights and the arguments, charges
  the rate limit, writes the audit row and calls the upstream with its own client (one session,
  kept open).

The ratio governed ÷ direct is what a gateway costs a call: a second HTTP hop and the promises.
No target: the issue asks for the row (its floor is the hop itself, ~1x the direct call's time).

    .venv/bin/python bench/upstream.py [--quick]
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from bench.server import MODEL_NAME, mcp_seconds, prepared, serving, uvicorn_command
from turnkit import model_name

SCENARIO = "upstream"
NAME = "up"
"""The upstream's name in turnkit: its tools are ``up.<name>``."""


def upstreams_file(folder: Path, url: str) -> Path:
    """The ``--upstream`` file: the upstream at ``url``, its tools behind the benchmarks' read
    scope and permission (the key ``prepared`` makes holds the one, its user the other)."""
    path = folder / "upstreams.toml"
    path.write_text(
        f'[{NAME}]\nurl = "{url}"\n\n[{NAME}.tools."*"]\nscope = "bench.items:read"\n'
        'permission = "bench.view"\nread_only = true\n',
        encoding="utf-8",
    )
    return path


def turnkit_command(db: str, upstreams: Path) -> list[str]:
    """``turnkit serve`` fronting the upstream only (one worker)."""
    script = shutil.which("turnkit", path=str(Path(sys.executable).parent)) or "turnkit"
    return [script, "serve", "--upstream", str(upstreams), "--permissions",
            "bench._common:permissions", "--db", db, "--port", "{port}"]  # fmt: skip


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The rows: the governed call, the direct one, and their ratio."""
    with tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder:
        here = Path(folder)
        db = str(here / "ledger.sqlite")
        secret = prepared(db)
        with serving(uvicorn_command("bench.server:mcp_peer_app"), "/not-served") as upstream:
            served = turnkit_command(db, upstreams_file(here, f"{upstream}/mcp"))
            with serving(served, "/healthz") as turnkit:
                seconds = asyncio.run(mcp_seconds(
                    {"direct": (f"{upstream}/mcp", {}),
                     "governed": (f"{turnkit}/mcp", {"Authorization": f"Bearer {secret}"})},
                    quick, tools={"governed": model_name(f"{NAME}.{MODEL_NAME}")},
                ))  # fmt: skip
    governed, direct = seconds["governed"], seconds["direct"]
    return [
        _common.row(SCENARIO, "MCP tools/call through turnkit serve --upstream (÷ direct)",
                    governed * 1e6, "µs", ratio=governed / direct),
        _common.row(SCENARIO, "MCP tools/call to the upstream directly (SDK Client)",
                    direct * 1e6, "µs"),
    ]  # fmt: skip


if __name__ == "__main__":
    print(_common.format_table(run("--quick" in sys.argv)))
