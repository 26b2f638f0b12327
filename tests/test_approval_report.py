"""The approval report (``turnkit.ledger.report``): per tool, what became of its held writes.

Reaches ``turnkit.ledger.report`` and ``turnkit.ledger.records`` (the report and the reader's rule
have no public name: ``turnkit report approvals`` and ``/ui/report`` are their doors), and
``turnkit.executor.confirmations`` for ``DECIDE_SCOPE``. The figures are checked by hand on
ledgers filled with known decisions, on SQLite and PostgreSQL, and on decisions taken through the
executor; then the command and the inbox page (over real HTTP, and in Chromium at 390 px) show
them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from _doors import csrf_of
from _serving import uvicorn_serving
from _shop import prices
from test_cli import TURNKIT, env
from turnkit import Caller, Confirmation, open_ledger
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.ledger.records import Readable
from turnkit.ledger.report import approval_report, outcome_of, percentile
from turnkit.server import create_app

NOW = 1_800_000_000.0
ALICE = Caller.session("alice")
BOB = Caller.session("bob")


def put(
    ledger,
    tool: str,
    *,
    at: float,
    status: str = "done",
    action: str | None = "approve",
    wait: float | None = 10.0,
    caller: Caller = ALICE,
    expires_in: float = 3600.0,
    cid: str | None = None,
) -> str:
    """A confirmation of ``tool`` held at ``at`` and ended as ``status`` ``wait`` seconds later."""
    cid = cid or str(uuid.uuid4())
    decided = status != "pending" and wait is not None
    ledger.create_confirmation(
        Confirmation(
            id=cid, caller=caller, tool=tool, input={"n": 1}, input_hash="h",
            idempotency_key=None, status=status, created_at=at, expires_at=at + expires_in,
            decided_at=at + wait if decided else None,
            decided_by="root" if decided else None,
            decision={"action": action} if decided and action else None,
        )
    )  # fmt: skip
    return cid


def by_tool(ledger, now: float = NOW, **given):
    return {row.tool: row for row in approval_report(ledger, now=now, **given)}


def test_the_figures_of_known_decisions_are_counted_and_the_waits_ranked(ledger):
    t = NOW - 86400
    # the waits of people's decisions, held in this order: 30 50 10 90 70 20 60 40 80
    for i, (wait, action, status) in enumerate(
        [(30, "approve", "done"), (50, "approve", "done"), (10, "approve", "done"),
         (90, "reject", "rejected"), (70, "edit", "done"), (20, "approve", "done"),
         (60, "approve", "running"), (40, "approve", "done"), (80, "edit", "done")]
    ):  # fmt: skip
        put(ledger, "shop.set_prices", at=t + i, status=status, action=action, wait=wait)
    put(ledger, "shop.set_prices", at=t + 20, status="expired", action=None, wait=3600)
    put(ledger, "shop.set_prices", at=t + 21, status="forbidden", action=None, wait=5)
    put(ledger, "shop.set_prices", at=NOW - 7200, status="pending")  # its time ran out
    put(ledger, "shop.set_prices", at=NOW - 60, status="pending")  # still waiting
    put(ledger, "shop.delete_product", at=t, status="rejected", action="reject", wait=600)

    report = by_tool(ledger)
    assert list(report) == ["shop.delete_product", "shop.set_prices"]
    prices_ = report["shop.set_prices"]
    assert (prices_.held, prices_.decided, prices_.pending) == (13, 12, 1)
    assert (prices_.approved, prices_.edited, prices_.rejected) == (6, 2, 1)
    assert (prices_.expired, prices_.forbidden) == (2, 1)  # closed, and not yet closed
    assert prices_.rate("approved") == 6 / 12
    assert prices_.rate("expired") == 2 / 12
    # nine waits, 10..90 s: nearest rank p50 is the 5th (50 s), p90 the 9th (ceil 8.1: 90 s);
    # the expiry (3600 s) and the revoked key (5 s) are no person's decision
    assert (prices_.wait_p50, prices_.wait_p90) == (50.0, 90.0)
    assert prices_.suggestion is None
    deletes = report["shop.delete_product"]
    assert (deletes.held, deletes.rejected, deletes.rate("rejected")) == (1, 1, 1.0)
    assert (deletes.wait_p50, deletes.wait_p90) == (600.0, 600.0)
    figures = prices_.as_dict()
    assert figures["rates"]["edited"] == 2 / 12
    assert figures["wait_seconds"] == {"p50": 50.0, "p90": 90.0}
    json.dumps(figures)  # JSON data as it is


def test_since_counts_the_writes_held_from_then_on(ledger):
    since = NOW - 3600
    put(ledger, "shop.set_prices", at=since - 1)
    put(ledger, "shop.set_prices", at=since)  # held at that very moment: counted
    put(ledger, "shop.set_prices", at=since + 1)
    assert by_tool(ledger)["shop.set_prices"].held == 3
    assert by_tool(ledger, since=since)["shop.set_prices"].held == 2
    assert by_tool(ledger, since=NOW) == {}


def test_the_suggestion_appears_when_the_latest_approvals_reach_the_threshold(ledger):
    t = NOW - 86400
    put(ledger, "shop.set_prices", at=t, action="edit")  # before the streak: it breaks nothing
    for i in range(19):
        put(ledger, "shop.set_prices", at=t + 1 + i)
    below = by_tool(ledger, streak_over=20)["shop.set_prices"]
    assert (below.streak, below.suggestion) == (19, None)
    put(ledger, "shop.set_prices", at=t + 30)
    put(ledger, "shop.set_prices", at=NOW - 10, status="pending")  # undecided: breaks nothing
    reached = by_tool(ledger, streak_over=20)["shop.set_prices"]
    assert reached.streak == 20
    assert reached.suggestion == (
        "shop.set_prices was approved unedited 20 times in a row: a `danger` rule could let"
        " such calls through"
    )
    put(ledger, "shop.set_prices", at=NOW - 5, status="rejected", action="reject")
    broken = by_tool(ledger, streak_over=20)["shop.set_prices"]
    assert (broken.streak, broken.suggestion) == (0, None)


@pytest.mark.parametrize("breaker", ["edit", "expired", "forbidden"])
def test_an_edit_an_expiry_or_a_revoked_key_ends_a_streak(ledger, breaker):
    t = NOW - 86400
    for i in range(3):
        put(ledger, "shop.set_prices", at=t + i)
    status = "done" if breaker == "edit" else breaker
    put(ledger, "shop.set_prices", at=t + 5, status=status, action="edit")
    assert by_tool(ledger, streak_over=3)["shop.set_prices"].streak == 0
    put(ledger, "shop.set_prices", at=t + 6)
    assert by_tool(ledger, streak_over=3)["shop.set_prices"].streak == 1


def test_pages_of_any_size_give_the_same_figures_ties_included(ledger):
    for i in range(7):  # held at the same instant: ordered by id within it
        cid = f"00000000-0000-4000-8000-{i:012d}"
        put(ledger, "shop.set_prices", at=NOW - 100, wait=i + 1, cid=cid)
    for i in range(5):
        put(ledger, "shop.delete_product", at=NOW - 50 + i, status="rejected", action="reject")
    whole = approval_report(ledger, now=NOW)
    for page in (1, 2, 3, 7, 12):
        assert approval_report(ledger, now=NOW, page=page) == whole
    assert [row.held for row in whole] == [5, 7]


def test_a_reader_who_sees_only_their_own_gets_their_own_figures(ledger):
    put(ledger, "shop.set_prices", at=NOW - 10, caller=ALICE)
    put(ledger, "shop.set_prices", at=NOW - 9, caller=BOB, status="rejected", action="reject")
    mine = by_tool(ledger, readable=Readable(identity=ALICE.identity))["shop.set_prices"]
    assert (mine.held, mine.approved, mine.rejected) == (1, 1, 0)
    everyone = by_tool(ledger, readable=Readable(identity=ALICE.identity, others="all"))
    assert everyone["shop.set_prices"].held == 2


def test_the_report_counts_decisions_taken_through_the_executor(executor, clock):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    root = Caller.session("root")

    def hold() -> str:
        return executor.execute(ALICE, "shop.set_prices", prices())["confirmation_id"]

    first, second, third, fourth = hold(), hold(), hold(), hold()
    clock.now += 30
    executor.confirm(first, ALICE, "approve")
    clock.now += 30
    executor.confirm(second, root, {"action": "edit", "arguments": prices(price=7.0)})
    executor.confirm(third, ALICE, {"action": "reject", "message": "not now"})
    clock.now += 7200  # the fourth expires undecided
    report = by_tool(executor.ledger, clock.now)["shop.set_prices"]
    assert (report.approved, report.edited, report.rejected, report.expired) == (1, 1, 1, 1)
    assert (report.wait_p50, report.wait_p90) == (60.0, 60.0)  # 30, 60, 60: the 2nd and 3rd
    assert executor.confirmation(fourth).status == "expired"  # closed now: counted the same
    assert by_tool(executor.ledger, clock.now)["shop.set_prices"].expired == 1


def test_percentile_is_the_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.9) == 7.0
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert (percentile(values, 0.5), percentile(values, 0.9)) == (10.0, 18.0)


def test_a_pending_write_whose_time_ran_out_counts_as_expired():
    held = Confirmation(id="c", caller=ALICE, tool="t.x_y", input={}, input_hash="h",
                        idempotency_key=None, status="pending", created_at=0.0,
                        expires_at=10.0)  # fmt: skip
    assert outcome_of(held, 9.0) == "pending"
    assert outcome_of(held, 10.0) == "expired"


# --- the command ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_shows_the_table_the_suggestion_and_json(ledger_url, tmp_path):
    ledger = open_ledger(ledger_url)
    try:
        empty = _report(ledger_url, tmp_path)
        assert empty.returncode == 0, empty.stderr
        assert "no confirmations yet" in empty.stdout
        now = time.time()
        for i in range(21):
            put(ledger, "shop.set_prices", at=now - 3600 + i, wait=60)
        put(ledger, "shop.delete_product", at=now - 30 * 86400, status="rejected",
            action="reject")  # fmt: skip
    finally:
        ledger.close()
    shown = _report(ledger_url, tmp_path)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if "shop.set_prices" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells == ["shop.set_prices", "21", "100%", "0%", "0%", "0%", "1m", "1m"]
    assert "shop.delete_product" in shown.stdout
    assert "suggestion: shop.set_prices was approved unedited 21 times in a row" in shown.stdout
    recent = _report(ledger_url, tmp_path, "--since", "7d", "--json")
    assert recent.returncode == 0, recent.stderr
    tools = json.loads(recent.stdout)["tools"]
    assert [t["tool"] for t in tools] == ["shop.set_prices"]  # the delete was 30 days ago
    assert tools[0]["approved"] == 21
    typo = _report(ledger_url, tmp_path, "--since", "a week")
    assert typo.returncode == 2
    assert "not a period" in typo.stdout
    assert "Traceback" not in typo.stdout + typo.stderr


@pytest.mark.slow
def test_the_report_section_runs_as_written(tmp_path):
    from test_docs_blocks import blocks

    (code,) = [code for heading, code in blocks("sh") if heading.startswith("What people decided")]
    (tmp_path / ".turnkit").mkdir()
    ledger = open_ledger(tmp_path / ".turnkit" / "turnkit.sqlite")  # the command's default
    try:
        for i in range(3):
            put(ledger, "catalogue.set_prices", at=time.time() - 600 + i, wait=45)
    finally:
        ledger.close()
    path = {"PATH": f"{Path(TURNKIT).parent}:{env()['PATH']}"}
    done = subprocess.run(["bash", "-c", code], cwd=tmp_path, env=env() | path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "catalogue.set_prices" in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [
        "catalogue.set_prices", "3", "100%", "0%", "0%", "0%", "45s", "45s"]  # fmt: skip


def _report(db: str, cwd, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TURNKIT, "report", "approvals", "--db", db, *args], cwd=cwd,
                          env=env(), capture_output=True, text=True, timeout=120)  # fmt: skip


# --- the inbox page ------------------------------------------------------------------------------


@pytest.fixture
def served(executor) -> Iterator[str]:
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        yield url


@contextmanager
def signed_in_as(url: str, executor, user: str) -> Iterator[httpx.Client]:
    """A client (cookies kept, as a browser) signed in with a new key of ``user``'s."""
    _, secret = executor.ledger.keys.create(user, {DECIDE_SCOPE})
    with httpx.Client(base_url=url, timeout=10, follow_redirects=True) as client:
        form = client.get("/ui/sign-in")
        signed = client.post("/ui/sign-in", data={"key": secret, "csrf": csrf_of(form)})
        assert signed.url.path == "/ui/", signed.text[:300]
        yield client


def cells(page: httpx.Response, tool: str) -> list[str]:
    """The texts of ``tool``'s row of the report table."""
    row = re.search(rf'<tr data-tool="{re.escape(tool)}">(.*?)</tr>', page.text, re.S)
    assert row, page.text[-2000:]
    return [re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row[1], re.S)]  # fmt: skip


def test_the_page_shows_everyones_figures_to_a_person_who_decides_for_others(executor, served):
    t = NOW - 3 * 86400
    for i in range(20):
        put(executor.ledger, "shop.set_prices", at=t + i, wait=120)
    put(executor.ledger, "shop.delete_product", at=t, caller=BOB, status="rejected",
        action="reject", wait=30)  # fmt: skip
    put(executor.ledger, "shop.delete_product", at=t + 1, caller=BOB, status="expired",
        action=None)  # fmt: skip
    with signed_in_as(served, executor, "root") as root:
        page = root.get("/ui/report")
        assert page.status_code == 200
        assert page.headers["cache-control"] == "no-store"
        assert cells(page, "shop.set_prices") == [
            "shop.set_prices", "20", "100%", "0%", "0%", "0%", "2m", "2m"]  # fmt: skip
        assert cells(page, "shop.delete_product") == [
            "shop.delete_product", "2", "0%", "0%", "50%", "50%", "30s", "30s"]  # fmt: skip
        assert ("shop.set_prices was approved unedited 20 times in a row: a `danger` rule could"
                " let such calls through") in page.text  # fmt: skip
        assert "your own confirmations only" not in page.text
        assert 'href="/ui/report"' in root.get("/ui/").text  # linked from every page
        assert 'href="/ui/history?tool=shop.delete_product"' in page.text  # its decisions
        recent = root.get("/ui/report", params={"since": "1d"})
        assert "No confirmations yet in the last day" in recent.text
        odd = root.get("/ui/report", params={"since": "<script>"})
        assert odd.status_code == 200
        assert "<script>" not in odd.text.split("<main", 1)[1]


def test_a_person_who_decides_only_their_own_sees_only_their_own_figures(executor, served):
    put(executor.ledger, "shop.set_prices", at=NOW - 100, caller=ALICE)
    put(executor.ledger, "shop.set_prices", at=NOW - 90, caller=BOB, status="rejected",
        action="reject")  # fmt: skip
    put(executor.ledger, "shop.delete_product", at=NOW - 80, caller=BOB)
    with signed_in_as(served, executor, "alice") as alice:
        page = alice.get("/ui/report")
    assert "your own confirmations only" in page.text
    assert cells(page, "shop.set_prices")[:4] == ["shop.set_prices", "1", "100%", "0%"]
    assert 'data-tool="shop.delete_product"' not in page.text


def test_the_page_is_for_signed_in_people_and_says_when_nothing_was_held(executor, served):
    with httpx.Client(base_url=served, timeout=10) as nobody:
        sent = nobody.get("/ui/report")
        assert (sent.status_code, sent.headers["location"]) == (303, "/ui/sign-in")
    with signed_in_as(served, executor, "root") as root:
        assert "No confirmations yet: nothing was held for a person" in root.get("/ui/report").text


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def chromium() -> Iterator[Any]:
    from test_web_inbox_browser import FLAGS

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: apt-get install chromium (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.mark.slow
def test_the_page_fits_a_390_px_phone_in_chromium(chromium, executor, served, tmp_path):
    from test_web_inbox_browser import signed_in

    t = NOW - 86400
    for i in range(21):
        put(executor.ledger, "shop.set_prices_for_every_catalogue_entry", at=t + i, wait=90)
    put(executor.ledger, "shop.delete_product", at=t, status="rejected", action="reject")
    _, secret = executor.ledger.keys.create("root", {DECIDE_SCOPE})
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = signed_in(context, served, secret)
        page.goto(f"{served}/ui/report")
        card = page.locator('tr[data-tool="shop.set_prices_for_every_catalogue_entry"]')
        approve = card.locator('td[data-label="Approve"]')
        assert approve.inner_text() == "100%"
        shown = approve.evaluate(  # a card: each figure on a line of its own, its label beside it
            "td => [getComputedStyle(td).display, getComputedStyle(td, '::before').content]"
        )
        assert shown == ["flex", '"Approve"']
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        box = card.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 390
        suggestion = page.locator("ul.suggestions li").first
        assert "approved unedited 21 times in a row" in suggestion.inner_text()
        page.screenshot(path=str(tmp_path / "report-390.png"), full_page=True)
    finally:
        context.close()
