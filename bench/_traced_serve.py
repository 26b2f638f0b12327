"""``turnkit serve`` whose tracing state each request chooses, for ``bench/tracing.py``.

    python bench/_traced_serve.py serve ARGS...

The request's ``x-bench-tracing`` header names the state (``_tracing_modes.MODES``):
``removed`` (turnkit's calls into ``turnkit.observe`` stubbed out: the code path before observing
existed), ``api`` (``opentelemetry-api`` only: every span a no-op) or ``sdk`` (the SDK recording
every span into an in-memory exporter); ``api+log`` is ``api`` with the line per call the server
writes when asked (``--log-format text``), which the other states leave out. One server for all
states, so the states differ in nothing else; the load sends one request at a time.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

try:
    from bench import _tracing_modes
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _tracing_modes

HEADER = b"x-bench-tracing"


def switching(app: Any) -> Any:
    """``app`` with each request's tracing state set from its header first."""
    lines = logging.getLogger("turnkit.calls")

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            mode = dict(scope["headers"]).get(HEADER, b"api").decode()
            lines.disabled = mode != "api+log"
            _tracing_modes.use(mode.removesuffix("+log"))
        await app(scope, receive, send)

    return asgi


if __name__ == "__main__":
    _tracing_modes.install()
    from turnkit.cli import main, serve

    made = serve.app_from_environment
    serve.app_from_environment = lambda: switching(made())  # type: ignore[assignment]
    sys.argv = ["turnkit", *sys.argv[1:]]
    main()
