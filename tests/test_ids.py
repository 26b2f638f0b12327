"""``turnkit.registry.ids``: unique ids made without a system call, so a call on the event loop
never hands the GIL to a waiting thread just to name something; nor can one id be foretold
from others (a keyed BLAKE2b of a counter). Secrets keep ``secrets``."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import re
import threading
import uuid

import pytest

from turnkit.registry import ids  # internal: the ids a call, an audit row and a message get


def test_a_uuid4_text_reads_as_a_random_uuid_and_does_not_repeat():
    made = [ids.uuid4_text() for _ in range(20_000)]
    assert len(set(made)) == len(made)
    for text in made[:200]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)


def test_random_hex_gives_as_many_digits_as_bits_say_and_refuses_other_counts():
    assert re.fullmatch(r"[0-9a-f]{12}", ids.random_hex(48))
    assert re.fullmatch(r"[0-9a-f]", ids.random_hex(4))
    assert len(ids.random_hex(512)) == 128
    assert len({ids.random_hex(48) for _ in range(5_000)}) == 5_000
    for bad in (0, -4, 6, 516):
        with pytest.raises(ValueError, match="multiple of 4 from 4 to 512"):
            ids.random_hex(bad)


def test_an_applications_random_seed_does_not_repeat_the_ids():
    state = random.getstate()
    try:
        random.seed(0)
        first = ids.uuid4_text()
        random.seed(0)
        assert ids.uuid4_text() != first
    finally:
        random.setstate(state)


def test_threads_drawing_at_once_never_get_the_same_id():
    made: list[str] = []

    def draw() -> None:
        made.extend(ids.uuid4_text() for _ in range(2_000))

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == len(made) == 16_000


def _child_id(ids_out) -> None:
    ids_out.put(ids.uuid4_text())


def test_a_forked_child_does_not_repeat_its_parents_next_id():
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_child_id, args=(out,))
    child.start()
    theirs = out.get(timeout=30)
    child.join(30)
    assert theirs != ids.uuid4_text()  # unseeded, the child would draw the parent's next


def test_a_read_call_on_the_loop_makes_no_system_call_for_its_ids(executor, alice, monkeypatch):
    asyncio.run(executor.aexecute(alice, "shop.list_products", {}))  # warm: nothing first-time
    drawn: list[int] = []
    real = os.urandom

    def urandom(size: int) -> bytes:
        drawn.append(size)
        return real(size)

    monkeypatch.setattr(os, "urandom", urandom)
    answer = asyncio.run(executor.aexecute(alice, "shop.list_products", {}))
    assert answer["status"] == "ok"
    rows = executor.ledger.audit_rows(limit=1)
    assert rows[0]["status"] == "ok"  # the call was audited, its row given an id
    assert drawn == []  # uuid4() and os.urandom read the kernel's source, releasing the GIL
