"""Run every benchmark and print one table: ``python -m bench [--quick] [--only NAME ...]
[--repeat N]``.

From the repository root. ``--quick`` runs fewer turns, rounds and calls (a smoke pass of a minute
or so); the full run takes a few minutes. PostgreSQL rows need ``TURNKIT_BENCH_POSTGRES_URL`` (or
``TURNKIT_TEST_POSTGRES_URL``); without either they are skipped with a note. The ``instructions``
rows (counted under valgrind's callgrind, ~15 minutes) run only when ``--only`` names them. Ratios
compare with a peer measured in the same run (see each scenario's docstring); nothing here asserts
an absolute time. Each scenario runs in a fresh Python process, so one scenario's leftovers (a
bigger heap: longer garbage collections) do not weigh on the next.

``--repeat N`` runs the selection N times, the scenarios in turn within each time (a slow spell
of a shared machine then falls on one run of each, not on every run of one), and prints one table
of medians: a row's value and ratio are the medians over the runs, and a target is met when it
was met in more than half of them (for a fixed threshold, the median's verdict), its cell saying
in how many and the spread of the ratio. On a machine whose ratios move by 0.1 from run to run,
that is the figure to decide on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from bench import (
    checkpoint_growth,
    concurrency,
    fit,
    for_model,
    instructions,
    scale_out,
    server,
    tracing,
    turn_overhead,
    upstream,
    validate,
)

Scenario = Callable[[bool], list[dict[str, Any]]]


def validate_rows(quick: bool = False) -> list[dict[str, Any]]:
    """``validate.run()`` as table rows: turnkit ÷ jsonschema, and the ratio target (absolute
    times differ 3-4x between machines; the ratio to a peer in the same run does not)."""
    batches = validate.BATCHES
    if quick:
        validate.BATCHES = 7
    try:
        found = validate.run()
    finally:
        validate.BATCHES = batches
    times = {(r["name"], r["case"]): r["median_us"] for r in found}
    rows = []
    for case in validate.CASES:
        ours, peer = times["turnkit.validate", case], times["jsonschema", case]
        target: dict[str, Any] = {}
        if case == "valid":
            limit = validate.TARGET_RATIO
            target = {"target": f"<= {limit:g}x", "met": ours / peer <= limit}
        rows.append(
            _common.row(
                "validate",
                f"{case} input: turnkit (÷ jsonschema)",
                ours,
                "µs",
                ratio=ours / peer,
                **target,
            )
        )
        rows.append(_common.row("validate", f"{case} input: jsonschema", peer, "µs"))
    return rows


SCENARIOS: dict[str, Scenario] = {
    "turn_overhead": turn_overhead.run,
    "validate": validate_rows,
    "for_model": for_model.run,
    "fit": fit.run,
    "checkpoint_growth": checkpoint_growth.run,
    "concurrency": concurrency.run,
    "instructions": instructions.run,
    "server": server.run,
    "scale_out": scale_out.run,
    "tracing": tracing.run,
    "upstream": upstream.run,
}

ON_REQUEST = {"instructions"}
"""Scenarios run only when ``--only`` names them: ``instructions`` takes ~15 minutes under
valgrind, longer than every other scenario together."""
DEFAULT = [name for name in SCENARIOS if name not in ON_REQUEST]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, a smoke pass")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="these scenarios")
    parser.add_argument(
        "--repeat", type=_count, default=1, metavar="N", help="run N times, print the medians"
    )
    parser.add_argument("--rows-of", choices=sorted(SCENARIOS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows_of:  # a child process: one scenario's rows as JSON on stdout
        print(json.dumps(SCENARIOS[args.rows_of](args.quick)))
        return 0
    runs: list[list[dict[str, Any]]] = []
    started = time.perf_counter()
    for run in range(1, args.repeat + 1):
        rows: list[dict[str, Any]] = []
        for name in SCENARIOS:
            if name not in (args.only or DEFAULT):
                continue
            which = f" (run {run} of {args.repeat})" if args.repeat > 1 else ""
            print(f"running {name}{which} ...", file=sys.stderr, flush=True)
            begun = time.perf_counter()
            rows += _rows_in_a_new_process(name, args.quick)
            print(f"  {name}: {time.perf_counter() - begun:.1f} s", file=sys.stderr, flush=True)
        runs.append(rows)
    rows = runs[0] if len(runs) == 1 else medians(runs)
    print(_common.format_table(rows))
    missed = [r for r in rows if r.get("met") is False]
    print(
        f"\n{len(rows)} rows in {time.perf_counter() - started:.0f} s;"
        f" targets met: {sum(r.get('met') is True for r in rows)},"
        f" missed: {len(missed)}"
        + (" (" + "; ".join(r["case"] for r in missed) + ")" if missed else "")
    )
    return 0


def medians(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per scenario and case of ``runs`` (in the order they first appear): the median
    value and ratio over the runs that have it; a target met in more than half of those runs,
    its cell saying in how many and the ratio's spread (``<= 1.15x (met in 2 of 3;
    1.07-1.18x)``)."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rows in runs:
        for row in rows:
            found.setdefault((row["scenario"], row["case"]), []).append(row)
    merged = []
    for (scenario, case), same in found.items():
        ratios = [r["ratio"] for r in same if r.get("ratio") is not None]
        ratio = statistics.median(ratios) if ratios else None
        value = statistics.median(r["value"] for r in same)
        verdicts = [r["met"] for r in same if r.get("met") is not None]
        if not verdicts:
            merged.append(_common.row(scenario, case, value, same[0]["unit"], ratio=ratio))
            continue
        met = sum(verdicts)
        spread = f"; {min(ratios):.2f}-{max(ratios):.2f}x" if len(ratios) > 1 else ""
        target = f"{same[0]['target']} (met in {met} of {len(verdicts)}{spread})"
        merged.append(_common.row(scenario, case, value, same[0]["unit"], ratio=ratio,
                                  target=target, met=met > len(verdicts) / 2))  # fmt: skip
    return merged


def _count(text: str) -> int:
    """``--repeat``'s value: a whole number of runs, 1 or more."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of runs, 1 or more (not {text!r})")
    return int(text)


def _rows_in_a_new_process(name: str, quick: bool) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "bench", "--rows-of", name] + (["--quick"] if quick else [])
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


if __name__ == "__main__":
    raise SystemExit(main())
