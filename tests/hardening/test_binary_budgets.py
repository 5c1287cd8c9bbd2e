"""Issue #30 (P1.1): the binary readers' work is bounded by objects, not by the sizes a header
declares. Hostile ELF and fatbin files are built byte by byte here (the linked lists a C reader
would follow in a loop, sizes far past the file, sparse files that declare gigabytes); each read
must return or raise the reader's one-line error within a step and a memory budget. The cases
are sized so that a walk quadratic in the records, or a table materialized per declared count,
overruns the budget by orders of magnitude."""

from __future__ import annotations

import struct
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aotipre.binaries import cuda, elf, x86
from aotipre.binaries.cuda import CudaBinaryError, read_cubin, read_fatbin
from aotipre.binaries.elf import ElfError, ElfFile
from aotipre.binaries.source import BytesSource, open_file
from tests.hardening.craft import read_members, write_members
from tests.hardening.harness import RSS_BOUND_MB, run_aotipre

STEP_BUDGET = 1_000_000
"""Python and C function calls one read may make. The quadratic walks of issue #30 make 10^7
to 10^8 on these files; the linear readers make at most a few thousand."""
MEMORY_BUDGET_MB = 64
"""Peak traced memory of one read (the reported cases reached 314 MB to 2.3 GB)."""
HEADROOM_MB = 1024
"""Address space one read may add (RLIMIT_AS, on Linux), so that a reader that regresses fails
its test with a MemoryError instead of exhausting the machine (before the fix, one of these
cases grew to 23 GB before the kernel killed it)."""
CLI_TIMEOUT_S = 60
CPU_PACKAGE = Path(__file__).resolve().parents[1] / "data" / "torch214" / "aoti.pt2"

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_VERNEED = struct.Struct("<HHIII")  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
_VERNAUX = struct.Struct("<IHHII")  # vna_hash, vna_flags, vna_other, vna_name, vna_next
_VERDEF = struct.Struct(
    "<HHHHIII"
)  # vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
_SYM = struct.Struct("<IBBHQQ")
_DYN = struct.Struct("<qQ")
BACK = 0xFFFFFFF0
"""A 32-bit `next` of -16: a C reader adding it to a pointer walks back into the records it
already read, for ever."""
SPARSE_AT = 1 << 20
"""Where the declared-but-absent tables of a sparse file start (past every real byte)."""


# --- builders -------------------------------------------------------------------------------


@dataclass
class Sec:
    """One section as written; `size` and `offset` may lie about `data`."""

    name: str
    type: int
    data: bytes = b""
    link: int = 0
    info: int = 0
    entsize: int = 0
    size: int | None = None
    """Declared sh_size; None: len(data)."""
    offset: int | None = None
    """Declared sh_offset; None: where `data` is written."""


def elf_bytes(sections: list[Sec], machine: int = elf.EM_X86_64, abi: int = 0) -> bytes:
    """An ELF64 shared object: header, one empty PT_LOAD, each section's data, the section name
    table, the section headers (0: null, 1..n: `sections`, n+1: .shstrtab)."""
    names = bytearray(b"\0")
    name_at = []
    for s in [*sections, Sec(".shstrtab", elf.SHT_STRTAB)]:
        name_at.append(len(names))
        names += s.name.encode() + b"\0"
    body = bytearray(_EHDR.size + _PHDR.size)
    headers = [bytes(_SHDR.size)]
    for s, at_name in zip(sections, name_at):
        body += bytes(-len(body) % 8)
        at = len(body) if s.offset is None else s.offset
        size = len(s.data) if s.size is None else s.size
        body += s.data
        headers.append(_SHDR.pack(at_name, s.type, 0, 0, at, size, s.link, s.info, 8, s.entsize))
    headers.append(_SHDR.pack(name_at[-1], elf.SHT_STRTAB, 0, 0, len(body), len(names), 0, 0, 1, 0))
    body += names + bytes(-(len(body) + len(names)) % 8)
    shoff = len(body)
    body += b"".join(headers)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0, abi]) + bytes(7)
    n = len(headers)
    body[: _EHDR.size] = _EHDR.pack(
        ident, elf.ET_DYN, machine, 1, 0, 64, shoff, 0, 64, 56, 1, 64, n, n - 1
    )
    body[_EHDR.size : _EHDR.size + _PHDR.size] = _PHDR.pack(elf.PT_LOAD, 5, 0, 0, 0, 0, 0, 0x1000)
    return bytes(body)


def sparse(path: Path, data: bytes, size: int) -> Path:
    """`data`, then a hole up to `size` bytes (no disk, no memory)."""
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(size)
    return path


DYNSTR = Sec(".dynstr", elf.SHT_STRTAB, b"\0libc.so.6\0GLIBC_2.2.5\0")


def verneed_so(records: bytes, info: int = 0) -> bytes:
    """A .so whose .gnu.version_r holds `records` (names from a small .dynstr), with two dynamic
    symbols and their .gnu.version indexes: reading its dynamic symbols reads the table too."""
    symbols = bytes(24) + _SYM.pack(1, 0x12, 0, 0, 0, 0)
    return elf_bytes(
        [
            DYNSTR,
            Sec(".gnu.version_r", elf.SHT_GNU_VERNEED, records, link=1, info=info),
            Sec(".dynsym", elf.SHT_DYNSYM, symbols, link=1, entsize=24),
            Sec(".gnu.version", elf.SHT_GNU_VERSYM, struct.pack("<HH", 0, 2), link=3),
        ]
    )


def shared_aux(entries: int, aux: int) -> bytes:
    """`entries` version-need records that all point at one chain of `aux` vernaux records: each
    record is valid, the walk per record is linear, the walk of all of them quadratic."""
    start = entries * _VERNEED.size
    out = bytearray()
    for i in range(entries):
        nxt = _VERNEED.size if i < entries - 1 else 0
        out += _VERNEED.pack(1, aux, 1, start - i * _VERNEED.size, nxt)
    for i in range(aux):
        out += _VERNAUX.pack(0, 0, (2 + i) & 0x7FFF, 11, _VERNAUX.size if i < aux - 1 else 0)
    return bytes(out)


# --- the budget -----------------------------------------------------------------------------


@contextmanager
def address_space_cap() -> Iterator[None]:
    """The process's address space limited to what it maps now plus HEADROOM_MB, for the block."""
    if not sys.platform.startswith("linux"):
        yield
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    cap = mapped + (HEADROOM_MB << 20)
    cap = min(c for c in (cap, soft, hard) if c != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class Overrun(BaseException):
    """A read made more calls than STEP_BUDGET (BaseException: no reader may swallow it)."""


def bounded(read: Callable[[], Any]) -> Any:
    """What `read()` returns, or the ElfError / CudaBinaryError it raises; fails the test when it
    makes more than STEP_BUDGET calls or its traced memory peaks above MEMORY_BUDGET_MB (or it
    needs more than HEADROOM_MB of address space: MemoryError)."""
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1
            if calls > STEP_BUDGET:
                raise Overrun

    tracemalloc.start()
    sys.setprofile(count)
    try:
        with address_space_cap():
            result = read()
    except (ElfError, CudaBinaryError) as exc:
        result = exc
    except Overrun:
        pytest.fail(f"more than {STEP_BUDGET} calls: the work is not bounded by the objects read")
    finally:
        sys.setprofile(None)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MEMORY_BUDGET_MB << 20, f"peak traced memory {peak >> 20} MB"
    return result


def refused(result: Any, *words: str) -> str:
    """The one-line message of a reader error that names each of `words`."""
    assert isinstance(result, (ElfError, CudaBinaryError)), f"no error: {result!r:.300}"
    message = str(result)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


def read_all(data: bytes | Path) -> Callable[[], Any]:
    """Everything aotipre reads from a .so: needed libraries, versions, dynamic symbols."""

    def read() -> Any:
        if isinstance(data, Path):
            with open_file(data) as source:
                f = ElfFile(source)
                return f.needed(), f.version_needs(), f.version_definitions(), f.dynamic_symbols()
        f = ElfFile(BytesSource(data))
        return f.needed(), f.version_needs(), f.version_definitions(), f.dynamic_symbols()

    return read


# --- version needs and definitions ------------------------------------------------------------


def test_verneed_records_sharing_one_vernaux_chain() -> None:
    """The reported case: 3,000 records x one chain of 3,000 = 9 M steps (and as many tuples)
    from a 96 KB section; each vernaux record may be read once."""
    data = verneed_so(shared_aux(3000, 3000))
    refused(bounded(lambda: ElfFile(BytesSource(data)).version_needs()), "already read")
    refused(bounded(lambda: ElfFile(BytesSource(data)).dynamic_symbols()), "already read")


def test_verneed_chain_whose_vn_next_loops_back() -> None:
    records = _VERNEED.pack(1, 1, 1, 16, 32) + _VERNAUX.pack(0, 0, 2, 11, 0)
    records += _VERNEED.pack(1, 1, 1, 16, BACK) + _VERNAUX.pack(0, 0, 3, 11, 0)
    refused(bounded(read_all(verneed_so(records))), "version-needs")


def test_verneed_with_a_huge_vn_cnt() -> None:
    """vn_cnt 65535 over a chain of 100,000 vernaux records (1.6 MB): at most the budget of
    version records is read, and one more raises."""
    records = _VERNEED.pack(1, 0xFFFF, 1, 16, 0) + shared_aux(0, 100_000)
    message = refused(bounded(read_all(verneed_so(records))), "version-needs")
    assert str(elf.MAX_VERSION_RECORDS) in message


def test_vernaux_chain_loops_back() -> None:
    looping = _VERNEED.pack(1, 0xFFFF, 1, 16, 0)
    looping += _VERNAUX.pack(0, 0, 2, 11, 16) + _VERNAUX.pack(0, 0, 3, 11, BACK)
    refused(bounded(read_all(verneed_so(looping))), "version-needs")
    # the second record's chain runs into the first one's
    joined = _VERNEED.pack(1, 2, 1, 32, 16) + _VERNEED.pack(1, 2, 1, 16, 0)
    joined += _VERNAUX.pack(0, 0, 2, 11, 16) + _VERNAUX.pack(0, 0, 3, 11, 0)
    refused(bounded(read_all(verneed_so(joined))), "version-needs", "already read")


def test_verdef_chain_loops_back_and_runs_long() -> None:
    def so(records: bytes) -> bytes:
        return elf_bytes([DYNSTR, Sec(".gnu.version_d", elf.SHT_GNU_VERDEF, records, link=1)])

    looping = _VERDEF.pack(1, 0, 1, 1, 0, 20, 28) + struct.pack("<II", 11, 0)
    looping += _VERDEF.pack(1, 0, 2, 1, 0, 20, BACK) + struct.pack("<II", 11, 0)
    refused(bounded(read_all(so(looping))), "version-definitions")
    # 100,000 definitions (2.8 MB), each with its own name record
    many = b"".join(
        _VERDEF.pack(1, 0, i & 0x7FFF, 1, 0, 20, 28) + struct.pack("<II", 11, 0)
        for i in range(100_000)
    )
    message = refused(bounded(read_all(so(many))), "version-definitions")
    assert str(elf.MAX_VERSION_RECORDS) in message


def test_real_version_tables_still_read() -> None:
    """A well-formed table (one library, three versions) reads as before."""
    records = _VERNEED.pack(1, 3, 1, 16, 0)
    for i, nxt in enumerate((16, 16, 0)):
        records += _VERNAUX.pack(0, 0, 2 + i, 11, nxt)
    needs = ElfFile(BytesSource(verneed_so(records, info=1))).version_needs()
    assert needs == {"libc.so.6": ("GLIBC_2.2.5",) * 3}


# --- symbols, string tables, sections, dynamic entries ----------------------------------------


def test_sparse_file_declaring_millions_of_symbols(tmp_path: Path) -> None:
    """4 M symbols declared (96 MB of a sparse 97 MB file, a few KB on disk): refused by count
    before a byte of them is read (reported: 700 MB and 60 s)."""
    count = 4_000_000
    base = elf_bytes(
        [
            DYNSTR,
            Sec(".dynsym", elf.SHT_DYNSYM, link=1, entsize=24, size=count * 24, offset=SPARSE_AT),
        ]
    )
    path = sparse(tmp_path / "sparse.so", base, SPARSE_AT + count * 24)
    message = refused(bounded(read_all(path)), ".dynsym", str(elf.MAX_SYMBOLS))
    assert str(count) in message


@pytest.mark.parametrize("entsize", [0, 1, 24])
def test_symbol_table_larger_than_the_file(entsize: int) -> None:
    """sh_entsize 0 (the reader's own size is used), tiny (refused), or right, with sh_size far
    past the end of a small file: nothing is materialized for the declared count."""
    for size in (1 << 40, elf.MAX_SYMBOLS * 24 - 24):
        data = elf_bytes(
            [DYNSTR, Sec(".dynsym", elf.SHT_DYNSYM, link=1, entsize=entsize, size=size)]
        )
        refused(bounded(read_all(data)), ".dynsym")


def test_symbol_names_without_terminators() -> None:
    """50,000 symbols named at successive offsets of a 1 MB string table with no NUL: each name
    runs to the end of the table (50 GB of names before); decoded names have a byte budget."""
    count = 50_000
    symbols = bytes(24) + b"".join(_SYM.pack(i, 0x12, 0, 1, 0, 0) for i in range(1, count))
    data = elf_bytes(
        [
            Sec(".dynstr", elf.SHT_STRTAB, b"x" * (1 << 20)),
            Sec(".dynsym", elf.SHT_DYNSYM, symbols, link=1, entsize=24),
        ]
    )
    refused(bounded(read_all(data)), ".dynstr", str(elf.MAX_NAME_BYTES))


def test_section_names_without_terminators() -> None:
    """4,000 sections all named inside a 1 MB .shstrtab with no NUL (4 GB of names before)."""
    data = bytearray(elf_bytes([Sec(f"s{i}", 1) for i in range(4000)]))
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    (shnum,) = struct.unpack_from("<H", data, 0x3C)
    struct.pack_into("<QQ", data, shoff + (shnum - 1) * 64 + 24, len(data), 1 << 20)
    data += b"y" * (1 << 20)  # the new .shstrtab: sh_offset, sh_size above
    read = bounded(lambda: ElfFile(BytesSource(bytes(data))))
    refused(read, "section names", str(elf.MAX_NAME_BYTES))


def test_too_many_sections() -> None:
    data = bytearray(elf_bytes([]))
    struct.pack_into("<H", data, 0x3C, 0xFFFF)  # e_shnum
    refused(bounded(lambda: ElfFile(BytesSource(bytes(data)))), "section", str(elf.MAX_SECTIONS))


def test_dynamic_section_with_a_huge_count() -> None:
    """90,000 DT_NEEDED entries, each naming offset 0 of a 1 MB .dynstr without NUL (90 GB of
    names before); and a .dynamic declaring 2^36 bytes past the end, with sh_entsize 0."""
    entries = _DYN.pack(elf.DT_NEEDED, 0) * 90_000 + _DYN.pack(0, 0)
    strings = Sec(".dynstr", elf.SHT_STRTAB, b"z" * (1 << 20))
    data = elf_bytes([strings, Sec(".dynamic", elf.SHT_DYNAMIC, entries, link=1, entsize=16)])
    refused(bounded(read_all(data)), "dynamic", str(elf.MAX_DYNAMIC_ENTRIES))
    declared = Sec(".dynamic", elf.SHT_DYNAMIC, link=1, size=1 << 36)
    refused(
        bounded(read_all(elf_bytes([DYNSTR, declared]))), "dynamic", str(elf.MAX_DYNAMIC_ENTRIES)
    )


def test_string_table_declared_larger_than_the_reader_reads(tmp_path: Path) -> None:
    size = elf.MAX_TABLE_BYTES + 8
    base = elf_bytes(
        [
            Sec(".dynstr", elf.SHT_STRTAB, size=size, offset=SPARSE_AT),
            Sec(".dynsym", elf.SHT_DYNSYM, bytes(48), link=1, entsize=24),
        ]
    )
    path = sparse(tmp_path / "strings.so", base, SPARSE_AT + size)
    refused(bounded(read_all(path)), ".dynstr", str(elf.MAX_TABLE_BYTES))


# --- notes, cubins, fatbins, the instruction scan ---------------------------------------------


def _tkinfo_cubin(notes: bytes) -> bytes:
    return elf_bytes([Sec(".note.nv.tkinfo", elf.SHT_NOTE, notes)], machine=elf.EM_CUDA, abi=8)


def test_note_chain_of_empty_notes() -> None:
    """87,000 empty notes in 1 MB: the note walk stops at its cap and says so; the cubin is
    still read, without the tool note."""
    data = _tkinfo_cubin(struct.pack("<III", 0, 0, 1) * 87_000)
    refused(
        bounded(lambda: ElfFile(BytesSource(data)).notes(".note.nv.tkinfo")),
        "notes",
        str(elf.MAX_NOTES),
    )
    image = bounded(lambda: read_cubin(BytesSource(data)))
    assert (image.kind, image.toolkit) == ("sass", None)


def test_note_section_declared_huge(tmp_path: Path) -> None:
    base = elf_bytes(
        [Sec(".note.nv.tkinfo", elf.SHT_NOTE, size=1 << 40, offset=SPARSE_AT)],
        machine=elf.EM_CUDA,
        abi=8,
    )
    path = sparse(tmp_path / "notes.cubin", base, SPARSE_AT + (64 << 20))

    def read() -> Any:
        with open_file(path) as source:
            return read_cubin(source)

    assert bounded(read).kind == "sass"


def _fatbin(entries: list[bytes]) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", cuda.FATBIN_MAGIC, 1, 16, len(body)) + body


def _entry(kind: int, payload: bytes, sm: int = 90) -> bytes:
    head = struct.pack("<HHIQ", kind, 0, 64, len(payload)) + bytes(8)
    head += struct.pack("<HHI", 0, 9, sm) + bytes(64 - 32)
    return head + payload


def test_fatbin_with_a_huge_entry_count() -> None:
    """200,000 empty PTX entries (12.8 MB): refused at the entry cap."""
    data = _fatbin([_entry(1, b"")] * 200_000)
    refused(
        bounded(lambda: read_fatbin(BytesSource(data))),
        "fatbin entries",
        str(cuda.MAX_FATBIN_ENTRIES),
    )


def test_fatbin_entry_whose_size_loops_back() -> None:
    """An entry size that a 64-bit C reader would wrap back to the same entry."""
    loop = bytearray(_entry(1, b""))
    struct.pack_into("<Q", loop, 8, (1 << 64) - 64)
    data = _fatbin([bytes(loop), _entry(1, b"")])
    refused(bounded(lambda: read_fatbin(BytesSource(data))), "fatbin entry")


def test_fatbin_of_cubins_with_many_sections() -> None:
    """Entries each carrying a cubin of 4,000 sections: the cubins of one fatbin share one
    section budget, so entries x sections stays bounded."""
    cubin = elf_bytes([Sec(f"s{i}", 1) for i in range(4000)], machine=elf.EM_CUDA, abi=8)
    data = _fatbin([_entry(2, cubin)] * 200)
    refused(bounded(lambda: read_fatbin(BytesSource(data))), "sections", str(elf.MAX_SECTIONS))


def test_instruction_scan_of_a_sparse_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .text declared 1 GB (sparse): only the first MAX_SCAN_BYTES are read (set small here:
    decoding 64 MB of zeros is slow, reading 1 GB was the bug)."""
    pytest.importorskip("iced_x86")
    monkeypatch.setattr(x86, "MAX_SCAN_BYTES", 1 << 16)
    size = 1 << 30
    base = elf_bytes([Sec(".text", 1, size=size, offset=SPARSE_AT)])
    path = sparse(tmp_path / "text.so", base, SPARSE_AT + size)

    def read() -> Any:
        with open_file(path) as source:
            return x86.scan_elf(ElfFile(source))

    scan = bounded(read)
    assert (scan.scanned_bytes, scan.text_bytes, scan.complete) == (1 << 16, size, False)


# --- end to end -------------------------------------------------------------------------------


def _package_with(tmp_path: Path, so: bytes) -> Path:
    """torch 2.14's CPU package (stub binaries) with `so` as its wrapper .so (zip, STORED)."""
    members = [
        (name, so if name.endswith(".wrapper.so") else data)
        for name, data in read_members(CPU_PACKAGE)
    ]
    return write_members(tmp_path / "hostile.pt2", members)


def test_cli_reports_the_hostile_so(tmp_path: Path) -> None:
    """`inspect` (exit 0: it reports, it does not judge), `check --static-only` (exit 1: the
    AOT050 error) and `--target libtorch=` over a library with the same table (exit 2: a usage
    error naming the library) each end in seconds, with one clear line and no traceback."""
    so = verneed_so(shared_aux(3000, 3000))
    package = _package_with(tmp_path, so)
    lib = tmp_path / "libtorch" / "lib"
    lib.mkdir(parents=True)
    (lib / "libtorch_cpu.so").write_bytes(so)
    cases = [
        (["inspect", str(package)], 0),
        (["check", str(package), "--static-only", "--no-config"], 1),
        (
            [
                "check",
                str(package),
                "--static-only",
                "--no-config",
                "--target",
                f"cpu,libtorch={lib.parent}",
            ],
            2,
        ),
    ]
    for i, (args, code) in enumerate(cases):
        run = run_aotipre(args, workdir=tmp_path / f"run{i}", timeout_s=CLI_TIMEOUT_S)
        where = f"{args[0]}: exit {run.returncode}, stderr {run.stderr[-600:]!r}"
        assert not run.killed and "Traceback" not in run.stderr, where
        assert run.returncode == code, where
        assert run.peak_rss_mb <= RSS_BOUND_MB, f"{where}; peak RSS {run.peak_rss_mb:.0f} MB"
        if code == 2:
            assert run.stderr.startswith("aotipre: error: ") and "libtorch_cpu.so" in run.stderr
            assert "version-needs" in run.stderr and len(run.stderr.splitlines()) == 1
        else:
            text = " ".join(run.stdout.split())
            assert "AOT050" in text and "version-needs" in text, run.stdout[-2000:]
