"""Notifications reach real receivers: a keep-alive HTTP server that verifies each Standard
Webhooks signature with the ``standardwebhooks`` package, a Slack-style receiver, and an
``aiosmtpd`` SMTP server; failed attempts are retried after a backoff and given up as dead
letters; nothing of the held input goes out unless the target includes it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from _receiver import Receiver
from _shop import prices
from turnkit import Executor, MemoryLedger, Registry, Settings
from turnkit.notify import Dispatcher, add_target, new_secret, send_ping

PUBLIC = "https://tools.example.com"
SECRET_ARGUMENT = "ZQX-9931"  # a SKU no notification may carry unless asked to


@pytest.fixture
def shop_executor(shop, rights, clock) -> Iterator[Executor]:
    ledger = MemoryLedger()
    ledger.set_setting("api_session_write_modules", ["shop"])
    ex = Executor(
        Registry([shop]), ledger=ledger, permissions=rights, settings=Settings(), clock=clock
    )
    yield ex
    ex.close()


def dispatcher(executor: Executor, clock: Any = None, **options: Any) -> Dispatcher:
    options = {"public_url": PUBLIC, "backoff": 10.0, "timeout": 5.0} | options
    if clock is not None:
        options["clock"] = clock
    return Dispatcher(executor.ledger, **options)


def hold(executor: Executor, alice, sku: str = "TEA-0001") -> str:
    answer = executor.execute(alice, "shop.set_prices", prices(sku))
    return answer["confirmation_id"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_signed_webhook_is_verified_by_standardwebhooks(shop_executor, alice):
    secret = new_secret()
    with Receiver(secret) as receiver:
        add_target(shop_executor.ledger, "hook", "webhook",
                   {"url": receiver.url, "secret": secret}, now=0)  # fmt: skip
        held = hold(shop_executor, alice)
        shop_executor.confirm(held, alice, "approve")
        sender = dispatcher(shop_executor)
        try:
            assert sender.run_once().sent == 3
        finally:
            sender.close()
    assert receiver.bad_signatures == 0
    assert sorted(receiver.counts) == sorted(
        d.id for d in shop_executor.ledger.deliveries(confirmation_id=held)
    )
    kinds = [body["type"] for body in receiver.bodies]
    assert sorted(kinds) == ["confirmation.decided", "confirmation.held", "confirmation.ran"]
    held_body = next(b for b in receiver.bodies if b["type"] == "confirmation.held")
    assert held_body["data"] | {"expires_at": "x"} == {
        "confirmation_id": held,
        "event": "held",
        "status": "pending",
        "summary": "waits for a decision",
        "link": f"{PUBLIC}/ui/confirmations/{held}",
        "tool": "shop.set_prices",
        "caller": "session:alice",
        "caller_name": None,
        "thread_id": None,
        "expires_at": "x",
    }
    assert {d.state for d in shop_executor.ledger.deliveries()} == {"sent"}


def test_a_wrong_secret_fails_verification_and_is_retried(shop_executor, alice, clock):
    with Receiver(new_secret()) as receiver:
        add_target(shop_executor.ledger, "hook", "webhook", {"url": receiver.url},
                   events=["held"], now=0)  # fmt: skip
        hold(shop_executor, alice)
        sender = dispatcher(shop_executor, clock)
        try:
            assert sender.run_once().retried == 1
        finally:
            sender.close()
    assert receiver.bad_signatures == 1
    (row,) = shop_executor.ledger.deliveries()
    assert row.state == "pending"
    assert row.last_error == "HTTP 400: no"


def test_nothing_of_the_input_goes_out_unless_the_target_includes_arguments(shop_executor, alice):
    plain, told = new_secret(), new_secret()
    with Receiver(plain) as bare, Receiver(told) as full:
        add_target(shop_executor.ledger, "bare", "webhook",
                   {"url": bare.url, "secret": plain}, events=["held"], now=0)  # fmt: skip
        add_target(shop_executor.ledger, "full", "webhook",
                   {"url": full.url, "secret": told}, events=["held"],
                   include=["arguments", "preview", "context"], now=0)  # fmt: skip
        hold(shop_executor, alice, SECRET_ARGUMENT)
        sender = dispatcher(shop_executor)
        try:
            assert sender.run_once().sent == 2
        finally:
            sender.close()
    assert SECRET_ARGUMENT not in bare.raw[0]
    assert "arguments" not in bare.bodies[0]["data"]
    assert SECRET_ARGUMENT in full.raw[0]
    assert full.bodies[0]["data"]["arguments"] == prices(SECRET_ARGUMENT)
    assert {"preview", "context"} <= set(full.bodies[0]["data"])


def test_failed_attempts_back_off_then_succeed(shop_executor, alice, clock):
    with Receiver(statuses=[500, 503]) as receiver:
        add_target(shop_executor.ledger, "chat", "slack", {"url": receiver.url},
                   events=["held"], now=0)  # fmt: skip
        hold(shop_executor, alice)
        sender = dispatcher(shop_executor, clock, backoff=10.0)
        try:
            assert sender.run_once().retried == 1
            (row,) = shop_executor.ledger.deliveries()
            assert 5.0 <= row.next_at - clock.now <= 10.0  # the first backoff, jittered
            assert sender.run_once().claimed == 0  # not yet
            clock.now += 10.0
            assert sender.run_once().retried == 1
            (row,) = shop_executor.ledger.deliveries()
            assert 10.0 <= row.next_at - clock.now <= 20.0  # twice as long
            clock.now += 20.0
            assert sender.run_once().sent == 1
        finally:
            sender.close()
    (row,) = shop_executor.ledger.deliveries()
    assert (row.state, row.attempts, row.last_error) == ("sent", 3, None)
    assert receiver.requests == 3


def test_a_row_that_keeps_failing_becomes_a_dead_letter_once(
    shop_executor, alice, clock, expect_errors, caplog
):
    expect_errors("given up after 2 attempt")
    with Receiver(statuses=[500, 500, 500]) as receiver:
        add_target(shop_executor.ledger, "chat", "slack", {"url": receiver.url},
                   events=["held"], now=0)  # fmt: skip
        hold(shop_executor, alice)
        sender = dispatcher(shop_executor, clock, max_attempts=2)
        try:
            assert sender.run_once().retried == 1
            clock.now += 100
            assert sender.run_once().dead == 1
            clock.now += 10_000
            assert sender.run_once().claimed == 0
            (dead,) = shop_executor.ledger.dead_letters()
            assert dead.last_error == "HTTP 500: no"
            warnings = [r for r in caplog.records if r.name == "turnkit.notify"]
            assert [r.levelname for r in warnings] == ["WARNING", "ERROR"]
            assert shop_executor.ledger.retry_dead(dead.id)
            assert sender.run_once().dead == 0
        finally:
            sender.close()
    assert receiver.requests == 3


def test_a_target_that_refuses_the_connection_is_retried(shop_executor, alice, clock):
    closed = f"http://127.0.0.1:{free_port()}/hook"
    add_target(shop_executor.ledger, "gone", "webhook", {"url": closed}, now=0)
    hold(shop_executor, alice)
    sender = dispatcher(shop_executor, clock)
    try:
        assert sender.run_once().retried == 1
    finally:
        sender.close()
    (row,) = shop_executor.ledger.deliveries()
    assert row.state == "pending"
    assert "ConnectError" in (row.last_error or "")


def test_slack_gets_a_message_with_the_tool_the_caller_and_the_link(shop_executor, alice):
    with Receiver() as slack:
        add_target(shop_executor.ledger, "chat", "slack", {"url": slack.url},
                   events=["held"], now=0)  # fmt: skip
        held = hold(shop_executor, alice, SECRET_ARGUMENT)
        sender = dispatcher(shop_executor)
        try:
            assert sender.run_once().sent == 1
        finally:
            sender.close()
    (message,) = slack.bodies
    assert "shop.set_prices" in message["text"]
    assert "session:alice" in message["text"]
    assert f"<{PUBLIC}/ui/confirmations/{held}|Open it in the inbox>" in json.dumps(message)
    assert SECRET_ARGUMENT not in slack.raw[0]


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.envelopes.append(envelope)
        self.messages.append(message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    inbox, port = Inbox(), free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


def test_an_email_reaches_a_real_smtp_server_with_the_link(shop_executor, alice, smtp):
    inbox, port = smtp
    config = {"smtp_host": "127.0.0.1", "smtp_port": port, "from": "turnkit@example.com",
              "to": ["ops@example.com", "lead@example.com"]}  # fmt: skip
    add_target(shop_executor.ledger, "ops", "email", config, events=["held"], now=0)
    held = hold(shop_executor, alice, SECRET_ARGUMENT)
    sender = dispatcher(shop_executor)
    try:
        assert sender.run_once().sent == 1
    finally:
        sender.close()
    (message,) = inbox.messages
    assert inbox.envelopes[0].rcpt_tos == ["ops@example.com", "lead@example.com"]
    assert message["Subject"] == "[turnkit] shop.set_prices waits for a decision"
    body = message.get_payload(decode=True).decode()
    assert f"Open it: {PUBLIC}/ui/confirmations/{held}" in body
    assert "session:alice" in body
    assert SECRET_ARGUMENT not in body


def test_a_test_notification_says_what_the_receiver_answered(shop_executor, smtp):
    secret = new_secret()
    with Receiver(secret, statuses=[200, 410]) as receiver:
        target = add_target(shop_executor.ledger, "hook", "webhook",
                            {"url": receiver.url, "secret": secret}, now=0)  # fmt: skip
        first, second = send_ping(target, PUBLIC), send_ping(target, PUBLIC)
    assert (first.ok, first.detail) == (True, "HTTP 200: ok")
    assert (second.ok, second.detail) == (False, "HTTP 410: no")
    assert receiver.bodies[0]["type"] == "turnkit.test"
    inbox, port = smtp
    mail = add_target(shop_executor.ledger, "ops", "email",
                      {"smtp_host": "127.0.0.1", "smtp_port": port, "from": "t@example.com",
                       "to": ["ops@example.com"]}, now=0)  # fmt: skip
    answered = send_ping(mail, PUBLIC)
    assert answered.ok, answered.detail
    assert inbox.messages[0]["Subject"] == "[turnkit] test notification"


async def test_the_async_loop_delivers_without_blocking_and_stops_when_told(shop_executor, alice):
    import asyncio

    secret = new_secret()
    with Receiver(secret) as receiver:
        add_target(shop_executor.ledger, "hook", "webhook",
                   {"url": receiver.url, "secret": secret}, events=["held"], now=0)  # fmt: skip
        sender = dispatcher(shop_executor)
        stop = asyncio.Event()
        loop = asyncio.create_task(sender.arun_forever(stop, idle=0.05))
        try:
            await shop_executor.aexecute(alice, "shop.set_prices", prices("TEA-0001"))
            for _ in range(500):  # bounded: 10 s
                if receiver.counts:
                    break
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.wait_for(loop, 10)
            sender.close()
    assert len(receiver.counts) == 1
    assert receiver.bad_signatures == 0


def test_a_target_that_includes_them_gets_the_preview_the_request_and_the_quorum(tmp_path):
    from _vault import RIGHTS, Vault
    from turnkit import Caller, StaticPermissions

    ledger = MemoryLedger()
    ledger.set_setting("api_session_write_modules", ["vault"])
    ex = Executor(Registry([Vault(tmp_path / "v.log")]), ledger=ledger,
                  permissions=StaticPermissions(RIGHTS))  # fmt: skip
    secret, bare_secret = new_secret(), new_secret()
    try:
        with Receiver(secret) as full, Receiver(bare_secret) as bare:
            add_target(ledger, "full", "webhook", {"url": full.url, "secret": secret},
                       events=["held"], include=["preview", "context"], now=0)  # fmt: skip
            add_target(ledger, "bare", "webhook", {"url": bare.url, "secret": bare_secret},
                       events=["held"], now=0)  # fmt: skip
            request = {"user": "move 100 from ops", "model": "Moving it."}
            ex.call(Caller.session("alice"), "vault.move_funds",
                    {"account": "ops", "amount": 100}, request=request)  # fmt: skip
            sender = dispatcher(ex)
            try:
                assert sender.run_once().sent == 2
            finally:
                sender.close()
        data = full.bodies[0]["data"]
        assert data["preview"] == {"value": {"account": "ops", "before": 500, "after": 400}}
        assert data["context"] == request
        assert data["approvals"] == {"given": 0, "needed": 2}
        assert "before" not in bare.raw[0]
        assert "move 100" not in bare.raw[0]
    finally:
        ex.close()


def test_a_receiver_trickling_its_answer_cannot_keep_a_send_past_its_lease(shop_executor, alice):
    """One byte every 0.3 s keeps each read within httpx's timeout; the send still ends at its
    total timeout (as a failure, retried later), before the lease lets another worker take it."""
    hits: list[float] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            hits.append(1.0)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
            for byte in b"trickled!!":
                time.sleep(0.3)
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the sender gave up: what the test wants
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    add_target(shop_executor.ledger, "hook", "webhook",
               {"url": f"http://127.0.0.1:{port}/", "secret": new_secret()},
               events=["held"], now=0)  # fmt: skip
    hold(shop_executor, alice, "TEA-0001")
    sender = dispatcher(shop_executor, timeout=1.0, lease_seconds=2.0)
    try:
        started = time.monotonic()
        done = sender.run_once()
        took = time.monotonic() - started
    finally:
        sender.close()
        listener.close()
    assert (done.sent, done.retried) == (0, 1)
    assert took < 2.0  # within the lease: no other worker could have taken the row meanwhile
    (row,) = shop_executor.ledger.deliveries()
    assert row.state == "pending"
    assert row.last_error == "no answer within 1 s (ReadTimeout)"
