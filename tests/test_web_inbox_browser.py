"""The web inbox in a real browser: Debian's Chromium driven by Playwright.

An agent turn holds a write in another process; the page shows it with its arguments; a click
approves it and the write runs once; the paused turn, resumed, honours that decision. Also: two
tabs approving at once, a confirmation decided elsewhere leaving the page, an invalid edit shown
beside its field. Screenshots of the inbox are saved under each test's tmp dir.
"""

from __future__ import annotations

import multiprocessing
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import _agent_workers as workers
from _serving import uvicorn_serving
from _shop import prices
from test_web_inbox import HIDDEN, Notes
from turnkit import Agent, Caller, Executor, Registry, Settings
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name
from turnkit.server import create_app
from turnkit.testing import ScriptedModel

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]  # fmt: skip
SPAWN = multiprocessing.get_context("spawn")
ALICE = Caller.session("alice")
ACTING = Settings(api_session_write_modules=["local"])


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: apt-get install chromium (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


def held_in_another_process(storage: str, thread_id: str, log: str) -> list[str]:
    results = SPAWN.Queue()
    arguments = (storage, thread_id, log, "alice", results)
    process = SPAWN.Process(target=workers.hold_delete_for, args=arguments, daemon=True)
    process.start()
    try:
        return results.get(timeout=120)
    finally:
        process.join(60)
        assert process.exitcode == 0


def signed_in(context: Any, url: str, secret: str) -> Any:
    page = context.new_page()
    page.goto(f"{url}/ui/")
    assert page.url.endswith("/ui/sign-in")
    page.get_by_label("API key").fill(secret)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{url}/ui/")
    return page


def test_a_write_held_by_an_agent_in_another_process_is_approved_in_the_browser_once(
    chromium, tmp_path
):
    storage, log = str(tmp_path / "agent.sqlite"), tmp_path / "deleted.log"
    thread_id = f"notes-{uuid.uuid4()}"
    (held,) = held_in_another_process(storage, thread_id, str(log))
    tools = workers.notes_tools(str(log))
    with Agent(ScriptedModel([]), tools=tools, storage=storage, settings=ACTING) as server_side:
        _, secret = server_side.executor.ledger.keys.create("alice", {DECIDE_SCOPE})
        app = create_app(server_side.executor, mcp_path=None)
        with uvicorn_serving(app) as url:
            context = chromium.new_context()
            page = signed_in(context, url, secret)
            article = page.locator(f'article[data-id="{held}"]')
            assert "local.delete_note" in article.inner_text()
            assert "groceries" in article.inner_text()
            assert "Asked by alice at" in article.inner_text()
            page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)
            article.get_by_role("button", name="Approve").click()
            page.wait_for_load_state()
            assert "the write ran" in page.get_by_role("status").first.inner_text()
            assert page.locator("article.confirmation").count() == 0
            context.close()
    assert log.read_text() == "groceries\n"

    model = ScriptedModel(["I deleted your groceries note."])
    with Agent(model, tools=tools, storage=storage, thread_id=thread_id, caller=ALICE,
               settings=ACTING) as agent:  # fmt: skip
        done = agent.confirm({held: "approve"})
    assert done.content == "I deleted your groceries note."
    assert log.read_text() == "groceries\n"  # honoured as decided out of band: no second write


def test_two_tabs_approving_at_once_write_once_and_one_is_told_it_was_decided(
    chromium, executor, shop, tmp_path
):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    held = executor.execute(ALICE, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    _, secret = executor.ledger.keys.create("alice", {DECIDE_SCOPE})
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        context = chromium.new_context()
        first = signed_in(context, url, secret)
        first.screenshot(path=str(tmp_path / "inbox-price-change.png"), full_page=True)
        second = context.new_page()
        second.goto(f"{url}/ui/")
        buttons = [tab.locator(f'article[data-id="{held}"]').get_by_role("button", name="Approve")
                   for tab in (first, second)]  # fmt: skip
        for button in buttons:
            button.evaluate("b => b.form.submit()")  # both forms sent without waiting
        for tab in (first, second):
            tab.wait_for_load_state()
        texts = sorted(tab.locator("main").inner_text() for tab in (first, second))
        context.close()
    assert len(shop.writes()) == 1
    told = [t for t in texts if "already decided" in t]
    assert len(told) == 1
    assert "approve by session:alice" in told[0]


def test_a_confirmation_decided_elsewhere_leaves_the_page_and_an_invalid_edit_shows_why(
    chromium, executor, shop, tmp_path
):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    elsewhere = executor.execute(ALICE, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    edited = executor.execute(ALICE, "shop.set_prices", prices("TEA-0002"))["confirmation_id"]
    _, secret = executor.ledger.keys.create("alice", {DECIDE_SCOPE})
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        context = chromium.new_context()
        page = signed_in(context, url, secret)
        assert page.locator("article.confirmation").count() == 2
        countdown = page.locator(f'article[data-id="{edited}"] time.countdown')
        before = int(countdown.get_attribute("data-seconds") or 0)
        page.wait_for_function(  # the expiry counts down on the page, second by second
            f"() => +document.querySelector('article[data-id=\"{edited}\"] time.countdown')"
            f".dataset.seconds < {before}",
            timeout=3000,
        )
        executor.confirm(elsewhere, ALICE, "reject")  # the command line, another process
        page.locator(f'article[data-id="{elsewhere}"]').wait_for(state="detached", timeout=2500)
        assert "decided elsewhere" in page.locator("#live").inner_text()

        article = page.locator(f'article[data-id="{edited}"]')
        article.get_by_text("Edit the arguments").click()
        article.locator('input[name="/prices/0/price"]').fill("-3")
        article.get_by_role("button", name="Save and run the edited call").click()
        page.wait_for_load_state()
        field = page.locator('input[name="/prices/0/price"][aria-invalid="true"]')
        assert field.input_value() == "-3"
        problem = page.locator(f"#{field.get_attribute('aria-describedby')}")
        assert "less than or equal to the minimum" in problem.inner_text()
        page.screenshot(path=str(tmp_path / "inbox-invalid-edit.png"), full_page=True)
        context.close()
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(edited).status == "pending"


def test_a_form_forged_by_another_page_is_refused_in_the_browser(chromium, executor, shop):
    """Another server on the same host (same site: the browser sends the cookies) plants its own
    ``tk_csrf`` cookie and posts an approve form carrying that token: refused, nothing runs."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    held = executor.execute(ALICE, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    _, secret = executor.ledger.keys.create("alice", {DECIDE_SCOPE})
    planted = "A" * 43
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        target = f"{url}/ui/confirmations/{held}/approve"
        evil = (f'<form method="post" action="{target}"><input type="hidden" name="csrf"'
                f' value="{planted}"><button>win a prize</button></form>')  # fmt: skip

        async def lure(request: Any) -> HTMLResponse:
            response = HTMLResponse(evil)
            response.set_cookie("tk_csrf", planted, path="/")  # cookies ignore ports
            return response

        with uvicorn_serving(Starlette(routes=[Route("/", lure)])) as other:
            context = chromium.new_context()
            signed_in(context, url, secret)  # the person is signed in, in this browser
            page = context.new_page()
            page.goto(other)
            page.get_by_role("button", name="win a prize").click()
            page.wait_for_load_state()
            refused = page.locator("main").inner_text()
            context.close()
    assert "Form refused" in refused
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"


def test_without_javascript_and_by_keyboard_a_person_approves_and_rejects(chromium, executor, shop):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    approve = executor.execute(ALICE, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    reject = executor.execute(ALICE, "shop.set_prices", prices("TEA-0002"))["confirmation_id"]
    _, secret = executor.ledger.keys.create("alice", {DECIDE_SCOPE})
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        context = chromium.new_context(java_script_enabled=False)
        page = signed_in(context, url, secret)
        article = page.locator(f'article[data-id="{approve}"]')
        article.get_by_role("button", name="Approve").focus()
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/ui/?decided={approve}")
        assert "approved; the write ran" in page.get_by_role("status").first.inner_text()
        reason = page.locator(f'article[data-id="{reject}"]').get_by_label("Reason (optional)")
        reason.fill("not today")
        page.keyboard.press("Tab")  # to the Reject button
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/ui/?decided={reject}")
        assert "rejected; nothing ran" in page.get_by_role("status").first.inner_text()
        context.close()
    assert len(shop.writes()) == 1
    assert executor.ledger.get_confirmation(reject).decision == {
        "action": "reject",
        "message": "not today",
    }


def test_hidden_characters_are_marked_whitespace_kept_and_an_edit_sends_the_text_back(
    chromium, ledger, rights, clock, tmp_path
):
    module = Notes()
    executor = Executor(Registry([module]), ledger=ledger, permissions=rights, clock=clock)
    ledger.set_setting("api_session_write_modules", ["notes"])
    body = f"first line\n\u202egnp.exe{HIDDEN}\n  indented"
    held = executor.execute(ALICE, "notes.save_note", {"title": "draft", "body": body})
    _, secret = ledger.keys.create("alice", {DECIDE_SCOPE})
    try:
        with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
            context = chromium.new_context()
            page = signed_in(context, url, secret)
            article = page.locator(f'article[data-id="{held["confirmation_id"]}"]')
            shown = article.locator("section code.value", has_text="first line")  # read only
            assert shown.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
            assert shown.locator(".hidden-char").count() == len(HIDDEN) + 1
            assert "⟨U+202E⟩gnp.exe" in shown.inner_text()
            assert "Asked by alice at" in article.inner_text()
            article.get_by_text("Edit the arguments").click()
            field = article.locator('textarea[name="/body"]')
            assert field.input_value() == body  # the real text, to edit
            article.locator('input[name="/title"]').fill("final")
            page.screenshot(path=str(tmp_path / "inbox-hidden-characters.png"), full_page=True)
            article.get_by_role("button", name="Save and run the edited call").click()
            page.wait_for_load_state()
            assert "edited; the write ran" in page.get_by_role("status").first.inner_text()
            context.close()
    finally:
        executor.close()
    assert module.saved == [{"title": "final", "body": body}]
