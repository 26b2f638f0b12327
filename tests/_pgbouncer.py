"""Debian's ``pgbouncer`` in transaction mode, in front of the test PostgreSQL server.

``PgBouncer(server_url)`` writes an ini and a user list into a fresh folder, starts ``pgbouncer``
on a free port of 127.0.0.1 (as the ``postgres`` user when the tests run as root: pgbouncer refuses
root), waits until it answers, and stops it on ``close()``. Every database of the server is served
under its own name (the ``*`` entry), so a test makes a fresh database on the server and reaches it
through the pooler with ``url(name)``. Authentication is ``trust`` on both sides: a throw-away
server on 127.0.0.1.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _serving import free_port

__all__ = ["PgBouncer"]

INI = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_reset_query =
logfile = {folder}/pgbouncer.log
"""


class PgBouncer:
    """A running ``pgbouncer`` (``pool_mode = transaction``) in front of ``server_url``'s server."""

    def __init__(self, server_url: str, *, timeout: float = 30.0) -> None:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not os.path.exists(binary):
            raise FileNotFoundError(
                "pgbouncer is not installed: apt-get install -y pgbouncer (.ci/run does)"
            )
        server = urlsplit(server_url)
        self.user = server.username or "postgres"
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="turnkit-pgbouncer-"))
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            INI.format(
                host=server.hostname, port=server.port or 5432, listen=self.port, folder=self.folder
            )
        )
        (self.folder / "users.txt").write_text(f'"{self.user}" ""\n')
        user: dict[str, Any] = {}
        if os.getuid() == 0:  # pgbouncer will not run as root: run it as postgres (no runuser
            # in between, so that terminate() signals pgbouncer itself)
            account = pwd.getpwnam("postgres")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        # pgbouncer logs every connection to stderr too: to a file, never to a pipe nobody reads
        # (a full pipe stops pgbouncer mid-write, and every client with it)
        with (self.folder / "stderr.log").open("w") as stderr:
            self._process = subprocess.Popen(
                [binary, str(ini)], stdout=subprocess.DEVNULL, stderr=stderr, **user
            )
        try:
            self._wait(timeout)
        except BaseException:
            self.close()
            raise

    def url(self, database: str) -> str:
        """The URL of ``database`` through the pooler."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        """What pgbouncer logged (for a failing test's message)."""
        path = self.folder / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def _wait(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                stderr = (self.folder / "stderr.log").read_text()
                raise RuntimeError(f"pgbouncer exited at start: {stderr}{self.log()}")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pgbouncer did not answer in {timeout} s: {self.log()}"
                    ) from exc
                time.sleep(0.05)

    def close(self) -> None:
        """Stop pgbouncer (SIGTERM, then SIGKILL after 10 s) and remove its folder."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        if self._process.stderr:
            self._process.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)
