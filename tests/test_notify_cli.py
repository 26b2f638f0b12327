"""``turnkit notify add|list|test|remove|run`` through typer's runner on the real app: the secret
shown once, counts per target, a test event a real receiver verifies, and every bad input told in
a line with exit status 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _receiver import Receiver
from _shop import prices
from test_cli import env
from turnkit import Caller, Executor, Registry, open_ledger
from turnkit.cli import app  # internal: the command's typer app, run in this process
from turnkit.notify import new_secret

SECRET = re.compile(r"whsec_[A-Za-z0-9+/=]{40,}")


@pytest.fixture
def notify(ledger_url):
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, ["notify", *args, "--db", ledger_url], env={"COLUMNS": "200"})

    return run


def test_add_shows_a_made_secret_once_and_list_never(notify, ledger_url):
    added = notify("add", "webhook", "ops", "--url", "https://example.com/h", "--events",
                   "held,decided")  # fmt: skip
    assert added.exit_code == 0, added.output
    (secret,) = SECRET.findall(added.output)
    assert "shown this once" in added.output
    listed = notify("list")
    assert listed.exit_code == 0
    assert "ops" in listed.output
    assert "held,decided" in listed.output
    assert secret not in listed.output
    ledger = open_ledger(ledger_url)
    try:
        target = ledger.notify_target(name="ops")
        assert target.config["secret"] == secret
        assert target.events == ("held", "decided")
        assert target.include == ()
    finally:
        ledger.close()


def test_a_given_secret_is_not_printed(notify):
    secret = new_secret()
    added = notify("add", "webhook", "ops", "--url", "https://example.com/h", "--secret", secret,
                   "--include", "arguments")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert secret not in added.output
    assert "includes arguments" in added.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["add", "pager", "ops", "--url", "https://x.example"], "unknown kind 'pager'"),
        (["add", "webhook", "ops", "--url", "ftp://x.example"], "expected http(s)://host/path"),
        (["add", "webhook", "ops"], "no URL"),
        (["add", "webhook", "ops", "--url", "http://[::1/"], "Invalid IPv6 URL; expected http"),
        (["add", "webhook", "ops", "--url", "http://h:port/"], "Port could not be cast"),
        (["add", "webhook", "ops", "--url", "https://x.example", "--secret", "hunter2"],
         "starts with 'whsec_'"),
        (["add", "webhook", "ops", "--url", "https://x.example", "--secret", "whsec_!!"],
         "not base64"),
        (["add", "slack", "ops", "--url", "https://x.example", "--events", "held,lunch"],
         "unknown event 'lunch'"),
        (["add", "slack", "ops", "--url", "https://x.example", "--include", "secrets"],
         "unknown include 'secrets'"),
        (["add", "email", "ops", "--smtp-host", "mail.example"], "give --from"),
        (["add", "slack", "bad name", "--url", "https://x.example"], "name 'bad name'"),
        (["test", "nobody"], "no target 'nobody'"),
        (["remove", "nobody"], "no target 'nobody'"),
        (["run", "--timeout", "30", "--lease-seconds", "10"], "is not below"),
    ],
)  # fmt: skip
def test_bad_input_is_told_in_a_line_and_exits_2(notify, args, said):
    result = notify(*args)
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_a_duplicate_name_is_refused(notify):
    assert notify("add", "slack", "ops", "--url", "https://x.example").exit_code == 0
    again = notify("add", "slack", "ops", "--url", "https://y.example")
    assert again.exit_code == 2
    assert "a target named 'ops' exists" in again.output


def test_test_sends_a_verified_event_and_says_what_the_receiver_answered(notify):
    secret = new_secret()
    with Receiver(secret, statuses=[200, 500]) as receiver:
        notify("add", "webhook", "ops", "--url", receiver.url, "--secret", secret)
        good, bad = notify("test", "ops"), notify("test", "ops")
    assert good.exit_code == 0
    assert "ops answered: HTTP 200: ok" in good.output
    assert bad.exit_code == 1
    assert "did not take it: HTTP 500" in bad.output
    assert receiver.bad_signatures == 0


def test_run_once_delivers_what_is_due_and_list_counts_it(notify, ledger_url, shop, rights):
    secret = new_secret()
    with Receiver(secret) as receiver:
        notify("add", "webhook", "ops", "--url", receiver.url, "--secret", secret,
               "--events", "held")  # fmt: skip
        ledger = open_ledger(ledger_url)
        ledger.set_setting("api_session_write_modules", ["shop"])
        executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
        for sku in ("TEA-0001", "TEA-0002"):
            executor.execute(Caller.session("alice"), "shop.set_prices", prices(sku))
        executor.close()
        ledger.close()
        ran = notify("run", "--once", "--public-url", "https://tools.example.com")
    assert ran.exit_code == 0, ran.output
    assert "2 notification(s) tried" in ran.output
    assert len(receiver.counts) == 2
    assert receiver.bodies[0]["data"]["link"].startswith("https://tools.example.com/ui/")
    listed = " ".join(notify("list").output.split())
    assert "│ 0 │ 2 │ 0 │" in listed  # pending, sent, dead
    removed = notify("remove", "ops")
    assert removed.exit_code == 0
    assert "no targets yet" in notify("list").output


def test_the_notifications_section_runs_as_written(tmp_path):
    from test_docs_blocks import blocks

    (code,) = [code for heading, code in blocks("sh") if heading == "Notifications"]
    shown = ("--url", "--events", "--smtp-host", "--smtp-port", "--starttls", "--from", "--to",
             "--user", "--password-env", "--once", "--public-url")  # fmt: skip
    assert all(flag in code for flag in shown)  # the section shows every option it names
    path = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", code], cwd=tmp_path, env=env() | path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert SECRET.search(said)  # the webhook's secret, made and shown once
    assert "0 notification(s) tried" in said  # nothing was held yet
    ledger = open_ledger(str(tmp_path / ".turnkit" / "turnkit.sqlite"))
    try:
        names = [(t.name, t.kind, t.events) for t in ledger.notify_targets()]
        oncall = ledger.notify_target(name="oncall")
    finally:
        ledger.close()
    assert names == [
        ("approvers", "slack", ("held",)),
        ("oncall", "email", ("held", "decided", "expired", "ran")),
        ("ops", "webhook", ("held", "decided")),
    ]
    assert oncall.config == {
        "smtp_host": "smtp.example.com", "smtp_port": 587, "from": "turnkit@example.com",
        "to": ["oncall@example.com"], "starttls": True, "user": "turnkit",
        "password_env": "SMTP_PASSWORD",
    }  # fmt: skip
