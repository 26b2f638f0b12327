"""The web inbox (``/ui/``) over real HTTP: sign-in, CSRF, who sees what, deciding, editing,
history; on SQLite and PostgreSQL. The browser flows are in ``test_web_inbox_browser.py``.

Reaches ``turnkit.server.ui.present`` directly, to test how the inbox folds and rebuilds
arguments, and ``turnkit.executor.confirmations`` for ``DECIDE_SCOPE``: no public name exposes
either."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser

import httpx
import pytest
from fastapi import Request

from _doors import csrf_of
from _serving import uvicorn_serving
from _shop import prices
from turnkit import Caller, Executor, Registry
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.server import create_app

ALICE = Caller.session("alice")


@pytest.fixture
def served(executor) -> Iterator[str]:
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
        yield url


@pytest.fixture
def browser(served) -> Iterator[httpx.Client]:
    """A keep-alive client that keeps cookies, as a browser does (not signed in)."""
    with httpx.Client(base_url=served, timeout=10, follow_redirects=True) as client:
        yield client


def sign_in(client: httpx.Client, secret: str) -> httpx.Response:
    form = client.get("/ui/sign-in")
    return client.post("/ui/sign-in", data={"key": secret, "csrf": csrf_of(form)})


def person_key(executor, user: str = "alice") -> str:
    return executor.ledger.keys.create(user, {DECIDE_SCOPE})[1]


def hold_prices(executor, caller: Caller = ALICE, *skus: str) -> str:
    answer = executor.execute(caller, "shop.set_prices", prices(*(skus or ("TEA-0001",))))
    assert answer["status"] == "confirmation_required", answer
    return answer["confirmation_id"]


def test_a_signed_out_person_is_sent_to_sign_in_and_a_bad_key_is_told_what_to_do(browser, executor):
    inbox = browser.get("/ui/", follow_redirects=False)
    assert (inbox.status_code, inbox.headers["location"]) == (303, "/ui/sign-in")
    assert browser.get("/ui/pending.json").status_code == 401
    wrong = sign_in(browser, "tk_" + "x" * 40)
    assert wrong.status_code == 401
    assert "not a known API key" in wrong.text
    assert "Traceback" not in wrong.text
    _, reader = executor.ledger.keys.create("alice", {"shop.products:read"})
    narrow = sign_in(browser, reader)
    assert narrow.status_code == 401
    assert f"--scope {DECIDE_SCOPE}" in narrow.text
    assert browser.get("/ui/", follow_redirects=False).status_code == 303


def test_the_session_cookie_is_httponly_strict_and_signed(browser, executor):
    signed = sign_in(browser, person_key(executor))
    assert signed.status_code == 200  # redirected to the inbox
    cookie = signed.history[0].headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    value = browser.cookies["tk_session"]
    browser.cookies.set("tk_session", value[:-4] + "0000")  # tampered: not signed in
    assert browser.get("/ui/", follow_redirects=False).status_code == 303


def test_a_person_sees_their_own_holds_and_approves_once(browser, executor, shop):
    mine = hold_prices(executor)
    a_key = Caller.key("k-9", user_id="alice", scopes={"shop.products:write"})
    other = executor.execute(a_key, "shop.delete_product", {"sku": "TEA-0002"})
    assert other["status"] == "confirmation_required"  # a key's hold: not the person's own
    sign_in(browser, person_key(executor))
    page = browser.get("/ui/")
    assert page.status_code == 200
    assert page.text.count('class="confirmation"') == 1
    assert mine in page.text
    assert browser.get("/ui/pending.json").json() == {"signed_in": True, "ids": [mine]}
    done = browser.post(f"/ui/confirmations/{mine}/approve", data={"csrf": csrf_of(page)})
    assert done.status_code == 200
    assert "the write ran" in done.text
    assert len(shop.writes()) == 1
    again = browser.post(f"/ui/confirmations/{mine}/approve", data={"csrf": csrf_of(page)})
    assert again.status_code == 409
    assert "already decided: approve by session:alice" in again.text
    assert "Nothing ran again" in again.text
    assert len(shop.writes()) == 1


def test_a_forged_form_and_a_signed_out_post_are_refused_and_apply_nothing(browser, executor, shop):
    held = hold_prices(executor)
    sign_in(browser, person_key(executor))
    forged = browser.post(f"/ui/confirmations/{held}/approve", data={"csrf": "x" * 43})
    assert forged.status_code == 403
    assert "Reload the page" in forged.text
    missing = browser.post(f"/ui/confirmations/{held}/approve")
    assert missing.status_code == 403
    with httpx.Client(base_url=str(browser.base_url), timeout=10) as stranger:
        token = csrf_of(stranger.get("/ui/sign-in"))  # a real token, but nobody signed in
        out = stranger.post(f"/ui/confirmations/{held}/approve", data={"csrf": token},
                            follow_redirects=False)  # fmt: skip
        assert (out.status_code, out.headers["location"]) == (303, "/ui/sign-in")
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"


def test_an_invalid_edit_shows_each_violation_beside_its_field_and_applies_nothing(
    browser, executor, shop
):
    held = hold_prices(executor, ALICE, "TEA-0001", "TEA-0002")
    sign_in(browser, person_key(executor))
    token = csrf_of(browser.get("/ui/"))
    form = {"csrf": token, "/prices/0/price": "-3", "/prices/1/price": "cheap"}
    refused = browser.post(f"/ui/confirmations/{held}/edit", data=form)
    assert refused.status_code == 422
    text = refused.text
    assert "Nothing was applied" in text
    assert re.search(r'name="/prices/0/price" value="-3"\s+aria-invalid="true"', text)
    assert re.search(r'name="/prices/1/price" value="cheap"\s+aria-invalid="true"', text)
    assert "is not of type" in text
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"
    fixed = {"csrf": token, "/prices/0/price": "3.5"}
    done = browser.post(f"/ui/confirmations/{held}/edit", data=fixed)
    assert done.status_code == 200
    assert "edited; the write ran" in done.text
    (write,) = shop.writes()
    assert write["input"]["prices"][0] == {"sku": "TEA-0001", "price": 3.5}


def test_reject_with_a_reason_and_the_history_filters_by_tool_and_status(browser, executor, shop):
    first, second = hold_prices(executor), hold_prices(executor, ALICE, "TEA-0002")
    sign_in(browser, person_key(executor))
    token = csrf_of(browser.get("/ui/"))
    browser.post(f"/ui/confirmations/{first}/reject", data={"csrf": token, "message": "no"})
    browser.post(f"/ui/confirmations/{second}/approve", data={"csrf": token})
    assert executor.ledger.get_confirmation(first).decision == {"action": "reject",
                                                                "message": "no"}  # fmt: skip
    history = browser.get("/ui/history").text
    assert first in history
    assert second in history
    assert "the write ran" in history
    assert "no write ran (rejected)" in history
    rejected = browser.get("/ui/history", params={"status": "rejected"}).text
    assert first in rejected
    assert second not in rejected
    other_tool = browser.get("/ui/history", params={"tool": "shop.delete_product"}).text
    assert first not in other_tool
    assert "No decided confirmations match" in other_tool


def test_confirm_any_sees_everyones_holds_and_a_revoked_key_ends_the_session(
    browser, executor, rights
):
    held = hold_prices(executor)
    rights.grant("root", "system.confirm_any")
    key, secret = executor.ledger.keys.create("root", {DECIDE_SCOPE})
    sign_in(browser, secret)
    assert browser.get("/ui/pending.json").json()["ids"] == [held]
    executor.ledger.keys.revoke(key.id)
    assert browser.get("/ui/", follow_redirects=False).status_code == 303


def test_an_application_plugs_in_its_own_sign_in(executor, shop):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    held = hold_prices(executor)

    def who(request: Request) -> Caller | None:
        user = request.headers.get("x-user")
        return Caller.session(user) if user else None

    app = create_app(executor, mcp_path=None, ui_sign_in=who)
    with (
        uvicorn_serving(app) as url,
        httpx.Client(base_url=url, timeout=10, follow_redirects=True) as client,
    ):
        assert client.get("/ui/", follow_redirects=False).status_code == 303
        assert "Sign in with the application" in client.get("/ui/sign-in").text
        page = client.get("/ui/", headers={"x-user": "alice"})
        assert held in page.text
        assert "Sign out" not in page.text
        done = client.post(f"/ui/confirmations/{held}/approve", headers={"x-user": "alice"},
                           data={"csrf": csrf_of(page)})  # fmt: skip
        assert done.status_code == 200
    assert len(shop.writes()) == 1


def test_long_lists_fold_with_their_count_and_a_list_of_objects_is_a_table(browser, executor):
    skus = [f"TEA-{n:04d}" for n in range(1, 13)]
    held = hold_prices(executor, ALICE, *skus)
    sign_in(browser, person_key(executor))
    page = browser.get("/ui/").text
    assert held in page
    assert "<summary>12 rows</summary>" in page
    assert '<th scope="col">price</th><th scope="col">sku</th>' in page


def test_the_edit_form_reads_back_into_the_inputs_own_shape_and_types():
    from turnkit.server.ui import present

    original = {"a/b": [1, 2.5, True, None, "x"], "n": {"m~": 3}}
    tree = present.node(original)
    pointers = [child.pointer for _, child in tree.children]
    assert pointers == ["/a~1b", "/n"]
    form = {"/a~1b/0": "7", "/a~1b/2": "false", "/a~1b/4": "42", "/n/m~0": "three"}
    assert present.rebuilt(original, form) == {
        "a/b": [7, 2.5, False, None, "42"],  # a string stays a string, typed as it was
        "n": {"m~": "three"},  # not a number: kept as typed, for the schema to refuse
    }
    assert not present.node(list(range(10))).folded
    assert present.node(list(range(11))).folded


def test_a_keys_allow_list_binds_the_person_who_signed_in_with_it(browser, executor, rights, shop):
    held = hold_prices(executor)
    rights.grant("root", "system.confirm_any")
    _, narrow = executor.ledger.keys.create("root", {DECIDE_SCOPE}, allow={"shop.delete_product"})
    sign_in(browser, narrow)
    page = browser.get("/ui/")
    assert held not in page.text  # over REST this key may not decide it either
    refused = browser.post(f"/ui/confirmations/{held}/approve", data={"csrf": csrf_of(page)})
    assert refused.status_code == 404
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"


def test_crafted_tokens_and_cookies_are_refused_not_a_server_error(browser, executor, shop):
    held = hold_prices(executor)
    sign_in(browser, person_key(executor))
    for token in ("é" * 43, "x" * 5000, ""):
        answer = browser.post(f"/ui/confirmations/{held}/approve", data={"csrf": token})
        assert answer.status_code == 403, token[:10]
    for cookie in ("a" * 5000, "key_1.99999999999999999999999.zz", "x" * 40):
        browser.cookies.set("tk_session", cookie)
        assert browser.get("/ui/", follow_redirects=False).status_code == 303
    assert shop.writes() == []


def test_a_post_from_another_origin_is_refused_even_with_the_right_token(browser, executor, shop):
    held = hold_prices(executor)
    sign_in(browser, person_key(executor))
    token = csrf_of(browser.get("/ui/"))
    for header in ({"Origin": "http://127.0.0.1:1"}, {"Sec-Fetch-Site": "same-site"}):
        answer = browser.post(f"/ui/confirmations/{held}/approve", data={"csrf": token},
                              headers=header)  # fmt: skip
        assert answer.status_code == 403
    assert shop.writes() == []
    same = {"Origin": str(browser.base_url).rstrip("/"), "Sec-Fetch-Site": "same-origin"}
    done = browser.post(f"/ui/confirmations/{held}/approve", data={"csrf": token}, headers=same)
    assert done.status_code == 200
    assert len(shop.writes()) == 1


def test_signing_out_ends_the_sign_in_in_the_ledger_not_only_in_the_browser(browser, executor):
    sign_in(browser, person_key(executor))
    copied = browser.cookies["tk_session"]
    out = browser.post("/ui/sign-out", data={"csrf": csrf_of(browser.get("/ui/"))})
    assert out.url.path == "/ui/sign-in"
    browser.cookies.set("tk_session", copied)  # a copy kept elsewhere: no longer signed in
    assert browser.get("/ui/", follow_redirects=False).status_code == 303


def test_over_https_the_cookies_are_secure_and_scoped_to_the_inbox(executor):
    from fastapi.testclient import TestClient

    app = create_app(executor, mcp_path=None)
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        form = client.get("/ui/sign-in")
        assert "Secure" in form.headers["set-cookie"]
        signed = client.post("/ui/sign-in", data={"key": person_key(executor),
                                                  "csrf": csrf_of(form)})  # fmt: skip
        cookie = signed.headers["set-cookie"]
        assert signed.status_code == 303
        for flag in ("tk_session=", "HttpOnly", "Secure", "SameSite=strict", "Path=/ui"):
            assert flag in cookie
        page = client.get("/ui/")
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_an_expired_confirmation_says_it_expired_and_runs_nothing(browser, executor, clock, shop):
    held = hold_prices(executor)
    sign_in(browser, person_key(executor))
    token = csrf_of(browser.get("/ui/"))
    clock.now += 7 * 24 * 3600
    answer = browser.post(f"/ui/confirmations/{held}/approve", data={"csrf": token})
    assert answer.status_code == 410
    assert "expired" in answer.text
    assert "already decided" not in answer.text
    assert shop.writes() == []


def test_the_notice_after_a_decision_comes_from_the_ledger_not_the_address(browser, executor):
    held = hold_prices(executor)
    sign_in(browser, person_key(executor))
    lure = browser.get("/ui/", params={"notice": "Sign in again at https://evil.example"})
    assert "evil.example" not in lure.text
    done = browser.post(f"/ui/confirmations/{held}/reject", data={"csrf": csrf_of(lure)})
    assert done.url.params["decided"] == held
    assert "shop.set_prices: rejected; nothing ran" in done.text
    stranger = browser.get("/ui/", params={"decided": "not-an-id" * 20})
    assert stranger.status_code == 200


def test_the_history_finds_a_runs_outcome_however_many_calls_came_after(browser, executor):
    held = hold_prices(executor)
    executor.confirm(held, ALICE, "approve")
    for n in range(1_100):
        executor.ledger.audit(at=clock_now(executor) + n, caller="session:bob", tool="shop.x",
                              status="ok", code=None, duration_ms=1.0)  # fmt: skip
    sign_in(browser, person_key(executor))
    row = re.search(rf'<tr data-id="{held}">(.*?)</tr>', browser.get("/ui/history").text, re.S)
    assert row is not None
    assert "<td>the write ran</td>" in row.group(1)


def clock_now(executor) -> float:
    return executor.clock()


def test_a_sync_sign_in_of_the_application_runs_off_the_event_loop(executor):
    import threading

    seen: list[int] = []

    def who(request: Request) -> Caller | None:
        seen.append(threading.get_ident())
        return ALICE

    app = create_app(executor, mcp_path=None, ui_sign_in=who)
    with uvicorn_serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert client.get("/ui/").status_code == 200
        assert client.get("/ui/pending.json").json()["signed_in"] is True
    assert seen
    assert threading.get_ident() not in seen


def test_a_mistyped_address_or_a_decision_opened_as_a_link_is_a_page_that_says_what_to_do(
    browser, executor
):
    held = hold_prices(executor)
    sign_in(browser, person_key(executor))
    for path, status, said in (
        ("/ui/nowhere", 404, "There is no such page"),
        (f"/ui/confirmations/{held}/approve", 405, "with the buttons on the inbox page"),
    ):
        page = browser.get(path)
        assert page.status_code == status
        assert page.headers["content-type"].startswith("text/html")
        assert said in page.text
    assert executor.ledger.get_confirmation(held).status == "pending"
    assert browser.get("/ui/static/inbox.js").status_code == 200


# --- idle sign-ins ----------------------------------------------------------------------------


def idled(executor, seconds: float) -> list[float]:
    """Make every sign-in look unused for ``seconds`` more; their last uses now."""
    ledger = executor.ledger
    ledger._run("UPDATE turnkit_key_sessions SET last_seen = last_seen - ?", (seconds,))
    return [row[0] for row in ledger._rows("SELECT last_seen FROM turnkit_key_sessions")]


def test_a_sign_in_unused_for_30_minutes_ends_and_the_pages_own_poll_is_no_use(browser, executor):
    sign_in(browser, person_key(executor))
    before = idled(executor, 30 * 60 - 10)

    assert browser.get("/ui/pending.json").json()["signed_in"] is True  # the page's poll
    assert idled(executor, 0) == before  # not a use: nothing extended
    idled(executor, 20)
    assert browser.get("/ui/", follow_redirects=False).status_code == 303
    assert browser.get("/ui/pending.json").json() == {"signed_in": False, "ids": []}


def test_each_page_a_person_opens_extends_their_sign_in(executor):
    app = create_app(executor, mcp_path=None, inbox_idle_timeout=600)
    with (
        uvicorn_serving(app) as url,
        httpx.Client(base_url=url, timeout=10, follow_redirects=True) as browser,
    ):
        sign_in(browser, person_key(executor))
        (rewound,) = idled(executor, 590)
        assert browser.get("/ui/history").status_code == 200  # a use: extends it
        (extended,) = idled(executor, 0)
        assert extended >= rewound + 590
        idled(executor, 590)
        assert browser.get("/ui/", follow_redirects=False).status_code == 200
        idled(executor, 601)
        assert browser.get("/ui/", follow_redirects=False).status_code == 303


def test_signing_in_purges_the_sign_ins_that_ended(served, executor):
    with httpx.Client(base_url=served, timeout=10, follow_redirects=True) as left_open:
        sign_in(left_open, person_key(executor))
    idled(executor, 2 * 3600)
    with httpx.Client(base_url=served, timeout=10, follow_redirects=True) as browser:
        sign_in(browser, person_key(executor, "bob"))
    assert executor.ledger._rows("SELECT COUNT(*) FROM turnkit_key_sessions") == [(1,)]


# --- what a person reads ----------------------------------------------------------------------

HIDDEN = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c" \
         "\u200b\u200c\u200d\u2060\ufeff"  # fmt: skip
"""Bidi controls and zero-width characters: each changes or hides what a person reads."""


class Notes:
    """Module ``notes``: a note saved (a write) with a title and a free-text body."""

    key = "notes"

    def __init__(self) -> None:
        self.saved: list[dict[str, str]] = []

    def api_tools(self) -> list[dict[str, object]]:
        text = {"type": "string"}
        schema = {"type": "object", "required": ["title", "body"], "additionalProperties": False,
                  "properties": {"title": text, "body": text}}  # fmt: skip
        return [{"name": "notes.save_note", "scope": "notes.notes:write", "permission": "shop.view",
                 "handler": lambda value, ctx: self.saved.append(value) or "saved",
                 "input_schema": schema}]  # fmt: skip


@pytest.fixture
def notes(ledger, rights, clock) -> Iterator[tuple[Notes, Executor, str]]:
    """The inbox of an executor over ``Notes`` (alice's writes held): the module, the executor
    and the inbox's URL."""
    module = Notes()
    executor = Executor(Registry([module]), ledger=ledger, permissions=rights, clock=clock)
    ledger.set_setting("api_session_write_modules", ["notes"])
    try:
        with uvicorn_serving(create_app(executor, mcp_path=None)) as url:
            yield module, executor, url
    finally:
        executor.close()


class EditForm(HTMLParser):
    """The fields a browser sends from the edit form of one confirmation, as it sends them."""

    def __init__(self, confirmation_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.action, self.inside, self.area = f"/{confirmation_id}/edit", False, None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.inside = (found.get("action") or "").endswith(self.action)
        elif self.inside and tag == "input" and found.get("name"):
            value = found.get("value") or ""
            if found.get("type", "text") == "text":  # a one-line field drops line breaks
                value = value.replace("\r", "").replace("\n", "")
            self.fields[found["name"] or ""] = value
        elif self.inside and tag == "textarea":
            self.area = found.get("name")
            self.fields[self.area or ""] = ""

    def handle_data(self, data: str) -> None:
        if self.area is not None:
            self.fields[self.area] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self.area is not None:
            value = self.fields[self.area].removeprefix("\n")  # the parser drops one line break
            self.fields[self.area] = value.replace("\r\n", "\n").replace("\n", "\r\n")  # sent so
            self.area = None
        self.inside = self.inside and tag != "form"


def test_text_is_shown_as_it_is_and_hidden_characters_are_marked(browser, executor):
    held = executor.execute(ALICE, "shop.delete_product", {"sku": f"TEA-0001{HIDDEN}  two\nlines"})
    sign_in(browser, person_key(executor))

    page = browser.get("/ui/").text

    shown = re.search(r'<code class="value">(TEA-0001.*?)</code>', page, re.S)
    assert shown is not None, page
    for char in HIDDEN:
        assert f"⟨U+{ord(char):04X}⟩</span>" in shown.group(1)
        assert char not in shown.group(1)
    assert shown.group(1).endswith("</span>  two\nlines")  # whitespace as it is
    assert 'title="RIGHT-TO-LEFT OVERRIDE"' in shown.group(1)
    assert held["confirmation_id"] in page
    style = browser.get("/ui/static/inbox.css").text
    assert re.search(r"code\.value[^{]*\{[^}]*white-space: pre-wrap", style)


def test_an_edit_sends_back_unchanged_what_the_person_did_not_change(notes):
    module, executor, url = notes
    body = f"first line\n\u202egnp.exe{HIDDEN}\n  indented\n"
    held = executor.execute(ALICE, "notes.save_note", {"title": "draft", "body": body})
    with httpx.Client(base_url=url, timeout=10, follow_redirects=True) as browser:
        sign_in(browser, person_key(executor))
        page = browser.get("/ui/")
        assert "with its hidden characters" in page.text  # beside the field being edited
        form = EditForm(held["confirmation_id"])
        form.feed(page.text)
        assert set(form.fields) == {"csrf", "seen", "/title", "/body"}  # seen: what it showed
        form.fields["/title"] = "final"
        done = browser.post(f"/ui/confirmations/{held['confirmation_id']}/edit", data=form.fields)
    assert done.status_code == 200, done.text
    assert module.saved == [{"title": "final", "body": body}]


def test_asked_by_names_the_user_and_the_key_they_asked_with(browser, executor):
    by_key = Caller.key("key_0a1b2c3d", user_id="alice", scopes={"shop.products:write"})
    executor.execute(by_key, "shop.delete_product", {"sku": "TEA-0002"})
    hold_prices(executor)
    sign_in(browser, person_key(executor, "root"))  # root may decide everyone's holds

    page = browser.get("/ui/").text

    asked = re.findall(r"Asked by <strong>(.*?)</strong>", page)
    assert sorted(asked) == ["alice", "alice (key key_0a1b2c3d)"]
