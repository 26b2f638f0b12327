"""The rule of ``conftest.py``: an ERROR logged by turnkit fails the test that caused it, unless
the test declared it with ``expect_errors`` (a small test file run in a pytest of its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

SAMPLE = """
import logging
import threading

import pytest

log = logging.getLogger("turnkit.sample")


def test_logs_an_error():
    log.error("boom")


def test_declares_it(expect_errors):
    expect_errors(r"boom \\d")
    log.error("boom 2")


def test_declares_one_never_logged(expect_errors):
    expect_errors("never")


def test_logs_one_in_a_thread():
    thread = threading.Thread(target=log.error, args=("from a thread",))
    thread.start()
    thread.join()


@pytest.fixture
def noisy():
    yield
    log.error("in a fixture's teardown")


def test_whose_fixture_logs_one(noisy):
    pass


def test_logs_a_warning_and_another_loggers_error():
    log.warning("a warning is no error")
    logging.getLogger("elsewhere").error("not turnkit's")


def test_declares_an_exception(expect_errors):
    expect_errors("ValueError: bad")
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("failed")
"""


@pytest.fixture
def pytest_with_our_conftest(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """A pytest in a process of its own (its logging apart from this one's) with our conftest."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_an_error_turnkit_logs_fails_the_test_that_caused_it_unless_declared(
    pytest_with_our_conftest,
):
    pytest_with_our_conftest.makepyfile(test_sample=SAMPLE)
    result = pytest_with_our_conftest.runpytest_subprocess("-p", "no:cacheprovider", "-rE")
    result.assert_outcomes(passed=7, errors=4)
    result.stdout.fnmatch_lines_random(
        [
            "ERROR test_sample.py::test_logs_an_error - Failed: turnkit logged*",
            "ERROR test_sample.py::test_declares_one_never_logged - Failed: turnkit logged*",
            "ERROR test_sample.py::test_logs_one_in_a_thread - Failed: turnkit logged*",
            "ERROR test_sample.py::test_whose_fixture_logs_one - Failed: turnkit logged*",
            "unexpected: turnkit.sample: boom",
            "expected, never logged: an ERROR matching 'never'",
            "unexpected: turnkit.sample: from a thread",
            "unexpected: turnkit.sample: in a fixture's teardown",
        ]
    )


LATE_ERROR = """
import logging
import pytest

@pytest.fixture(scope="module")
def shared():
    yield
    logging.getLogger("turnkit.sample").error("after the test")

def test_uses_it(shared):
    pass
"""
"""A test file whose module fixture logs an ERROR after its one test ended."""


def test_an_error_logged_while_no_test_runs_fails_the_run(pytest_with_our_conftest):
    pytest_with_our_conftest.makepyfile(test_late=LATE_ERROR)
    result = pytest_with_our_conftest.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["turnkit logged an ERROR after test_late.py::test_uses_it ended: *after the test"]
    )


def test_under_xdist_the_rule_the_skip_summary_and_a_lone_surrogate_hold(pytest_with_our_conftest):
    """With ``-n 2`` (pytest-xdist): an ERROR a worker saw logged while no test ran still fails
    the run and is named, the skip summary counts the workers' skips, a report with a lone
    surrogate in its captured log reaches the controller, and no worker sees LINES or COLUMNS."""
    pytest_with_our_conftest.makepyfile(
        test_late=LATE_ERROR,
        test_more="""
import logging
import os
import pytest

@pytest.mark.parametrize("n", range(3))
def test_skips(n):
    pytest.skip("no reason at all")

def test_declares_a_surrogate(expect_errors):
    expect_errors("bad byte")
    logging.getLogger("turnkit.sample").error("bad byte \\udc80")

def test_no_terminal_size():
    assert "COLUMNS" not in os.environ and "LINES" not in os.environ
""",
    )
    result = pytest_with_our_conftest.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, skipped=3)
    result.stdout.fnmatch_lines_random(
        [
            "turnkit logged an ERROR after test_late.py::test_uses_it ended: *after the test",
            "3 skipped: no reason at all",
        ]
    )
