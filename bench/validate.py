"""Median time per call of ``turnkit.registry.schema.validate`` next to the ``jsonschema`` package.

Both run in the same process on the same typical tool schema, for a valid and an invalid input.
``jsonschema`` gets its best case: the validator (with the format checker) is built once, and its
``iter_errors`` is collected into a list, as ``validate`` returns a list. The target is at most
0.05 x jsonschema's time for a valid input (a ratio in one run: absolute times differ 3-4 x
between machines).

    .venv/bin/python bench/validate.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from jsonschema import Draft202012Validator

from turnkit import validate

TARGET_RATIO = 0.05
"""turnkit's time for a valid input over jsonschema's, at most (a ratio: machines differ)."""

BATCHES = 31
CALLS_PER_BATCH = 2000
WARMUP_CALLS = 2000

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "priority": {"enum": ["low", "normal", "high"]},
        "delivery_date": {"type": "string", "format": "date"},
        "discount_percent": {"type": "number", "minimum": 0, "exclusiveMaximum": 100},
        "note": {"type": ["string", "null"], "maxLength": 200},
        "lines": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "minLength": 1, "maxLength": 32},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
                    "unit": {"enum": ["piece", "box", "pallet"]},
                },
                "required": ["sku", "quantity"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["customer_id", "lines"],
    "additionalProperties": False,
}
"""A typical tool input: a nested object with a list of objects, enums, bounds, a pattern, a
nullable field and a format."""

VALID: dict[str, Any] = {
    "customer_id": "ACM-0042",
    "priority": "high",
    "delivery_date": "2024-02-29",
    "discount_percent": 12.5,
    "note": None,
    "lines": [
        {"sku": "BOLT-M8", "quantity": 200, "unit": "box"},
        {"sku": "NUT-M8", "quantity": 200, "unit": "box"},
        {"sku": "WASHER-8", "quantity": 400},
    ],
}

INVALID: dict[str, Any] = {
    "customer_id": "acm-42",  # pattern
    "priority": "urgent",  # enum
    "delivery_date": "2024-02-30",  # format
    "discount_percent": 100,  # exclusiveMaximum
    "note": None,
    "lines": [
        {"sku": "BOLT-M8", "quantity": 0, "unit": "box"},  # minimum
        {"sku": "", "quantity": 200, "colour": "red"},  # minLength, additionalProperties
    ],
}

CASES = {"valid": VALID, "invalid": INVALID}


def _median_us(call: Callable[[object], object], value: object) -> float:
    """The median over ``BATCHES`` of the mean time of one ``call(value)``, in microseconds."""
    for _ in range(WARMUP_CALLS):
        call(value)
    means = []
    for _ in range(BATCHES):
        start = time.perf_counter_ns()
        for _ in range(CALLS_PER_BATCH):
            call(value)
        means.append((time.perf_counter_ns() - start) / CALLS_PER_BATCH / 1000)
    return statistics.median(means)


Contender = Callable[[object], list[Any]]


def _contenders() -> dict[str, Contender]:
    reference = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)

    def jsonschema(value: object) -> list[Any]:
        return list(reference.iter_errors(value))

    return {"turnkit.validate": partial(validate, SCHEMA), "jsonschema": jsonschema}


def _check_cases(contenders: dict[str, Contender]) -> None:
    """Time nothing unless each contender finds VALID valid and INVALID invalid."""
    for name, call in contenders.items():
        if call(VALID) or not call(INVALID):
            raise RuntimeError(f"{name} does not judge the benchmark inputs as expected")


def run() -> list[dict[str, Any]]:
    """Time every contender on every case; one row ``{name, case, median_us}`` per pair."""
    contenders = _contenders()
    _check_cases(contenders)
    return [
        {"name": name, "case": case, "median_us": _median_us(call, value)}
        for case, value in CASES.items()
        for name, call in contenders.items()
    ]


def _table(rows: list[dict[str, Any]]) -> str:
    times = {(row["name"], row["case"]): row["median_us"] for row in rows}
    lines = [f"{'case':<8} {'turnkit.validate':>18} {'jsonschema':>12} {'jsonschema/turnkit':>20}"]
    for case in CASES:
        ours, peer = times["turnkit.validate", case], times["jsonschema", case]
        lines.append(f"{case:<8} {ours:>15.2f} µs {peer:>9.2f} µs {peer / ours:>19.1f}x")
    ratio = times["turnkit.validate", "valid"] / times["jsonschema", "valid"]
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    target = f"target <= {TARGET_RATIO:g}x jsonschema for a valid input"
    lines.append(f"{target}: {verdict} ({ratio:.3f}x)")
    return "\n".join(lines)


if __name__ == "__main__":
    print(
        f"median of {BATCHES} batches of {CALLS_PER_BATCH} calls, per call, "
        f"after {WARMUP_CALLS} warm-up calls"
    )
    print(_table(run()))
