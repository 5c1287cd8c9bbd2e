"""Torch-free reader of a weights file for a swap (`--weights FILE`): a state_dict saved with
torch.save (through the sample-input reader's weights-only unpickler) or a safetensors file
(its header only: 8-byte little-endian length + JSON, read by the rules of the safetensors
library itself, in memory a small multiple of the header). Tensors become TensorMeta."""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass, field
from json.decoder import scanstring
from typing import NoReturn

from aotipre.foundation.errors import AotipreError, UsageError
from aotipre.foundation.safeio import require_file
from aotipre.inputs.load import load_sample_inputs
from aotipre.inputs.meta import TensorMeta

MAX_SAFETENSORS_HEADER = 100_000_000
"""The safetensors library's own limit on the header (its `MAX_HEADER_SIZE`)."""
MAX_TENSORS = 1_000_000
MAX_RANK = 64

SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 1),
    "U8": ("uint8", 1),
    "I8": ("int8", 1),
    "U16": ("uint16", 2),
    "I16": ("int16", 2),
    "F16": ("float16", 2),
    "BF16": ("bfloat16", 2),
    "U32": ("uint32", 4),
    "I32": ("int32", 4),
    "F32": ("float32", 4),
    "U64": ("uint64", 8),
    "I64": ("int64", 8),
    "F64": ("float64", 8),
    "C64": ("complex64", 8),
    "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E5M2": ("float8_e5m2", 1),
    "F8_E8M0": ("float8_e8m0fnu", 1),
}
"""safetensors dtype tag -> (torch dtype name, bytes per element)."""
ITEMSIZE_OF = {dtype: size for dtype, size in SAFETENSORS_DTYPES.values()}
"""torch dtype name -> bytes per element, for the dtypes of SAFETENSORS_DTYPES."""


@dataclass(frozen=True)
class WeightsFile:
    """The tensors of a weights file, by name (no values)."""

    path: str
    format: str
    """`torch.save` or `safetensors`."""
    tensors: dict[str, TensorMeta] = field(default_factory=dict)
    """Name (the state_dict key, a module path such as `fc.weight`) -> what it holds."""
    skipped: tuple[str, ...] = ()
    """Entries that are not tensors (a torch.save dict may hold counters or strings)."""

    def describe(self) -> str:
        return f"--weights {self.path} ({self.format}, {len(self.tensors)} tensor(s))"


def read_weights(path: str | os.PathLike[str]) -> WeightsFile:
    """Read `path` without torch; one UsageError line (naming `--weights PATH`) when it is
    missing, not a regular file, truncated, hostile, or neither format."""
    name = os.fspath(path)
    subject = f"--weights {name}"
    st = require_file(name, subject)
    head = _read_head(name, subject, 72)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _read_torch_save(name, subject)
    if head[8:].lstrip(b" \t\n\r")[:1] == b"{":  # safetensors skips JSON whitespace
        return _read_safetensors(name, subject, st.st_size)
    if not head:
        raise UsageError(f"{subject} is empty (0 bytes)")
    raise UsageError(
        f"{subject} is neither a torch.save file (a zip) nor a safetensors file",
        "save the weights with torch.save(model.state_dict(), path) or safetensors' save_file",
    )


def _open(name: str, subject: str) -> int:
    try:
        # O_NONBLOCK: a FIFO put in the file's place after the stat must not block the open
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{subject} is not a regular file (a pipe or device?)")
    return fd


def _read_head(name: str, subject: str, n: int) -> bytes:
    fd = _open(name, subject)
    try:
        return os.read(fd, n)
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _read_torch_save(name: str, subject: str) -> WeightsFile:
    try:
        sample = load_sample_inputs(name)
    except AotipreError as exc:
        why = str(exc).removeprefix(f"{name}: ")
        raise UsageError(f"{subject}: not a state_dict saved with torch.save ({why})") from None
    tree: object = sample.kwargs
    if sample.args:
        tree = sample.args[0] if len(sample.args) == 1 else None
    if not isinstance(tree, dict) or not tree:
        raise UsageError(
            f"{subject}: holds no dict of tensors keyed by name",
            "save the weights with torch.save(model.state_dict(), path)",
        )
    tensors = {str(k): v for k, v in tree.items() if isinstance(v, TensorMeta)}
    skipped = tuple(str(k) for k, v in tree.items() if not isinstance(v, TensorMeta))
    if not tensors:
        raise UsageError(
            f"{subject}: its dict holds no tensors",
            "save the weights with torch.save(model.state_dict(), path)",
        )
    return WeightsFile(name, "torch.save", tensors, skipped)


U64_MAX = 2**64 - 1
"""The largest size safetensors computes (a Rust usize on 64-bit hosts): more overflows there."""
_HINT = (
    "safetensors.torch.load_file refuses it too; re-save the weights with safetensors' save_file"
)
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SCALAR = re.compile(r"true|false|null|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SURROGATE = re.compile("[\ud800-\udfff]")
_S = "[ \t\n\r]*"  # JSON's whitespace, not Unicode's (`\s`)
_N = "(?:0|[1-9][0-9]{0,19})"
_CANONICAL_ENTRY = re.compile(
    rf'"((?:[^"\\\x00-\x1f])*)"{_S}:{_S}\{{{_S}"dtype"{_S}:{_S}"([A-Z0-9_]{{1,16}})"{_S},'
    rf'{_S}"shape"{_S}:{_S}\[((?:{_S}{_N}{_S}(?:,{_S}{_N}{_S})*)?{_S})\]{_S},'
    rf'{_S}"data_offsets"{_S}:{_S}\[{_S}({_N}){_S},{_S}({_N}){_S}\]{_S}\}}'
)
"""An entry as every writer writes it: `"name": {"dtype": .., "shape": [..], "data_offsets":
[b, e]}`, the name without escapes (a name with one is read token by token)."""


def _read_safetensors(name: str, subject: str, size: int) -> WeightsFile:
    """The header as the safetensors library reads it (its Rust `read_metadata`: the length,
    UTF-8, serde_json's grammar, `__metadata__` a map of strings, every tensor's dtype, shape
    and data_offsets, then `validate`: sorted by offsets, the tensors tile the data section
    from its first byte to the file's last, each span exactly its bytes). Parsed entry by entry
    into compact records, never into a JSON tree: memory stays a small multiple of the header."""
    bad = f"{subject}: not a valid safetensors file"
    fd = _open(name, subject)
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(8)
            (n,) = struct.unpack("<Q", raw) if len(raw) == 8 else (0,)
            if n > MAX_SAFETENSORS_HEADER:
                raise UsageError(
                    f"{bad}: its header declares {n} bytes, more than the "
                    f"{MAX_SAFETENSORS_HEADER} safetensors itself reads"
                )
            if n == 0 or 8 + n > size:
                raise UsageError(
                    f"{bad}: its header declares {n} bytes but the file has {size}: truncated?"
                )
            data = fh.read(n)
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    if len(data) != n:
        raise UsageError(f"{bad}: the file ends inside its header (truncated)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{bad}: its header is not UTF-8 ({_short(exc)})", _HINT) from None
    del data
    entries = _Header(text, bad).read()
    del text
    _validate_layout(bad, entries, size - 8 - n)
    tensors: dict[str, TensorMeta] = entries  # type: ignore[assignment]  # converted in place:
    for key, (_, _, meta) in entries.items():  # no second dict of a million names at once
        tensors[key] = meta
    if not tensors:
        raise UsageError(
            f"{subject}: holds no tensors",
            "save the weights with safetensors' save_file(model.state_dict(), path)",
        )
    return WeightsFile(name, "safetensors", tensors)


def _validate_layout(bad: str, entries: dict[str, tuple[int, int, TensorMeta]], body: int) -> None:
    """safetensors' `Metadata::validate` and its coverage check: in the order of their offsets,
    each tensor starts where the one before it ends (the first at 0: no gap, no overlap), spans
    exactly its bytes, and the last ends at the end of the file (no trailing bytes)."""
    start = 0
    for key, (begin, end, meta) in sorted(entries.items(), key=_offsets):
        shown = _printable(key)
        if begin != start or end < begin:
            why = (
                f"data_offsets [{begin}, {end}] end before they start"
                if end < begin
                else f"starts at byte {begin} of the data section, where the tensors before it "
                + (
                    f"end at {start}: it overlaps them"
                    if begin < start
                    else f"end at {start}: a gap of {begin - start} bytes"
                )
            )
            raise UsageError(f"{bad}: tensor {shown!r} {why}", _HINT)
        start = end
        numel = 1
        for d in meta.shape:
            numel *= d
            if numel > U64_MAX:
                raise UsageError(f"{bad}: tensor {shown!r}'s size overflows 64 bits", _HINT)
        need = numel * ITEMSIZE_OF[meta.dtype]
        if need > U64_MAX:
            raise UsageError(f"{bad}: tensor {shown!r}'s size overflows 64 bits", _HINT)
        if end - begin != need:
            raise UsageError(
                f"{bad}: entry {shown!r} ({meta.dtype}{list(meta.shape)}) needs {need} bytes "
                f"but its data_offsets span {end - begin}",
                _HINT,
            )
    if start != body:
        raise UsageError(
            f"{bad}: its tensors end at byte {start} of a {body}-byte data section "
            + ("(truncated)" if start > body else f"({body - start} trailing bytes)"),
            _HINT,
        )


_SHARED_METAS = 4096
"""How many distinct (dtype, shape) TensorMetas a header read shares between its tensors."""


def _offsets(item: tuple[str, tuple[int, int, TensorMeta]]) -> int:
    """The sort key of safetensors' `validate`, data_offsets as one number (end < 2**64)."""
    return item[1][0] << 64 | item[1][1]


class _Header:
    """A cursor over a safetensors header's text that accepts what safetensors' serde_json
    accepts (strict JSON: no NaN, no trailing comma or characters, no lone surrogate; every
    field typed; a duplicate field or `__metadata__` refused, a duplicate tensor name taking
    the last entry) and keeps each tensor as (begin, end, TensorMeta), equal metas shared.
    aotipre's own limits: MAX_TENSORS, MAX_RANK, and an unknown field of an entry holding a
    scalar (serde skips any value there; no writer puts one). An entry written the way every
    writer writes it is matched by one regular expression; anything else is read token by
    token. Messages are formatted only on failure."""

    def __init__(self, text: str, bad: str) -> None:
        self.text, self.pos, self.bad = text, 0, bad
        self.entry_name: str | None = None
        """The tensor whose entry is being read, for messages."""
        self.metas: dict[tuple[str, tuple[int, ...]], TensorMeta] = {}

    def fail(self, why: str) -> NoReturn:
        where = f"entry {_printable(self.entry_name)!r}: " if self.entry_name is not None else ""
        raise UsageError(f"{self.bad}: {where}{why}", _HINT)

    def peek(self) -> str:
        match = _WS.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos
        return self.text[self.pos : self.pos + 1]

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            got = _printable(self.text[self.pos : self.pos + 20]) or "the end"
            self.fail(f"its header is not JSON: expected {char!r} {what}, found {got!r}")
        self.pos += 1

    def more(self, close: str, what: str) -> bool:
        """After an element: True on a comma (another follows), False on `close`."""
        char = self.peek()
        self.pos += 1
        if char == close:
            return False
        if char != ",":
            got = _printable(char) or "the end"
            self.fail(f"its header is not JSON: expected ',' or {close!r} {what}, found {got!r}")
        return True

    def string(self, what: str) -> str:
        if self.peek() != '"':
            self.fail(f"its header is not JSON: {what} is not a string")
        try:
            value, self.pos = scanstring(self.text, self.pos + 1, True)
        except ValueError as exc:
            self.fail(f"its header is not JSON ({_short(exc)})")
        if _SURROGATE.search(value):
            self.fail(f"its header is not JSON: {what} holds a lone UTF-16 surrogate escape")
        return value

    def uint(self, what: str) -> int:
        self.peek()
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            self.fail(f"{what} holds something that is not a number")
        self.pos = match.end()
        token = match.group()
        if not token.isdigit():
            self.fail(f"{what} holds {token[:40]}, not a non-negative integer")
        if len(token) > 20 or int(token) > U64_MAX:
            self.fail(f"{what} holds a number larger than {U64_MAX}")
        return int(token)

    def uints(self, what: str, most: int) -> list[int]:
        self.expect("[", f"to open {what}")
        out: list[int] = []
        if self.peek() == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.uint(what))
            if len(out) > most:
                self.fail(f"{what} has more than {most} elements")
            if not self.more("]", f"in {what}"):
                return out

    def read(self) -> dict[str, tuple[int, int, TensorMeta]]:
        entries: dict[str, tuple[int, int, TensorMeta]] = {}
        self.expect("{", "at the start of its header")
        seen_metadata = False
        if self.peek() == "}":
            self.pos += 1
        else:
            while True:
                fast = _CANONICAL_ENTRY.match(self.text, self.pos)
                if fast is not None and self._fast(fast, entries):
                    self.pos = fast.end()
                else:
                    key = self.string("a name")
                    self.expect(":", "after a name")
                    if key == "__metadata__":
                        if seen_metadata:
                            self.fail("its header has two __metadata__ entries")
                        seen_metadata = True
                        self.metadata()
                    else:
                        self.entry_name = key
                        entries[key] = self.entry()
                        self.entry_name = None
                if len(entries) > MAX_TENSORS:
                    self.fail(f"more than {MAX_TENSORS} tensors")
                if not self.more("}", "between the header's entries"):
                    break
        if self.peek():
            self.fail("its header has characters after its JSON object")
        return entries

    def _fast(self, match: re.Match[str], entries: dict[str, tuple[int, int, TensorMeta]]) -> bool:
        """An entry in the canonical form (a name without escapes; dtype, shape, data_offsets
        in that order, plain integers): taken whole; False to read it token by token."""
        key, tag, dims, begin, end = match.groups()
        if key == "__metadata__" or tag not in SAFETENSORS_DTYPES:
            return False
        shape = [int(d) for d in dims.split(",")] if dims.strip(" \t\n\r") else []
        if len(shape) > MAX_RANK or any(d > U64_MAX for d in shape):
            return False  # the token-by-token reader says why
        if int(begin) > U64_MAX or int(end) > U64_MAX:
            return False
        entries[key] = (int(begin), int(end), self.meta(tag, shape))
        return True

    def metadata(self) -> None:
        if self.peek() == "n" and self.text.startswith("null", self.pos):
            self.pos += 4
            return
        self.expect("{", "to open __metadata__ (a map of strings)")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            self.string("a __metadata__ key")
            self.expect(":", "after a __metadata__ key")
            self.string("a __metadata__ value (safetensors takes strings only)")
            if not self.more("}", "in __metadata__"):
                return

    def entry(self) -> tuple[int, int, TensorMeta]:
        self.expect("{", "to open the entry")
        tag: str | None = None
        shape: list[int] | None = None
        offsets: list[int] | None = None
        seen: set[str] = set()
        while self.peek() != "}" or seen:
            field = self.string("a field name")
            if field in seen:
                self.fail(f"two {_printable(field)!r} fields")
            seen.add(field)
            self.expect(":", "after a field name")
            if field == "dtype":
                tag = self.string("the dtype")
            elif field == "shape":
                shape = self.uints("the shape", MAX_RANK)
            elif field == "data_offsets":
                offsets = self.uints("data_offsets", 2)
            else:
                self.scalar(f"field {_printable(field)!r}")
            if not self.more("}", "in the entry"):
                break
        else:
            self.pos += 1
        if tag is None or shape is None or offsets is None:
            missing = [f for f in ("dtype", "shape", "data_offsets") if f not in seen]
            self.fail(f"no {', no '.join(missing)}")
        if tag not in SAFETENSORS_DTYPES:
            self.fail(f"unknown dtype {_printable(tag)!r}")
        if len(offsets) != 2:
            self.fail(f"{len(offsets)} data_offsets, not 2")
        return offsets[0], offsets[1], self.meta(tag, shape)

    def meta(self, tag: str, shape: list[int]) -> TensorMeta:
        dims = tuple(shape)
        meta = self.metas.get((tag, dims))
        if meta is None:  # a bounded cache: distinct shapes must not cost a slot each
            strides: list[int] = []
            step = 1
            for d in reversed(dims):
                strides.append(step)
                step *= d
            meta = TensorMeta(SAFETENSORS_DTYPES[tag][0], dims, tuple(reversed(strides)))
            if len(self.metas) < _SHARED_METAS:
                self.metas[(tag, dims)] = meta
        return meta

    def scalar(self, what: str) -> None:
        if self.peek() == '"':
            self.string(what)
            return
        match = _SCALAR.match(self.text, self.pos)
        if match is None:
            self.fail(f"{what} holds a list or object, which aotipre does not read")
        self.pos = match.end()


def _printable(text: str) -> str:
    """At most 200 characters of `text`, control characters escaped (a name may be megabytes)."""
    head = text[:200]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)[:200]


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
