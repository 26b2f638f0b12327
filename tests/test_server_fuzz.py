"""The REST API fuzzed from its own OpenAPI document (schemathesis), over real HTTP: uvicorn on
127.0.0.1, on SQLite and PostgreSQL ledgers.

Whatever schemathesis generates from ``/openapi.json`` (its examples, coverage and fuzzing phases,
valid and invalid data, unexpected methods), sent with a writer's key, with no key, with a bad
key, or with the bearer schemathesis made up itself: no answer is a 5xx, and every error is an
RFC 9457 problem document. Path parameters are drawn from the generated values and from names
that exist (the shop's tools, confirmations held for the key), and invoke bodies from generated
ones and inputs the tools accept, so requests reach the executor and the ledger, not only the 404s.

The run is deterministic (``derandomize``, a fixed seed, no example database) and bounded
(``MAX_EXAMPLES`` per operation, ``INVOKE_EXAMPLES`` for invoke, plus the coverage phase's cases;
each case is sent once per kind of bearer). schemathesis drives the test through its pytest
plugin with a document loaded at import (``schema.parametrize()``): its lazy
``from_fixture`` loader reads ``request.node._nodeid``, which pytest 9.2 no longer has
(schemathesis 4.15). ``test_the_fuzzed_document_is_the_served_one`` ties the two together.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, HookContext, Response
from schemathesis.checks import not_a_server_error

from _serving import uvicorn_serving
from _shop import prices
from test_server_rest import PROBLEM
from turnkit import Executor, Registry
from turnkit.server import create_app

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

MAX_EXAMPLES = 25
"""Fuzzed examples per operation (the coverage phase adds its own cases)."""

INVOKE_EXAMPLES = 60
"""Invoke is where requests reach the tools, the ledger and idempotency: more of its examples."""

CONFIG = {
    "seed": 14,
    "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
    "operations": [
        {
            "include-name": "POST /v1/tools/{name}/invoke",
            "generation": {
                "max-examples": INVOKE_EXAMPLES,
                "deterministic": True,
                "database": "none",
            },
        }
    ],
}
"""schemathesis's configuration: reproducible from run to run, nothing remembered between runs."""

TOOLS = ("shop.list_products", "shop.set_prices", "shop.delete_product")
CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("shop.list_products", {"input": {"limit": 2}}),
    ("shop.list_products", {"input": {}, "dry_run": True}),
    ("shop.set_prices", {"input": prices("TEA-0001", "TEA-0002")}),
    ("shop.delete_product", {"input": {"sku": "TEA-0001"}, "dry_run": True}),
    ("shop.delete_product", {"input": {"sku": "TEA-0002"}}),
)
"""Invokes that run or are held (the document cannot say which inputs a tool takes: ``input`` is
any object, so generated ones reach the tools only to be refused)."""

INVOKE = "POST /v1/tools/{name}/invoke"
BEARERS = ("writer", "none", "bad", "generated")
"""What a request carries: the writer's key, no ``Authorization``, an unknown ``tk_`` secret, or
whatever schemathesis generated for the bearer scheme (negative mode makes up odd ones; its
coverage phase also drops the bearer on purpose, and then even "writer" is a 401)."""
BAD = "tk_" + "A" * 43

HELD = ("held-0", "held-1")
"""Stand-ins for the ids of the confirmations ``held`` makes; the test puts the real ids in
(path parameters are kept URL-encoded in a case, hence nothing here that encoding changes)."""


def _document() -> dict[str, Any]:
    """The app's own OpenAPI document (the same for any registry and ledger)."""
    executor = Executor(Registry())
    try:
        return create_app(executor, mcp_path=None).openapi()
    finally:
        executor.close()


DOCUMENT = _document()
schema = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict(CONFIG))
KNOWN = {"name": TOOLS, "confirmation_id": HELD}


@schema.hook
def flatmap_path_parameters(context: HookContext, parameters: dict[str, Any] | None) -> Any:
    """The generated path parameters, or a tool name or a held confirmation that exists."""
    for name, values in KNOWN.items():
        if parameters and name in parameters:
            real = st.sampled_from(values).map(lambda value, name=name: {name: value})
            return st.one_of(st.just(parameters), real)
    return st.just(parameters)


@schema.hook
def flatmap_case(context: HookContext, case: Case) -> Any:
    """The generated case, or for an invoke the same case calling a tool with an input it takes
    (the generated headers, ``Idempotency-Key`` among them, are kept)."""
    if case.operation.label != INVOKE:
        return st.just(case)
    return st.one_of(st.just(case), st.sampled_from(CALLS).map(lambda call: _calling(case, *call)))


def _calling(case: Case, tool: str, body: dict[str, Any]) -> Case:
    case.path_parameters = {"name": tool}
    case.body = body
    return case


@pytest.fixture
def writer(executor: Executor, clock: Any) -> str:
    """The secret of alice's key, which may read and write the shop."""
    _, secret = executor.ledger.keys.create(
        "alice", {"shop.products:read", "shop.products:write"}, now=clock.now
    )
    return secret


@pytest.fixture
def base_url(executor: Executor) -> Iterator[str]:
    """The app (REST only, 10 kB body limit) served by uvicorn on 127.0.0.1."""
    with uvicorn_serving(create_app(executor, mcp_path=None, max_body_bytes=10_000)) as url:
        yield url


@pytest.fixture
def held(base_url: str, writer: str) -> dict[str, str]:
    """The ids of two deletes held for the writer's key, by their stand-ins in ``HELD``."""
    found = {}
    with httpx.Client(base_url=base_url, headers=_bearer(writer), timeout=10) as client:
        for stand_in, sku in zip(HELD, ("TEA-0001", "TEA-0002"), strict=True):
            answer = client.post(
                "/v1/tools/shop.delete_product/invoke", json={"input": {"sku": sku}}
            )
            assert answer.status_code == 202, answer.text
            found[stand_in] = answer.json()["id"]
    return found


def errors_are_problems(ctx: CheckContext, response: Response, case: Case) -> None:
    """A schemathesis check: a 4xx or 5xx answer is an ``application/problem+json`` document
    whose ``status`` is the response's and which names a ``code``."""
    if response.status_code < 400:
        return
    kind = response.headers.get("content-type", [""])[0]
    assert kind == PROBLEM, f"a {response.status_code} answered as {kind!r}, not {PROBLEM}"
    body = response.json()
    assert body["status"] == response.status_code, body
    assert body["code"], body
    assert body["title"], body
    assert body["detail"], body
    assert "Traceback" not in response.text


def test_the_fuzzed_document_is_the_served_one(base_url: str) -> None:
    assert httpx.get(f"{base_url}/openapi.json", timeout=10).json() == DOCUMENT


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one server per item
def test_no_generated_request_gets_a_5xx_and_errors_are_problems(
    case: Case, base_url: str, writer: str, held: dict[str, str]
) -> None:
    parameters = case.path_parameters or {}
    if "confirmation_id" in parameters:
        stand_in = parameters["confirmation_id"]
        parameters["confirmation_id"] = held.get(stand_in, stand_in)
    generated = dict(case.headers or {})
    without = {k: v for k, v in generated.items() if k.lower() != "authorization"}
    for bearer in BEARERS:
        case.headers = without if bearer == "none" else generated
        headers = {"writer": _bearer(writer), "bad": _bearer(BAD)}.get(bearer)
        response = case.call(base_url=base_url, headers=headers, timeout=10)
        case.validate_response(response, checks=[not_a_server_error, errors_are_problems])


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}
