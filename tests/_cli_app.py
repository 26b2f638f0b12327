"""An application for the command-line tests: the shop module and a permission provider whose
grants live in a JSON file, so a test can revoke one between two ``turnkit`` commands.

``TURNKIT_TEST_APP_DIR`` names the folder of ``writes.log`` (the shop's writes) and
``rights.json`` (``{"user": ["permission", ...]}``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from _shop import Shop
from turnkit import Caller


def _folder() -> Path:
    return Path(os.environ["TURNKIT_TEST_APP_DIR"])


class App(Shop):
    """The shop, writing to the test's folder (given to ``--module`` as a class)."""

    def __init__(self) -> None:
        super().__init__(_folder() / "writes.log")


def permissions(caller: Caller) -> set[str]:
    """The application's provider: what ``rights.json`` grants the caller's user now."""
    rights = json.loads((_folder() / "rights.json").read_text())
    return set(rights.get(caller.user_id or "", []))
