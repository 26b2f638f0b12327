"""The inbox's page of one confirmation, history's times and reasons, and bulk decisions, over
real HTTP on SQLite and PostgreSQL (docs/architecture.md, "Deciding well"). The browser flows of
the same pages are in ``test_web_inbox_browser_detail.py``.

Reaches ``turnkit.executor.confirmations`` for ``DECIDE_SCOPE`` (no public name exposes it) and
``turnkit.server.ui`` internals for the fold size and the relative times."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from _doors import cards, csrf_of, history_row
from _serving import uvicorn_serving
from _shop import Shop, prices
from turnkit import Caller, Executor, Registry, Settings, StaticPermissions
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.server import create_app
from turnkit.server.ui.present import ago
from turnkit.server.ui.views import GROUP_OVER

ALICE = Caller.session("alice")
BOB = Caller.session("bob")


@pytest.fixture
def served(executor) -> Iterator[str]:
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        yield url


@contextmanager
def person(served: str, executor, user: str = "alice") -> Iterator[httpx.Client]:
    """A cookie-keeping client signed in to the inbox with a new key of ``user``."""
    with httpx.Client(base_url=served, timeout=10, follow_redirects=True) as client:
        secret = executor.ledger.keys.create(user, {DECIDE_SCOPE})[1]
        form = client.get("/ui/sign-in")
        signed = client.post("/ui/sign-in", data={"key": secret, "csrf": csrf_of(form)})
        assert signed.status_code == 200, signed.text[:500]
        yield client


@pytest.fixture
def alice(served, executor) -> Iterator[httpx.Client]:
    with person(served, executor) as client:
        yield client


def hold(executor, *skus: str, caller: Caller = ALICE, thread: str | None = None) -> str:
    answer = executor.execute(caller, "shop.set_prices", prices(*skus), thread=thread)
    assert answer["status"] == "confirmation_required", answer
    return answer["confirmation_id"]


def text_of(page: str) -> str:
    """A page's text as a person reads it: tags dropped, entities decoded, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_the_detail_page_shows_the_arguments_caller_thread_times_and_audit_trail(
    alice, executor, clock
):
    held = hold(executor, "TEA-0007", thread="conv-42")
    clock.now += 300
    page = alice.get(f"/ui/confirmations/{held}")
    assert page.status_code == 200
    said = text_of(page.text)
    assert "TEA-0007" in said
    assert "alice (signed in)" in said
    assert "conv-42" in said
    assert re.search(
        r'<time class="relative" datetime="[^"]+Z" title="[^"]+ UTC">5 minutes ago', page.text
    )
    assert "Expires in 55 min 0 s" in said  # an hour after the hold
    assert "confirmation_required" in said  # the audit row of the hold
    assert "One person's approval runs the write." in said
    assert f'action="/ui/confirmations/{held}/approve"' in page.text
    assert 'name="back" value="detail"' in page.text


def test_the_card_links_to_its_page_and_a_decision_made_there_comes_back_to_it(
    alice, executor, shop
):
    held = hold(executor, "TEA-0001")
    inbox = alice.get("/ui/")
    assert f'href="/ui/confirmations/{held}"' in inbox.text
    done = alice.post(f"/ui/confirmations/{held}/approve",
                      data={"csrf": csrf_of(inbox), "back": "detail"})  # fmt: skip
    assert done.status_code == 200
    assert str(done.url).endswith(f"/ui/confirmations/{held}?decided=1")
    said = text_of(done.text)
    assert "approved; the write ran" in said
    assert "approve by session:alice" in said
    assert "the write ran" in said
    assert "Approve" not in re.sub(r"approved|approve by", "", said)  # no forms once decided
    assert len(shop.writes()) == 1


def test_a_stranger_and_a_made_up_id_get_the_not_found_page_the_decide_routes_give(
    served, alice, executor
):
    held = hold(executor, "TEA-0001")
    with person(served, executor, "bob") as bob:
        theirs = bob.get(f"/ui/confirmations/{held}")
        deciding = bob.post(f"/ui/confirmations/{held}/approve",
                            data={"csrf": csrf_of(bob.get("/ui/"))})  # fmt: skip
    assert (theirs.status_code, deciding.status_code) == (404, 404)
    assert "There is no such confirmation for you to decide." in theirs.text
    assert text_of(theirs.text).count("no such confirmation") == 1
    assert held not in theirs.text
    for made_up in ("nope", "%00", "x" * 5000, "%F0%9F%92%A5", "..%2F..%2Fetc"):
        page = alice.get(f"/ui/confirmations/{made_up}")
        assert page.status_code == 404, made_up
        assert page.headers["content-type"].startswith("text/html")
        assert "Traceback" not in page.text
    assert executor.ledger.get_confirmation(held).status == "pending"


def test_the_history_shows_the_arguments_a_rejects_reason_and_how_long_ago(alice, executor, clock):
    held = hold(executor, "TEA-0003")
    executor.confirm(held, ALICE, {"action": "reject", "message": "not <b>before</b> Friday"})
    clock.now += 2 * 3600
    page = alice.get("/ui/history").text
    row = history_row(page, held)
    assert "2 hours ago" in row
    assert re.search(r'<time class="relative" datetime="\d{4}-\d\d-\d\dT[\d:]+Z"', row)
    assert "not &lt;b&gt;before&lt;/b&gt; Friday" in row
    assert "<b>before" not in page
    assert "TEA-0003" in page.split(f'<tr data-id="{held}">')[1]  # the arguments follow the row
    assert "no write ran (rejected)" in row
    assert "<td>rejected</td>" in row


def test_relative_times_read_as_a_person_says_them():
    spans = (10, 50, 100, 55 * 60, 100 * 60, 5 * 3600, 30 * 3600, 40 * 3600, 80 * 3600)
    assert [ago(0, s) for s in spans] == [
        "just now", "1 minute ago", "2 minutes ago", "55 minutes ago", "2 hours ago",
        "5 hours ago", "30 hours ago", "2 days ago", "3 days ago",
    ]  # fmt: skip
    assert ago(600, 0) == "in 10 minutes"


def test_a_bulk_decision_asks_with_the_count_and_tools_and_decides_nothing_until_confirmed(
    alice, executor, shop
):
    held = [hold(executor, f"TEA-000{n}") for n in range(3)]
    token = csrf_of(alice.get("/ui/"))
    asked = alice.post("/ui/bulk", data={"csrf": token, "action": "approve", "id": held})
    assert asked.status_code == 200
    said = text_of(asked.text)
    assert "Approve 3 held writes?" in said
    assert "shop.set_prices \N{MULTIPLICATION SIGN} 3" in said
    assert "Approve these 3" in said
    assert shop.writes() == []
    assert {executor.ledger.get_confirmation(i).status for i in held} == {"pending"}
    forged = alice.post("/ui/bulk",
                        data={"csrf": "x" * 43, "action": "approve", "id": held,
                              "confirmed": "yes"})  # fmt: skip
    assert forged.status_code == 403
    assert shop.writes() == []
    nothing = alice.post("/ui/bulk", data={"csrf": token, "action": "approve"})
    assert (nothing.status_code, "Nothing selected" in nothing.text) == (422, True)
    edit = alice.post("/ui/bulk", data={"csrf": token, "action": "edit", "id": held})
    assert edit.status_code == 422
    assert shop.writes() == []


def test_a_bulk_approve_runs_each_write_once_and_says_what_became_of_each(alice, executor, shop):
    held = [hold(executor, f"TEA-000{n}") for n in range(4)]
    token = csrf_of(alice.get("/ui/"))
    asked = alice.post("/ui/bulk", data={"csrf": token, "action": "approve", "id": held})
    assert "Approve 4 held writes?" in text_of(asked.text)
    executor.confirm(held[1], ALICE, "reject")  # decided in another tab meanwhile
    confirm = {"csrf": csrf_of(asked), "action": "approve", "confirmed": "yes", "id": held}
    done = alice.post("/ui/bulk", data=confirm)
    assert done.status_code == 200
    results = dict(re.findall(r'<li data-id="([^"]+)" data-kind="([a-z_]+)"', done.text))
    assert results == {held[0]: "decided", held[1]: "already", held[2]: "decided",
                       held[3]: "decided"}  # fmt: skip
    said = text_of(done.text)
    assert said.count("approved; the write ran") == 3
    assert "already decided: reject by session:alice" in said
    written = sorted(w["input"]["prices"][0]["sku"] for w in shop.writes())
    assert written == ["TEA-0000", "TEA-0002", "TEA-0003"]  # each once
    again = alice.post("/ui/bulk", data=confirm)  # the same page sent twice: nothing runs again
    assert set(re.findall(r'data-kind="([a-z_]+)"', again.text)) == {"already"}
    assert len(shop.writes()) == 3


def test_a_bulk_reject_gives_each_the_reason_and_leaves_out_what_is_not_theirs(
    served, alice, executor, shop
):
    mine = [hold(executor, "TEA-0001"), hold(executor, "TEA-0002")]
    a_key = Caller.key("k-9", user_id="alice", scopes={"shop.products:write"})
    theirs = executor.execute(a_key, "shop.delete_product", {"sku": "TEA-0009"})["confirmation_id"]
    token = csrf_of(alice.get("/ui/"))
    asked = alice.post("/ui/bulk", data={"csrf": token, "action": "reject",
                                         "id": [*mine, theirs]})  # fmt: skip
    said = text_of(asked.text)
    assert "Reject 2 held writes?" in said
    assert "1 of those you selected no longer wait for you" in said
    assert theirs not in asked.text
    sent = {"csrf": token, "action": "reject", "confirmed": "yes", "message": "prices are frozen"}
    done = alice.post("/ui/bulk", data=sent | {"id": [*mine, theirs]})
    kinds = dict(re.findall(r'<li data-id="([^"]+)" data-kind="([a-z_]+)"', done.text))
    assert kinds == {mine[0]: "decided", mine[1]: "decided", theirs: "not_found"}
    for i in mine:
        decision = executor.ledger.get_confirmation(i).decision
        assert decision == {"action": "reject", "message": "prices are frozen"}
    assert executor.ledger.get_confirmation(theirs).status == "pending"
    assert shop.writes() == []


def test_many_holds_of_one_tool_are_folded_and_their_buttons_state_the_size(alice, executor):
    many = [hold(executor, f"TEA-{n:04d}") for n in range(GROUP_OVER + 2)]
    alone = executor.execute(ALICE, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    page = alice.get("/ui/").text
    size = len(many)
    assert f"Approve all {size}…" in page
    assert f"Reject all {size}…" in page
    group = page.split('<section class="group"')[1].split("  </details>\n</section>")[0]
    assert '<details class="folded">' in group  # closed until opened
    assert sorted(cards(group)) == sorted(many)
    assert alone in cards(page)
    assert alone not in cards(group)
    assert "Approve all" not in page.split('<section class="group"')[0]


def test_an_invalid_edit_sent_from_the_detail_page_shows_there_beside_its_field(
    alice, executor, shop
):
    held = hold(executor, "TEA-0001")
    page = alice.get(f"/ui/confirmations/{held}")
    form = {"csrf": csrf_of(page), "back": "detail", "/prices/0/price": "-3"}
    refused = alice.post(f"/ui/confirmations/{held}/edit", data=form)
    assert refused.status_code == 422
    assert '<article class="detail"' in refused.text
    assert re.search(r'name="/prices/0/price" value="-3"\s+aria-invalid="true"', refused.text)
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"


# --- previews, context and quorum (the tool declares them; the executor keeps them) ------------


class Reviewed(Shop):
    """The test shop whose writes say what they would change; a delete needs two people, never
    the one whose call it is."""

    def preview_prices(self, input: dict, ctx: Any) -> dict:
        assert ctx.dry_run
        changes = [{"sku": p["sku"], "before": 4.5, "after": p["price"]} for p in input["prices"]]
        return {"changes": changes}

    def preview_delete(self, input: dict, ctx: Any) -> dict:
        if input["sku"] == "TEA-0666":
            raise RuntimeError("the catalogue is down")
        return {"would_delete": {"sku": input["sku"], "name": "<script>alert('row')</script>"}}

    def api_tools(self) -> list[dict]:
        tools = {t["name"]: t for t in super().api_tools()}
        tools["shop.set_prices"]["preview"] = self.preview_prices
        tools["shop.delete_product"] |= {"preview": self.preview_delete, "approvals": 2,
                                         "separate_duties": True}  # fmt: skip
        return list(tools.values())


@pytest.fixture
def reviewed(ledger, tmp_path, clock) -> Iterator[tuple[Executor, Reviewed]]:
    """An executor on ``Reviewed``; alice manages the shop, carol and dave decide for anyone."""
    shop = Reviewed(tmp_path / "reviewed.log")
    rights = StaticPermissions(
        {
            "alice": {"shop.view", "shop.manage"},
            "carol": {"shop.view", "system.confirm_any"},
            "dave": {"shop.view", "system.confirm_any"},
        }
    )
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights,
                        settings=Settings(handler_timeout=2.0), clock=clock)  # fmt: skip
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    yield executor, shop
    executor.close()


@pytest.fixture
def reviewed_url(reviewed) -> Iterator[str]:
    with uvicorn_serving(create_app(reviewed[0], mcp_path=None)) as url:
        yield url


ASKED = {"user": "Cut <b>tea</b> prices by 10%, please", "model": "I will set TEA-0001 to 5.0."}


def test_the_detail_page_shows_the_preview_and_the_request_as_plain_text(reviewed, reviewed_url):
    executor, shop = reviewed
    held = executor.execute(ALICE, "shop.set_prices", prices("TEA-0001"), thread="conv-9",
                            request=ASKED)["confirmation_id"]  # fmt: skip
    with person(reviewed_url, executor) as alice:
        inbox = alice.get("/ui/")
        page = alice.get(f"/ui/confirmations/{held}")
    card = inbox.text.split(f'data-id="{held}"')[1]
    assert "Preview of what will change" in card
    assert "approvals</span>" not in card  # one approval: nothing to count
    said = text_of(page.text)
    assert "Preview: what the write would change" in said
    assert re.search(r"changes.*before.*after.*4\.5.*5\.0", said)
    assert "Cut <b>tea</b> prices by 10%, please" in said  # as text
    assert "Cut &lt;b&gt;tea&lt;/b&gt; prices" in page.text
    assert "I will set TEA-0001 to 5.0." in said
    assert "preview unavailable" not in said
    assert shop.writes() == []


def test_a_keys_hold_names_the_key_its_name_and_its_user(reviewed, reviewed_url):
    executor, _ = reviewed
    key, _ = executor.ledger.keys.create("alice", {"shop.products:write"}, name="billing <bot>")
    held = executor.execute(key.caller, "shop.delete_product", {"sku": "TEA-0004"})
    with person(reviewed_url, executor, "carol") as carol:
        page = carol.get(f"/ui/confirmations/{held['confirmation_id']}")
    assert f"key {key.id} (billing <bot>) of alice" in text_of(page.text)
    assert "(billing &lt;bot&gt;)" in page.text


def test_four_eyes_show_one_of_two_and_the_caller_is_refused_on_the_page(reviewed, reviewed_url):
    executor, shop = reviewed
    asked = {"user": "<script>alert(1)</script>"}
    held = executor.execute(ALICE, "shop.delete_product", {"sku": "TEA-0002"}, request=asked)
    held = held["confirmation_id"]
    with person(reviewed_url, executor, "carol") as carol:
        token = csrf_of(carol.get("/ui/"))
        first = carol.post(f"/ui/confirmations/{held}/approve",
                           data={"csrf": token, "back": "detail"})  # fmt: skip
        assert first.status_code == 200
        said = text_of(first.text)
        assert "1 of 2 approvals" in said
        assert "nothing runs until another person approves it" in said
        assert "The caller may not approve it" in said
        assert re.search(r"carol approved (just now|\d+ \w+ ago)", said)
        assert "<script>alert(1)</script>" in said
        assert "<script>alert(1)" not in first.text
        assert "&lt;script&gt;alert(&#39;row&#39;)&lt;/script&gt;" in first.text  # the preview
        card = carol.get("/ui/").text.split(f'data-id="{held}"')[1]
        assert '<span class="quorum">1 of 2 approvals</span>' in card
    with person(reviewed_url, executor, "alice") as alice:
        own = alice.post(f"/ui/confirmations/{held}/approve",
                         data={"csrf": csrf_of(alice.get("/ui/"))})  # fmt: skip
        assert own.status_code == 422
        assert "Nothing was applied" in own.text
    assert shop.writes() == []
    with person(reviewed_url, executor, "dave") as dave:
        done = dave.post(f"/ui/confirmations/{held}/approve",
                         data={"csrf": csrf_of(dave.get("/ui/")), "back": "detail"})  # fmt: skip
        assert "approved; the write ran" in text_of(done.text)
    assert len(shop.writes()) == 1


def test_a_bulk_approve_of_four_eyes_writes_says_each_waits_for_another_person(
    reviewed, reviewed_url
):
    executor, shop = reviewed
    held = [executor.execute(ALICE, "shop.delete_product", {"sku": f"TEA-000{n}"})
            ["confirmation_id"] for n in range(2)]  # fmt: skip
    with person(reviewed_url, executor, "carol") as carol:
        token = csrf_of(carol.get("/ui/"))
        sent = {"csrf": token, "action": "approve", "confirmed": "yes", "id": held}
        done = carol.post("/ui/bulk", data=sent)
    assert set(re.findall(r'data-kind="([a-z_]+)"', done.text)) == {"waiting"}
    assert text_of(done.text).count("1 of 2 approvals") == 2
    assert shop.writes() == []


def test_a_failed_preview_and_a_cut_one_are_said_so(reviewed, reviewed_url):
    executor, _ = reviewed
    failed = executor.execute(ALICE, "shop.delete_product", {"sku": "TEA-0666"})
    executor.ledger.set_setting("agent_tool_result_chars", 60)
    many = prices(*[f"TEA-{n:04d}" for n in range(20)])
    cut = executor.execute(ALICE, "shop.set_prices", many)
    with person(reviewed_url, executor) as alice:
        unavailable = text_of(alice.get(f"/ui/confirmations/{failed['confirmation_id']}").text)
        shortened = text_of(alice.get(f"/ui/confirmations/{cut['confirmation_id']}").text)
    assert "preview unavailable: it failed: RuntimeError: the catalogue is down" in unavailable
    assert "(cut at 60 characters)" in shortened
    assert '{"changes":[{"sku":"TEA-0000"' in shortened


def test_a_page_approving_arguments_edited_since_it_was_shown_decides_nothing(
    reviewed, reviewed_url
):
    executor, shop = reviewed
    held = executor.execute(ALICE, "shop.delete_product", {"sku": "TEA-0002"})["confirmation_id"]
    with person(reviewed_url, executor, "carol") as carol:
        page = carol.get(f"/ui/confirmations/{held}")
        seen = re.search(r'name="seen" value="([0-9a-f]+)"', page.text)
        assert seen is not None  # the forms carry what the page showed
        listed = carol.post("/ui/bulk", data={"csrf": csrf_of(page), "action": "approve",
                                              "id": [held]})  # fmt: skip
        assert f'name="seen:{held}" value="{seen.group(1)}"' in listed.text
        executor.decide(
            held, Caller.session("dave"), {"action": "edit", "arguments": {"sku": "TEA-0009"}}
        )
        stale = carol.post(f"/ui/confirmations/{held}/approve",
                           data={"csrf": csrf_of(page), "seen": seen.group(1)})  # fmt: skip
        assert stale.status_code == 409
        assert "edited by someone else since you looked" in text_of(stale.text)
        sent = {"csrf": csrf_of(page), "action": "approve", "confirmed": "yes", "id": [held],
                f"seen:{held}": seen.group(1)}  # fmt: skip
        bulk = carol.post("/ui/bulk", data=sent)
        assert "edited by someone else since you looked" in text_of(bulk.text)
    now = executor.ledger.get_confirmation(held)
    assert now.status == "pending"
    assert [a.by for a in now.approvals] == ["user:dave"]
    assert shop.writes() == []
