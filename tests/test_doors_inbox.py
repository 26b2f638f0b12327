"""What the core decides for every door, pinned through the web inbox (``/ui/``) over real HTTP, on
SQLite and PostgreSQL (docs/architecture.md §4, "Seven doors, one promise"): a door that cannot run
a held write as it was held applies nothing and says why, a revoked key's hold closes forbidden,
pages of fifty with filters, which cards still wait, and a history that says whether a write ran."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from _doors import (
    WAIT,
    Impostor,
    Keys,
    another_door,
    bearer,
    cards,
    csrf_of,
    history_row,
    hold_delete,
    log_of,
    make_keys,
    sign_in,
)
from _serving import uvicorn_serving
from _shop import prices
from turnkit import Caller, Executor, Registry, Settings
from turnkit.server import create_app


@pytest.fixture
def keys(executor, clock) -> Keys:
    return make_keys(executor, clock.now)


@pytest.fixture
def served(executor) -> Iterator[str]:
    """The executor's app (REST and the inbox) on 127.0.0.1; its base URL."""
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        yield url


@pytest.fixture
def http(served) -> Iterator[httpx.Client]:
    """A keep-alive API client of the served app."""
    with httpx.Client(base_url=served, timeout=WAIT) as client:
        yield client


@pytest.fixture
def root(served, keys) -> Iterator[httpx.Client]:
    """Root, who may decide anyone's confirmations, signed in to the inbox (cookies kept)."""
    with httpx.Client(base_url=served, timeout=WAIT, follow_redirects=True) as client:
        sign_in(client, keys["root"])
        yield client


def hold_as(executor: Executor, keys: Keys, name: str, sku: str, **options: str) -> str:
    """A delete held for the key ``name`` (as REST would, with ``options`` such as a thread)."""
    key = keys.made[name]
    answer = executor.execute(
        key.caller, "shop.delete_product", {"sku": sku}, allow=key.allowed, **options
    )
    assert answer["status"] == "confirmation_required", answer
    return str(answer["confirmation_id"])


def decide(client: httpx.Client, confirmation_id: str, action: str) -> httpx.Response:
    """Press a card's button on the inbox page (its form's CSRF token included)."""
    token = csrf_of(client.get("/ui/"))
    return client.post(f"/ui/confirmations/{confirmation_id}/{action}", data={"csrf": token})


# --- 1. a door that declares the tool differently applies nothing --------------------------------


def test_the_inbox_of_a_door_declaring_the_tool_differently_applies_nothing_and_says_why(
    executor, keys, shop, ledger_url, rights, clock, tmp_path
):
    held = hold_as(executor, keys, "holder", "TEA-0001")
    impostor = Impostor(tmp_path / "impostor.log")
    with (
        another_door(ledger_url, impostor, rights, clock) as (_, url),
        httpx.Client(base_url=url, timeout=WAIT, follow_redirects=True) as door,
    ):
        sign_in(door, keys["root"])
        page = decide(door, held, "approve")
    assert "Nothing was applied" in page.text
    assert "module &#39;shop&#39;" in page.text
    assert "still pending" in page.text
    assert executor.confirmation(held).status == "pending"
    assert shop.writes() == []
    assert log_of(impostor.log) == []


def test_the_inbox_of_a_door_declaring_the_tool_differently_may_reject_though_not_approve(
    executor, keys, shop, ledger_url, rights, clock, tmp_path
):
    held = hold_as(executor, keys, "holder", "TEA-0001")
    impostor = Impostor(tmp_path / "impostor.log")
    with (
        another_door(ledger_url, impostor, rights, clock) as (_, url),
        httpx.Client(base_url=url, timeout=WAIT, follow_redirects=True) as door,
    ):
        sign_in(door, keys["root"])
        assert decide(door, held, "approve").status_code == 409  # as REST: this door's own
        rejected = decide(door, held, "reject")
    assert rejected.status_code == 200
    assert "rejected; nothing ran" in rejected.text
    assert executor.confirmation(held).status == "rejected"
    assert shop.writes() == []
    assert log_of(impostor.log) == []


# --- 2. a revoked key's held write never runs ---------------------------------------------------


def test_approving_in_the_inbox_a_write_held_under_a_revoked_key_closes_it_forbidden(
    root, executor, keys, shop
):
    held = hold_as(executor, keys, "holder", "TEA-0001")
    assert executor.ledger.keys.revoke(keys.made["holder"].id)
    page = decide(root, held, "approve")
    assert page.status_code == 200
    assert "revoked" in page.text
    assert "the write ran" not in page.text
    assert executor.confirmation(held).status == "forbidden"
    assert cards(page.text) == []
    assert shop.writes() == []


def test_the_history_says_no_write_ran_for_the_holds_of_a_revoked_key(root, executor, keys):
    held = hold_as(executor, keys, "holder", "TEA-0001")
    key = keys.made["holder"]
    executor.ledger.keys.revoke(key.id)
    assert executor.end_key_holds(executor.ledger.keys.get(key.id)) == 1
    assert held not in cards(root.get("/ui/").text)
    row = history_row(root.get("/ui/history", params={"status": "forbidden"}).text, held)
    assert "<td>forbidden</td>" in row
    assert "no write ran (forbidden: forbidden, key revoked)" in row


# --- 3. pages of fifty, filters, and which cards still wait -------------------------------------


def test_the_inbox_shows_fifty_cards_and_its_next_link_shows_the_rest(root, executor, keys, clock):
    held = []
    for n in range(60):
        held.append(hold_as(executor, keys, "holder", f"TEA-{n:04d}"))
        clock.now += 1
    first = root.get("/ui/")
    assert cards(first.text) == held[:50]
    following = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert following is not None, "no link to the next page"
    second = root.get(following.group(1).replace("&amp;", "&"))
    assert cards(second.text) == held[50:]
    assert 'rel="next"' not in second.text


def test_the_inbox_next_link_keeps_the_tool_filter(root, executor, keys, clock):
    key = keys.made["holder"]
    batch = prices(*[f"TEA-{n:04d}" for n in range(51)])  # over confirm_batch_over: held
    answer = executor.execute(key.caller, "shop.set_prices", batch, allow=key.allowed)
    assert answer["status"] == "confirmation_required", answer
    deletes = []
    for n in range(51):
        clock.now += 1
        deletes.append(hold_as(executor, keys, "holder", f"TEA-{n:04d}"))
    first = root.get("/ui/", params={"tool": "shop.delete_product"})
    assert cards(first.text) == deletes[:50]
    following = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert following is not None, "no link to the next page"
    assert cards(root.get(following.group(1).replace("&amp;", "&")).text) == deletes[50:]


def test_the_history_shows_fifty_rows_newest_first_and_its_older_link_the_rest(
    root, executor, keys, clock
):
    decided = []
    for n in range(51):
        held = hold_as(executor, keys, "holder", f"TEA-{n:04d}")
        assert executor.confirm(held, Caller.session("root"), "reject")["status"] == "rejected"
        decided.append(held)
        clock.now += 1
    first = root.get("/ui/history").text
    assert re.findall(r'<tr data-id="([^"]+)">', first) == decided[::-1][:50]
    older = re.search(r'<a href="([^"]+)" rel="next">Older</a>', first)
    assert older is not None, "no link to older rows"
    rest = root.get(older.group(1).replace("&amp;", "&")).text
    assert re.findall(r'<tr data-id="([^"]+)">', rest) == decided[:1]


def test_the_inbox_filters_by_tool(root, executor, keys):
    delete = hold_as(executor, keys, "holder", "TEA-0001")
    key = keys.made["holder"]
    batch = prices(*[f"TEA-{n:04d}" for n in range(51)])  # over confirm_batch_over: held
    answer = executor.execute(key.caller, "shop.set_prices", batch, allow=key.allowed)
    assert answer["status"] == "confirmation_required", answer
    assert cards(root.get("/ui/", params={"tool": "shop.delete_product"}).text) == [delete]
    shown = cards(root.get("/ui/", params={"tool": "shop.set_prices"}).text)
    assert shown == [answer["confirmation_id"]]


def test_the_inbox_filters_by_conversation_and_says_which_one(root, executor, keys):
    ours = hold_as(executor, keys, "holder", "TEA-0001", thread="t1")
    hold_as(executor, keys, "holder", "TEA-0002", thread="t2")
    page = root.get("/ui/", params={"thread": "t1"}).text
    assert cards(page) == [ours]
    assert "In conversation <code>t1</code>" in page


def test_pending_json_tells_which_of_the_cards_asked_about_still_wait(root, executor, keys, clock):
    first = hold_as(executor, keys, "holder", "TEA-0001")
    clock.now += 1
    decided = hold_as(executor, keys, "holder", "TEA-0002")
    clock.now += 1
    other = hold_as(executor, keys, "holder", "TEA-0003")
    assert decide(root, decided, "reject").status_code == 200
    asked = root.get("/ui/pending.json", params={"ids": f"{first},{decided}"}).json()
    assert asked == {"signed_in": True, "ids": [first]}
    every = root.get("/ui/pending.json", params={"ids": f"{decided},{other},{first}"}).json()
    assert every["ids"] == [first, other]


# --- 7. a door's own settings never burn a confirmation -----------------------------------------


def test_the_inbox_of_a_door_whose_settings_leave_out_the_agents_module_applies_nothing(
    root, ledger, executor, shop, rights, clock
):
    settings = Settings(handler_timeout=2.0, api_session_write_modules={"shop"})
    acting = Executor(
        Registry([shop]), ledger=ledger, permissions=rights, settings=settings, clock=clock
    )
    try:
        answer = acting.execute(Caller.session("alice"), "shop.set_prices", prices())
    finally:
        acting.close()
    assert answer["status"] == "confirmation_required", answer
    held = answer["confirmation_id"]
    page = decide(root, held, "approve")
    assert "Nothing was applied" in page.text
    assert "api_session_write_modules" in page.text
    assert executor.confirmation(held).status == "pending"
    assert held in cards(root.get("/ui/").text)
    assert shop.writes() == []


# --- 10. the history says no write ran for a repeat of a rejected call --------------------------


def test_the_history_says_no_write_ran_for_a_rejected_write_repeated_with_its_idempotency_key(
    http, root, keys, shop
):
    held = hold_delete(http, keys["holder"], "TEA-0001", **{"Idempotency-Key": "k1"})
    rejected = http.post(f"/v1/confirmations/{held}/reject", headers=bearer(keys["root"]))
    assert rejected.status_code == 200, rejected.text
    repeat = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=bearer(keys["holder"]) | {"Idempotency-Key": "k1"},
        json={"input": {"sku": "TEA-0001"}},
    )
    assert repeat.status_code == 200, repeat.text
    assert repeat.headers["idempotent-replayed"] == "true"
    assert (repeat.json()["status"], repeat.json()["executed"]) == ("rejected", False)
    row = history_row(root.get("/ui/history").text, held)
    assert "no write ran (rejected)" in row
    assert "replayed" not in row
    assert shop.writes() == []
