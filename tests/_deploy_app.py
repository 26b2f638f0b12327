"""An application that a deployment names by ``TURNKIT_*`` variables: the test shop, the
rights of its people, and a sign-in that knows two test tokens.

``TURNKIT_MODULES=_deploy_app:shop``, ``TURNKIT_PERMISSIONS=_deploy_app:rights``; the shop's
write log is ``SHOP_LOG`` (a file), so a test in another process can count the writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from _shop import Shop
from turnkit import StaticPermissions
from turnkit.executor.confirmations import CONFIRM_ANY  # internal: no public name

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
"""The sign-in tokens this application knows, and whose they are."""


def shop() -> Shop:
    """The shop module, writing to ``SHOP_LOG``."""
    return Shop(Path(os.environ.get("SHOP_LOG") or "writes.log"))


rights = StaticPermissions(
    {
        "alice": {"shop.view", "shop.manage"},
        "bob": {"shop.view"},
        "root": {"shop.view", CONFIRM_ANY},
    }
)
"""Alice may view and manage the shop; Bob may only view it; Root may decide anyone's holds."""


def signed_in(token: str) -> str | None:
    """The user a sign-in token belongs to (the application's own check, here a table)."""
    return TOKENS.get(token)


not_a_provider = 42
"""Not a permission provider (a test names it to see the refusal)."""


def broken() -> None:
    """A module factory that fails."""
    raise RuntimeError("the shop's database is down")


MODELS: list = []
"""The models ``words_only_model`` made in this process, to read what they were offered."""


def words_only_model():
    """A scripted model (``TURNKIT_MODEL_FACTORY=_deploy_app:words_only_model``) that answers
    in words once."""
    from turnkit.testing import ScriptedModel

    made = ScriptedModel(["Hello in words."])
    MODELS.append(made)
    return made
