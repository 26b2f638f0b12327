"""``Deployment``: the executor, model and turn graph one LangGraph server serves, built once.

LangGraph's server accepts a graph *factory* for a graph in ``langgraph.json``: a function it
calls (with no argument here) for every run and every read of a thread, whose coroutine it awaits.
``Deployment.agraph`` is one: the first call builds the executor (modules, permission provider,
ledger), the model and the compiled turn graph in a worker thread — the server refuses blocking
calls on its event loop — and every later call returns the same graph at once. Nothing is
imported, opened or written before that first call, so importing the module that names the
factory has no effect on disk.

The REST and MCP app (``app()``) and the auth handler (``turnkit.deploy.auth``) of the same
deployment use the same executor, hence one ledger: a write a run holds is listed and decided
over REST, and the resumed run honours that decision.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.graph.state import CompiledStateGraph

from turnkit.deploy.config import DeployConfig, load_model, load_modules, load_permissions
from turnkit.errors import ConfigError, StorageError
from turnkit.executor.executor import Executor, no_permissions
from turnkit.graph.build import build_turn_graph
from turnkit.ledger import open_ledger
from turnkit.registry.caller import Caller
from turnkit.registry.registry import Registry

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["NO_TOOLS", "Deployment"]

log = logging.getLogger("turnkit.deploy")
NO_TOOLS = (
    "the agent has no tools: no module is loaded, or the modules declare none (set"
    " TURNKIT_MODULES=package.module:object, several separated by commas); the model is offered"
    " no tool and can only answer in words"
)
"""The warning logged once, when a deployment's graph is built over an empty registry."""

Graph = CompiledStateGraph[Any, Any, Any, Any]


class Deployment:
    """What a LangGraph server serves: one executor, one model, one turn graph, built on first
    use from the functions given here (``from_env`` reads them from ``TURNKIT_*`` variables).

    Examples:
        >>> from turnkit.demo import demo_executor, scripted_demo_model
        >>> deployment = Deployment(lambda: demo_executor("demo/catalogue.sqlite"),
        ...                         scripted_demo_model)
        >>> graph = deployment.agraph  # langgraph.json: "graphs": {"agent": "myapp.deploy:graph"}
    """

    def __init__(
        self,
        executor: Callable[[], Executor],
        model: Callable[[], Any],
        *,
        default_caller: Caller | None = None,
        mcp_allowed_hosts: tuple[str, ...] = (),
        mcp_allowed_origins: tuple[str, ...] = (),
    ) -> None:
        """Remember how to build the deployment; nothing is built yet.

        Args:
            executor: makes the executor (its registry, ledger and permission provider); called
                once, in a worker thread.
            model: makes the chat model; called once, after ``executor``.
            default_caller: the caller of runs no one signed in (see ``turnkit.deploy.auth``);
                None makes such runs fail, saying how to sign in.
            mcp_allowed_hosts: the ``Host`` names the app's ``/mcp`` answers besides the
                loopback ones (``create_app``'s argument).
            mcp_allowed_origins: the browser origins it answers besides the loopback ones.
        """
        self._make_executor, self._make_model = executor, model
        self.default_caller = default_caller
        self._mcp_hosts, self._mcp_origins = mcp_allowed_hosts, mcp_allowed_origins
        self._lock = threading.Lock()
        self._built: tuple[Executor, Graph] | None = None

    @classmethod
    def from_config(cls, config: DeployConfig) -> Deployment:
        """The deployment ``config`` describes (see ``turnkit.deploy.config``)."""

        def executor() -> Executor:
            modules = load_modules(config.modules)  # the application's code first: nothing
            permissions = load_permissions(config.permissions)  # is opened if it is wrong
            try:
                ledger = open_ledger(config.database_url)
            except StorageError as exc:
                raise ConfigError(f"TURNKIT_DATABASE_URL: {exc}") from None
            return Executor(
                Registry(modules), ledger=ledger, permissions=permissions or no_permissions
            )

        user = config.default_user
        return cls(
            executor,
            lambda: load_model(config.model, config.model_factory),
            default_caller=None if user is None else Caller.session(user),
            mcp_allowed_hosts=config.mcp_allowed_hosts,
            mcp_allowed_origins=config.mcp_allowed_origins,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Deployment:
        """The deployment the ``TURNKIT_*`` variables of ``environ`` (default ``os.environ``)
        describe.

        Raises:
            ConfigError: a variable is missing or malformed (checked now; the references it
                names are loaded when the deployment is first built).
        """
        return cls.from_config(DeployConfig.from_env(environ))

    # --- built once -------------------------------------------------------------------------

    def executor(self) -> Executor:
        """The executor, built on first use (blocking: from async code, ``aexecutor``).

        Raises:
            ConfigError: a module or the permission provider cannot be loaded, or the ledger's
                URL cannot be opened.
            ModelError: the model cannot be built.
        """
        return self._build()[0]

    async def aexecutor(self) -> Executor:
        """``executor()`` without blocking the event loop (built in a worker thread)."""
        built = self._built
        return built[0] if built is not None else (await asyncio.to_thread(self._build))[0]

    def graph(self) -> Graph:
        """The compiled turn graph (no checkpointer: the server brings its own), built on
        first use (blocking: from async code, ``agraph``)."""
        return self._build()[1]

    async def agraph(self) -> Graph:
        """The graph factory to name in ``langgraph.json``: ``graph()`` without blocking the
        event loop."""
        built = self._built
        return built[1] if built is not None else (await asyncio.to_thread(self._build))[1]

    def app(self, *, prepare: Callable[[Executor], None] | None = None) -> Starlette:
        """The REST and MCP app on this deployment's executor, to name in ``langgraph.json``'s
        ``"http": {"app": ...}`` (see ``turnkit.deploy.app``); ``prepare(executor)`` runs once
        the executor is built, before the app serves."""
        from turnkit.deploy.app import deferred_app  # FastAPI and mcp: only when served

        return deferred_app(self.aexecutor, prepare=prepare, mcp_allowed_hosts=self._mcp_hosts,
                            mcp_allowed_origins=self._mcp_origins)  # fmt: skip

    def close(self) -> None:
        """Close the executor (and its ledger) if it was built; the next use builds anew."""
        with self._lock:
            built, self._built = self._built, None
        if built is not None:
            built[0].close()
            built[0].ledger.close()

    def _build(self) -> tuple[Executor, Graph]:
        with self._lock:
            if self._built is None:
                executor = self._make_executor()
                if not list(executor.registry.tools):
                    log.warning(NO_TOOLS)
                try:
                    model = self._make_model()
                    graph = build_turn_graph(
                        executor, model, default_caller=self.default_caller, busy_timeout=5
                    )  # a run the server cancelled may still be giving its thread back
                except BaseException:
                    executor.close()
                    executor.ledger.close()
                    raise
                self._built = (executor, graph)
            return self._built
