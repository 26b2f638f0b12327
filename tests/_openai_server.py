"""A local OpenAI-compatible chat.completions server for tests: real HTTP, scripted replies.

``OpenAIServer`` listens on 127.0.0.1 (a free port) and serves ``POST /v1/chat/completions``. It
records every request body (parsed JSON) in ``requests`` and answers from a script, in order:

- a string: the assistant's text;
- ``reply(content=..., tool_calls=[call(name, arguments)], usage=...)``: text and/or tool calls
  (arguments sent as a JSON string, as OpenAI does; give a string to send it as it is);
- a function of the request body returning one of those.

It speaks HTTP/1.1 and keeps connections alive, as real servers do, so a client's connection pool
is used as it is in production. A request with ``"stream": true`` gets server-sent
``chat.completion.chunk`` events (chunked encoding): the text in pieces, each tool call's
arguments split over several chunks, a usage chunk when ``stream_options.include_usage`` is set,
then ``data: [DONE]``. Otherwise the answer is one ``chat.completion`` object with ``usage``.

Failing loudly: a call beyond the script, a script function that raises, another path, and a
history that OpenAI itself refuses (an assistant tool call without its tool messages, a tool message
answering no call) are answered with an error status and a clear message (``x-should-retry:
false``, so the client does not retry) and recorded in ``errors``. ``assert_done()`` fails when
steps are left over or anything went wrong.

Example:
    >>> with OpenAIServer(["Hello!"]) as server:  # doctest: +SKIP
    ...     model = ChatOpenAI(model="m", base_url=server.url, api_key="test",
    ...                        use_responses_api=False)
    ...     model.invoke("hi").content
    'Hello!'
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DEFAULT_USAGE", "OpenAIServer", "Reply", "call", "reply"]

Reply = str | dict[str, Any] | Callable[[dict[str, Any]], "str | dict[str, Any]"]
"""A scripted reply: text, a ``reply(...)`` dict, or a function of the request body."""

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
"""The usage a reply reports when it names none."""

PATH = "/v1/chat/completions"
PIECES = 3
"""How many chunks a streamed text or a tool call's arguments are split into."""


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> dict[str, Any]:
    """A tool call of a reply; ``arguments`` (a dict, or raw text sent as it is)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {"name": name, "arguments": text, "id": id}


def reply(
    content: str | None = None,
    *,
    tool_calls: Iterable[dict[str, Any]] = (),
    usage: dict[str, int] | None = None,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """An assistant reply: ``content`` and/or ``tool_calls`` (from ``call``), and its usage;
    ``finish_reason`` defaults to ``tool_calls`` or ``stop`` (``length``: cut off at the limit)."""
    return {
        "content": content,
        "tool_calls": list(tool_calls),
        "usage": usage,
        "finish_reason": finish_reason,
    }


class OpenAIServer:
    """A scripted chat.completions endpoint on 127.0.0.1; use it as a context manager."""

    def __init__(self, replies: Iterable[Reply] = ()) -> None:
        self._script: deque[Reply] = deque(replies)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.requests: list[dict[str, Any]] = []
        """Every request body, parsed, in the order they came (failed ones too)."""
        self.errors: list[str] = []
        """What went wrong: unscripted calls, failing script steps, refused histories."""
        self.connections: set[tuple[str, int]] = set()
        """The client addresses (host, port) that sent requests: fewer than the requests when
        clients keep their connections alive."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- the script -------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Add ``replies`` to the end of the script."""
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self._script)

    def assert_done(self) -> None:
        """Fail when replies are left over or a request was answered with an error."""
        assert not self.errors, "the fake OpenAI server answered errors:\n" + "\n".join(self.errors)
        assert not self._script, f"{len(self._script)} scripted replies were never asked for"

    # --- life -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give a client: ``http://127.0.0.1:<port>/v1``."""
        assert self._httpd is not None, "the server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> OpenAIServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.owner = self  # type: ignore[attr-defined]  # read by _Handler
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )  # a short poll interval: shutdown() waits for one poll
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- answering (called from the handler's thread) ---------------------------------------

    def _answer(self, path: str, raw: bytes) -> tuple[int, str, Iterator[bytes] | bytes]:
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            return self._fail(400, f"the request body is not JSON ({exc}): {raw[:200]!r}")
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
        if path != PATH:
            return self._fail(404, f"request {number}: no route {path!r}; only POST {PATH}")
        problem = _refused(body)
        if problem is not None:
            return self._fail(400, f"request {number}: {problem}")
        with self._lock:
            step = self._script.popleft() if self._script else None
        if step is None:
            last = (body.get("messages") or [{}])[-1]
            return self._fail(
                500,
                f"request {number} is not scripted (the script is used up); its last message"
                f" was {json.dumps(last)[:300]}",
            )
        if callable(step):
            try:
                step = step(body)
            except Exception as exc:
                return self._fail(500, f"request {number}: the script function raised {exc!r}")
        message = self._message(step)
        usage = message.pop("usage") or DEFAULT_USAGE
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return 200, "text/event-stream", _sse(body, message, usage, include)
        return 200, "application/json", json.dumps(_completion(body, message, usage)).encode()

    def _message(self, step: Any) -> dict[str, Any]:
        if isinstance(step, str):
            step = reply(step)
        if not isinstance(step, dict):
            raise TypeError(f"a scripted reply is text, reply(...) or a function, got {step!r}")
        calls = [
            {
                "id": c.get("id") or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in step.get("tool_calls") or ()
        ]
        return {
            "content": step.get("content"),
            "tool_calls": calls,
            "usage": step.get("usage"),
            "finish_reason": step.get("finish_reason"),
        }

    def _fail(self, status: int, message: str) -> tuple[int, str, bytes]:
        with self._lock:
            self.errors.append(message)
        error = {"error": {"message": message, "type": "fake_server_error", "code": status}}
        return status, "application/json", json.dumps(error).encode()


def _refused(body: Any) -> str | None:
    """Why OpenAI would refuse this request (400), or None. Checks the tool-call pairing only."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (
                    f"messages[{index}]: messages with role 'tool' must be a response to a"
                    f" preceding message with 'tool_calls' (tool_call_id"
                    f" {message.get('tool_call_id')!r})"
                )
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages"
                " responding to each 'tool_call_id'. The following tool_call_ids did not have"
                f" response messages: {', '.join(sorted(open_calls))} (before messages[{index}])"
            )
        if role == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    if open_calls:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding"
            f" to each 'tool_call_id'; unanswered at the end: {', '.join(sorted(open_calls))}"
        )
    return None


def _finish(message: dict[str, Any]) -> str:
    return message.get("finish_reason") or ("tool_calls" if message["tool_calls"] else "stop")


def _base(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": kind,
        "created": 0,
        "model": body.get("model", "fake-model"),
        "system_fingerprint": None,
    }


def _completion(body: dict[str, Any], message: dict[str, Any], usage: dict[str, int]) -> Any:
    assistant: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    if message["tool_calls"]:
        assistant["tool_calls"] = message["tool_calls"]
    return {
        **_base(body, "chat.completion"),
        "choices": [
            {"index": 0, "message": assistant, "logprobs": None, "finish_reason": _finish(message)}
        ],
        "usage": usage,
    }


def _pieces(text: str) -> list[str]:
    """``text`` in ``PIECES`` parts (fewer when it is short; none when empty)."""
    size = max(1, -(-len(text) // PIECES))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(
    body: dict[str, Any], message: dict[str, Any], usage: dict[str, int], include_usage: bool
) -> Iterator[bytes]:
    base = _base(body, "chat.completion.chunk")
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], **extra}

    content = message["content"]
    events = [chunk({"role": "assistant", "content": "" if content is not None else None})]
    events += [chunk({"content": piece}) for piece in _pieces(content or "")]
    for index, tool_call in enumerate(message["tool_calls"]):
        function = tool_call["function"]
        start = {"name": function["name"], "arguments": ""}
        events.append(
            chunk({"tool_calls": [{"index": index, "id": tool_call["id"], "type": "function",
                                   "function": start}]})
        )  # fmt: skip
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(function["arguments"])
        ]
    events.append(chunk({}, _finish(message)))
    if include_usage:
        events.append({**base, "choices": [], "usage": usage})
    for event in events:
        yield b"data: " + json.dumps(event).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, as OpenAI, vLLM, llama.cpp and Ollama serve: a client reuses
    its connections (a stream is sent in chunked encoding, so the connection outlives it)."""

    protocol_version = "HTTP/1.1"

    def handle(self) -> None:
        # the client may go away between two requests: nothing to answer then
        with contextlib.suppress(ConnectionError, TimeoutError):
            super().handle()

    def do_POST(self) -> None:
        owner: OpenAIServer = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, content_type, data = owner._answer(self.path, raw)
        with owner._lock:
            owner.connections.add(self.client_address)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("x-should-retry", "false")
        if isinstance(data, bytes):
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in data:
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        owner: OpenAIServer = self.server.owner  # type: ignore[attr-defined]
        status, content_type, data = owner._fail(404, f"GET {self.path}: only POST {PATH}")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass
