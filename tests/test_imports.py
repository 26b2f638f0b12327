"""Every turnkit module imports on its own, whichever is imported first: no import cycles.

One fresh interpreter imports each module in turn after forgetting every turnkit module, so each
import starts from that module (the dependencies stay loaded: only turnkit's order is tested).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

SCRIPT = """
import importlib, pkgutil, sys
import turnkit
names = sorted(m.name for m in pkgutil.walk_packages(turnkit.__path__, "turnkit."))
failed = []
for name in names:
    for loaded in [n for n in sys.modules if n == "turnkit" or n.startswith("turnkit.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print("\\n".join(failed))
"""


def test_every_module_imports_first(tmp_path):
    env = {
        **os.environ,
        "TURNKIT_DEMO_DB": str(tmp_path / "demo.sqlite"),  # the Studio graph's
        "TURNKIT_DATABASE_URL": str(tmp_path / "ledger.sqlite"),  # turnkit.deploy.env checks it
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=tmp_path,  # nothing is left in the folder pytest runs from
        env=env,
    )
    count, *failed = done.stdout.strip().splitlines()
    assert int(count) > 50
    assert failed == []
    # importing opens and writes nothing (the Studio graph and the deployment's too)
    assert list(tmp_path.iterdir()) == []
