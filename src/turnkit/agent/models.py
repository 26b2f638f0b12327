"""Chat models for ``Agent`` and ``chat``: any LangChain chat model, or a string naming one.

``"scripted"`` is the offline, rule-based demo model (``agent/scripted.py``), the same name
``turnkit chat --model scripted`` takes; no language model, no network.
``"openai:gpt-4o-mini"`` (or any ``provider:model`` that ``init_chat_model`` knows) is built on
demand. For OpenAI-compatible servers — vLLM, llama.cpp's server, Ollama — give ``base_url=`` or
set ``OPENAI_BASE_URL``; a local server needs no key (``OPENAI_API_KEY`` is used when set). With
a base URL, a name whose prefix is no provider is the server's own name for a model, tag and all:
``"llama3.1:8b"``, ``"qwen2.5:7b"`` (Ollama).
langchain-openai is imported only here, and only when a string names a model (it costs ~2 s).

The OpenAI models an Agent uses talk through turnkit's own HTTP clients (``_http``), never
langchain-openai's process-wide one: the models built here, and a copy of a ``ChatOpenAI`` given
without ``http_async_client`` (``with_own_client``). A failure to reach the model's server, or a
client of the application's own used from two event loops, becomes a ``ModelError`` that says
what to do (``model_error``).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

from turnkit.errors import ModelError

__all__ = ["SCRIPTED", "model_error", "resolve_model", "with_own_client"]

SCRIPTED = "scripted"
"""The name of the scripted demo model (``agent/scripted.py``): offline, rule-based."""

UNKNOWN_PROVIDER = "Unsupported provider="
"""How ``init_chat_model`` starts its refusal of a provider it does not know (pinned by
tests/test_first_hour_library.py)."""

OTHER_LOOP = ("is bound to a different event loop", "attached to a different loop")
"""What asyncio says when an object of one event loop is used from another."""


def resolve_model(model: Any, *, base_url: str | None = None, **options: Any) -> Any:
    """``model`` itself when it is a chat model object, else the model a string names.

    ``"provider:model"`` names a provider LangChain knows; ``"openai:<model>"`` or a bare name is
    OpenAI or, with ``base_url`` (or ``OPENAI_BASE_URL``), an OpenAI-compatible server, whose
    model names may carry a tag (``"llama3.1:8b"``: no provider is called ``llama3.1``).
    ``"scripted"`` is the scripted demo model (``SCRIPTED``), which needs no key and no server.

    Raises:
        ModelError: ``model`` is neither a chat model nor a string, names a provider that is
            unknown or not installed, or is an OpenAI model with neither a key nor a base URL.

    Examples:
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
    if model == SCRIPTED:
        from turnkit.agent.scripted import scripted_demo_model

        return scripted_demo_model()
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
        server = base_url or os.environ.get("OPENAI_BASE_URL")
        if server and first.startswith(UNKNOWN_PROVIDER):  # "llama3.1:8b" on Ollama
            return _openai(model, base_url=server, **options)
        raise ModelError(
            f"model {model!r}: {first} Use 'openai:<model>' for OpenAI and any OpenAI-compatible"
            " server (vLLM, llama.cpp, Ollama: with base_url=... or OPENAI_BASE_URL set, a tagged"
            " name such as 'llama3.1:8b' is the server's), or a provider LangChain's"
            " init_chat_model knows (with its package installed)."
        ) from None


def _openai(name: str, *, base_url: str | None, **options: Any) -> Any:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    from turnkit.agent._http import async_client, sync_client

    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = os.environ.get("OPENAI_API_KEY") or ("not-needed" if url else None)
    if key is None:
        raise ModelError(
            "no OpenAI key and no base URL: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL"
            " (or base_url=...) for an OpenAI-compatible server such as vLLM, llama.cpp or Ollama"
        )
    options.setdefault("use_responses_api", False)  # chat.completions: what every server speaks
    options.setdefault("stream_usage", True)
    if "openai_proxy" not in options:  # langchain-openai builds proxied clients of its own
        options.setdefault("http_async_client", async_client())
        options.setdefault("http_client", sync_client())
    return ChatOpenAI(model=name, base_url=url, api_key=SecretStr(key), **options)


def with_own_client(model: Any) -> Any:
    """``model``, or, for an OpenAI model that uses langchain-openai's process-wide async client
    (a ``ChatOpenAI`` made without ``http_async_client``), a copy of it that uses turnkit's.

    The copy keeps every setting of the model (its OpenAI client is copied with
    ``with_options``); only the HTTP client under it changes, so the application may go on
    calling ``model.ainvoke`` on its own loop while an Agent runs turns on turnkit's. A model
    with a client of its own (``http_async_client=``) is used as it is.
    """
    if "langchain_openai" not in sys.modules:  # not loaded: the model cannot be one of its
        return model
    from langchain_openai.chat_models.base import BaseChatOpenAI

    from turnkit.agent._http import async_client

    if not isinstance(model, BaseChatOpenAI):
        return model
    if model.http_async_client is not None or model.root_async_client is None:
        return model
    shared = async_client()
    root = model.root_async_client.with_options(http_client=shared)
    return model.model_copy(
        update={
            "http_async_client": shared,
            "root_async_client": root,
            "async_client": root.chat.completions,
        }
    )


def model_error(exc: BaseException, model: Any) -> ModelError | None:
    """The ``ModelError`` that ``exc``, raised by a turn, stands for, or None.

    Two failures of the model are the integrator's to fix: its server cannot be reached (down,
    a wrong ``base_url``), and its HTTP client was used from another event loop (a client of the
    application's own, shared with code running on the application's loop).
    """
    chain = _chain(exc)
    if any(isinstance(e, _unreachable()) for e in chain):
        url = next((u for u in map(_url, chain) if u), None)
        where = f"at {url!r}" if url else "(no URL given)"
        return ModelError(
            f"cannot reach the model's server {where} ({type(exc).__name__}: {exc}). Check that"
            " the server is running and that base_url= (or OPENAI_BASE_URL) names it. The"
            " conversation is kept: once the server answers, send the prompt (or the confirm)"
            " again"
        )
    if isinstance(exc, RuntimeError) and any(s in str(exc) for s in OTHER_LOOP):
        package = type(model).__module__.partition(".")[0]
        frames = traceback.walk_tb(exc.__traceback__)
        if any(f.f_globals.get("__name__", "").partition(".")[0] == package for f, _ in frames):
            return ModelError(
                f"the model's HTTP client was used from another event loop ({exc}): an Agent"
                " runs its turns on turnkit's own loop, and a pooled connection belongs to one"
                " loop. Give the Agent a model whose client only it uses (e.g. ChatOpenAI(...,"
                " http_async_client=openai.DefaultAsyncHttpxClient()) made for the Agent), or"
                " let it build the model from a name: Agent('openai:<model>', base_url=...)"
            )
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (``raise ... from``), outermost first."""
    chain = [exc]
    while (cause := chain[-1].__cause__) is not None and len(chain) < 10:
        chain.append(cause)
    return chain


def _unreachable() -> tuple[type[BaseException], ...]:
    """The exceptions that say a model's server could not be reached or did not answer, from
    the libraries loaded (a library not imported cannot have raised its own)."""
    from langchain_core.exceptions import ModelConnectionError, ModelTimeoutError

    kinds: list[type[BaseException]] = [ModelConnectionError, ModelTimeoutError]
    if (openai := sys.modules.get("openai")) is not None:
        kinds.append(openai.APIConnectionError)  # APITimeoutError is one
    for name in ("httpx", "httpx2"):
        if (httpx := sys.modules.get(name)) is not None:
            kinds += [httpx.ConnectError, httpx.ConnectTimeout]
    return tuple(kinds)


def _url(exc: BaseException) -> str | None:
    """The base URL of the request ``exc`` failed on (its endpoint path cut off), if it says."""
    try:
        url = str(exc.request.url)  # type: ignore[attr-defined]  # openai's and httpx's errors
    except (AttributeError, RuntimeError):  # none, or httpx's "request not set"
        return None
    for endpoint in ("/chat/completions", "/responses", "/completions"):
        url = url.removesuffix(endpoint)
    return url
