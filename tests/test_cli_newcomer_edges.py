"""The rough edges a newcomer met in the ``turnkit`` command (issue 30, item 3): a module in the
current folder, the closing "continue with" line, Ctrl-C at start, two terminals on one thread,
``/help``, the scripted model's answer to what it cannot do, and the demo's temporary folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test_cli import TURNKIT, env, flat
from test_cli_first_hour import no_traceback

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

MYAPP = """
class Tools:
    key = "notes"

    def read(self, input, ctx):
        return {"notes": []}

    def api_tools(self):
        return [{"name": "notes.read", "scope": "notes.items:read", "permission": "notes.view",
                 "handler": self.read, "read_only": True,
                 "input_schema": {"type": "object", "properties": {}}}]
"""


def turnkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``turnkit`` run in ``cwd`` with no PYTHONPATH: only the console script's own path."""
    clean = {k: v for k, v in env().items() if k != "PYTHONPATH"}
    return subprocess.run(
        [TURNKIT, *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=120
    )


# --- 1. --module myapp:obj from the folder that holds myapp.py --------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["tools", "--grant", "notes.view"],
        ["keys", "create", "--user", "u", "--scope", "notes.items:read"],
    ],
    ids=["tools", "keys-create"],
)
def test_a_module_in_the_current_folder_is_found(tmp_path, command):
    (tmp_path / "myapp.py").write_text(MYAPP)
    done = turnkit(*command, "--module", "myapp:Tools", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    no_traceback(done)
    if command[0] == "tools":
        assert "notes.read" in done.stdout


def test_a_module_not_found_says_where_python_looked_and_what_to_do(tmp_path):
    done = turnkit("tools", "--module", "myap:Tools", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    no_traceback(done)
    said = flat(done.stdout)
    assert f"--module 'myap:Tools': no module 'myap' in the current folder ({tmp_path})" in said
    assert "run turnkit in the folder that holds myap.py" in said
    assert "PYTHONPATH" in said
