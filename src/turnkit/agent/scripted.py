"""``ScriptedDemoModel``: a **scripted**, rule-based stand-in for a chat model, for the demo.

It is not a language model and understands nothing of what the user writes. It follows one fixed
script, driven by the conversation, so that the demo and Studio show the whole governed flow
offline and for as long as you like:

1. after a user message about the catalogue, its products or their prices (``UNDERSTOOD``): call
   ``catalogue_list_products`` (five products); after any other message, say what it can do
   (``CAN_DO``) and call nothing;
2. after that result: propose a 10 % price cut for the first listed product
   (``catalogue_set_prices``), a write that waits for a person's confirmation;
3. after the write's outcome (done, rejected, still held, or an error): a short final text saying
   what happened.

It supports ``bind_tools`` and ``invoke``/``ainvoke``, keeps no state between calls and does no
I/O, so it is safe on an event loop and under any number of threads.

It drives the demo catalogue's tools (``turnkit.demo``) by their model names, yet lives here, in
``agent/``: the model name ``"scripted"`` (``agent.models.SCRIPTED``) names it for ``Agent``, for
``turnkit chat --model scripted`` and for ``TURNKIT_MODEL=scripted`` alike, resolved in one place
(``resolve_model``), and ``agent/`` may not import ``demo/`` (docs/architecture.md, Layers). The
demo re-exports it (``turnkit.demo.scripted_demo_model``).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from turnkit.executor.answers import Answer, Ran, Refused, Rejected, answer_from_json
from turnkit.testing import ReplyModel

__all__ = [
    "CAN_DO",
    "LIST_TOOL",
    "PRICE_CUT",
    "SET_PRICES_TOOL",
    "UNDERSTOOD",
    "ScriptedDemoModel",
    "scripted_demo_model",
]

LIST_TOOL = "catalogue_list_products"
SET_PRICES_TOOL = "catalogue_set_prices"
PRICE_CUT = 0.10
"""The scripted model proposes the first listed product's price minus this fraction."""
UNDERSTOOD = re.compile(
    r"\b(cheap|price|cost|discount|sale|sell|product|catalog|item|sku|tea|list|show|reduce|lower"
    r"|cut)",
    re.IGNORECASE,
)
"""A message the script follows names the catalogue, its products or their prices (a word that
starts so): "make the first product cheaper", "what is for sale?"."""
CAN_DO = (
    "I am a script, not a language model, and did not understand that. I can do one thing: list"
    f" the catalogue's products and propose a {PRICE_CUT:.0%} lower price for the first one, a"
    " write that waits for a person's yes. Ask, for example: make the first product cheaper."
)
"""The answer to a message the script does not follow."""
LABEL = "[scripted demo model]"
"""Every text answer starts with this, so nobody mistakes the script for a real model."""


class ScriptedDemoModel(ReplyModel):
    """A scripted, rule-based chat model for the catalogue demo (see the module docstring)."""

    list_limit: int = 5
    """How many products the scripted model asks for."""

    @property
    def _llm_type(self) -> str:
        return "turnkit-scripted-demo"

    def reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The scripted next message for ``messages`` with ``tools`` bound."""
        available = {tool.get("function", {}).get("name") for tool in tools}
        last = messages[-1] if messages else None
        if isinstance(last, HumanMessage) and not UNDERSTOOD.search(last.text):
            return _text(CAN_DO)
        if last is None or isinstance(last, HumanMessage):
            if LIST_TOOL not in available:
                return _text("I cannot list products for you: that tool is not available to you.")
            return _call(LIST_TOOL, {"limit": self.list_limit})
        if not isinstance(last, ToolMessage):
            return _text("Tell me what to do next.")
        tool = _tool_of(messages, last.tool_call_id)
        answer = _json(last.content)
        if tool == LIST_TOOL:
            return _after_list(answer, available)
        if tool == SET_PRICES_TOOL:
            return _text(_after_write(answer))
        return _text(f"The tool {tool or 'call'} answered: {_short(last.content)}")


def scripted_demo_model() -> ScriptedDemoModel:
    """The **scripted** demo model (rule-based, offline; not a real language model)."""
    return ScriptedDemoModel()


def _after_list(value: Any, available: set[Any]) -> AIMessage:
    answer = _answer(value)
    if not isinstance(answer, Ran) or not isinstance(answer.result, dict):
        return _text(f"I could not list the products: {_problem(value, answer)}")
    items = answer.result.get("items") or []
    if not items:
        return _text("The catalogue has no products to show.")
    first = items[0]
    if SET_PRICES_TOOL not in available:
        listed = ", ".join(f"{p['sku']} {p['name']} ({p['price']:.2f})" for p in items)
        return _text(f"Here are the first products: {listed}. I may not change prices for you.")
    price = round(first["price"] * (1 - PRICE_CUT), 2)
    return _call(SET_PRICES_TOOL, {"prices": [{"sku": first["sku"], "price": price}]})


def _after_write(value: Any) -> str:
    match value:  # the held call's notice (turn.tools.held_result), or the held answer
        case {"status": "confirmation_required"}:
            return (
                "The price change is waiting for a person's confirmation; nothing has changed yet."
            )
    answer = _answer(value)
    if isinstance(answer, Rejected):
        why = answer.message
        return "The price change was rejected, so nothing changed" + (f": {why}" if why else ".")
    if not isinstance(answer, Ran) or not isinstance(answer.result, dict):
        return f"The price change did not happen: {_problem(value, answer)}"
    result = answer.result
    done = "; ".join(
        f"{u['sku']} from {u['old_price']:.2f} to {u['price']:.2f}" for u in result["updated"]
    )
    text = f"Done: I changed the price of {done}." if done else "No price was changed."
    if result.get("unknown_skus"):
        text += f" Unknown skus: {', '.join(result['unknown_skus'])}."
    return text


def _tool_of(messages: list[BaseMessage], tool_call_id: str) -> str | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") == tool_call_id:
                    return call["name"]
    return None


def _json(content: Any) -> Any:
    try:
        return json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None


def _answer(value: Any) -> Answer | None:
    """The executor's answer the model read, or None for anything else (a result cut to fit)."""
    try:
        return answer_from_json(value)
    except ValueError:
        return None


def _problem(value: Any, answer: Answer | None) -> str:
    if isinstance(answer, Refused):
        return answer.message
    match value:
        case {"truncated": True}:
            return "the answer was too large to read."
    return "an unexpected answer."


def _short(content: Any) -> str:
    text = content if isinstance(content, str) else json.dumps(content)
    return text if len(text) <= 200 else text[:200] + "..."


def _text(content: str) -> AIMessage:
    return AIMessage(content=f"{LABEL} {content}", id=f"demo-{uuid.uuid4().hex}")


def _call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:24]}"}
        ],
        id=f"demo-{uuid.uuid4().hex}",
    )
