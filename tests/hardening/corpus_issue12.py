"""Adversarial cases of issue #12 that a single file carries (classes 1-4): sample inputs that
crash, exhaust or hang the unpickler, and zips that escape the bomb and directory bounds. They
join `corpus.CASES` (imported by test_corpus.py) and run the same way: `aotipre check
--static-only --format json --no-config`, with the same bounds (exit code, one stderr line, no
traceback, no file written, peak RSS)."""

from __future__ import annotations

import bz2
import io
import lzma
import re
import struct
import zipfile
from pathlib import Path

from scripts.build_fixtures import crc32_of_zeros
from tests.hardening.corpus import GiB, MiB, Sources, _pt, _pt2, _write, case
from tests.hardening.craft import (
    Pkl,
    RawEntry,
    many_empty_members,
    raw_zip,
    read_members,
    replace_member,
    rewrite,
    write_members,
)


def _put(i: int) -> bytes:
    return b"r" + struct.pack("<I", i)  # LONG_BINPUT


def _get(i: int) -> bytes:
    return b"j" + struct.pack("<I", i)  # LONG_BINGET


def _deep_key_by_tuple1(depth: int) -> bytes:
    """{((((),),),...): None} with the key `depth` deep (TUPLE1 opcodes)."""
    return Pkl.dump(b"}" + b")" + b"\x85" * depth + b"N" + b"s")


def _deep_key_by_marks(depth: int) -> bytes:
    """The same with MARK ... TUPLE pairs."""
    return Pkl.dump(b"}" + b"(" * depth + b"N" + b"t" * depth + b"N" + b"s")


def _dag_key(levels: int) -> bytes:
    """A key of `levels` tuples, each holding the previous one twice (memo references): only
    `levels` deep, but hashing it visits 2**levels nodes."""
    body = b"}" + b")" + _put(0)
    for i in range(levels):
        body += _get(i) + b"\x86" + _put(i + 1)
    return Pkl.dump(body + b"N" + b"s")


def _ordered_dict_deep_key(depth: int) -> bytes:
    """OrderedDict([(deep_key, None)]): the key is hashed inside the call (REDUCE)."""
    pair = b")" + b"\x85" * depth + b"N" + b"\x86"
    return Pkl.dump(Pkl.glob("collections", "OrderedDict") + b"(]" + pair + b"at" + b"R")


def _memo_index(index: int) -> bytes:
    return Pkl.dump(b"]" + _put(index))


def _list_flood(n: int) -> bytes:
    """A tuple of `n` empty lists: one byte of pickle, ~60 bytes of Python object each."""
    return Pkl.dump(b"(" + b"]" * n + b"t")


def _codecs_copies(mib: int, copies: int) -> bytes:
    """One `mib` MiB string, memoized, then `_codecs.encode(s, 'latin1')` `copies` times: each
    call allocates a new copy from 8 bytes of pickle."""
    encode = Pkl.glob("_codecs", "encode") + _put(0)
    text = Pkl.string("a" * (mib * MiB)) + _put(1)
    latin = Pkl.string("latin1") + _put(2)
    first = encode + b"(" + text + latin + b"tR"
    again = (_get(0) + b"(" + _get(1) + _get(2) + b"tR") * (copies - 1)
    return Pkl.dump(b"(" + first + again + b"t")


def _ordered_dict_copies(pairs: int, copies: int) -> bytes:
    """A list of `pairs` (int, None) pairs, memoized, turned into an OrderedDict `copies`
    times: 7 bytes of pickle per copy of the whole dict."""
    items = b"".join(Pkl.integer(i) + b"N\x86" for i in range(pairs))
    build = Pkl.glob("collections", "OrderedDict") + _put(0) + b"]" + _put(1) + b"(" + items
    build += b"e\x85R"
    again = (_get(0) + _get(1) + b"\x85R") * (copies - 1)
    return Pkl.dump(b"(" + build + again + b"t")


def _size_of_shared_lists() -> bytes:
    """torch.Size([...]) of 65 references to a DAG of lists 40 levels deep (each level holds
    the one below twice): refused (more than 64 dims), and the message must not expand the
    structure (2**40 elements) to quote it. The levels stay on the stack (STOP ignores them)."""
    body = b"]" + _put(0)
    for i in range(40):
        body += b"](" + _get(i) + _get(i) + b"e" + _put(i + 1)
    dims = b"](" + _get(40) * 65 + b"e"
    return Pkl.dump(body + Pkl.glob("torch", "Size") + dims + b"\x85R")


_UNPICKLER_CASES: list[tuple[str, str, bytes]] = [
    (
        "deep_key_1000000",
        "a dict keyed by a tuple nested 1,000,000 deep (was SIGSEGV)",
        _deep_key_by_tuple1(1_000_000),
    ),
    (
        "deep_key_marks",
        "a dict keyed by a tuple nested 600,000 deep through MARKs",
        _deep_key_by_marks(600_000),
    ),
    (
        "deep_key_in_ordered_dict",
        "OrderedDict([(key nested 1,000,000 deep, None)])",
        _ordered_dict_deep_key(1_000_000),
    ),
    (
        "dag_key_70",
        "a dict keyed by 70 levels of shared tuples: 2**70 nodes to hash (was a hang)",
        _dag_key(70),
    ),
    (
        "memo_index_4g",
        "a 16-byte LONG_BINPUT with index 2**32-16 (a 32 GiB memo table)",
        _memo_index(0xFFFFFFF0),
    ),
    ("memo_get_unset", "a LONG_BINGET of a memo entry never set", Pkl.dump(_get(5))),
    (
        "opcode_flood",
        "50,000,000 NONE opcodes (50 MB) behind a protocol-4 STACK_GLOBAL that turns the replay "
        "off: the scan alone must stay bounded",
        Pkl.dump(
            Pkl.string("collections") + Pkl.string("OrderedDict") + b"\x93" + b"N" * 50_000_000
        ),
    ),
    (
        "list_flood",
        "4,000,000 EMPTY_LIST opcodes in one tuple (~240 MB of lists from 4 MB)",
        _list_flood(4_000_000),
    ),
    (
        "codecs_copies",
        "one 8 MiB string copied by _codecs.encode 64 times (512 MiB from 8 MiB)",
        _codecs_copies(8, 64),
    ),
    (
        "ordered_dict_copies",
        "a 20,000-pair list made into an OrderedDict 2,000 times",
        _ordered_dict_copies(20_000, 2_000),
    ),
    (
        "shared_lists_in_a_message",
        "torch.Size of shared lists 2**40 elements wide (the error message must not expand it)",
        _size_of_shared_lists(),
    ),
]

for _name, _what, _pkl in _UNPICKLER_CASES:

    def _build(d: Path, s: Sources, pkl: bytes = _pkl, name: str = _name) -> list[str]:
        (d / f"{name}.pt").write_bytes(_pt(pkl))
        return [str(s.ep_only), "--inputs", f"{name}.pt"]

    _build.__name__ = f"build_inputs_{_name}"
    case(f"--inputs: {_what}", 2, ("AOT020",))(_build)

    def _build_stored(d: Path, s: Sources, pkl: bytes = _pkl, name: str = _name) -> list[str]:
        edit = replace_member("sample_inputs/model.pt", _pt(pkl))
        return [rewrite(s.ep_only, d / f"stored_{name}.pt2", edit).name]

    _build_stored.__name__ = f"build_stored_inputs_{_name}"
    # exit 1 since issue 30: a member a weights-only load refuses is one torch.export.load
    # retries with weights_only=False, so the package is refused (AOT081), never unpickled here;
    # torch.Size of lists names only allowed globals (it fails later, building the Size)
    allowed = _name == "shared_lists_in_a_message"
    case(
        f"stored sample inputs (read even with --static-only): {_what}",
        0 if allowed else 1,
        ("AOT020",) if allowed else ("AOT020", "AOT081"),
    )(_build_stored)


@case(
    "-j 2: a package whose stored inputs crashed aotipre, next to a sound one",
    1,
    ("AOT020", "AOT081"),
)
def build_parallel_with_a_deep_key(d: Path, s: Sources) -> list[str]:
    edit = replace_member("sample_inputs/model.pt", _pt(_deep_key_by_tuple1(1_000_000)))
    bad = rewrite(s.ep_only, d / "bad.pt2", edit).name
    return [bad, str(s.ep_only), "-j", "2"]


# --- compression methods -------------------------------------------------------------------------


def _compressed_zip(members: list[tuple[str, bytes]], method: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _lzma_zeros(nbytes: int) -> bytes:
    """A zip LZMA member's data (zipfile's 4-byte header, the 5 property bytes, a raw LZMA1
    stream with its end marker) that inflates to `nbytes` (a multiple of 1 MiB) zero bytes,
    ~150 bytes per MiB: compressed 1 MiB at a time, never holding `nbytes`, by the fastest
    preset (as small as zipfile's default preset on zeros, in a third of the time)."""
    alone = lzma.LZMACompressor(lzma.FORMAT_ALONE, filters=[{"id": lzma.FILTER_LZMA1, "preset": 0}])
    chunk = bytes(MiB)
    data = b"".join([alone.compress(chunk) for _ in range(nbytes // MiB)]) + alone.flush()
    return struct.pack("<BBH", 9, 4, 5) + data[:5] + data[13:]  # .lzma: props, size, stream


_BZIP2_BLOCK = format(0x314159265359, "048b")
_BZIP2_END = format(0x177245385090, "048b")


def _bzip2_blocks(nbytes: int) -> list[str]:
    """The blocks of bz2.compress(bytes(nbytes), 1), as strings of bits."""
    stream = bz2.compress(bytes(nbytes), 1)
    bits = format(int.from_bytes(stream, "big"), f"0{len(stream) * 8}b")
    starts = [m.start() for m in re.finditer(f"(?={_BZIP2_BLOCK})", bits)]
    return [bits[a:b] for a, b in zip(starts, [*starts[1:], bits.rindex(_BZIP2_END)])]


def _bzip2_stream(blocks: list[str]) -> bytes:
    """A level-1 bzip2 stream of `blocks`: header, blocks, end marker, and the stream CRC that
    bzip2 combines from the blocks' CRCs (bits 48-80 of each block)."""
    crc = 0
    for block in blocks:
        crc = (((crc << 1) | (crc >> 31)) & 0xFFFFFFFF) ^ int(block[48:80], 2)
    bits = f"{int.from_bytes(b'BZh1', 'big'):032b}{''.join(blocks)}{_BZIP2_END}{crc:032b}"
    bits += "0" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big")


def _bzip2_zeros(nbytes: int) -> bytes:
    """A bzip2 stream of `nbytes` zero bytes, ~40 bytes per 5 MB, made without compressing
    them: one full block of zeros (bit aligned, so put together as bits) repeated, then a block
    of the rest."""
    full = _bzip2_blocks(16 * MiB)[0]
    per_block = len(bz2.decompress(_bzip2_stream([full])))
    count, rest = divmod(nbytes, per_block)
    return _bzip2_stream([full] * count + (_bzip2_blocks(rest) if rest else []))


for _method, _label in ((zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "LZMA")):

    def _build_pkg(d: Path, s: Sources, method: int = _method, label: str = _label) -> list[str]:
        path = d / f"{label}.pt2"
        write_members(path, read_members(s.ep_only), method)
        return [path.name]

    _build_pkg.__name__ = f"build_package_{_label.lower()}_members"
    case(
        f"a real package re-written with {_label} members (torch cannot read them)", 2, ("AOT030",)
    )(_build_pkg)

    def _build_inputs(d: Path, s: Sources, method: int = _method, label: str = _label) -> list[str]:
        stored = read_members(s.ep_only)
        sample = next(data for name, data in stored if name.endswith("sample_inputs/model.pt"))
        inner = [(n, b) for n, b in _members_of(sample)]
        (d / f"{label}.pt").write_bytes(_compressed_zip(inner, method))
        return [str(s.ep_only), "--inputs", f"{label}.pt"]

    _build_inputs.__name__ = f"build_inputs_{_label.lower()}_members"
    case(
        f"--inputs: the package's own sample inputs re-written with {_label} members",
        2,
        ("AOT020",),
    )(_build_inputs)


def _members_of(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(i.filename, zf.read(i)) for i in zf.infolist()]


@case("a 150 KB LZMA member that inflates to 1 GiB (was 1.9 GB of RSS)", 2, ("AOT030",))
def build_package_lzma_bomb(d: Path, s: Sources) -> list[str]:
    member = RawEntry(
        b"pkg/data/weights/w", _lzma_zeros(GiB), zipfile.ZIP_LZMA, GiB, crc32_of_zeros(GiB)
    )
    return _write(d / "lzma_bomb.pt2", raw_zip([*_pt2(), member]))


@case("--inputs: a data.pkl stored as a 4 KB bzip2 stream of 512 MiB", 2, ("AOT020",))
def build_inputs_bzip2_bomb(d: Path, s: Sources) -> list[str]:
    stream, size = _bzip2_zeros(512 * MiB), 512 * MiB
    member = RawEntry(b"archive/data.pkl", stream, zipfile.ZIP_BZIP2, size, crc32_of_zeros(size))
    (d / "bz.pt").write_bytes(raw_zip([member]))
    return [str(s.ep_only), "--inputs", "bz.pt"]


@case("stored sample inputs: a member compressed with bzip2 inside the package", 2, ("AOT030",))
def build_stored_inputs_bzip2_member(d: Path, s: Sources) -> list[str]:
    members = read_members(s.ep_only)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members:
            method = zipfile.ZIP_BZIP2 if name.endswith("sample_inputs/model.pt") else 0
            zf.writestr(name, data, compress_type=method)
    return _write(d / "stored_bz.pt2", buf.getvalue())


# --- the central-directory guard -----------------------------------------------------------------


def _eocd_with_second_signature(data: bytes) -> bytes:
    """The end record's entry counts rewritten to the bytes `PK\\x05\\x06` (zipfile ignores
    them): a search for the last signature then lands inside the real end record."""
    eocd = bytearray(data[-22:])
    eocd[8:12] = b"PK\x05\x06"
    return data[:-22] + bytes(eocd)


@case("400,000 members behind an end record that holds a second signature (bypass)", 2, ("AOT007",))
def build_directory_flood_eocd_bypass(d: Path, s: Sources) -> list[str]:
    return _write(d / "bypass.pt2", _eocd_with_second_signature(many_empty_members(400_000)))


@case("--inputs: 400,000 members (inputs had no directory guard)", 2, ("AOT020",))
def build_inputs_directory_flood(d: Path, s: Sources) -> list[str]:
    (d / "flood.pt").write_bytes(many_empty_members(400_000, b"archive"))
    return [str(s.ep_only), "--inputs", "flood.pt"]


@case("--inputs: 400,000 members behind an end record holding a second signature", 2, ("AOT020",))
def build_inputs_directory_flood_bypass(d: Path, s: Sources) -> list[str]:
    data = _eocd_with_second_signature(many_empty_members(400_000, b"archive"))
    (d / "flood_bypass.pt").write_bytes(data)
    return [str(s.ep_only), "--inputs", "flood_bypass.pt"]


@case("an end record whose directory would start before the file does", 2, ("AOT002",))
def build_directory_before_file_start(d: Path, s: Sources) -> list[str]:
    data = bytearray(raw_zip(_pt2()))
    struct.pack_into("<L", data, len(data) - 10, 1 << 23)  # directory size: 8 MiB
    return _write(d / "cd_before_start.pt2", bytes(data))


@case("a package with a sound model and 300,000 member names in a 31 MB directory", 2, ("AOT007",))
def build_directory_under_the_byte_bound(d: Path, s: Sources) -> list[str]:
    flood = many_empty_members(300_000)
    return _write(d / "many.pt2", flood)
