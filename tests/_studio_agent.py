"""A ``create_agent`` agent governed by ``TurnkitMiddleware`` on the demo catalogue, for
``langgraph dev`` (test_hitl_studio.py serves it beside the repository's own graph).

Compiled without a checkpointer (the server brings persistence), on the scripted demo model, with
the demo user as the default caller; the catalogue's file is ``TURNKIT_DEMO_DB`` (the same file,
and ledger, as the turn graph the server also serves).
"""

from __future__ import annotations

import os

from langchain.agents import create_agent

from turnkit import TurnkitMiddleware
from turnkit.demo import DEMO_CALLER, demo_executor, scripted_demo_model

agent = create_agent(
    scripted_demo_model(),
    middleware=[
        TurnkitMiddleware(demo_executor(os.environ["TURNKIT_DEMO_DB"]), default_caller=DEMO_CALLER)
    ],
)
