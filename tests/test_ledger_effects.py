"""The pipeline's ledger effects (``on_ledger(Ledger.<method>, ...)``): they carry the method and
its arguments as data, run the ledger's own override of the method, and refuse what the driver
could not call.

Reaches ``turnkit.executor.effects`` directly: the effects are the executor's own contract between
its steps and its drivers; no public name exposes them."""

from __future__ import annotations

import pytest

from turnkit import Ledger, MemoryLedger
from turnkit.executor.effects import OnLedger, on_ledger


def test_an_effect_holds_the_methods_name_and_its_arguments():
    effect = on_ledger(Ledger.charge, "user:alice", 60_000, 2, 10)
    assert effect == OnLedger("charge", ("user:alice", 60_000, 2, 10), None)
    keyed = on_ledger(Ledger.list_confirmations, status="pending")
    assert (keyed.method, keyed.args, keyed.kwargs) == (
        "list_confirmations",
        (),
        {"status": "pending"},
    )


def test_an_effect_runs_the_method_of_the_ledger_it_is_given_its_override_included():
    ledger = MemoryLedger()  # overrides charge: usage counted in a dict
    try:
        charge = on_ledger(Ledger.charge, "user:alice", 0, 2, 3)
        assert charge.run(ledger) is True
        assert charge.run(ledger) is False  # 4 units would pass the limit of 3
        assert on_ledger(Ledger.settings).run(ledger) == {}
    finally:
        ledger.close()


@pytest.mark.parametrize(
    ("method", "says"),
    [
        (MemoryLedger.charge, "takes a Ledger method"),  # a subclass's: not the name's method
        (len, "takes a Ledger method"),
        (Ledger.asettings, "asettings is async"),  # its coroutine would never be awaited
    ],
)
def test_what_the_driver_could_not_call_is_refused_when_the_effect_is_built(method, says):
    with pytest.raises(TypeError, match=says):
        on_ledger(method)
