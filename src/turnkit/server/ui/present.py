"""The held arguments as a person reads and edits them, and the edit form read back.

``node`` turns an input into a tree the template renders: objects as labelled rows, a list of
objects as a table (a price list), other lists item by item, long lists folded with their count.
Every leaf carries its JSON pointer (``/prices/0/price``): the name of its field in the edit form
and the path of the schema's violations, so each violation is shown beside its field.
``rebuilt`` reads the form back into the input's own shape, each value in its old type when it
parses as one (else as the text typed, which the tool's schema then refuses beside the field).

A person approves what they read, so text is shown as it is: whitespace kept (the style sheet's
``pre-wrap``), and every character that changes or hides what is read — bidi controls that
reorder the text around them, zero-width characters, invisible tag characters, control
characters — shown as a visible marker (``⟨U+202E⟩``, its name as a tooltip) by ``marked``. The
edit form still carries the real value, so an edit sends back exactly what it did not change.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

from turnkit.ledger.records import Preview, iso
from turnkit.registry.caller import Caller
from turnkit.registry.pointers import segment

__all__ = [
    "FOLD_OVER",
    "HIDDEN",
    "Node",
    "PreviewShown",
    "ago",
    "asked_by",
    "has_hidden",
    "marked",
    "node",
    "preview_shown",
    "rebuilt",
    "when",
]

HIDDEN = re.compile(
    "[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"  # bidi controls
    "\u200b-\u200d\u2060\ufeff"  # zero-width characters
    "\U000e0000-\U000e007f"  # tag characters (invisible text)
    "\x00-\x08\x0b-\x1f\x7f-\x9f]"  # control characters but tab and line feed
)
"""The characters ``marked`` shows as a visible marker instead of themselves."""

FOLD_OVER = 10
"""Lists longer than this are folded, with their count."""


@dataclass(frozen=True, slots=True)
class Node:
    """One value of the input, ready for the template."""

    kind: str
    """``object``, ``table`` (a list of objects), ``list`` or ``scalar``."""
    pointer: str
    """The JSON pointer of the value in the input (``""`` for the whole input)."""
    value: Any = None
    """A scalar's value."""
    text: str = ""
    """A scalar as the form shows it (strings as typed, the rest as JSON)."""
    children: list[tuple[str, Node]] = field(default_factory=list)
    """An object's or a list's members: (label, node)."""
    columns: list[str] = field(default_factory=list)
    """A table's column names."""
    rows: list[list[Node | None]] = field(default_factory=list)
    """A table's cells (None where a row lacks the column)."""

    @property
    def folded(self) -> bool:
        """Whether the template folds the list (shows its count until opened)."""
        return len(self.rows or self.children) > FOLD_OVER

    @property
    def count(self) -> int:
        return len(self.rows or self.children)

    @property
    def multiline(self) -> bool:
        """Whether the value is a string of several lines (edited in a text area: a browser
        drops the line breaks of a one-line field)."""
        return isinstance(self.value, str) and ("\n" in self.value or "\r" in self.value)

    @property
    def slug(self) -> str:
        """An HTML id for the field of this value (unique per pointer, whatever its keys)."""
        plain = re.sub(r"[^A-Za-z0-9_-]", "_", self.pointer)
        return f"{plain}-{hashlib.sha256(self.pointer.encode()).hexdigest()[:8]}"


def node(value: Any, pointer: str = "") -> Node:
    """The tree of ``value`` at ``pointer``."""
    if isinstance(value, Mapping):
        children = [(str(k), node(v, f"{pointer}/{segment(k)}")) for k, v in value.items()]
        return Node("object", pointer, children=children)
    if isinstance(value, list):
        if value and all(isinstance(item, Mapping) for item in value):
            columns = list(dict.fromkeys(str(k) for item in value for k in item))
            rows = [
                [
                    node(item[c], f"{pointer}/{i}/{segment(c)}") if c in item else None
                    for c in columns
                ]
                for i, item in enumerate(value)
            ]
            return Node("table", pointer, columns=columns, rows=rows)
        children = [(str(i), node(item, f"{pointer}/{i}")) for i, item in enumerate(value)]
        return Node("list", pointer, children=children)
    text = value if isinstance(value, str) else json.dumps(value)
    return Node("scalar", pointer, value=value, text=text)


def has_hidden(text: str) -> bool:
    """Whether ``text`` holds a character that ``marked`` shows as a marker."""
    return HIDDEN.search(text) is not None


def marked(text: object) -> Markup:
    """``text`` as HTML, escaped, each ``HIDDEN`` character replaced by a visible marker.

    Examples:
        >>> str(marked("a\u202eb<"))
        'a<span class="hidden-char" title="RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>b&lt;'
    """
    shown = []
    position = 0
    plain = str(text)
    for found in HIDDEN.finditer(plain):
        char = found.group()
        name = unicodedata.name(char, "control character")
        shown += [escape(plain[position : found.start()]),
                  Markup('<span class="hidden-char" title="{}">⟨U+{:04X}⟩</span>').format(
                      name, ord(char))]  # fmt: skip
        position = found.end()
    shown.append(escape(plain[position:]))
    return Markup("").join(shown)


def asked_by(caller: Caller) -> str:
    """Who asked for a held call, as a person reads it: the user (``alice``), and the key a
    key's call came with (``alice (key key_0a1b...)``)."""
    if caller.kind == "key":
        key = f"key {caller.key_id}"
        return f"{caller.user_id} ({key})" if caller.user_id else key
    return caller.user_id or caller.kind


def rebuilt(original: Any, form: Mapping[str, str], pointer: str = "") -> Any:
    """``original`` with each leaf replaced by the form's field of its pointer, if sent."""
    if isinstance(original, Mapping):
        return {k: rebuilt(v, form, f"{pointer}/{segment(k)}") for k, v in original.items()}
    if isinstance(original, list):
        return [rebuilt(item, form, f"{pointer}/{i}") for i, item in enumerate(original)]
    if pointer not in form:
        return original
    return _typed(form[pointer], original)


def _typed(text: str, like: Any) -> Any:
    """``text`` read as a value of the type of ``like`` when it is one; else ``text`` itself."""
    if isinstance(like, str):  # a browser sends a textarea's line breaks as CR LF
        return text if "\r" in like else text.replace("\r\n", "\n")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(like, bool) or like is None:
        return parsed
    if isinstance(like, int | float) and isinstance(parsed, int | float):
        return parsed
    return text


@dataclass(frozen=True, kw_only=True, slots=True)
class PreviewShown:
    """A confirmation's preview as a page shows it: the tree of its JSON, or the start of its
    JSON text when it was cut, or why there is none."""

    tree: Node | None = None
    """The preview's value as a tree, like the arguments (None when cut or unavailable)."""
    cut: str | None = None
    """The start of the preview's JSON text, when it was longer than the ledger keeps."""
    unavailable: str | None = None
    """Why the tool's preview gave nothing (it failed, took too long, was not JSON)."""


def preview_shown(preview: Preview | None) -> PreviewShown | None:
    """What a page shows of ``preview``; None when the tool declares no preview."""
    if preview is None:
        return None
    if preview.unavailable is not None:
        return PreviewShown(unavailable=preview.unavailable)
    if preview.truncated:
        value = preview.value
        return PreviewShown(cut=value if isinstance(value, str) else json.dumps(value))
    return PreviewShown(tree=node(preview.value))


_UNITS = ((90 * 60, 60, "minute"), (36 * 3600, 3600, "hour"), (float("inf"), 86400, "day"))
"""(below, size, name): a span shorter than ``below`` is said in units of ``size`` seconds
(``inbox.js`` says it the same way)."""


def ago(at: float, now: float) -> str:
    """How long before (or after) ``now`` the moment ``at`` is, as a person says it.

    Examples:
        >>> ago(1000.0, 1300.0), ago(1000.0, 1010.0), ago(1000.0, 820.0), ago(0.0, 200000.0)
        ('5 minutes ago', 'just now', 'in 3 minutes', '2 days ago')
    """
    seconds = now - at
    span = abs(seconds)
    if span < 45:
        return "just now"
    _, size, unit = next(u for u in _UNITS if span < u[0])
    count = max(1, round(span / size))
    said = f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{said} ago" if seconds > 0 else f"in {said}"


def when(at: float, now: float) -> Markup:
    """A ``<time>`` element of ``at``: how long ago as its text (``inbox.js`` keeps it current
    and writes the exact time in the reader's zone as its title), the exact UTC time as its
    title until then, the ISO timestamp as its ``datetime``."""
    exact = datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time class="relative" datetime="{}" title="{}">{}</time>').format(
        iso(at), exact, ago(at, now)
    )
