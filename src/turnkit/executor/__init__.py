"""The executor: every tool call goes through its ten steps (``pipeline``), every decision about
a held write through ``confirmations``, and every answer is built in ``answers``. The steps are
generators of effects (``effects``), driven sync or async.

Nothing here imports LangGraph or LangChain.
"""

from turnkit.executor.confirmations import Decision
from turnkit.executor.executor import Executor

__all__ = ["Decision", "Executor"]
