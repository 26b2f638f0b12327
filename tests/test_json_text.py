"""``turnkit.registry.json_text``: the shared encoders write exactly what ``json.dumps`` with the
same options writes, and refuse what it refuses."""

from __future__ import annotations

import json
import math
import threading

import pytest

from turnkit.registry import json_text  # internal: the encoders every door shares

VALUES = [
    {"b": 1, "a": [1.5, None, True, "ü€"], "nested": {"z": "x", "y": [{}]}},
    "plain",
    [],
    "\ud800 and \x00",  # a lone surrogate and NUL
    {"big": 2**70, "neg": -0.0},
]


@pytest.mark.parametrize("value", VALUES)
def test_each_encoder_writes_what_json_dumps_writes(value):
    assert json_text.compact(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json_text.ascii_compact(value) == json.dumps(value, separators=(",", ":"))
    canonical = json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    )
    assert json_text.canonical(value) == canonical


def test_canonical_refuses_nan_and_infinity_and_the_others_write_them():
    for bad in (math.nan, math.inf, {"x": -math.inf}):
        with pytest.raises(ValueError, match="not JSON compliant"):
            json_text.canonical(bad)
    assert json_text.compact([math.nan]) == "[NaN]"


def test_ascii_compact_escapes_what_a_database_may_refuse():
    assert json_text.ascii_compact("\x00\ud800é") == '"\\u0000\\ud800\\u00e9"'


def test_one_encoder_shared_by_threads_writes_each_value_whole():
    values = [{"i": i, "s": "x" * (i % 50), "l": list(range(i % 20))} for i in range(2000)]
    found: list[list[str]] = [[], []]

    def encode(into: list[str]) -> None:
        into.extend(json_text.compact(v) for v in values)

    threads = [threading.Thread(target=encode, args=(found[n],)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in values]
    assert found == [expected, expected]


def test_a_circular_value_is_refused_as_json_dumps_refuses_it():
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular"):
        json_text.compact(loop)
