"""The guide "Bring your own module" (docs/guides/own-module.md), run as written.

Its files (``shop.py``, ``hold.py``: the blocks with a ``title``) are saved in an empty folder and
its commands run there, from that folder, as a newcomer would type them in the activated
virtual environment Get started asks for (``source .venv/bin/activate`` puts its ``bin`` first on
``PATH``: here, the tests' own), no ``PYTHONPATH`` (``--module shop:Shop``
must find ``shop.py`` in the current directory)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs_blocks import ROOT, page_blocks

pytestmark = pytest.mark.slow  # subprocesses of the turnkit command

GUIDE = ROOT / "docs" / "guides" / "own-module.md"
FILE = re.compile(r'^```python title="([\w.]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def run(line: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNKIT_", "PYTHONPATH"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["COLUMNS"] = "200"
    return subprocess.run(
        shlex.split(line), cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_guide_runs_as_written(tmp_path):
    files = dict(FILE.findall(GUIDE.read_text()))
    assert set(files) == {"shop.py", "hold.py"}
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    sees, held = (b.code for b in page_blocks("sh", GUIDE))

    outputs = [run(line, tmp_path) for line in sees.splitlines()]
    assert [done.returncode for done in outputs] == [0, 0, 0], [d.stderr for d in outputs]
    ana, ana_acting, bob_acting = (done.stdout for done in outputs)
    assert "shop.get_product" in ana
    assert "shop.set_price" not in ana  # the agent may not act in the shop yet
    assert "shop.set_price" in ana_acting  # --act shop: it may, and the write waits
    assert "shop.set_price" not in bob_acting  # bob lacks shop.manage

    hold, listing, approve = held.splitlines()
    done = run(hold, tmp_path)
    assert done.returncode == 0, done.stderr
    status, confirmation_id = done.stdout.split()
    assert status == "confirmation_required"
    assert confirmation_id in run(listing, tmp_path).stdout

    approve = approve.replace(" ID ", f" {confirmation_id[:4]} ")
    refused = run(approve.replace("--as ana", "--as bob"), tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr  # bob may not decide ana's
    assert "Traceback" not in refused.stdout + refused.stderr
    approved = run(approve, tmp_path)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert '"price": 4' in approved.stdout
    again = run(approve, tmp_path)
    assert again.returncode == 3  # decided before: it runs nothing, and says so
