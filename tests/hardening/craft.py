"""Torch-free builders of hostile files: raw zip bytes (forged headers, overlapping entries, names
zipfile would refuse to write), deflate bombs built by repetition, hand-assembled pickles."""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ZIP64_LIMIT = 0xFFFFFFFF

# --- raw zip ------------------------------------------------------------------------------------


@dataclass
class RawEntry:
    """One member as written byte by byte; every field may lie."""

    name: bytes
    data: bytes = b""
    """What follows the local header: raw bytes (stored) or a raw deflate stream."""
    method: int = zipfile.ZIP_STORED
    size: int | None = None
    """Declared uncompressed size; None: len(data) (right for stored data only)."""
    crc: int | None = None
    """Declared CRC-32; None: the CRC of `data` (right for stored data only)."""
    points_at: int | None = None
    """Central entry only, pointing at the local header of entry number `points_at`."""
    offset: int | None = None
    """Central entry only, pointing at this file offset (e.g. inside another member's data)."""
    compress_size: int | None = None
    """Declared compressed size; None: len(data)."""
    external_attr: int = 0
    create_system: int = 0


def raw_zip(entries: Iterable[RawEntry], *, forged_cd_size: int | None = None) -> bytes:
    """Local headers and data, then the central directory, then the end record(s) (zip64 when a
    size needs it). `forged_cd_size` overrides the directory size the end record declares."""
    entries = list(entries)
    body = bytearray()
    offsets: list[int] = []
    for e in entries:
        offsets.append(len(body))
        if e.points_at is not None or e.offset is not None:
            continue
        body += _local_header(e) + e.data
    central = bytearray()
    for e, off in zip(entries, offsets):
        if e.points_at is not None:
            off = offsets[e.points_at]
        central += _central_header(e, off if e.offset is None else e.offset)
    cd_offset = len(body)
    n = len(entries)
    out = body + central
    cd_size = len(central) if forged_cd_size is None else forged_cd_size
    if n >= 0xFFFF or cd_size >= ZIP64_LIMIT or cd_offset >= ZIP64_LIMIT:
        eocd64_at = len(out)
        out += struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, cd_size, cd_offset)
        out += struct.pack("<4sLQL", b"PK\x06\x07", 0, eocd64_at, 1)
        n16, cd32, off32 = 0xFFFF, ZIP64_LIMIT, ZIP64_LIMIT
    else:
        n16, cd32, off32 = n, cd_size, cd_offset
    out += struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n16, n16, cd32, off32, 0)
    return bytes(out)


def _sizes(e: RawEntry) -> tuple[int, int, int, bytes]:
    size = len(e.data) if e.size is None else e.size
    csize = len(e.data) if e.compress_size is None else e.compress_size
    crc = zlib.crc32(e.data) if e.crc is None else e.crc
    extra = b""
    if size >= ZIP64_LIMIT or csize >= ZIP64_LIMIT:
        extra = struct.pack("<2H2Q", 1, 16, size, csize)
        size = csize = ZIP64_LIMIT
    return size, csize, crc, extra


def _local_header(e: RawEntry) -> bytes:
    size, csize, crc, extra = _sizes(e)
    head = struct.pack(
        "<4s5H3L2H",
        b"PK\x03\x04",
        45,
        0,
        e.method,
        0,
        0x21,
        crc,
        csize,
        size,
        len(e.name),
        len(extra),
    )
    return head + e.name + extra


def _central_header(e: RawEntry, offset: int) -> bytes:
    size, csize, crc, extra = _sizes(e)
    head = struct.pack(
        "<4s6H3L5H2L",
        b"PK\x01\x02",
        (e.create_system << 8) | 45,
        45,
        0,
        e.method,
        0,
        0x21,
        crc,
        csize,
        size,
        len(e.name),
        len(extra),
        0,
        0,
        0,
        e.external_attr,
        offset,
    )
    return head + e.name + extra


def many_empty_members(count: int, root: bytes = b"pkg") -> bytes:
    """A zip of `count` empty stored members (~60 bytes each): a central-directory bomb."""
    local = bytearray()
    central = bytearray()
    crc0 = zlib.crc32(b"")
    for i in range(count):
        name = b"%s/m/%08d" % (root, i)
        off = len(local)
        local += struct.pack(
            "<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc0, 0, 0, len(name), 0
        )
        local += name
        central += struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            20,
            20,
            0,
            0,
            0,
            0x21,
            crc0,
            0,
            0,
            len(name),
            0,
            0,
            0,
            0,
            0,
            off,
        )
        central += name
    return _close(bytes(local), bytes(central), count)


def _close(local: bytes, central: bytes, count: int) -> bytes:
    n16 = min(count, 0xFFFF)
    eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n16, n16, len(central), len(local), 0)
    return local + central + eocd


# --- rewriting real archives ------------------------------------------------------------------

Members = list[tuple[str, bytes]]


def read_members(path: Path) -> Members:
    with zipfile.ZipFile(path) as zf:
        return [(i.filename, zf.read(i)) for i in zf.infolist()]


def write_members(path: Path, members: Members, method: int = zipfile.ZIP_STORED) -> Path:
    """A zip of (name, bytes) pairs, in order, duplicates kept."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w", method) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


def rewrite(src: Path, dst: Path, edit: Callable[[Members], Members]) -> Path:
    return write_members(dst, edit(read_members(src)))


def edit_json(suffix: str, change: Callable[[Any], Any]) -> Callable[[Members], Members]:
    """An `edit` that applies `change` to the decoded JSON of the member ending in `suffix`."""

    def edit(members: Members) -> Members:
        out = []
        for name, data in members:
            if name.endswith(suffix):
                data = json.dumps(change(json.loads(data))).encode()
            out.append((name, data))
        return out

    return edit


def replace_member(suffix: str, data: bytes | None) -> Callable[[Members], Members]:
    """An `edit` that replaces (or, with None, drops) the member ending in `suffix`."""

    def edit(members: Members) -> Members:
        out = []
        for name, old in members:
            if name.endswith(suffix):
                if data is None:
                    continue
                old = data
            out.append((name, old))
        return out

    return edit


# --- pickles ------------------------------------------------------------------------------------


class Pkl:
    """Raw protocol-2 pickle opcodes, so hostile files need neither torch nor the classes."""

    PROTO = b"\x80\x02"
    STOP = b"."
    FALSE = b"\x89"
    EMPTY_DICT = b"}"

    @staticmethod
    def glob(module: str, name: str) -> bytes:
        return b"c" + f"{module}\n{name}\n".encode()

    @staticmethod
    def string(text: str) -> bytes:
        data = text.encode()
        return b"X" + struct.pack("<I", len(data)) + data

    @staticmethod
    def integer(n: int) -> bytes:
        if -(2**31) <= n < 2**31:
            return b"J" + struct.pack("<i", n)
        raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
        return b"\x8a" + bytes([len(raw)]) + raw  # LONG1

    @staticmethod
    def tup(*items: bytes) -> bytes:
        return b"(" + b"".join(items) + b"t"

    @staticmethod
    def call(func: bytes, *args: bytes) -> bytes:
        return func + Pkl.tup(*args) + b"R"

    @staticmethod
    def dump(body: bytes) -> bytes:
        return Pkl.PROTO + body + Pkl.STOP

    @staticmethod
    def storage(key: str = "0", numel: int = 6, cls: str = "FloatStorage") -> bytes:
        pid = Pkl.tup(
            Pkl.string("storage"),
            Pkl.glob("torch", cls),
            Pkl.string(key),
            Pkl.string("cpu"),
            Pkl.integer(numel),
        )
        return pid + b"Q"

    @staticmethod
    def tensor(size: tuple[int, ...], stride: tuple[int, ...], numel: int, key: str = "0") -> bytes:
        return Pkl.call(
            Pkl.glob("torch._utils", "_rebuild_tensor_v2"),
            Pkl.storage(key, numel),
            Pkl.integer(0),
            Pkl.tup(*map(Pkl.integer, size)),
            Pkl.tup(*map(Pkl.integer, stride)),
            Pkl.FALSE,
            Pkl.call(Pkl.glob("collections", "OrderedDict")),
        )

    @staticmethod
    def args_kwargs(*args: bytes) -> bytes:
        """`((args...), {})`, the (args, kwargs) convention."""
        return Pkl.dump(Pkl.tup(Pkl.tup(*args), Pkl.EMPTY_DICT))


def torch_save_zip(pkl: bytes, storages: dict[str, RawEntry] | None = None) -> bytes:
    """The layout torch.save writes (`archive/data.pkl`, `archive/data/<key>`, ...), raw, so a
    storage member may declare any size."""
    entries = [
        RawEntry(b"archive/data.pkl", pkl),
        RawEntry(b"archive/byteorder", b"little"),
        *(storages or {}).values(),
        RawEntry(b"archive/version", b"3\n"),
    ]
    return raw_zip(entries)


class ExecutesOnLoad:
    """Pickles to `os.system(command)`: what an unsafe loader would run."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return os.system, (self.command,)


class EvalsOnLoad:
    """Pickles to `builtins.eval(source)`."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self) -> tuple[Any, ...]:
        return eval, (self.source,)
