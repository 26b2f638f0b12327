"""``turnkit confirmations approve|reject --all [--tool T]``: one explicit question, then each held
write decided through the single approval's path and told in a line.

The application is ``_cli_app`` (the shop, whose every write is a line of ``writes.log``, and a
permission provider reading ``rights.json``), loaded by the real ``turnkit`` command with
``--module``; the question is answered through a pseudo-terminal.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

import _cli_app
import _review_app
from _shop import prices
from test_cli import PROVIDER, TURNKIT, App, env, flat, words
from test_docs_blocks import blocks
from turnkit import Caller, Executor, Registry, open_ledger
from turnkit.demo import DEMO_CALLER, demo_executor

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'


@pytest.fixture
def app(tmp_path, monkeypatch) -> Iterator[App]:
    monkeypatch.setenv("TURNKIT_TEST_APP_DIR", str(tmp_path / "app"))
    made = App(tmp_path)
    yield made
    made.executor.close()
    made.ledger.close()


def hold_delete(app: App, sku: str = "TEA-0002") -> str:
    held = app.executor.execute(Caller.session("alice"), "shop.delete_product", {"sku": sku})
    return held["confirmation_id"]


def asked(app: App, *args: str) -> pexpect.spawn:
    """``turnkit confirmations`` with ``args`` on a terminal, stopped at its question."""
    child = pexpect.spawn(
        TURNKIT,
        ["confirmations", *args, "--db", app.db, "--module", "_cli_app:App", *PROVIDER],
        cwd=str(app.folder), env={**env(), **app.env}, encoding="utf-8", timeout=60,
        dimensions=(50, 160),
    )  # fmt: skip
    child.expect(words("anything else decides nothing:"))
    return child


def ended(child: pexpect.spawn) -> tuple[str, int]:
    child.expect(pexpect.EOF)
    child.close()
    return child.before, child.exitstatus


def test_typing_the_count_approves_each_write_which_runs_exactly_once(app):
    held = [app.hold(), app.hold(), app.hold()]
    child = asked(app, "approve", "--all", "--tool", "shop.set_prices", "--as", "alice")
    child.sendline("3")
    out, status = ended(child)
    assert status == 0, out
    for cid in held:
        assert f"{cid} shop.set_prices: ran" in flat(out)
        assert app.status(cid) == "done"
    assert len(app.writes()) == 3  # each handler call once


def test_the_question_lists_what_it_will_decide_and_y_says_yes(app):
    held = [app.hold(), app.hold()]
    child = asked(app, "approve", "--all", "--tool", "shop.set_prices", "--as", "alice")
    shown = flat(child.before)
    assert "2 confirmation(s) to approve: 2 of shop.set_prices" in shown
    assert all(cid in shown for cid in held)
    assert "approve these 2 of shop.set_prices?" in shown
    child.sendline("y")
    _, status = ended(child)
    assert status == 0
    assert len(app.writes()) == 2


@pytest.mark.parametrize("answer", ["", "n", "2 ", "yes please", "4"])
def test_any_other_answer_decides_nothing(app, answer):
    held = [app.hold(), app.hold(), app.hold()]
    child = asked(app, "approve", "--all", "--tool", "shop.set_prices", "--as", "alice")
    child.sendline(answer)
    out, status = ended(child)
    assert status == 2
    assert "nothing was decided: they are still pending" in flat(out)
    assert [app.status(cid) for cid in held] == ["pending"] * 3
    assert app.writes() == []


def test_the_end_of_the_input_decides_nothing(app):
    cid = app.hold()
    child = asked(app, "approve", "--all", "--as", "alice")
    child.sendeof()
    _, status = ended(child)
    assert status == 2
    assert app.status(cid) == "pending"


def test_without_a_terminal_it_refuses_unless_yes_is_given(app):
    held = [app.hold(), app.hold()]
    done = app.decide("approve", "--all", "--tool", "shop.set_prices", "--as", "alice",
                      *PROVIDER)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no terminal to ask on: pass --yes" in flat(done.stdout)
    assert [app.status(cid) for cid in held] == ["pending", "pending"]
    assert app.writes() == []
    done = app.decide("approve", "--all", "--tool", "shop.set_prices", "--as", "alice", "--yes",
                      *PROVIDER)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert [app.status(cid) for cid in held] == ["done", "done"]
    assert len(app.writes()) == 2


def test_all_without_a_tool_states_that_it_covers_every_tool(app):
    app.hold()
    hold_delete(app)
    child = asked(app, "approve", "--all", "--as", "alice")
    assert "approve ALL 2, of every tool?" in flat(child.before)
    assert "1 of shop.delete_product, 1 of shop.set_prices" in flat(child.before)
    child.sendline("2")
    _, status = ended(child)
    assert status == 0
    assert sorted(json.loads(w)["tool"] for w in app.writes()) == ["delete_product", "set_prices"]


def test_only_the_tool_named_is_decided(app):
    price, delete = app.hold(), hold_delete(app)
    done = app.decide("approve", "--all", "--tool", "shop.delete_product", "--yes", "--as",
                      "alice", *PROVIDER)  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert app.status(delete) == "done"
    assert app.status(price) == "pending"


def test_reject_all_rejects_each_with_the_message_and_runs_nothing(app):
    held = [app.hold(), app.hold()]
    done = app.turnkit("confirmations", "reject", "--all", "--tool", "shop.set_prices",
                       "--message", "prices are frozen", "--yes", "--db", app.db)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert flat(done.stdout).count("rejected: nothing ran") == 2
    for cid in held:
        c = app.ledger.get_confirmation(cid)
        assert (c.status, c.decision["message"]) == ("rejected", "prices are frozen")
    assert app.writes() == []


def test_a_refused_one_is_told_with_why_the_others_go_ahead_and_the_status_is_2(app):
    app.grant("carol", "shop.view", "shop.manage")
    mine = app.hold()
    carols = app.executor.execute(Caller.session("carol"), "shop.set_prices",
                                  prices("TEA-0003"))["confirmation_id"]  # fmt: skip
    app.grant("carol", "shop.view")  # shop.manage revoked while it waits
    app.grant("root", "system.confirm_any")
    done = app.decide("approve", "--all", "--yes", "--as", "root", *PROVIDER)
    assert done.returncode == 2, done.stdout + done.stderr
    out = flat(done.stdout)
    assert f"{mine} shop.set_prices: ran" in out
    assert f"{carols} shop.set_prices: refused (forbidden)" in out
    assert "shop.manage" in out
    assert "1 of 2 refused" in out
    assert len(app.writes()) == 1


def test_one_decided_elsewhere_while_the_question_waits_is_told_and_runs_once(app):
    first, second = app.hold(), app.hold()
    child = asked(app, "approve", "--all", "--as", "alice")
    app.executor.confirm(first, Caller.session("alice"), "approve")  # another door, meanwhile
    child.sendline("y")
    out, status = ended(child)
    assert status == 0, out
    assert f"{first} shop.set_prices: already decided" in flat(out)
    assert f"{second} shop.set_prices: ran" in flat(out)
    assert len(app.writes()) == 2  # one each


def test_approving_all_without_a_module_is_refused_before_anything_is_decided(app):
    cid = app.hold()
    done = app.turnkit("confirmations", "approve", "--all", "--yes", "--db", app.db)
    assert done.returncode == 2
    assert "approving runs the held tools' code: pass --module" in flat(done.stdout)
    assert app.status(cid) == "pending"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "give the confirmation's id, or --all"),
        (("abcd1234", "--all"), "give an id or --all, not both"),
        (("abcd1234", "--tool", "shop.set_prices"), "--tool and --yes go with --all"),
    ],
)
def test_an_id_and_all_together_or_neither_is_a_usage_mistake(app, args, said):
    done = app.decide("reject", *args)
    assert done.returncode == 2
    assert said in flat(done.stdout)
    assert "Traceback" not in done.stdout + done.stderr


def test_nothing_pending_says_so(app):
    done = app.decide("approve", "--all", "--tool", "shop.set_prices", "--yes", *PROVIDER)
    assert done.returncode == 0
    assert "no confirmations of shop.set_prices wait for a decision" in flat(done.stdout)


SHOWN_ID = "3f2a9c1e-0000-4000-8000-000000000001"
"""The id the README's ``show`` names (by its first four characters)."""


def test_the_terminal_section_runs_as_written(tmp_path):
    """In a folder whose default ledger holds two of the demo's price writes (one under the id
    the README shows), each line runs as written; the question is answered with the count."""
    (code,) = [code for heading, code in blocks("sh") if heading.startswith("At the terminal")]
    ledger_file = tmp_path / ".turnkit" / "turnkit.sqlite"
    executor = demo_executor(tmp_path / ".turnkit" / "catalogue.sqlite")
    ledger = open_ledger(ledger_file)
    try:
        change = {"prices": [{"sku": "TEA-0001", "price": 4.2}]}
        first = executor.execute(DEMO_CALLER, "catalogue.set_prices", change)["confirmation_id"]
        held = executor.ledger.get_confirmation(first)
        ledger.set_setting("api_session_write_modules", ["catalogue"])
        for cid in (first, SHOWN_ID):  # the demo's hold, copied into the CLI's default ledger
            ledger.create_confirmation(dataclasses.replace(held, id=cid))
    finally:
        executor.ledger.close()
        executor.close()
        ledger.close()
    listed, shown, approved = code.strip().splitlines()
    path = {"PATH": f"{Path(TURNKIT).parent}:{env()['PATH']}"}
    for line in (listed, shown):
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env() | path,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, line + done.stdout + done.stderr
    assert SHOWN_ID in flat(done.stdout)
    assert '"sku": "TEA-0001"' in done.stdout
    child = pexpect.spawn("bash", ["-c", approved], cwd=str(tmp_path), env=env() | path,
                          encoding="utf-8", timeout=60, dimensions=(50, 160))  # fmt: skip
    child.expect(words("anything else decides nothing:"))
    child.sendline("2")
    out, status = ended(child)
    assert status == 0, out
    assert flat(out).count("catalogue.set_prices: ran") == 2
    ledger = open_ledger(ledger_file)
    try:
        assert ledger.get_confirmation(SHOWN_ID).status == "done"
    finally:
        ledger.close()


# --- more than one approver ----------------------------------------------------------------------


class ReviewApp(App):
    """The ``_review_app`` module (two approvers, separate duties) on the same folder and rights."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.rights.write_text(json.dumps({
            "alice": ["shop.view", "shop.manage"],
            "bob": ["shop.view", "shop.manage", "system.confirm_any"],
            "carol": ["shop.view", "shop.manage", "system.confirm_any"],
        }))  # fmt: skip
        self.executor.close()
        self.ledger.set_setting("api_session_write_modules", ["shop", "review"])
        self.executor = Executor(Registry([_review_app.Review]), ledger=self.ledger,
                                 permissions=_cli_app.permissions)  # fmt: skip

    def hold_price(self, price: float = 5.0) -> str:
        held = self.executor.execute(Caller.session("alice"), "review.set_price",
                                     {"sku": "TEA-0001", "price": price})  # fmt: skip
        return held["confirmation_id"]

    def decide(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.turnkit("confirmations", *args, "--db", self.db, "--module",
                            "_review_app:Review", *PROVIDER)  # fmt: skip


@pytest.fixture
def review(tmp_path, monkeypatch) -> Iterator[ReviewApp]:
    monkeypatch.setenv("TURNKIT_TEST_APP_DIR", str(tmp_path / "app"))
    made = ReviewApp(tmp_path)
    yield made
    made.executor.close()
    made.ledger.close()


def test_a_first_approval_of_two_is_told_as_one_of_two_and_runs_nothing(review):
    cid = review.hold_price()
    first = review.decide("approve", cid[:8], "--as", "bob")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "approved 1 of 2: waiting for another approver" in flat(first.stdout)
    assert review.status(cid) == "pending"
    assert review.writes() == []
    second = review.decide("approve", cid[:8], "--as", "carol")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "← ok" in second.stdout
    assert len(review.writes()) == 1


def test_bulk_approval_counts_one_of_two_for_each_and_the_second_approver_runs_each_once(review):
    held = [review.hold_price(5.0), review.hold_price(6.0)]
    first = review.decide("approve", "--all", "--tool", "review.set_price", "--yes", "--as", "bob")
    assert first.returncode == 0, first.stdout + first.stderr
    for cid in held:
        assert f"{cid} review.set_price: approved 1 of 2: waiting for another approver" in flat(
            first.stdout
        )
    assert review.writes() == []
    again = review.decide("approve", "--all", "--yes", "--as", "bob")  # bob once more: no count
    assert review.writes() == []
    assert again.returncode in (0, 2), again.stdout
    second = review.decide("approve", "--all", "--yes", "--as", "carol")
    assert second.returncode == 0, second.stdout + second.stderr
    assert flat(second.stdout).count("review.set_price: ran") == 2
    assert sorted(json.loads(w)["input"]["price"] for w in review.writes()) == [5.0, 6.0]


def test_the_person_whose_write_it_is_is_refused_under_separate_duties_and_the_status_is_2(
    review,
):
    cid = review.hold_price()
    done = review.decide("approve", "--all", "--yes", "--as", "alice")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{cid} review.set_price: refused (forbidden)" in flat(done.stdout)
    assert review.status(cid) == "pending"
    assert review.writes() == []
