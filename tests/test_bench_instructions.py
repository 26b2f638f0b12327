"""``bench/instructions.py``: instructions per concurrent turn counted by valgrind's callgrind,
turnkit's own work over the six-step shape's in a figure the machine's load does not move.

The full count takes minutes (a process runs ~50x slower under callgrind); here: callgrind's
count is read from a real valgrind, the child's turns run, the rows say what they should, and
without valgrind the scenario says what to install instead of failing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository: bench/
from bench import instructions  # noqa: E402

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed"
)


@needs_valgrind
def test_callgrind_counts_a_program_and_more_work_counts_more():
    little = instructions.instructions([sys.executable, "-S", "-c", "pass"])
    more = instructions.instructions([sys.executable, "-S", "-c", "sum(range(200_000))"])
    assert little > 1_000_000  # an interpreter's start-up, not a parse of some other number
    assert more > little + 1_000_000


@needs_valgrind
def test_a_command_callgrind_cannot_run_is_an_error_that_says_what():
    with pytest.raises(RuntimeError, match="callgrind gave no count for"):
        instructions.instructions(["/nonexistent/program"])


@pytest.mark.parametrize("case", sorted(instructions.CONTENDERS))
def test_the_child_runs_each_contenders_turns(case):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "instructions.py"), "--child", case, "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_rows_give_each_count_and_turnkits_own_work_against_its_target(monkeypatch):
    counts = {"turnkit sync": 18.0e6, "shape": 17.2e6, "create_agent": 14.0e6}
    monkeypatch.setattr(instructions.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(instructions, "per_turn", lambda case, turns: counts[case])
    rows = {row["case"]: row for row in instructions.turn_rows(quick=True)}
    own = rows["turnkit sync: instructions per turn (÷ shape: the price of turnkit's own work)"]
    assert own["ratio"] == pytest.approx(18.0 / 17.2)
    assert (own["target"], own["met"]) == ("<= 1.05x", True)
    shape = rows["shape: instructions per turn (÷ create_agent)"]
    assert shape["ratio"] == pytest.approx(17.2 / 14)
    assert rows["create_agent: instructions per concurrent turn"]["value"] == 14_000
    counts["turnkit sync"] = 18.2e6  # 1.058x
    missed = {row["case"]: row for row in instructions.turn_rows(quick=True)}
    assert missed[own["case"]]["met"] is False


@needs_valgrind
def test_a_server_under_callgrind_answers_and_is_counted_when_stopped():
    command = [sys.executable, "-S", "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
    answers = []
    count = instructions.counted(command, "/", {}, lambda url: answers.append(httpx.get(url)))
    assert [answer.status_code for answer in answers] == [200]
    assert count > 1_000_000


@needs_valgrind
def test_a_server_that_cannot_start_under_callgrind_says_so():
    command = [sys.executable, "-S", "-c", "raise SystemExit(3)"]
    with pytest.raises(RuntimeError, match="stopped with 3"):
        instructions.counted(command, "/", {}, lambda url: None)


def test_a_wrong_child_command_is_refused_in_a_line():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "instructions.py"), "--child", "nobody", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "usage: --child" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_mcp_rows_give_each_server_per_call_and_turnkit_against_mcps_target(monkeypatch):
    per_call = {  # by a word of each server's command line
        "serve": 7.0e6,
        "bench.server:mcp_peer_app": 6.0e6,
        "bench._floor:mcp_floor_app": 6.9e6,
        "bench._floor:mcp_floor_one_hop_app": 6.3e6,
        "bench.profile_worker:mcp_straight_app": 6.6e6,
    }
    start = 50e6

    def counted(command, ready, env, headers, calls):
        (word,) = (word for word in per_call if word in command)
        return start + calls * per_call[word]

    monkeypatch.setattr(instructions, "served_instructions", counted)
    rows = {row["case"]: row for row in instructions.mcp_rows(quick=True)}
    ours = rows["MCP tools/call: turnkit /mcp, instructions per call (÷ MCPServer)"]
    assert ours["value"] == pytest.approx(7_000)
    assert ours["ratio"] == pytest.approx(7 / 6)
    assert (ours["target"], ours["met"]) == ("<= 1.2x", True)
    floor = rows["MCP tools/call: MCP floor, instructions per call (÷ MCPServer)"]
    assert floor["ratio"] == pytest.approx(6.9 / 6)
    assert rows["MCP tools/call: turnkit ÷ MCP floor, instructions per call"]["ratio"] == (
        pytest.approx(7 / 6.9)
    )
    one_hop = "MCP tools/call: MCP floor in one hop, the three statements alone, instructions"
    assert rows[f"{one_hop} per call (÷ MCPServer)"]["ratio"] == pytest.approx(6.3 / 6)
    straight = "MCP tools/call: turnkit's steps straight in one hop, instructions per call"
    assert rows[f"{straight} (÷ MCPServer)"]["ratio"] == pytest.approx(6.6 / 6)


def test_without_valgrind_the_rows_are_skipped_with_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    assert instructions.run(quick=True) == []
    assert "valgrind is not installed" in capsys.readouterr().err


def test_python_m_bench_counts_only_when_asked():
    from bench.__main__ import DEFAULT, SCENARIOS

    assert "instructions" in SCENARIOS
    assert "instructions" not in DEFAULT  # ~15 minutes under valgrind: --only instructions
    assert "concurrency" in DEFAULT
