"""What the core decides for every door, pinned through REST (``/v1``) over real HTTP (uvicorn on
127.0.0.1, httpx with keep-alive), on SQLite and PostgreSQL (docs/architecture.md §4, "Seven doors,
one promise"): which declaration may run a held write, a revoked or expired key's holds, holds that
reserve the rate limit and are capped, pages and filters of confirmations, single-use run tokens, an
idempotency key whose first call still runs, a door's own settings, and the operator's
``hold_key_writes``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _doors import (
    GATE,
    WAIT,
    Disabled,
    Gate,
    Impostor,
    Keys,
    Reshaped,
    assert_problem,
    bearer,
    decided_elsewhere,
    hold_delete,
    log_of,
    make_keys,
)
from _serving import uvicorn_serving
from _shop import prices
from turnkit import Caller, Executor, Registry, Settings
from turnkit.server import create_app

ROOT = Caller.session("root")
"""A person who may decide anyone's confirmations (``system.confirm_any``)."""


@pytest.fixture
def keys(executor, clock) -> Keys:
    return make_keys(executor, clock.now)


@pytest.fixture
def http(executor) -> Iterator[httpx.Client]:
    """A keep-alive client of the executor's app (REST and the inbox) on 127.0.0.1."""
    with (
        uvicorn_serving(create_app(executor, mcp_path=None)) as url,
        httpx.Client(base_url=url, timeout=WAIT) as client,
    ):
        yield client


def status_of(http: httpx.Client, confirmation_id: str, secret: str) -> str:
    found = http.get(f"/v1/confirmations/{confirmation_id}", headers=bearer(secret))
    assert found.status_code == 200, found.text
    return str(found.json()["status"])


def stored(executor: Executor) -> int:
    """How many confirmations the ledger keeps, whatever their status."""
    return int(executor.ledger._rows("SELECT COUNT(*) FROM turnkit_confirmations")[0][0])


# --- 1. a held write runs only under the declaration that held it ----------------------------


@pytest.mark.parametrize("module", [Impostor, Reshaped], ids=["other-handler", "other-schema"])
def test_a_door_declaring_the_tool_differently_refuses_to_approve_and_it_stays_pending(
    http, keys, shop, ledger_url, rights, clock, tmp_path, module
):
    held = hold_delete(http, keys["writer"])
    other = module(tmp_path / "other.log")
    posts = [(f"/v1/confirmations/{held}/approve", None)]
    (refused,) = decided_elsewhere(ledger_url, other, rights, clock, posts, keys["root"])
    body = assert_problem(refused, 409, "cannot_decide_here")
    assert "module 'shop'" in body["detail"]
    assert "still pending" in body["detail"]
    assert status_of(http, held, keys["root"]) == "pending"
    assert log_of(other.log) == []
    assert shop.writes() == []


def test_a_door_declaring_the_tool_differently_refuses_an_edit_too(
    http, keys, shop, ledger_url, rights, clock, tmp_path
):
    held = hold_delete(http, keys["writer"])
    impostor = Impostor(tmp_path / "impostor.log")
    posts = [(f"/v1/confirmations/{held}/edit", {"arguments": {"sku": "TEA-0002"}})]
    (edited,) = decided_elsewhere(ledger_url, impostor, rights, clock, posts, keys["root"])
    assert_problem(edited, 409, "cannot_decide_here")
    assert status_of(http, held, keys["root"]) == "pending"
    assert log_of(impostor.log) == []
    assert shop.writes() == []


def test_a_door_that_does_not_declare_the_tool_refuses_to_approve_and_names_its_module(
    http, keys, shop, ledger_url, rights, clock
):
    held = hold_delete(http, keys["writer"])
    posts = [(f"/v1/confirmations/{held}/approve", None)]
    (refused,) = decided_elsewhere(ledger_url, Gate(), rights, clock, posts, keys["root"])
    body = assert_problem(refused, 409, "cannot_decide_here")
    assert "does not declare the tool 'shop.delete_product'" in body["detail"]
    assert "module 'shop'" in body["detail"]
    assert status_of(http, held, keys["root"]) == "pending"
    assert shop.writes() == []


def test_a_door_where_the_module_is_disabled_refuses_to_approve_and_it_stays_pending(
    http, keys, shop, ledger_url, rights, clock, tmp_path
):
    held = hold_delete(http, keys["writer"])
    disabled = Disabled(tmp_path / "disabled.log")
    posts = [(f"/v1/confirmations/{held}/approve", None)]
    (refused,) = decided_elsewhere(ledger_url, disabled, rights, clock, posts, keys["root"])
    body = assert_problem(refused, 409, "cannot_decide_here")
    assert "disabled" in body["detail"]
    assert status_of(http, held, keys["root"]) == "pending"
    assert log_of(disabled.log) == []
    assert shop.writes() == []


def test_the_door_that_held_a_write_approves_it_after_another_door_refused_and_it_runs_once(
    http, keys, shop, ledger_url, rights, clock, tmp_path
):
    held = hold_delete(http, keys["writer"])
    impostor = Impostor(tmp_path / "impostor.log")
    posts = [(f"/v1/confirmations/{held}/approve", None)]
    (refused,) = decided_elsewhere(ledger_url, impostor, rights, clock, posts, keys["root"])
    assert refused.status_code == 409, refused.text
    approved = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "done"
    assert approved.json()["outcome"]["result"] == {"deleted": "TEA-0001"}
    assert shop.writes() == [{"tool": "delete_product", "input": {"sku": "TEA-0001"}}]
    assert log_of(impostor.log) == []


def test_a_door_declaring_the_tool_differently_may_reject_and_nothing_runs(
    http, keys, shop, ledger_url, rights, clock, tmp_path
):
    held = hold_delete(http, keys["writer"])
    impostor = Impostor(tmp_path / "impostor.log")
    posts = [
        (f"/v1/confirmations/{held}/approve", None),
        (f"/v1/confirmations/{held}/reject", {"message": "not here"}),
    ]
    refused, rejected = decided_elsewhere(ledger_url, impostor, rights, clock, posts, keys["root"])
    assert refused.status_code == 409, refused.text
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["status"] == "rejected"
    assert status_of(http, held, keys["root"]) == "rejected"
    assert shop.writes() == []
    assert log_of(impostor.log) == []


# --- 2. a revoked or expired key's held write never runs --------------------------------------


def test_approving_a_write_held_under_a_revoked_key_closes_it_forbidden_and_runs_nothing(
    http, keys, executor, shop
):
    held = hold_delete(http, keys["holder"])
    assert executor.ledger.keys.revoke(keys.made["holder"].id)
    approved = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "forbidden"
    error = approved.json()["outcome"]["error"]
    assert (error["code"], error["details"]["reason"]) == ("forbidden", "key revoked")
    assert shop.writes() == []
    again = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    assert_problem(again, 409, "already_decided")
    assert shop.writes() == []


def test_approving_a_write_held_under_an_expired_key_closes_it_forbidden(http, keys, shop, clock):
    held = hold_delete(http, keys["brief"])
    clock.now += 61  # the key expired; the confirmation (an hour) did not
    approved = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "forbidden"
    assert approved.json()["outcome"]["error"]["details"]["reason"] == "key expired"
    assert shop.writes() == []


def test_ending_a_revoked_keys_holds_lists_each_as_forbidden(http, keys, executor, shop):
    held = [hold_delete(http, keys["holder"], sku) for sku in ("TEA-0001", "TEA-0002")]
    key = keys.made["holder"]
    assert executor.ledger.keys.revoke(key.id)
    assert executor.end_key_holds(executor.ledger.keys.get(key.id)) == 2
    root = bearer(keys["root"])
    assert http.get("/v1/confirmations", headers=root).json() == []
    closed = http.get("/v1/confirmations", headers=root, params={"status": "forbidden"}).json()
    assert sorted(c["id"] for c in closed) == sorted(held)
    assert {c["outcome"]["error"]["details"]["reason"] for c in closed} == {"key revoked"}
    assert shop.writes() == []


# --- 3. holds are not free: they reserve the rate limit, and are capped -------------------------


def test_holds_reserve_the_rate_limit_and_one_past_it_is_429_with_nothing_held(
    http, keys, executor
):
    executor.ledger.set_setting("rate_limit_units", 3)
    for sku in ("TEA-0001", "TEA-0002", "TEA-0003"):
        hold_delete(http, keys["holder"], sku)
    fourth = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=bearer(keys["holder"]),
        json={"input": {"sku": "TEA-0004"}},
    )
    assert_problem(fourth, 429, "rate_limited")
    assert int(fourth.headers["retry-after"]) >= 1
    assert stored(executor) == 3


def test_holds_that_reserve_the_whole_budget_leave_no_room_for_reads(http, keys, executor):
    executor.ledger.set_setting("rate_limit_units", 3)
    for sku in ("TEA-0001", "TEA-0002", "TEA-0003"):
        hold_delete(http, keys["holder"], sku)
    read = http.post("/v1/tools/shop.list_products/invoke", headers=bearer(keys["holder"]))
    assert_problem(read, 429, "rate_limited")
    assert "retry-after" in read.headers


def test_a_rejected_hold_gives_its_units_back(http, keys, executor):
    executor.ledger.set_setting("rate_limit_units", 3)
    held = [hold_delete(http, keys["holder"], f"TEA-000{n}") for n in (1, 2, 3)]
    full = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=bearer(keys["holder"]),
        json={"input": {"sku": "TEA-0004"}},
    )
    assert full.status_code == 429, full.text
    rejected = http.post(f"/v1/confirmations/{held[0]}/reject", headers=bearer(keys["root"]))
    assert rejected.status_code == 200, rejected.text
    hold_delete(http, keys["holder"], "TEA-0004")
    assert stored(executor) == 4


@pytest.fixture
def long_window(executor) -> None:
    """Three units per two hours; a confirmation waits one minute: holds expire in the window
    whose units they reserved."""
    settings = {"rate_limit_units": 3, "rate_limit_window": 7200, "confirmation_ttl": 60}
    for name, value in settings.items():
        executor.ledger.set_setting(name, value)


def hold_fits(http: httpx.Client, secret: str, sku: str) -> bool:
    """Whether a delete is held now (False: refused for the rate limit)."""
    answer = http.post(
        "/v1/tools/shop.delete_product/invoke", headers=bearer(secret), json={"input": {"sku": sku}}
    )
    assert answer.status_code in (202, 429), answer.text
    return answer.status_code == 202


def test_an_expired_hold_closed_by_a_decision_gives_its_units_back(http, keys, clock, long_window):
    held = [hold_delete(http, keys["holder"], f"TEA-000{n}") for n in (1, 2, 3)]
    assert not hold_fits(http, keys["holder"], "TEA-0004")
    clock.now += 61
    late = http.post(f"/v1/confirmations/{held[0]}/approve", headers=bearer(keys["root"]))
    assert_problem(late, 410, "confirmation_expired")
    assert hold_fits(http, keys["holder"], "TEA-0004")


def test_an_expired_hold_nobody_decided_gives_its_units_back(http, keys, clock, long_window):
    for n in (1, 2, 3):
        hold_delete(http, keys["holder"], f"TEA-000{n}")
    assert not hold_fits(http, keys["holder"], "TEA-0004")
    clock.now += 61
    assert hold_fits(http, keys["holder"], "TEA-0005")


def test_two_keys_of_one_user_share_the_users_budget(http, keys, executor):
    executor.ledger.set_setting("rate_limit_units", 3)
    url = "/v1/tools/shop.list_products/invoke"
    for name in ("holder", "holder", "twin"):
        assert http.post(url, headers=bearer(keys[name])).status_code == 200
    assert_problem(http.post(url, headers=bearer(keys["twin"])), 429, "rate_limited")
    assert_problem(http.post(url, headers=bearer(keys["holder"])), 429, "rate_limited")
    assert http.post(url, headers=bearer(keys["reader"])).status_code == 200  # bob's own budget


def test_past_the_cap_of_pending_holds_a_hold_is_429_too_many_pending_and_nothing_is_held(
    http, keys, executor, shop
):
    executor.ledger.set_setting("max_pending_holds", 2)
    hold_delete(http, keys["holder"], "TEA-0001")
    hold_delete(http, keys["holder"], "TEA-0002")
    third = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=bearer(keys["holder"]),
        json={"input": {"sku": "TEA-0003"}},
    )
    body = assert_problem(third, 429, "too_many_pending")
    assert int(third.headers["retry-after"]) >= 1
    assert "max_pending_holds" in body["detail"]
    assert "decided first" in body["detail"]
    assert stored(executor) == 2
    assert shop.writes() == []


def test_a_hold_refused_for_the_cap_may_be_sent_again_with_its_idempotency_key(
    http, keys, executor
):
    executor.ledger.set_setting("max_pending_holds", 1)
    first = hold_delete(http, keys["holder"], "TEA-0001")
    again = {"Idempotency-Key": "second"}
    refused = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=bearer(keys["holder"]) | again,
        json={"input": {"sku": "TEA-0002"}},
    )
    assert_problem(refused, 429, "too_many_pending")
    assert http.post(f"/v1/confirmations/{first}/reject", headers=bearer(keys["root"])).is_success
    second = hold_delete(http, keys["holder"], "TEA-0002", **again)  # a hold, not a replay
    assert second != first
    assert stored(executor) == 2


# --- 3. confirmations listed a page at a time, filtered ----------------------------------------


def test_confirmations_are_paged_by_their_link_header_each_once_in_order(http, keys, clock):
    held = []
    for n in range(5):
        held.append(hold_delete(http, keys["holder"], f"TEA-000{n}"))
        clock.now += 1
    pages: list[list[str]] = []
    following: str | None = "/v1/confirmations?limit=2"
    while following is not None:
        page = http.get(following, headers=bearer(keys["root"]))
        assert page.status_code == 200, page.text
        pages.append([c["id"] for c in page.json()])
        following = page.links.get("next", {}).get("url")
        assert len(pages) <= 5, "the Link header never ends"
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [c for page in pages for c in page] == held


def test_the_link_to_the_next_page_keeps_the_filter(http, keys, clock):
    deletes = []
    for n in range(3):
        deletes.append(hold_delete(http, keys["holder"], f"TEA-000{n}"))
        clock.now += 1
        batch = prices(*[f"TEA-{m:04d}" for m in range(51 + n)])  # held: over the batch size
        answer = http.post(
            "/v1/tools/shop.set_prices/invoke",
            headers=bearer(keys["holder"]),
            json={"input": batch},
        )
        assert answer.status_code == 202, answer.text
        clock.now += 1
    root = bearer(keys["root"])
    only = {"tool": "shop.delete_product", "limit": 2}
    first = http.get("/v1/confirmations", headers=root, params=only)
    second = http.get(first.links["next"]["url"], headers=root)
    assert [c["id"] for c in first.json() + second.json()] == deletes
    assert "next" not in second.links


def test_confirmations_filter_by_tool(http, keys):
    delete = hold_delete(http, keys["holder"])
    batch = prices(*[f"TEA-{n:04d}" for n in range(51)])  # over confirm_batch_over: held
    held = http.post(
        "/v1/tools/shop.set_prices/invoke", headers=bearer(keys["holder"]), json={"input": batch}
    )
    assert held.status_code == 202, held.text
    root = bearer(keys["root"])
    for tool, expected in (("shop.set_prices", held.json()["id"]), ("shop.delete_product", delete)):
        listed = http.get("/v1/confirmations", headers=root, params={"tool": tool}).json()
        assert [c["id"] for c in listed] == [expected]


def test_confirmations_filter_by_status(http, keys, clock):
    rejected = hold_delete(http, keys["holder"], "TEA-0001")
    clock.now += 1
    pending = hold_delete(http, keys["holder"], "TEA-0002")
    root = bearer(keys["root"])
    assert http.post(f"/v1/confirmations/{rejected}/reject", headers=root).status_code == 200

    def listed(**params: str) -> list[str]:
        return [c["id"] for c in http.get("/v1/confirmations", headers=root, params=params).json()]

    assert listed() == [pending]
    assert listed(status="rejected") == [rejected]
    assert listed(status="all") == [rejected, pending]


def test_confirmations_filter_by_the_thread_they_were_held_in(http, keys, executor):
    key = keys.made["holder"]
    in_thread = executor.execute(
        key.caller, "shop.delete_product", {"sku": "TEA-0001"}, allow=key.allowed, thread="t1"
    )
    assert in_thread["status"] == "confirmation_required", in_thread
    hold_delete(http, keys["holder"], "TEA-0002")  # REST has no thread
    listed = http.get("/v1/confirmations", headers=bearer(keys["root"]), params={"thread": "t1"})
    assert [c["id"] for c in listed.json()] == [in_thread["confirmation_id"]]


@pytest.mark.parametrize("cursor", ["nonsense!", "bm9uc2Vuc2U", "W251bGwsMV0"])
def test_a_cursor_no_link_gave_is_a_422_problem(http, keys, cursor):
    hold_delete(http, keys["holder"])
    answer = http.get("/v1/confirmations", headers=bearer(keys["root"]), params={"after": cursor})
    body = assert_problem(answer, 422, "invalid_request")
    assert "cursor" in body["detail"]


def test_a_key_without_the_decide_scope_lists_its_own_holds_as_not_decidable(http, keys):
    held = [hold_delete(http, keys["holder"], sku) for sku in ("TEA-0001", "TEA-0002")]
    own = http.get("/v1/confirmations", headers=bearer(keys["holder"])).json()
    assert sorted(c["id"] for c in own) == sorted(held)
    assert {c["decidable"] for c in own} == {False}
    root = http.get("/v1/confirmations", headers=bearer(keys["root"])).json()
    assert {c["decidable"] for c in root} == {True}
    assert http.get("/v1/confirmations", headers=bearer(keys["reader"])).json() == []


def test_a_confirmation_whose_time_ran_out_is_listed_as_not_decidable(http, keys, clock):
    held = hold_delete(http, keys["holder"])
    clock.now += 2 * 3600  # past the hour a confirmation waits
    root = bearer(keys["root"])
    [listed] = http.get("/v1/confirmations", headers=root, params={"status": "all"}).json()
    assert listed["id"] == held
    assert listed["decidable"] is False
    approved = http.post(f"/v1/confirmations/{held}/approve", headers=root)
    assert_problem(approved, 410, "confirmation_expired")


# --- 5. no token in the REST body; a run token runs one call once ------------------------------


def test_a_confirm_token_in_the_body_is_422_saying_where_a_person_approves(
    http, keys, executor, shop
):
    sent = {"input": {"sku": "TEA-0001"}, "confirm_token": "a-token-from-somewhere"}
    answer = http.post(
        "/v1/tools/shop.delete_product/invoke", headers=bearer(keys["writer"]), json=sent
    )
    body = assert_problem(answer, 422, "invalid_request")
    assert "/v1/confirmations/{id}/approve" in body["detail"]
    assert stored(executor) == 0
    assert shop.writes() == []


@pytest.fixture
def tokens(ledger, monkeypatch) -> list[tuple[str, str]]:
    """Every ``(confirmation id, run token)`` an approval made, as the ledger stored them (the
    token is spent before the write runs, so the column no longer holds it then)."""
    made: list[tuple[str, str]] = []
    claim = ledger.claim_confirmation

    def spy(confirmation_id: str, **given: Any) -> bool:
        won = claim(confirmation_id, **given)
        if won:
            made.append((confirmation_id, given["token"]))
        return won

    monkeypatch.setattr(ledger, "claim_confirmation", spy)
    return made


def test_a_run_token_replayed_while_its_write_runs_is_refused_and_runs_nothing(
    gated, gate, tokens, clock
):
    key, _ = gated.ledger.keys.create("alice", {GATE}, now=clock.now)
    held = gated.execute(key.caller, "gate.clear_level", {"level": 1}, allow=key.allowed)
    decided: list[Any] = []
    approving = threading.Thread(
        target=lambda: decided.append(gated.confirm(held["confirmation_id"], ROOT, "approve"))
    )
    approving.start()
    try:
        assert gate.started.wait(WAIT), "the approved write did not start"
        [(_, token)] = tokens
        again = {"confirm_token": token}
        replay = gated.execute(key.caller, "gate.clear_level", {"level": 1}, again)
        assert replay["status"] == "error", replay
        assert replay["error"]["code"] == "forbidden"
        assert gate.runs == 1
    finally:
        gate.opened.set()
        approving.join(WAIT)
    assert decided[0]["status"] == "ok", decided
    assert gate.runs == 1


def test_the_run_token_of_a_done_write_runs_nothing_again(executor, keys, tokens, shop):
    key = keys.made["holder"]
    held = executor.execute(key.caller, "shop.delete_product", {"sku": "TEA-0001"})
    assert executor.confirm(held["confirmation_id"], ROOT, "approve")["status"] == "ok"
    [(_, token)] = tokens
    replay = executor.execute(
        key.caller, "shop.delete_product", {"sku": "TEA-0001"}, {"confirm_token": token}
    )
    assert replay["status"] == "error", replay
    assert replay["error"]["code"] == "forbidden"
    assert len(shop.writes()) == 1


# --- 6. a repeat while the first call runs is answered at once ---------------------------------


def test_a_repeat_while_the_first_call_runs_is_409_in_progress_at_once_then_replays(
    gated, gate, clock
):
    _, secret = gated.ledger.keys.create("alice", {GATE}, now=clock.now)
    headers = bearer(secret) | {"Idempotency-Key": "k"}
    url = "/v1/tools/gate.set_level/invoke"
    with (
        uvicorn_serving(create_app(gated, mcp_path=None)) as base,
        httpx.Client(base_url=base, timeout=WAIT) as http,
    ):
        first: list[httpx.Response] = []

        def send_first() -> None:
            with httpx.Client(base_url=base, timeout=WAIT) as own:
                first.append(own.post(url, headers=headers, json={"input": {"level": 3}}))

        running = threading.Thread(target=send_first)
        running.start()
        try:
            assert gate.started.wait(WAIT), "the first call's handler did not start"
            repeat = http.post(url, headers=headers, json={"input": {"level": 3}})
            body = assert_problem(repeat, 409, "in_progress")
            assert int(repeat.headers["retry-after"]) >= 1
            assert "nothing ran for this one" in body["detail"]
            assert (gate.finished, first) == (0, [])  # answered while the first still ran
        finally:
            gate.opened.set()
            running.join(WAIT)
        assert first[0].status_code == 200, first[0].text
        again = http.post(url, headers=headers, json={"input": {"level": 3}})
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["result"] == first[0].json()["result"] == {"level": 3}
    assert gate.runs == 1


# --- 7. a door's own settings never burn a confirmation ----------------------------------------


@pytest.fixture
def acting(ledger, shop, rights, clock) -> Iterator[Executor]:
    """An application whose agent may act in the shop, said in code (not in the ledger)."""
    settings = Settings(handler_timeout=2.0, api_session_write_modules={"shop"})
    executor = Executor(
        Registry([shop]), ledger=ledger, permissions=rights, settings=settings, clock=clock
    )
    yield executor
    executor.close()


def hold_for_alice(acting: Executor) -> str:
    """Alice's agent changes a price in the acting application: held for her yes."""
    answer = acting.execute(Caller.session("alice"), "shop.set_prices", prices())
    assert answer["status"] == "confirmation_required", answer
    return str(answer["confirmation_id"])


def test_a_door_whose_settings_leave_out_the_agents_module_refuses_to_approve_and_it_stays_pending(
    http, keys, acting, shop
):
    held = hold_for_alice(acting)
    refused = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    body = assert_problem(refused, 409, "cannot_decide_here")
    assert "api_session_write_modules" in body["detail"]
    assert body["details"]["setting"] == "api_session_write_modules"
    assert status_of(http, held, keys["root"]) == "pending"
    assert shop.writes() == []
    assert acting.confirm(held, Caller.session("alice"), "approve")["status"] == "ok"
    assert len(shop.writes()) == 1


def test_once_the_operators_ledger_setting_leaves_the_module_out_the_refusing_door_closes_it(
    http, keys, acting, executor, shop
):
    held = hold_for_alice(acting)
    refused = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    assert_problem(refused, 409, "cannot_decide_here")  # only this door's code differs
    executor.ledger.set_setting("api_session_write_modules", [])  # now every door agrees: no
    approved = http.post(f"/v1/confirmations/{held}/approve", headers=bearer(keys["root"]))
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "done"
    assert approved.json()["outcome"]["error"]["code"] == "forbidden"
    assert shop.writes() == []


# --- 12. the operator may hold every key write --------------------------------------------------


def test_with_hold_key_writes_a_keys_small_write_is_held(http, keys, executor, shop):
    executor.ledger.set_setting("hold_key_writes", True)
    answer = http.post(
        "/v1/tools/shop.set_prices/invoke", headers=bearer(keys["holder"]), json={"input": prices()}
    )
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "pending"
    assert shop.writes() == []


def test_with_hold_key_writes_the_tool_list_says_the_operator_holds_writes(http, keys, executor):
    executor.ledger.set_setting("hold_key_writes", True)
    listed = http.get("/v1/tools", headers=bearer(keys["holder"])).json()
    by_name = {tool["name"]: tool for tool in listed}
    assert by_name["shop.set_prices"]["hold_rule"] == "operator"
    assert by_name["shop.set_prices"]["would_hold"] is True
    assert by_name["shop.list_products"]["hold_rule"] == "never"
    one = http.get("/v1/tools/shop.set_prices", headers=bearer(keys["holder"])).json()
    assert (one["hold_rule"], one["would_hold"]) == ("operator", True)
