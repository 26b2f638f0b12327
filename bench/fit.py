"""``fit`` on tool results of 1 KB to 10 MB of JSON, with the default 20,000-character limit.

A result is a list of catalogue rows (non-ASCII names included, since ``fit`` keeps them), sized to
the target number of bytes of compact JSON. Each size is timed as the median of several calls;
µs per KB shows whether the cost is linear in the size. The peer is ``json.dumps`` of the same
result (the least any truncation must do: see the whole result once), so the ratio is ``fit``'s
time over one serialisation.

    .venv/bin/python bench/fit.py [--quick]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from turnkit.turn.tools import fit

SCENARIO = "fit"
LIMIT = 20_000
SIZES = {"1 KB": 1_000, "10 KB": 10_000, "100 KB": 100_000, "1 MB": 1_000_000, "10 MB": 10_000_000}
TARGET_10MB_MS = 100.0
LINEAR_SLACK = 2.0
"""µs per KB of the largest size may be at most this many times that of 100 KB ("linear")."""


def result_of(size: int) -> list[dict[str, Any]]:
    """Catalogue rows whose compact JSON is about ``size`` bytes."""
    rows: list[dict[str, Any]] = []
    length = 2
    i = 0
    while length < size:
        entry = {"sku": f"TEA-{i % 10000:04d}", "name": f"Thé vert n°{i}", "price": 4.5 + i % 7}
        rows.append(entry)
        length += len(_compact(entry)) + 1
        i += 1
    return rows


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _median_ms(call: Any, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return _common.median(times)


def _calls(size: int, quick: bool) -> int:
    if size >= 10_000_000:
        return 3 if quick else 7
    if size >= 1_000_000:
        return 5 if quick else 15
    return 50 if quick else 300


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Milliseconds per size, µs per KB, the ratio to one ``json.dumps``, and the targets."""
    rows = []
    per_kb: dict[str, float] = {}
    for label, size in SIZES.items():
        result = result_of(size)
        fitted = fit(result, LIMIT)
        if len(_compact(fitted)) > LIMIT:
            raise RuntimeError(f"fit did not fit the {label} result into {LIMIT} characters")
        calls = _calls(size, quick)
        fit(result, LIMIT)  # warm
        ms = _median_ms(lambda result=result: fit(result, LIMIT), calls)
        dumps_ms = _median_ms(lambda result=result: _compact(result), calls)
        per_kb[label] = ms * 1000 / (size / 1000)
        target: dict[str, Any] = {}
        if label == "10 MB":
            target = {"target": f"<= {TARGET_10MB_MS:g} ms", "met": ms <= TARGET_10MB_MS}
        rows.append(
            _common.row(
                SCENARIO, f"{label} (÷ json.dumps)", ms, "ms", ratio=ms / dumps_ms, **target
            )
        )
    for label in SIZES:
        rows.append(_common.row(SCENARIO, f"{label}: per KB", per_kb[label], "µs/KB"))
    growth = per_kb["10 MB"] / per_kb["100 KB"]
    rows.append(
        _common.row(
            SCENARIO,
            "linearity: µs/KB at 10 MB ÷ at 100 KB",
            growth,
            "x",
            target=f"<= {LINEAR_SLACK:g}x (linear)",
            met=growth <= LINEAR_SLACK,
        )
    )
    return rows


if __name__ == "__main__":
    print(f"limit {LIMIT:,} characters; median of repeated calls per size")
    print(_common.format_table(run("--quick" in sys.argv)))
