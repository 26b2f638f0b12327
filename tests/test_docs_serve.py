"""The guide "Serve your tools: REST and MCP" (docs/guides/serve.md), run as written against
one ``turnkit serve``.

Its ``sh`` blocks run in ``bash`` with ``turnkit`` on the PATH, in an empty folder (so the default
``--db`` is a new ``.turnkit/turnkit.sqlite``), its ``python`` blocks in a fresh interpreter. Three
things are filled in, as a reader fills them in: the secret ``keys create`` printed for
``tk_...``, and a free port for the guide's 8080 (``--port`` is added to ``turnkit serve``). Its
``json`` block must be the repository's own ``langgraph.json``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from _serving import free_port, wait_healthy
from test_cli import env
from test_docs_blocks import ROOT, SERVED, blocks

APPROVALS = "Approvals"

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

SECRET = re.compile(r"tk_[A-Za-z0-9_-]{43}")


def shell(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, env=reader_env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"{code}\n{done.stdout}\n{done.stderr}"
    return done


def reader_env() -> dict[str, str]:
    """A reader's shell: the virtualenv's ``turnkit`` first on the PATH, nothing of ours set."""
    bin_dir = str(Path(sys.executable).parent)
    return {**env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextmanager
def served(serve: str, port: int, cwd: Path) -> Iterator[str]:
    """The guide's ``turnkit serve`` line run as written (on ``port``); its URL once healthy."""
    server = subprocess.Popen(["bash", "-c", f"exec {serve} --port {port}"], cwd=cwd,
                              env=reader_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_the_serve_section_runs_as_written(tmp_path):
    sh = [code for heading, code in blocks("sh") if heading == SERVED]
    python = [code for heading, code in blocks("python") if heading == SERVED]
    (graph_json,) = [code for heading, code in blocks("json") if heading == SERVED]
    assert json.loads(graph_json) == json.loads((ROOT / "langgraph.json").read_text())
    make_key, serve = sh[0].strip().splitlines()
    port = free_port()

    def filled(code: str) -> str:
        return code.replace("tk_...", secret).replace(":8080", f":{port}")

    (secret,) = SECRET.findall(shell(make_key, tmp_path).stdout)
    with served(serve, port, tmp_path) as url:
        said = shell(filled(sh[1]), tmp_path).stdout
        decoder = json.JSONDecoder()  # curl -s prints the bodies one after another
        listed, end = decoder.raw_decode(said)
        read, end = decoder.raw_decode(said, end)
        held = said[end:]
        assert "catalogue.delete_product" in {tool["name"] for tool in listed}
        assert read["result"]["product"]["sku"] == "TEA-0001"
        assert held.startswith("HTTP/1.1 202")
        location = re.search(r"^location: (\S+)", held, re.I | re.M)[1]
        bearer = {"Authorization": f"Bearer {secret}"}
        itself = httpx.post(f"{url}{location}/approve", headers=bearer)
        assert itself.status_code == 403  # the key reads its hold; a person decides it
        assert httpx.get(f"{url}{location}", headers=bearer).json()["status"] == "pending"
        cid = location.rsplit("/", 1)[1]
        approved = shell(f"turnkit confirmations approve {cid} --demo", tmp_path)  # the guide's
        assert "deleted" in approved.stdout
        assert httpx.get(f"{url}{location}", headers=bearer).json()["status"] == "done"

        printed = []
        for code in python:
            (tmp_path / "block.py").write_text(filled(code))
            done = subprocess.run([sys.executable, "block.py"], cwd=tmp_path,
                                  env={**reader_env(), "TURNKIT_KEY": secret},
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
            assert done.returncode == 0, f"{code}\n{done.stderr[-3000:]}"
            printed.append(done.stdout)
        mcp_client, own_app = printed
        assert "'catalogue_get_product'" in mcp_client
        assert "'catalogue_delete_product'" in mcp_client
        assert '"sku":"TEA-0003"' in mcp_client.replace(" ", "")
        assert own_app.strip() == "{'status': 'ok'}"


def test_the_approvals_section_runs_as_written(tmp_path):
    """The person's key and the server as written; a write held over REST (a second key, made
    the guide's way) is shown on the inbox page and approved there with the form, once."""
    (sh,) = [code for heading, code in blocks("sh") if heading == APPROVALS]
    make_key, serve = sh.strip().splitlines()
    (person,) = SECRET.findall(shell(make_key, tmp_path).stdout)
    writer_key = "turnkit keys create --user demo --scope catalogue.products:write"
    (writer,) = SECRET.findall(shell(writer_key, tmp_path).stdout)
    with served(serve, free_port(), tmp_path) as url:
        held = httpx.post(f"{url}/v1/tools/catalogue.delete_product/invoke",
                          headers={"Authorization": f"Bearer {writer}"},
                          json={"input": {"sku": "TEA-0002"}})  # fmt: skip
        assert held.status_code == 202, held.text
        cid = held.json()["id"]
        with httpx.Client(base_url=url, follow_redirects=True, timeout=30) as browser:
            form = browser.get("/ui/")  # signed out: sent to the sign-in form
            assert form.url.path == "/ui/sign-in"
            token = re.search(r'name="csrf" value="([^"]+)"', form.text)[1]
            inbox = browser.post("/ui/sign-in", data={"key": person, "csrf": token})
            assert inbox.url.path == "/ui/"
            assert cid in inbox.text
            assert "Delete a product" in inbox.text or "catalogue.delete_product" in inbox.text
            token = re.search(r'name="csrf" value="([^"]+)"', inbox.text)[1]  # the sign-in's
            done = browser.post(f"/ui/confirmations/{cid}/approve", data={"csrf": token})
            assert done.status_code == 200
            assert "the write ran" in done.text
            again = browser.post(f"/ui/confirmations/{cid}/approve", data={"csrf": token})
            assert again.status_code == 409
            assert "Nothing ran again" in again.text
        bearer = {"Authorization": f"Bearer {writer}"}
        status = httpx.get(f"{url}/v1/confirmations/{cid}", headers=bearer).json()["status"]
        assert status == "done"
