"""API keys in the ledger: shown once, kept as a hash, found by secret, revoked and expired at once
on every backend (and for every process on the same database)."""

from __future__ import annotations

import hashlib

import pytest

from turnkit import Caller, CallerError, open_ledger
from turnkit.ledger.keys import looks_like_key  # internal: a secret's shape


@pytest.fixture
def keys(ledger_url):
    ledger = open_ledger(ledger_url)
    ledger.setup()
    yield ledger.keys
    ledger.close()


def test_a_key_is_found_by_its_secret_and_becomes_its_owners_key_caller(keys):
    key, secret = keys.create("alice", {"shop.products:read"}, allow={"shop.list_products"})
    assert looks_like_key(secret)
    assert secret.startswith("tk_")
    assert len(secret) == 46
    found = keys.by_secret(secret)
    assert found == key
    assert found.caller == Caller.key(key.id, scopes={"shop.products:read"}, user_id="alice")
    assert found.allowed == frozenset({"shop.list_products"})
    assert keys.get(key.id) == key
    assert keys.list() == [key]


def test_only_the_hash_of_the_secret_is_stored(keys, ledger_url):
    _, secret = keys.create("alice", {"shop.products:read"})
    rows = keys.ledger._rows("SELECT * FROM turnkit_api_keys")
    stored = " ".join(map(str, rows[0]))
    assert secret not in stored
    assert secret[3:] not in stored
    assert hashlib.sha256(secret.encode()).hexdigest() in stored


def test_unknown_malformed_and_other_secrets_find_nothing(keys):
    _, secret = keys.create("alice", set())
    for wrong in ("", "tk_", secret[:-1], secret + "x", secret.upper(), "Bearer " + secret,
                  "tk_" + "A" * 43, "x" * 10_000):  # fmt: skip
        assert keys.by_secret(wrong) is None


def test_a_revoked_key_is_refused_and_revoking_twice_says_so(keys):
    key, secret = keys.create("alice", set())
    assert keys.by_secret(secret).refused(now=key.created_at) is None
    assert keys.revoke(key.id) is True
    assert keys.revoke(key.id) is False
    assert keys.revoke("key_unknown") is False
    assert "was revoked" in keys.by_secret(secret).refused(now=key.created_at)


def test_a_key_expires_after_its_time(keys):
    key, secret = keys.create("alice", set(), expires_in=60, now=1000.0)
    assert key.expires_at == 1060.0
    assert keys.by_secret(secret).refused(now=1059.9) is None
    assert "expired at" in keys.by_secret(secret).refused(now=1060.0)


@pytest.mark.parametrize(
    ("user", "scopes", "options", "said"),
    [
        ("", set(), {}, "user"),
        ("alice", {"no scope"}, {}, "scope"),
        ("alice", set(), {"allow": set()}, "allow list"),
        ("alice", set(), {"expires_in": 0}, "expires"),
        ("alice", set(), {"expires_in": float("nan")}, "expires"),
        ("alice", set(), {"expires_in": 1e12}, "expires"),
    ],
)
def test_a_bad_key_is_refused_and_nothing_is_stored(keys, user, scopes, options, said):
    with pytest.raises(CallerError, match=said):
        keys.create(user, scopes, **options)
    assert keys.list() == []


def test_every_key_is_listed_oldest_first_without_secrets(keys):
    made = [keys.create(user, set(), now=at)[0] for user, at in (("b", 2.0), ("a", 1.0))]
    assert keys.list() == [made[1], made[0]]
    assert "secret" not in str(keys.list()[0].as_dict())


def test_a_keys_last_use_is_written_at_most_once_a_minute_not_per_request(keys):
    key, secret = keys.create("alice", {"shop.products:read"}, now=1_000.0)
    writes: list[str] = []
    run = keys.ledger._run

    def counted(sql, params=()):
        writes.append(sql)
        return run(sql, params)

    keys.ledger._run = counted  # every write of the key store goes through _run
    try:
        for second in range(100):  # a busy key: a request a second for 100 s
            keys.by_secret(secret, now=2_000.0 + second)
    finally:
        keys.ledger._run = run
    assert len(writes) == 2  # at 2000 and at 2060: once per KEY_TOUCH, not per request
    assert keys.get(key.id).last_used_at == 2_060.0
    assert keys.list()[0].as_dict()["last_used_at"] == "1970-01-01T00:34:20Z"


def test_a_refused_key_is_not_recorded_as_used(keys):
    key, secret = keys.create("alice", {"shop.products:read"}, now=1_000.0)
    keys.revoke(key.id, now=1_500.0)
    assert keys.by_secret(secret, now=2_000.0) is not None  # found, to be refused by its caller
    assert keys.get(key.id).last_used_at is None
