"""The one sanitiser between untrusted text and every renderer.

Package paths, member and model names, wrapper metadata values, fake-tensor device strings,
worker logs: all of them end up in reports. For people (table, Markdown, GitHub commands,
stderr lines), every control character (newlines, escape sequences), line or paragraph
separator, bidi override and other invisible format character is shown escaped, so nothing
can clear a screen, forge a line (`::error ...`) or reorder what is displayed. For every
format, a lone surrogate (how Python carries a non-UTF-8 byte of a path) becomes `\\xNN`, so
the output is valid UTF-8.

`sanitized(obj)` copies a Report, a PackageInfo or any nesting of dataclasses, dicts, lists and
tuples, cleaning each string; renderers work on the copy and add their own layout.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any, TypeVar

T = TypeVar("T")

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
    "\ufff9-\ufffb\ud800-\udfff]"
)
"""C0/C1 controls (newline, tab, ESC, DEL, CSI), Arabic letter mark, zero-width and bidi
marks, line/paragraph separators, bidi embeddings/overrides/isolates, invisible operators,
BOM, interlinear annotation, lone surrogates."""
_SURROGATE = re.compile("[\ud800-\udfff]")
MULTILINE_FIELDS = frozenset({"kernel_source"})
"""Dataclass fields whose text is several lines by nature: each line is cleaned, the line
breaks are kept."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's surrogateescape of byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str, *, multiline: bool = False) -> str:
    """`text` with every unsafe character escaped (`\\n`, `\\x1b`, `\\u202e`, `\\xff`)."""
    if multiline:
        return "\n".join(clean(line) for line in text.split("\n"))
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def encodable(text: str) -> str:
    """`text` with only lone surrogates escaped: what machine formats need to be valid UTF-8
    (their own escaping handles control characters)."""
    return _SURROGATE.sub(_escape, text) if _SURROGATE.search(text) else text


def sanitized(obj: T, *, human: bool = True) -> T:
    """A copy of `obj` whose strings are `clean` (`human`) or `encodable`; unchanged parts are
    shared, and `obj` itself is returned when nothing needed cleaning."""
    return _walk(obj, human, multiline=False)  # type: ignore[no-any-return]


def _walk(obj: Any, human: bool, *, multiline: bool) -> Any:
    if isinstance(obj, str) and not isinstance(obj, enum.Enum):
        return clean(obj, multiline=multiline) if human else encodable(obj)
    if obj is None or isinstance(obj, (bool, int, float, enum.Enum)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            new = _walk(value, human, multiline=f.name in MULTILINE_FIELDS)
            if new is not value:
                changes[f.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    if isinstance(obj, dict):
        items = [
            (_walk(k, human, multiline=False), _walk(v, human, multiline=False))
            for k, v in obj.items()
        ]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, obj.items())):
            return obj
        return dict(items)
    if isinstance(obj, (list, tuple)):
        new_items = [_walk(v, human, multiline=multiline) for v in obj]
        if all(a is b for a, b in zip(new_items, obj)):
            return obj
        return type(obj)(new_items) if type(obj) in (list, tuple) else new_items
    return obj
