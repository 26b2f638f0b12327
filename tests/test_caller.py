"""Callers and the permission provider asked at call time.

Reaches ``turnkit.registry.caller`` directly: it tests ``permissions_now`` and
``apermissions_now`` themselves, which no public name exposes."""

from __future__ import annotations

import asyncio
import threading

import pytest

from turnkit import Caller, CallerError, StaticPermissions
from turnkit.registry.caller import apermissions_now, permissions_now


def test_the_three_kinds_and_their_identities():
    assert Caller.session("u_1").identity == "session:u_1"
    assert Caller.key("k_1", scopes=["a.b:c"], user_id="u_1").identity == "key:k_1"
    assert Caller.public().identity == "public:anonymous"
    assert Caller.public("ip-hash").identity == "public:ip-hash"


def test_key_scopes_are_a_frozenset():
    caller = Caller.key("k_1", scopes=["a.b:c", "a.b:c"])
    assert caller.scopes == frozenset({"a.b:c"})


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"kind": "session"}, "a session caller needs user_id"),
        ({"kind": "session", "user_id": ""}, "a session caller needs user_id"),
        ({"kind": "key"}, "a key caller needs key_id"),
        ({"kind": "public", "scopes": frozenset({"a.b:c"})}, "a public caller has no key"),
        ({"kind": "session", "user_id": "u", "key_id": "k"}, "a session caller has no key"),
        ({"kind": "public", "user_id": "u"}, "a public caller has no user"),
        ({"kind": "robot"}, "kind 'robot' is not 'session', 'key' or 'public'"),
        ({"kind": "key", "key_id": "k", "scopes": "a.b:c"}, "scopes must be a set"),
    ],
)
def test_a_caller_that_cannot_identify_anyone_is_refused(fields, fragment):
    with pytest.raises(CallerError, match=fragment):
        Caller(**fields)


def test_permissions_are_asked_at_call_time_not_snapshotted():
    rights = StaticPermissions({"u_1": {"shop.view", "shop.manage"}})
    caller = Caller.session("u_1")
    assert permissions_now(rights, caller) == {"shop.view", "shop.manage"}
    rights.revoke("u_1", "shop.manage")
    assert permissions_now(rights, caller) == {"shop.view"}
    rights.grant("u_1", "shop.refund")
    assert permissions_now(rights, caller) == {"shop.view", "shop.refund"}


def test_a_key_has_the_permissions_of_its_owner():
    rights = StaticPermissions({"u_1": {"shop.view"}})
    assert permissions_now(rights, Caller.key("k", user_id="u_1")) == {"shop.view"}
    assert permissions_now(rights, Caller.key("k")) == frozenset()
    assert permissions_now(rights, Caller.public()) == frozenset()


def test_a_function_can_be_the_provider():
    calls = []

    def provider(caller):
        calls.append(caller.user_id)
        return ["shop.view"]

    assert permissions_now(provider, Caller.session("u_9")) == {"shop.view"}
    assert calls == ["u_9"]


def test_an_async_provider_is_refused_on_the_sync_path_with_advice():
    async def provider(caller):
        return ["shop.view"]

    with pytest.raises(TypeError, match="use the executor's async methods"):
        permissions_now(provider, Caller.session("u_1"))


async def test_async_provider_is_awaited():
    async def provider(caller):
        await asyncio.sleep(0)
        return {"shop.view"}

    assert await apermissions_now(provider, Caller.session("u_1")) == {"shop.view"}


async def test_a_blocking_sync_provider_runs_off_the_event_loop():
    loop_thread = threading.get_ident()
    seen = []

    def provider(caller):
        seen.append(threading.get_ident())
        return {"shop.view"}

    assert await apermissions_now(provider, Caller.session("u_1")) == {"shop.view"}
    assert seen
    assert seen[0] != loop_thread


async def test_static_permissions_are_read_directly_on_the_async_path():
    rights = StaticPermissions({"u_1": {"shop.view"}})
    assert await apermissions_now(rights, Caller.session("u_1")) == {"shop.view"}
