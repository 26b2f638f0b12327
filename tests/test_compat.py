"""The private parts of LangGraph and LangChain turnkit relies on are still where it takes them.

When this fails after an upgrade, read ``turnkit/_compat.py``: each import says why it is used,
and what replaces it has to keep that behaviour (the tests named beside it prove it).
"""

from __future__ import annotations

from langchain_core.callbacks import BaseCallbackHandler

from turnkit import _compat


def test_the_durability_key_is_langgraphs_config_key():
    assert _compat.CONFIG_KEY_DURABILITY == "__pregel_durability"


def test_runnable_callable_takes_a_sync_and_an_async_twin_untraced():
    node = _compat.RunnableCallable(lambda x: x + 1, None, name="n", trace=False)
    assert node.invoke(1) == 2


def test_langgraphs_messages_mode_handler_is_a_streaming_handler():
    from langgraph.pregel._messages import StreamMessagesHandler

    assert issubclass(StreamMessagesHandler, _compat.StreamingHandler)
    assert not issubclass(BaseCallbackHandler, _compat.StreamingHandler)
