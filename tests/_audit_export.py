"""Run by ``test_audit_rest.py`` in a process of its own: serve the SQLite ledger at ``argv[1]``,
stream ``GET /v1/audit/export`` with the key ``argv[2]`` in the same process, and print how many
lines came, whether they came newest first, and how much the process's peak memory grew while
they did (``ru_maxrss`` after a warm-up export of one page, then after the whole one)."""

from __future__ import annotations

import json
import resource
import sys
import time

import httpx

from _serving import uvicorn_serving
from turnkit import Executor, Registry, open_ledger
from turnkit.server import create_app


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def main(path: str, secret: str) -> None:
    ledger = open_ledger(path)
    app = create_app(Executor(Registry(), ledger=ledger), mcp_path=None, ui=False)
    headers = {"Authorization": f"Bearer {secret}"}
    with uvicorn_serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        warm = client.get("/v1/audit/export", headers=headers, params={"until": 1_800_000_100})
        assert warm.status_code == 200, warm.text
        before, started = peak_kib(), time.perf_counter()
        lines, ordered, last = 0, True, ("~", "~")  # after every ISO time and id
        with client.stream("GET", "/v1/audit/export", headers=headers) as answer:
            for line in answer.iter_lines():
                if not line:
                    continue
                row = json.loads(line)
                key = (row["at"], row["id"])
                ordered = ordered and key < last  # newest first, each once
                last, lines = key, lines + 1
        seconds = time.perf_counter() - started
        grew = peak_kib() - before
    ledger.close()
    print(
        json.dumps(
            {
                "lines": lines,
                "ordered": ordered,
                "grew_kib": grew,
                "seconds": seconds,
                "peak_kib": peak_kib(),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
