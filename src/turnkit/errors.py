"""Exceptions raised for the integrator's mistakes.

What a *model* does wrong never raises: it becomes a tool message or an error answer it can act on.
What the *integrator* does wrong (a bad tool declaration, a caller built without an id, a
lookup of a tool that does not exist) raises one of these::

    TurnkitError
     ├── ToolDeclarationError   (ValueError)  a tool declaration breaks one or more rules
     ├── SchemaError            (ValueError)  a JSON Schema outside turnkit's subset
     ├── CallerError            (ValueError)  a Caller that cannot identify anyone
     ├── ProviderError          (TypeError)   a permission provider answered something not a set
     ├── ModuleError            (TypeError)   an object passed as a module is not one
     ├── UnknownToolError       (LookupError) a registry lookup of a name that is not registered
     ├── ResumeError            (ValueError)  a paused turn resumed with a value it cannot take
     ├── StorageError           (ValueError)  a storage URL that names nothing turnkit can open
     ├── ModelError             (ValueError)  a model that cannot be built or reached
     ├── ConfigError            (ValueError)  TURNKIT_* or an upstream's options name nothing usable
     ├── ThreadBusy             (RuntimeError) another run has the thread's lease
     │    ├── AgentBusy                        a prompt or reset while a prompt is in flight
     │    └── LeaseLost                        this run's lease was taken over; it stopped writing
     └── AgentTimeout           (TimeoutError) a prompt ran out of time; it was cancelled

    ToolError                   raised by a handler on purpose: the caller sees its message

``ToolError`` is not an integrator's mistake: a handler raises it for an expected failure ("no such
sku") whose message the caller should read. Any other exception in a handler is an internal error
whose detail goes to the log only.
"""

from __future__ import annotations

from collections.abc import Sequence


class TurnkitError(Exception):
    """Base class of every exception turnkit raises on purpose."""


class ToolDeclarationError(TurnkitError, ValueError):
    """A tool declaration breaks one or more rules; ``problems`` lists every one of them."""

    def __init__(self, name: object, problems: Sequence[str]) -> None:
        self.name = name
        self.problems: tuple[str, ...] = tuple(problems)
        listed = "\n".join(f"  - {problem}" for problem in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"tool {name!r} has {count} {noun}:\n{listed}")


class SchemaError(TurnkitError, ValueError):
    """A JSON Schema uses something outside the supported subset; ``problems`` lists each."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        listed = "\n".join(f"  - {path or '/'}: {message}" for path, message in self.problems)
        super().__init__(f"schema is outside turnkit's JSON Schema subset:\n{listed}")


class CallerError(TurnkitError, ValueError):
    """A ``Caller`` was built without what its kind needs (a user id, a key id...)."""


class ModuleError(TurnkitError, TypeError):
    """An object given to the ``Registry`` as a module lacks ``key`` or ``api_tools()``."""


class ThreadBusy(TurnkitError, RuntimeError):
    """Another run has the lease on this thread: in this process or in another one that
    shares the ledger's database (one writer per thread, see ``turnkit.threads.leases``).

    ``thread_id`` names the thread; ``holder`` says whose it is when that is known (a
    ``host:pid`` and the run's token), else ``None``. Wait for that run, or pass a
    ``busy_timeout`` to wait for it.
    """

    def __init__(self, message: str, *, thread_id: str = "", holder: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.holder = holder


class AgentBusy(ThreadBusy):
    """An ``Agent`` was asked to prompt or reset while one of its prompts is in flight, in this
    process or (through the thread's lease) in another one."""


class LeaseLost(ThreadBusy):
    """This run's lease on its thread ended under it (it outlived its expiry without renewal, or
    its database session was closed) and another run may have the thread now: the run stopped
    before its next checkpoint or write, so the thread's checkpoint chain does not fork. What it
    wrote before stays; run the turn again to continue from the thread's latest checkpoint."""


class AgentTimeout(TurnkitError, TimeoutError):
    """A prompt took longer than its timeout; the run was cancelled and the agent is usable."""


class ToolError(Exception):
    """Raised by a handler for an expected failure; the answer carries its message and details.

    Examples:
        >>> def get_product(input, ctx):
        ...     raise ToolError(f"no product {input['sku']!r}; list_products shows the skus")
    """

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class UnknownToolError(TurnkitError, LookupError):
    """``Registry[name]`` for a name that no module registered."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        shown = ", ".join(repr(n) for n in known[:20]) or "none"
        more = f" (and {len(known) - 20} more)" if len(known) > 20 else ""
        super().__init__(f"no tool named {name!r} is registered; registered tools: {shown}{more}")


class MissingCallerError(TurnkitError, ValueError):
    """A turn was started without a caller and the graph has no default caller: pass
    ``context=TurnContext(caller=...)``, or sign the request in on LangGraph's server."""


class ResumeError(TurnkitError, ValueError):
    """A paused turn was resumed with a value that is not a decision for its held calls.

    Nothing was decided or saved: the turn is still paused, answer it again. ``held`` lists the
    confirmation ids the turn waits on; ``problems`` says what was wrong with the value.
    """

    def __init__(self, held: Sequence[str], problems: Sequence[str], how: str) -> None:
        self.held: tuple[str, ...] = tuple(held)
        self.problems: tuple[str, ...] = tuple(problems)
        listed = "; ".join(self.problems) or "not a decision"
        super().__init__(
            f"the resume value was refused ({listed}); nothing was decided, the turn still waits."
            f" It holds the confirmations {list(self.held)}: resume with {how}"
        )


class StorageError(TurnkitError, ValueError):
    """A storage URL or path that turnkit cannot open: not one of the accepted forms, a folder
    that does not exist, a PostgreSQL server that cannot be reached. The message names it (without
    credentials) and says what to do."""


class ModelError(TurnkitError, ValueError):
    """A chat model that cannot be built (an unknown provider, not a model object) or reached
    (its server is down, its HTTP client belongs to another event loop); the message says what
    to check. A turn that raised it kept its conversation: send the prompt (or confirm) again."""


class ConfigError(TurnkitError, ValueError):
    """A deployment's configuration (``TURNKIT_DATABASE_URL``, ``TURNKIT_MODULES``,
    ``TURNKIT_PERMISSIONS``, an upstream MCP server's ``McpUpstream`` options, ...) that names
    nothing usable: a malformed or unknown reference, a ledger URL of no accepted form, an
    upstream without a URL or command. The message names the setting and says what to write."""


class ProviderError(TurnkitError, TypeError):
    """A permission provider answered something that is not a collection of permission names
    (``None``, a string): refused, since reading it as "no rights" or as letters would be wrong."""
