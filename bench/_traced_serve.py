"""``turnkit serve`` with its tracing in one of three states, for ``bench/tracing.py``.

    python bench/_traced_serve.py MODE serve ARGS...

``removed``: turnkit's calls into ``turnkit.observe`` replaced by stubs (the code path before
observing existed); ``api``: ``opentelemetry-api`` only, no SDK (every span a no-op, the default
a user gets); ``sdk``: the OpenTelemetry SDK with an in-memory exporter recording every span.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from bench import _tracing_modes
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _tracing_modes

if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    _tracing_modes.install()
    _tracing_modes.use(mode)
    from turnkit.cli import main

    sys.argv = ["turnkit", *args]
    main()
