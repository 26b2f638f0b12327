"""``python -m bench --repeat N``: N runs of the selection, one table of medians, a target met
when it was met in more than half of the runs; a wrong count is refused in a line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository: bench/
from bench import _common  # noqa: E402
from bench.__main__ import medians  # noqa: E402


def _run(ratio: float, met: bool, value: float = 1.0) -> list[dict]:
    return [
        _common.row("s", "a target", value, "µs", ratio=ratio, target="<= 1.15x", met=met),
        _common.row("s", "a plain figure", value * 2, "ms"),
    ]


def test_the_medians_of_three_runs_and_the_majoritys_verdict():
    rows = medians([_run(1.10, True, 3.0), _run(1.20, False, 1.0), _run(1.12, True, 2.0)])
    target, plain = rows
    assert (target["value"], target["ratio"], target["met"]) == (2.0, 1.12, True)
    assert target["target"] == "<= 1.15x (met in 2 of 3; 1.10-1.20x)"
    assert plain == _common.row("s", "a plain figure", 4.0, "ms")


def test_a_target_met_in_half_of_the_runs_is_not_met():
    rows = medians([_run(1.10, True), _run(1.20, False)])
    assert rows[0]["met"] is False
    assert rows[0]["target"] == "<= 1.15x (met in 1 of 2; 1.10-1.20x)"


def test_a_row_only_some_runs_have_is_kept_with_those_runs():
    extra = _common.row("s", "only once", 5.0, "s", ratio=0.5)
    rows = medians([_run(1.1, True), [*_run(1.1, True), extra]])
    assert [r["case"] for r in rows] == ["a target", "a plain figure", "only once"]
    assert rows[2] == extra


@pytest.mark.parametrize("count", ["0", "-1", "two"])
def test_a_wrong_count_of_runs_is_refused_in_a_line(count):
    done = subprocess.run([sys.executable, "-m", "bench", "--repeat", count], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "give a whole number of runs, 1 or more" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_quick_pass_repeated_prints_one_table_of_medians():
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "validate", "--repeat", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("running validate (run ") == 3
    assert len(re.findall(r"\bvalid input: turnkit", done.stdout)) == 1  # one row, not three
    assert re.search(r"<= [\d.]+x \(met in [0-3] of 3; [\d.]+-[\d.]+x\)", done.stdout)
