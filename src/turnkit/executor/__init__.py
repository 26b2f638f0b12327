"""The executor: every tool call goes through its ten steps (``pipeline``), every decision about
a held write through ``confirmations``, and every answer is a typed value of ``answers`` — ``Ran``,
``Held``, ``DryRun``, ``Rejected``, ``Refused`` — that ``Executor.call`` and ``decide`` return and
``execute`` and ``confirm`` give as JSON. The steps are generators of effects (``effects``),
performed sync or async by ``drivers``.

Nothing here imports LangGraph or LangChain.
"""

from turnkit.executor.answers import (
    Answer,
    DryRun,
    Held,
    Ran,
    Refused,
    Rejected,
    answer_from_json,
)
from turnkit.executor.confirmations import Decision
from turnkit.executor.executor import Executor

__all__ = [
    "Answer",
    "Decision",
    "DryRun",
    "Executor",
    "Held",
    "Ran",
    "Refused",
    "Rejected",
    "answer_from_json",
]
