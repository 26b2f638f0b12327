"""The demo's scripted model, ``ScriptedDemoModel``: it lives in ``turnkit.agent.scripted`` so
that ``Agent("scripted")`` may name it (``agent/`` may not import ``demo/``); re-exported here."""

from turnkit.agent.scripted import (
    CAN_DO,
    LABEL,
    LIST_TOOL,
    PRICE_CUT,
    SET_PRICES_TOOL,
    UNDERSTOOD,
    ScriptedDemoModel,
    scripted_demo_model,
)

__all__ = [
    "CAN_DO",
    "LABEL",
    "LIST_TOOL",
    "PRICE_CUT",
    "SET_PRICES_TOOL",
    "UNDERSTOOD",
    "ScriptedDemoModel",
    "scripted_demo_model",
]
