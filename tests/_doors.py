"""What the tests of the HTTP doors share (``test_doors_rest.py``, ``test_doors_inbox.py``,
``test_doors_mcp.py``): keys, problem checks, the inbox's sign-in, a second door on the same
ledger, and a module whose handler the test holds up.

A second door is another application (another process, as far as the ledger can tell) on the same
database: its own ``Executor`` with its own registry and settings given in code, over its own
connection to the ledger, served by its own uvicorn.

Reaches ``turnkit.executor.confirmations`` and ``turnkit.ledger.keys`` for ``DECIDE_SCOPE`` and
``ApiKey``: the scope that lets a key decide held writes and the key record the ledger returns have
no public name.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from _serving import uvicorn_serving
from _shop import Shop
from turnkit import Executor, Registry, Settings, open_ledger
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.ledger.keys import ApiKey
from turnkit.server import create_app

PROBLEM = "application/problem+json"
READ = "shop.products:read"
WRITE = "shop.products:write"
GATE = "gate.levels:write"
WAIT = 30.0
"""The longest a test waits for a state it expects (a bound, never a pause)."""


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The problem document of ``response``, checked to be one of ``status`` and ``code``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert (body["status"], body["code"]) == (status, code), body
    assert body["title"]
    assert body["detail"]
    assert "Traceback" not in response.text
    return body


@dataclass(frozen=True)
class Keys:
    """Keys made in the ledger: their secrets, and the keys themselves."""

    secrets: dict[str, str]
    made: dict[str, ApiKey]

    def __getitem__(self, name: str) -> str:
        return self.secrets[name]


def make_keys(executor: Executor, now: float) -> Keys:
    """writer: alice, reads, writes and decides her holds; holder: alice, reads and writes but
    may not decide; twin: another key of alice's like holder; brief: alice's, expires after 60 s;
    reader: bob, reads; root: root (who may decide for anyone), reads and decides."""
    store = executor.ledger.keys
    write = {READ, WRITE}
    made = {
        "writer": store.create("alice", write | {DECIDE_SCOPE}, now=now),
        "holder": store.create("alice", write, now=now),
        "twin": store.create("alice", write, now=now),
        "brief": store.create("alice", write, expires_in=60, now=now),
        "reader": store.create("bob", {READ}, now=now),
        "root": store.create("root", {READ, DECIDE_SCOPE}, now=now),
    }
    return Keys(
        secrets={name: secret for name, (_, secret) in made.items()},
        made={name: key for name, (key, _) in made.items()},
    )


def hold_delete(http: httpx.Client, secret: str, sku: str = "TEA-0001", **headers: str) -> str:
    """Invoke the always-held delete over REST; the confirmation's id."""
    held = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=bearer(secret) | headers,
        json={"input": {"sku": sku}},
    )
    assert held.status_code == 202, held.text
    return str(held.json()["id"])


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text[:500]
    return found.group(1)


def sign_in(client: httpx.Client, secret: str) -> httpx.Response:
    """Sign in to the inbox with a key, as the form does."""
    form = client.get("/ui/sign-in")
    signed = client.post("/ui/sign-in", data={"key": secret, "csrf": csrf_of(form)})
    assert signed.status_code == 200, signed.text[:500]
    return signed


def history_row(page: str, confirmation_id: str) -> str:
    """The history table's row of ``confirmation_id``: its cells' text."""
    found = re.search(rf'<tr data-id="{confirmation_id}">(.*?)</tr>', page, re.S)
    assert found is not None, f"no history row of {confirmation_id}"
    return found.group(1)


def cards(page: str) -> list[str]:
    """The ids of the confirmation cards an inbox page shows, in order."""
    return re.findall(r'<article class="confirmation" data-id="([^"]+)"', page)


class Impostor(Shop):
    """Another application's module ``shop``: it declares the shop's writes under the same names
    with other handlers (written to its own log)."""

    def set_prices(self, input: dict, ctx: Any) -> dict:
        self._write({"tool": "impostor.set_prices", "input": input})
        return {"updated": 0}

    def delete_product(self, input: dict, ctx: Any) -> dict:
        self._write({"tool": "impostor.delete_product", "input": input})
        return {"deleted": None}


class Reshaped(Shop):
    """Another application's module ``shop``: the same handlers, but ``shop.delete_product``
    takes one more (optional) field."""

    def api_tools(self) -> list[dict]:
        tools = super().api_tools()
        for tool in tools:
            if tool["name"] == "shop.delete_product":
                schema = tool["input_schema"]
                tool["input_schema"] = schema | {
                    "properties": schema["properties"] | {"reason": {"type": "string"}}
                }
        return tools


class Disabled(Shop):
    """Another application's module ``shop``, declared as the shop declares it, but disabled
    there (its ``enabled()`` says no)."""

    def enabled(self) -> bool:
        return False


@contextmanager
def another_door(
    ledger_url: str,
    module: Any,
    rights: Any,
    clock: Any,
    settings: Settings | None = None,
) -> Iterator[tuple[Executor, str]]:
    """Another application on the ledger at ``ledger_url``: its executor over ``module`` (its
    own connection) and its app (REST, the inbox) served by uvicorn; ``(executor, base URL)``."""
    ledger = open_ledger(ledger_url)
    executor = Executor(
        Registry([module]),
        ledger=ledger,
        permissions=rights,
        settings=settings or Settings(handler_timeout=2.0),
        clock=clock,
    )
    try:
        with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
            yield executor, url
    finally:
        executor.close()
        ledger.close()


class Gate:
    """Module ``gate``: a write that runs at once and one always held, whose handlers wait until
    the test opens the gate (at most ``WAIT`` s). ``started`` is set when a handler starts;
    ``runs`` counts the handler runs, ``finished`` those that ended."""

    key = "gate"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.opened = threading.Event()
        self.runs = 0
        self.finished = 0

    def _run(self, input: dict, ctx: Any) -> dict:
        self.runs += 1
        self.started.set()
        self.opened.wait(WAIT)
        self.finished += 1
        return {"level": input["level"]}

    def api_tools(self) -> list[dict]:
        schema = {
            "type": "object",
            "required": ["level"],
            "additionalProperties": False,
            "properties": {"level": {"type": "integer"}},
        }
        write = {"scope": GATE, "permission": "shop.manage", "input_schema": schema}
        return [
            {"name": "gate.set_level", "handler": self._run, **write},
            {"name": "gate.clear_level", "handler": self._run, "danger": "always", **write},
        ]


def gate_executor(ledger: Any, shop: Shop, gate: Gate, rights: Any, clock: Any) -> Executor:
    """An executor over the shop and the gate whose handler timeout outlasts any gate."""
    return Executor(
        Registry([shop, gate]),
        ledger=ledger,
        permissions=rights,
        settings=Settings(handler_timeout=2 * WAIT),
        clock=clock,
    )


def decided_elsewhere(
    ledger_url: str,
    module: Any,
    rights: Any,
    clock: Any,
    posts: list[tuple[str, dict[str, Any] | None]],
    secret: str,
) -> list[httpx.Response]:
    """What another door (``another_door`` over ``module``) answers to each ``(path, body)``
    POST of ``posts``, made with the key ``secret``, in order."""
    with (
        another_door(ledger_url, module, rights, clock) as (_, url),
        httpx.Client(base_url=url, timeout=WAIT) as door,
    ):
        return [door.post(path, headers=bearer(secret), json=body) for path, body in posts]


def log_of(path: Path) -> list[str]:
    """The lines of a write log (none when nothing was written)."""
    return path.read_text().splitlines() if path.exists() else []
