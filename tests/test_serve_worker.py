"""A ``turnkit serve`` worker settles its heap once its app is built: start-up's objects leave
the garbage collector's generations (``gc.freeze``), so a full collection under load walks only
what requests made (p99 under 50 clients went from ~175 ms to ~95-125 ms in
``bench/server.py``'s setting). What start-up left as garbage is freed first, not kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import gc, json, sys
from turnkit.cli.serve import app_from_environment
before = gc.get_freeze_count()
app = app_from_environment()
print(json.dumps({"before": before, "after": gc.get_freeze_count(), "young": gc.get_count()[2]}))
"""


def test_a_worker_freezes_what_start_up_built(tmp_path) -> None:
    found = _probe(tmp_path, PROBE)
    assert found["before"] == 0
    assert found["after"] > 10_000  # the libraries' objects, frozen
    assert found["young"] == 0  # collected just before: nothing old left to walk


WARM_PROBE = """
import asyncio, json, threading
from turnkit.cli.serve import app_from_environment
app = app_from_environment()

async def main():
    async with app.router.lifespan_context(app):
        pool = type(asyncio.get_running_loop()._default_executor).__name__
        names = [await asyncio.to_thread(lambda: threading.current_thread().name)
                 for _ in range(3)]
    return pool, names

pool, names = asyncio.run(main())  # closing the loop shuts its pool down
left = [t.name for t in threading.enumerate() if t.name.startswith("turnkit-worker")]
print(json.dumps({"pool": pool, "names": names, "left": left}))
"""


def test_a_worker_hands_its_calls_to_the_thread_that_went_idle_last(tmp_path) -> None:
    """``turnkit serve``'s app makes ``WarmThreads`` its loop's default pool when it starts:
    one call after another runs on one thread; the pool's threads end with the loop."""
    found = _probe(tmp_path, WARM_PROBE)
    assert found["pool"] == "WarmThreads"
    assert len(set(found["names"])) == 1
    assert found["names"][0].startswith("turnkit-worker")
    assert found["left"] == []


def _probe(tmp_path, script: str) -> dict:
    """What ``script`` prints last (JSON), run in a fresh process as a ``turnkit serve`` worker
    over a demo ledger in ``tmp_path``."""
    options = {"db": str(tmp_path / "ledger.sqlite"), "modules": [], "entry_points": False,
               "demo": True, "catalogue": None, "permissions": None}  # fmt: skip
    env = os.environ | {"TURNKIT_SERVE": json.dumps(options)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
