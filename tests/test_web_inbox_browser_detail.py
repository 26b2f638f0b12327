"""The page of one confirmation, bulk decisions and the phone layout in a real browser: Debian's
Chromium driven by Playwright, launched as ``test_web_inbox_browser.py`` does. Times read in the
browser's own zone; three writes approved at once run once each; one decided in another tab
meanwhile is reported, not run; at 390 px nothing scrolls sideways and the buttons are on screen;
text from a model or a tool is shown as text.

Reaches ``turnkit.executor.confirmations`` for ``DECIDE_SCOPE`` (no public name exposes it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _serving import uvicorn_serving
from _shop import prices
from test_web_inbox_browser import CHROMIUM, FLAGS, signed_in
from test_web_inbox_detail import Reviewed
from turnkit import Caller, Executor, Registry, Settings, StaticPermissions
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name
from turnkit.server import create_app

pytestmark = pytest.mark.slow

ALICE = Caller.session("alice")
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's Chromium under Playwright, as ``test_web_inbox_browser.py`` launches it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def served(executor) -> Iterator[tuple[str, str]]:
    """The executor's app on 127.0.0.1 and a key's secret for alice to sign in with."""
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    _, secret = executor.ledger.keys.create("alice", {DECIDE_SCOPE})
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        yield url, secret


def hold(executor, *skus: str, thread: str | None = None) -> str:
    answer = executor.execute(ALICE, "shop.set_prices", prices(*skus), thread=thread)
    assert answer["status"] == "confirmation_required", answer
    return answer["confirmation_id"]


def no_sideways_scroll(page: Any) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide"


def on_screen(locator: Any) -> None:
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= PHONE["width"]


def test_times_read_as_how_long_ago_with_the_exact_time_in_the_readers_zone(
    chromium, served, executor, clock
):
    url, secret = served
    held = hold(executor, "TEA-0001", thread="conv-7")
    clock.now += 300  # the server's clock: the page counts from it, not from the browser's
    context = chromium.new_context(timezone_id="America/New_York", locale="en-US")
    page = signed_in(context, url, secret)
    page.locator(f'article[data-id="{held}"] h2 a').click()
    page.wait_for_url(f"{url}/ui/confirmations/{held}")
    held_at = page.locator("dl.facts time.relative").first
    assert held_at.inner_text() == "5 minutes ago"
    assert held_at.get_attribute("title") == "Jan 15, 2027, 3:00:00 AM EST"  # 08:00 UTC
    context.close()

    plain = chromium.new_context(java_script_enabled=False, timezone_id="Asia/Tokyo")
    page = signed_in(plain, url, secret)
    page.goto(f"{url}/ui/confirmations/{held}")
    held_at = page.locator("dl.facts time.relative").first
    assert held_at.inner_text() == "5 minutes ago"  # written by the server
    assert held_at.get_attribute("title") == "2027-01-15 08:00:00 UTC"
    plain.close()


def test_three_approved_at_once_each_run_once_after_one_explicit_confirmation(
    chromium, served, executor, shop
):
    url, secret = served
    held = [hold(executor, f"TEA-000{n}") for n in range(3)]
    context = chromium.new_context()
    page = signed_in(context, url, secret)
    for confirmation_id in held:
        page.locator(f'article[data-id="{confirmation_id}"] input.pick').check()
    assert page.locator("#picked").inner_text() == "3"
    page.get_by_role("button", name="Approve selected…").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading", level=1).inner_text() == "Approve 3 held writes?"
    assert shop.writes() == []  # asking decided nothing
    page.get_by_role("button", name="Approve these 3").click()
    page.wait_for_load_state()
    results = page.locator("ol.bulk-result li")
    assert results.count() == 3
    assert all("approved; the write ran" in t for t in results.all_inner_texts())
    context.close()
    assert sorted(w["input"]["prices"][0]["sku"] for w in shop.writes()) == [
        "TEA-0000", "TEA-0001", "TEA-0002",
    ]  # fmt: skip


def test_one_of_a_bulk_decided_in_another_tab_meanwhile_is_reported_and_not_run_again(
    chromium, served, executor, shop
):
    url, secret = served
    held = [hold(executor, f"TEA-000{n}") for n in range(3)]
    context = chromium.new_context()
    page = signed_in(context, url, secret)
    for confirmation_id in held:
        page.locator(f'article[data-id="{confirmation_id}"] input.pick').check()
    page.get_by_role("button", name="Approve selected…").click()
    page.wait_for_load_state()
    other = context.new_page()  # the second tab rejects one from its own page
    other.goto(f"{url}/ui/confirmations/{held[1]}")
    other.get_by_label("Reason (optional)").fill("not this one")
    other.get_by_role("button", name="Reject").click()
    other.wait_for_load_state()
    assert "rejected; nothing ran" in other.get_by_role("status").inner_text()
    page.get_by_role("button", name="Approve these 3").click()
    page.wait_for_load_state()
    told = page.locator(f'ol.bulk-result li[data-id="{held[1]}"]').inner_text()
    assert "already decided: reject by session:alice" in told
    assert page.locator('ol.bulk-result li[data-kind="decided"]').count() == 2
    context.close()
    assert len(shop.writes()) == 2
    assert executor.ledger.get_confirmation(held[1]).status == "rejected"


def test_the_inbox_the_detail_page_and_the_history_fit_a_390_px_phone(
    chromium, served, executor, tmp_path
):
    url, secret = served
    many = [hold(executor, f"TEA-{n:04d}", "TEA-0100", "TEA-0200", thread=f"a-long-conversation-"
                 f"name-that-does-not-wrap-{n}") for n in range(7)]  # fmt: skip
    long_sku = executor.execute(ALICE, "shop.delete_product", {"sku": "X" * 120})
    decided = hold(executor, "TEA-0300")
    executor.confirm(decided, ALICE, {"action": "reject", "message": "no " * 60})
    context = chromium.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                   has_touch=True)  # fmt: skip
    page = signed_in(context, url, secret)
    no_sideways_scroll(page)
    page.get_by_text("Show the 7 shop.set_prices writes").click()
    no_sideways_scroll(page)
    card = page.locator(f'article[data-id="{long_sku["confirmation_id"]}"]')
    on_screen(card.get_by_role("button", name="Approve"))
    on_screen(card.get_by_role("button", name="Reject"))
    on_screen(page.get_by_role("button", name="Approve all 7…"))
    page.screenshot(path=str(tmp_path / "inbox-phone.png"), full_page=True)
    page.goto(f"{url}/ui/confirmations/{many[0]}")
    no_sideways_scroll(page)
    on_screen(page.get_by_role("button", name="Approve"))
    page.screenshot(path=str(tmp_path / "detail-phone.png"), full_page=True)
    page.goto(f"{url}/ui/history")
    no_sideways_scroll(page)
    page.get_by_text("Arguments").first.click()
    no_sideways_scroll(page)
    page.screenshot(path=str(tmp_path / "history-phone.png"), full_page=True)
    context.close()


def test_a_script_in_the_arguments_is_shown_as_text_and_never_runs(chromium, served, executor):
    url, secret = served
    planted = "<script>window.__planted = 1</script><img src=x onerror=window.__planted=2>"
    held = executor.execute(ALICE, "shop.delete_product", {"sku": planted})["confirmation_id"]
    context = chromium.new_context()
    page = signed_in(context, url, secret)
    assert planted in page.locator(f'article[data-id="{held}"]').inner_text()
    page.goto(f"{url}/ui/confirmations/{held}")
    assert planted in page.locator("main").inner_text()
    assert page.evaluate("window.__planted") is None
    context.close()


def test_a_strangers_detail_page_is_not_found_in_the_browser(chromium, served, executor):
    url, _ = served
    held = hold(executor, "TEA-0001")
    _, bobs = executor.ledger.keys.create("bob", {DECIDE_SCOPE})
    context = chromium.new_context()
    page = signed_in(context, url, bobs)
    page.goto(f"{url}/ui/confirmations/{held}")
    assert page.get_by_role("heading", level=1).inner_text() == "Not found"
    assert "TEA-0001" not in page.locator("main").inner_text()
    context.close()


def test_the_demos_held_price_change_shows_its_preview_and_the_conversation(chromium, tmp_path):
    """The demo's turn holds a price cut; its page shows each price before and after and what
    the person and the model said. Its screenshot is ``detail-page.png`` in the test's tmp dir."""
    from langgraph.checkpoint.memory import InMemorySaver

    from turnkit.demo import DEMO_CALLER, DEMO_USER, demo_executor, scripted_demo_model
    from turnkit.graph import build_turn_graph

    executor = demo_executor(tmp_path / "catalogue.sqlite")
    graph = build_turn_graph(executor, scripted_demo_model(), checkpointer=InMemorySaver(),
                             default_caller=DEMO_CALLER)  # fmt: skip
    asked = "Our accessories sell slowly: make one of them a little cheaper, please."
    stopped = graph.invoke({"messages": [("user", asked)]},
                           {"configurable": {"thread_id": "shop-floor-7"}})  # fmt: skip
    (held,) = stopped["__interrupt__"][0].value["confirmations"]
    _, secret = executor.ledger.keys.create(DEMO_USER, {DECIDE_SCOPE}, name="approver laptop")
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        context = chromium.new_context(viewport={"width": 1000, "height": 900},
                                       timezone_id="Europe/Berlin")  # fmt: skip
        page = signed_in(context, url, secret)
        page.locator(f'article[data-id="{held["confirmation_id"]}"] h2 a').click()
        page.wait_for_load_state()
        preview = page.locator("section.preview").inner_text()
        context_text = page.locator("section.context").inner_text()
        page.screenshot(path=str(tmp_path / "detail-page.png"), full_page=True)
        context.close()
    executor.close()
    assert "ACC-0001" in preview
    assert "7.03" in preview
    assert "6.33" in preview
    assert asked in context_text


@pytest.fixture
def reviewed_served(ledger, tmp_path, clock) -> Iterator[tuple[str, Executor, Reviewed]]:
    """An app on ``Reviewed`` (previews; a delete needs two people, not its caller), with carol
    and dave who decide for anyone; its URL, executor and shop."""
    shop = Reviewed(tmp_path / "reviewed.log")
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"},
                                "carol": {"shop.view", "system.confirm_any"}})  # fmt: skip
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights,
                        settings=Settings(handler_timeout=2.0), clock=clock)  # fmt: skip
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        yield url, executor, shop
    executor.close()


def test_a_four_eyes_delete_with_its_preview_and_request_on_a_phone_shows_scripts_as_text(
    chromium, reviewed_served, tmp_path
):
    url, executor, shop = reviewed_served
    planted = "<script>window.__planted = 1</script><img src=x onerror=window.__planted=2>"
    asked = {"user": f"Remove the old teapot {planted} " + "and its photos " * 30,
             "model": f"I will delete TEA-0005. {planted}"}  # fmt: skip
    held = executor.execute(ALICE, "shop.delete_product", {"sku": "TEA-0005"}, request=asked)
    held_id = held["confirmation_id"]
    _, secret = executor.ledger.keys.create("carol", {DECIDE_SCOPE})
    context = chromium.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    page = signed_in(context, url, secret)
    card = page.locator(f'article[data-id="{held_id}"]')
    assert "0 of 2 approvals" in card.inner_text()
    assert "preview" in card.locator(".has-preview").inner_text()
    no_sideways_scroll(page)
    card.get_by_role("button", name="Approve").click()
    page.wait_for_load_state()
    assert "1 of 2 approvals" in page.get_by_role("status").first.inner_text()
    page.goto(f"{url}/ui/confirmations/{held_id}")
    no_sideways_scroll(page)
    main = page.locator("main").inner_text()
    assert planted in page.locator("blockquote.user-said").inner_text()
    assert planted in page.locator("blockquote.model-said").inner_text()
    assert "<script>alert('row')</script>" in page.locator("section.preview").inner_text()
    assert "The caller may not approve it" in main
    assert "user:carol approved" in page.locator("ul.approvers").inner_text()
    assert page.evaluate("window.__planted") is None
    on_screen(page.get_by_role("button", name="Reject"))
    page.screenshot(path=str(tmp_path / "four-eyes-phone.png"), full_page=True)
    context.close()
    assert shop.writes() == []
