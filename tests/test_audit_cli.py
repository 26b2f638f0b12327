"""``turnkit audit`` through typer's runner on the real app, on SQLite and PostgreSQL: the table
with trace ids, ``--csv`` / ``--jsonl`` / ``--json`` that parse, the filters, what to do when
nothing matched, a bad time told in a line with exit status 2 (no traceback), and the README's
section run as written."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from test_cli import TURNKIT, env
from turnkit import open_ledger
from turnkit.cli import app  # internal: the command's typer app, run in this process

START = 1_800_000_000.0
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def audit(ledger_url):
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, ["audit", *args, "--db", ledger_url], env={"COLUMNS": "200"})

    return run


@pytest.fixture
def written(ledger_url) -> None:
    """Five calls a second apart from START: list, list, a held delete, a refused list, and one
    of another caller with a trace id."""
    ledger = open_ledger(ledger_url)
    rows = [
        ("key:k1", "shop.list_products", "ok", None, None, None),
        ("key:k1", "shop.list_products", "ok", None, None, None),
        ("key:k1", "shop.delete_product", "held", None, "c1", None),
        ("key:k1", "shop.list_products", "error", "forbidden", None, None),
        ("session:alice", "shopping.cart", "ok", None, None, TRACE),
    ]
    for i, (caller, tool, status, code, confirmation, trace) in enumerate(rows):
        ledger.audit(at=START + i, caller=caller, tool=tool, status=status, code=code,
                     duration_ms=2.5, confirmation_id=confirmation, trace_id=trace)  # fmt: skip
    ledger.close()


def test_the_table_shows_the_latest_calls_with_their_trace_ids(audit, written):
    shown = audit()
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "2027-01-15 08:00:04" in shown.output
    assert TRACE in shown.output
    assert "error: forbidden" in shown.output
    assert lines.index(next(line for line in lines if "shopping.cart" in line)) < lines.index(
        next(line for line in lines if "shop.delete_product" in line)
    )  # newest first


def test_csv_parses_with_a_header_and_every_row(audit, written):
    done = audit("--csv")
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader(io.StringIO(done.output)))
    assert [row["tool"] for row in rows] == [
        "shopping.cart", "shop.list_products", "shop.delete_product", "shop.list_products",
        "shop.list_products",
    ]  # fmt: skip
    assert rows[0]["trace_id"] == TRACE
    assert rows[0]["at"] == "2027-01-15T08:00:04.000Z"
    assert list(rows[0]) == ["id", "at", "caller", "tool", "status", "code", "duration_ms",
                             "confirmation_id", "detail", "trace_id"]  # fmt: skip


def test_jsonl_lines_parse_and_the_filters_apply(audit, written):
    done = audit("--jsonl", "--tool", "shop.", "--oldest-first")
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in done.output.splitlines()]
    listed, deleted = "shop.list_products", "shop.delete_product"
    assert [row["tool"] for row in rows] == [listed, listed, deleted, listed]
    held = audit("--jsonl", "--status", "held")
    assert [json.loads(line)["confirmation_id"] for line in held.output.splitlines()] == ["c1"]
    alice = audit("--json", "--caller", "session:alice")
    assert [row["tool"] for row in json.loads(alice.output)] == ["shopping.cart"]
    period = audit("--json", "--since", "2027-01-15T08:00:01Z", "--until", "2027-01-15T08:00:03")
    assert [row["status"] for row in json.loads(period.output)] == ["held", "ok"]
    assert len(json.loads(audit("--json", "--limit", "2").output)) == 2


def test_a_relative_since_counts_back_from_now(audit, ledger_url):
    ledger = open_ledger(ledger_url)
    for ago in (30 * 60, 3 * 3600):
        ledger.audit(at=time.time() - ago, caller="public", tool="shop.list_products",
                     status="ok", code=None, duration_ms=1.0)  # fmt: skip
    ledger.close()
    assert len(audit("--jsonl", "--since", "1h").output.splitlines()) == 1
    assert len(audit("--jsonl", "--since", "1d").output.splitlines()) == 2
    assert len(audit("--jsonl", "--until", "15m").output.splitlines()) == 2


def test_an_empty_json_is_an_empty_array(audit):
    done = audit("--json")
    assert done.exit_code == 0
    assert json.loads(done.output) == []


def test_no_rows_says_what_to_do_next(audit, written):
    empty = audit("--tool", "nothing.here")
    assert empty.exit_code == 0
    assert "no audit rows match these filters: widen them" in " ".join(empty.output.split())


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("value", ["yesterday", "0m", "2026-13-01", "15 minutes"])
def test_a_bad_time_is_told_in_a_line_with_status_2(audit, option, value):
    done = audit(option, value)
    assert done.exit_code == 2
    said = " ".join(done.output.split())
    assert f"{option} {value!r} is neither a time nor a period" in said
    assert "90s, 30m, 12h, 7d, 2w" in said
    assert "Traceback" not in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)


def test_two_formats_at_once_are_refused_with_status_2(audit):
    done = audit("--json", "--csv")
    assert done.exit_code == 2
    assert "give one" in done.output


def test_the_audit_section_runs_as_written(tmp_path):
    from test_docs_blocks import blocks

    (code,) = [code for heading, code in blocks("sh") if heading.startswith("The audit: query")]
    (tmp_path / ".turnkit").mkdir()
    ledger = open_ledger(tmp_path / ".turnkit" / "turnkit.sqlite")  # the command's default
    for i, (tool, status, code_) in enumerate(
        [("catalogue.get_product", "ok", None), ("catalogue.set_prices", "error", "forbidden")]
    ):
        ledger.audit(at=time.time() - 600 + i, caller="key:k1", tool=tool, status=status,
                     code=code_, duration_ms=3.0, trace_id=TRACE)  # fmt: skip
    ledger.close()
    path = {"PATH": f"{Path(TURNKIT).parent}:{env()['PATH']}"}
    done = subprocess.run(["bash", "-c", code], cwd=tmp_path, env=env() | path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("catalogue.set_prices") == 2  # in both tables
    assert done.stdout.count("catalogue.get_product") == 1  # not an error
    exported = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line)["tool"] for line in exported] == [
        "catalogue.set_prices", "catalogue.get_product",
    ]  # fmt: skip
