"""A Ctrl-C is never lost (a CI run saw two: ``turnkit chat`` sat at its prompt after one).

Two ways Python can drop one, each reproduced here as it happens, without timing luck:

- it lands where Python cannot raise it, such as the import system's weakref callback: the
  console script's unraisable hook must send it again, from outside the hook (raised in the hook
  itself, Python ignores it a second time), and as a real signal (the main thread may already
  be blocked in a read);
- it is taken by Python's signal handler after the last check and before the prompt's read
  blocks: nothing interrupts the read, so the prompt must not block for long without a look;
- a library catches it while the command loads and raises an error of its own instead
  (pydantic-core building a validator raises a ``SchemaError`` naming it; a CI run printed that
  traceback): the console script must still end in its one line and status 130.
"""

from __future__ import annotations

import io
import sys
import textwrap

import pexpect

TIMEOUT = 20
"""Seconds the child has to act on the Ctrl-C (it needs ~0.1 s; a hang is what fails)."""


def run_python(script: str) -> tuple[str, int | None]:
    """Run ``script`` on a terminal; what it printed and its exit status."""
    child = pexpect.spawn(sys.executable, ["-c", textwrap.dedent(script)], encoding="utf-8",
                          timeout=TIMEOUT)  # fmt: skip
    child.logfile_read = shown = io.StringIO()
    child.expect(pexpect.EOF)
    child.close()
    return shown.getvalue(), child.exitstatus


def test_a_ctrl_c_python_could_not_raise_reaches_a_main_thread_blocked_in_a_read():
    said, status = run_python("""
        import os, sys, weakref
        import _turnkit_entry
        sys.unraisablehook = _turnkit_entry._unraisable  # as the console script's main sets it

        class Thing:
            pass

        def callback(ref):  # where the import system's module locks keep theirs
            raise KeyboardInterrupt

        thing = Thing()
        ref = weakref.ref(thing, callback)
        reading, _ = os.pipe()
        try:
            del thing  # the callback's KeyboardInterrupt cannot be raised: it is "unraisable"
            print("reading", flush=True)
            os.read(reading, 1)  # nothing ever comes: only a signal ends this read
            print("LOST")
        except KeyboardInterrupt:
            print("RAISED")
    """)
    assert "reading" in said, said
    assert "RAISED" in said, said
    assert "LOST" not in said, said
    assert "Exception ignored" not in said, said
    assert status == 0


def test_a_ctrl_c_taken_just_before_the_prompt_reads_is_acted_on():
    said, status = run_python("""
        import _thread, threading, time
        from rich.console import Console
        from turnkit.cli.line_input import read_line

        def ctrl_c_without_a_signal():  # the flag Python's handler sets, with no read to wake:
            time.sleep(0.5)  # what a signal taken just before the read leaves behind
            _thread.interrupt_main()

        threading.Thread(target=ctrl_c_without_a_signal).start()
        try:
            read_line(Console(), "you> ")
            print("READ")
        except KeyboardInterrupt:
            print("RAISED")
    """)
    assert "you> " in said, said
    assert "RAISED" in said, said
    assert status == 0


def test_a_line_typed_at_the_prompt_is_read_as_typed():
    child = pexpect.spawn(sys.executable, ["-c", textwrap.dedent("""
        from rich.console import Console
        from turnkit.cli.line_input import read_line

        print(repr(read_line(Console(), "[bold]you>[/] ")))
        print(repr(read_line(Console(), "again> ")))
        try:
            read_line(Console(), "last> ")
        except EOFError:
            print("EOF")
    """)], encoding="utf-8", timeout=TIMEOUT)  # fmt: skip
    child.expect("you>")
    child.sendline("make it cheaper ✓")
    child.expect("'make it cheaper ✓'")
    child.expect("again>")
    child.sendline("")
    child.expect("''")
    child.expect("last>")
    child.sendeof()
    child.expect("EOF")
    child.expect(pexpect.EOF)


def test_a_prompt_reads_a_pipe_without_waiting_on_it(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        textwrap.dedent("""
        from rich.console import Console
        from turnkit.cli.line_input import read_line

        print(read_line(Console(), "one> "), read_line(Console(), "two> "))
    """)
    )
    child = pexpect.spawn("/bin/sh", ["-c", f"printf 'a\\nb\\n' | {sys.executable} {script}"],
                          encoding="utf-8", timeout=TIMEOUT)  # fmt: skip
    child.expect("a b")
    child.expect(pexpect.EOF)


def test_an_error_a_library_made_of_a_ctrl_c_while_loading_ends_in_the_one_line():
    out, status = run_python("""
        import signal, _turnkit_entry

        def load():  # as pydantic-core does with a Ctrl-C while it builds a validator
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                raise ValueError('Error building "literal" validator: KeyboardInterrupt') from None

        _turnkit_entry._load = load
        _turnkit_entry.main()
    """)
    assert (status, out.split()) == (130, ["stopped", "(Ctrl-C)"]), out


def test_an_error_while_loading_without_a_ctrl_c_is_not_taken_for_one():
    out, status = run_python("""
        import _turnkit_entry

        def load():
            raise ValueError("a broken install")

        _turnkit_entry._load = load
        _turnkit_entry.main()
    """)
    assert status == 1
    assert "ValueError: a broken install" in out
    assert "stopped (Ctrl-C)" not in out
