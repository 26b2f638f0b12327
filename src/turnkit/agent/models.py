"""Chat models for ``Agent`` and ``chat``: any LangChain chat model, or a string naming one.

``"openai:gpt-4o-mini"`` (or any ``provider:model`` that ``init_chat_model`` knows) is built on
demand. For OpenAI-compatible servers — vLLM, llama.cpp's server, Ollama — give ``base_url=`` or
set ``OPENAI_BASE_URL``; a local server needs no key (``OPENAI_API_KEY`` is used when set).
langchain-openai is imported only here, and only when a string names a model (it costs ~2 s).
"""

from __future__ import annotations

import os
from typing import Any

from turnkit.errors import ModelError

__all__ = ["resolve_model"]


def resolve_model(model: Any, *, base_url: str | None = None, **options: Any) -> Any:
    """``model`` itself when it is a chat model object, else the model a string names.

    Raises:
        ModelError: ``model`` is neither a chat model nor a string, names a provider that is
            unknown or not installed, or is an OpenAI model with neither a key nor a base URL.

    Example:
        >>> resolve_model("openai:llama3", base_url="http://127.0.0.1:8000/v1")  # doctest: +SKIP
        ChatOpenAI(model_name='llama3', ...)
    """
    if not isinstance(model, str):
        if not hasattr(model, "invoke"):
            raise ModelError(
                f"model must be a LangChain chat model or a string such as 'openai:gpt-4o-mini',"
                f" got {type(model).__name__}"
            )
        return model
    provider, _, name = model.partition(":")
    if not name:
        provider, name = "openai", model
    if not provider or not name.strip():
        raise ModelError(
            f"model {model!r}: write it as 'provider:model', e.g. 'openai:gpt-4o-mini'"
        )
    if provider == "openai":
        return _openai(name, base_url=base_url, **options)
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(name, model_provider=provider, base_url=base_url, **options)
    except ImportError as exc:
        raise ModelError(f"model {model!r}: {exc}") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise ModelError(
            f"model {model!r}: {first} Use 'openai:<model>' for OpenAI and any OpenAI-compatible"
            " server (vLLM, llama.cpp, Ollama), or a provider LangChain's init_chat_model knows"
            " (with its package installed)."
        ) from None


def _openai(name: str, *, base_url: str | None, **options: Any) -> Any:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = os.environ.get("OPENAI_API_KEY") or ("not-needed" if url else None)
    if key is None:
        raise ModelError(
            "no OpenAI key and no base URL: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL"
            " (or base_url=...) for an OpenAI-compatible server such as vLLM, llama.cpp or Ollama"
        )
    options.setdefault("use_responses_api", False)  # chat.completions: what every server speaks
    options.setdefault("stream_usage", True)
    return ChatOpenAI(model=name, base_url=url, api_key=SecretStr(key), **options)
