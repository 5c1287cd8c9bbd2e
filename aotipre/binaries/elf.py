"""A small, bounded ELF64 reader (standard library only): sections, dynamic entries, version
needs and definitions, dynamic and static symbols, notes.

Why not pyelftools: importing it costs ~45 ms, a fifth of the static lane's whole budget, and
aotipre needs only these few tables. Nothing here loads or runs the file. The members are
untrusted, so the work is bounded by objects, not by the sizes a header declares: every table
has a cap on its entries (checked against the declared size before anything is read) and on
its bytes, every linked list is walked at most once per record, and the names decoded from a
string table share one byte budget. Every failure is an ElfError with one line. Little-endian
ELF64 only: x86-64 and aarch64 shared objects and CUDA cubins are all that.

The caps sit far above what real files need, measured over the 1,214 ELF files of this
repository's machine (Debian 12's /usr/lib and the torch 2.13 CPU venv): at most 64 sections
(libc.so.6), 51 dynamic entries, 75,415 dynamic symbols (libtorch_cpu.so, whose .dynstr of
5.2 MB is the largest string table and whose names take 5.1 MB), 60 version-need records
(libtorch_cpu.so: 9 libraries, 51 versions) and 63 version definitions (libnss3.so).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from aotipre.binaries.source import Source, SourceError

MAX_SECTIONS = 4096
"""Section headers of one file (real: at most 64)."""
MAX_SEGMENTS = 4096
MAX_SYMBOLS = 500_000
"""Entries of one symbol table (real: libtorch_cpu.so has 75,415 dynamic symbols, a package .so
a few thousand; libtorch_cpu.so's 530,468 static ones are never read: aotipre reads .symtab only
of a package's own .so)."""
MAX_TABLE_BYTES = 32 * 1024 * 1024
"""Largest table read into memory (real: libtorch_cpu.so's .dynstr, 5.2 MB)."""
MAX_NAME_BYTES = 32 * 1024 * 1024
"""Bytes of names decoded from one string table by one read (real: libtorch_cpu.so's dynamic
symbol names, 5.1 MB). Names at many offsets of a table without NULs would each run to its end."""
MAX_DYNAMIC_ENTRIES = 4096
"""Entries of the dynamic section (real: at most 51)."""
MAX_VERSION_RECORDS = 4096
"""Records of one GNU version table: version-need entries and their vernaux records together,
or version definitions (real: at most 63)."""
MAX_NOTES = 1024
"""Notes of one note section (a cubin's .note.nv.tkinfo holds one)."""

ELF_MAGIC = b"\x7fELF"
EM_X86_64 = 62
EM_AARCH64 = 183
EM_CUDA = 190
MACHINES = {EM_X86_64: "x86_64", EM_AARCH64: "aarch64", EM_CUDA: "cuda", 3: "i386", 40: "arm"}

SHT_SYMTAB, SHT_STRTAB, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 3, 6, 7, 8, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_NEEDED, DT_SONAME = 1, 14
ET_DYN, PT_LOAD = 3, 1
STB_WEAK = 2
STT_FUNC = 2

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_DYN = struct.Struct("<qQ")


class ElfError(Exception):
    """The bytes are not a readable ELF file (one line)."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True, slots=True)
class Symbol:
    """One symbol table entry (slots: a table may hold up to MAX_SYMBOLS of them)."""

    name: str
    value: int
    size: int
    bind: int
    type: int
    defined: bool
    version: str | None = None
    """For dynamic symbols: the version it needs (undefined) or defines, e.g. GLIBC_2.34."""


@dataclass(frozen=True)
class ElfHeader:
    machine: int
    osabi: int
    abi_version: int
    elf_type: int
    flags: int

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")


class ElfFile:
    """One parsed ELF file over a Source; tables are read when first asked for."""

    def __init__(self, source: Source) -> None:
        self.source = source
        if source.size < _EHDR.size:
            raise ElfError(f"too short for an ELF file ({source.size} bytes)")
        head = _read(source, 0, _EHDR.size)
        if head[:4] != ELF_MAGIC:
            raise ElfError("not an ELF file (no \\x7fELF magic)")
        if head[4] != 2 or head[5] != 1:
            raise ElfError(
                f"unsupported ELF class/byte order ({head[4]}/{head[5]}); only 64-bit "
                "little-endian is read"
            )
        f = _EHDR.unpack(head)
        self.header = ElfHeader(
            machine=f[2], osabi=head[7], abi_version=head[8], elf_type=f[1], flags=f[7]
        )
        self._check_segments(f[5], f[9], f[10])
        shoff, shentsize, shnum, shstrndx = f[6], f[11], f[12], f[13]
        self.sections = self._read_sections(shoff, shentsize, shnum, shstrndx)

    def _check_segments(self, phoff: int, phentsize: int, phnum: int) -> None:
        """What the dynamic loader reads first: the program headers, and the file bytes of each
        loadable segment, inside the file (dlopen says `cannot read file data` otherwise)."""
        if phnum == 0:
            if self.header.elf_type == ET_DYN:
                raise ElfError("a shared object without program headers: nothing to load")
            return
        if phentsize != _PHDR.size:
            raise ElfError(f"program header size {phentsize}, expected {_PHDR.size}")
        if phnum > MAX_SEGMENTS:
            raise ElfError(f"{phnum} program headers, more than aotipre reads ({MAX_SEGMENTS})")
        raw = _read(self.source, phoff, phnum * _PHDR.size, "the program header table")
        for i, h in enumerate(_PHDR.iter_unpack(raw)):
            kind, offset, filesz = h[0], h[2], h[5]
            if kind == PT_LOAD and offset + filesz > self.source.size:
                raise ElfError(
                    f"loadable segment {i} ({offset}+{filesz} bytes) lies past the end of the "
                    f"file ({self.source.size} bytes; truncated?)"
                )

    # ---------------------------------------------------------------- sections

    def _read_sections(
        self, shoff: int, shentsize: int, shnum: int, shstrndx: int
    ) -> tuple[Section, ...]:
        if shoff == 0 or shnum == 0:
            return ()
        if shentsize != _SHDR.size:
            raise ElfError(f"section header size {shentsize}, expected {_SHDR.size}")
        if shnum > MAX_SECTIONS:
            raise ElfError(f"{shnum} sections, more than aotipre reads ({MAX_SECTIONS})")
        raw = _read(self.source, shoff, shnum * _SHDR.size, "the section headers")
        headers = list(_SHDR.iter_unpack(raw))
        table = b""
        if 0 < shstrndx < shnum:
            h = headers[shstrndx]
            table = self._bytes_at(h[4], min(h[5], 1 << 20), "the section name table")
        names = _Names(table, "the section names")
        out = []
        for h in headers:
            out.append(
                Section(
                    name=names(h[0]),
                    type=h[1],
                    flags=h[2],
                    addr=h[3],
                    offset=h[4],
                    size=h[5],
                    link=h[6],
                    info=h[7],
                    entsize=h[9],
                )
            )
        return tuple(out)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def _of_type(self, kind: int) -> Section | None:
        return next((s for s in self.sections if s.type == kind), None)

    def section_bytes(
        self, section: Section, limit: int = MAX_TABLE_BYTES, *, prefix: bool = False
    ) -> bytes:
        """The contents of a section (empty for NOBITS). One larger than `limit` is an ElfError,
        or with `prefix` gives its first `limit` bytes (never more bytes than asked for: a
        sparse file can declare terabytes)."""
        if section.type == SHT_NOBITS or section.size == 0:
            return b""
        size = section.size
        if size > limit:
            if not prefix:
                raise ElfError(
                    f"section {section.name} is {size} bytes, more than aotipre reads ({limit})"
                )
            size = limit
        return self._bytes_at(section.offset, size, f"section {section.name}")

    def section_bytes_at(self, section: Section, start: int, size: int) -> bytes:
        """`size` bytes of a section from `start` (clipped to the section; at most
        MAX_TABLE_BYTES): for searching a large table piece by piece."""
        if section.type == SHT_NOBITS or start >= section.size:
            return b""
        size = min(size, section.size - start, MAX_TABLE_BYTES)
        return self._bytes_at(section.offset + start, size, f"section {section.name}")

    def _bytes_at(self, offset: int, size: int, what: str) -> bytes:
        return _read(self.source, offset, size, what)

    def _strings(self, section: Section) -> _Names:
        """The names of the string table `section` links to."""
        if not 0 < section.link < len(self.sections):
            raise ElfError(f"section {section.name} links to no string table")
        table = self.sections[section.link]
        return _Names(self.section_bytes(table), f"the names in {table.name}")

    # ---------------------------------------------------------------- dynamic

    def dynamic_entries(self) -> list[tuple[int, int]]:
        sec = self._of_type(SHT_DYNAMIC)
        if sec is None:
            return []
        count = sec.size // _DYN.size
        if count > MAX_DYNAMIC_ENTRIES:
            raise ElfError(
                f"{count} entries in the dynamic section, more than aotipre reads "
                f"({MAX_DYNAMIC_ENTRIES})"
            )
        data = self.section_bytes(sec)
        out = []
        for tag, value in _DYN.iter_unpack(data[: len(data) - len(data) % _DYN.size]):
            if tag == 0:
                break
            out.append((tag, value))
        return out

    def needed(self) -> tuple[str, ...]:
        """DT_NEEDED: the libraries the dynamic loader must find."""
        sec = self._of_type(SHT_DYNAMIC)
        if sec is None:
            return ()
        name = self._strings(sec)
        return tuple(name(v) for tag, v in self.dynamic_entries() if tag == DT_NEEDED)

    def version_needs(self) -> dict[str, tuple[str, ...]]:
        """SHT_GNU_verneed: library -> the symbol versions it must define (GLIBC_2.34, ...)."""
        out: dict[str, list[str]] = {}
        for library, name, _index in self._verneed():
            out.setdefault(library, []).append(name)
        return {k: tuple(v) for k, v in out.items()}

    def version_definitions(self) -> tuple[str, ...]:
        """SHT_GNU_verdef: the symbol versions this library defines (libc: GLIBC_2.2.5...)."""
        return tuple(name for name, _index in self._verdef())

    def _version_table(self, sh_type: int) -> tuple[Section, bytes, _Names] | None:
        """A GNU version section, its bytes and the names of its string table."""
        sec = self._of_type(sh_type)
        if sec is None:
            return None
        return sec, self.section_bytes(sec), self._strings(sec)

    def _verneed(self) -> list[tuple[str, str, int]]:
        """(library, version name, version index) of each SHT_GNU_verneed entry."""
        table = self._version_table(SHT_GNU_VERNEED)
        if table is None:
            return []
        sec, data, name = table
        seen: set[int] = set()
        out = []
        entries = _walk(data, 0, "<HHIII", "version-needs", seen, _entry_count(sec))
        for at, (_v, cnt, file_off, aux, _next) in entries:
            library = name(file_off)
            for _at, (_h, _fl, index, name_off, _n) in _walk(
                data, at + aux, "<IHHII", "version-needs", seen, cnt
            ):
                out.append((library, name(name_off), index & 0x7FFF))
        return out

    def _verdef(self) -> list[tuple[str, int]]:
        """(version name, version index) of each SHT_GNU_verdef entry. Only an entry's first
        verdaux record is read (the version's own name; the others name its parents), so its
        vda_next chain is never followed."""
        table = self._version_table(SHT_GNU_VERDEF)
        if table is None:
            return []
        sec, data, name = table
        out = []
        entries = _walk(data, 0, "<HHHHIII", "version-definitions", set(), _entry_count(sec))
        for at, (_v, _fl, index, cnt, _h, aux, _next) in entries:
            if cnt:
                (name_off,) = _unpack("<I", data, at + aux, "version-definitions")
                out.append((name(name_off), index & 0x7FFF))
        return out

    # ---------------------------------------------------------------- symbols

    def dynamic_symbols(self) -> list[Symbol]:
        """Every .dynsym entry (index 0 skipped), with its version name when versioned."""
        sec = self._of_type(SHT_DYNSYM)
        if sec is None:
            return []
        count = _symbol_count(sec)
        return self._symbols(sec, count, self._version_names(count))

    def static_symbols(self) -> list[Symbol]:
        """.symtab entries (absent from a stripped file)."""
        sec = self._of_type(SHT_SYMTAB)
        return [] if sec is None else self._symbols(sec, _symbol_count(sec), None)

    def _symbols(self, sec: Section, count: int, versions: list[str | None] | None) -> list[Symbol]:
        data = self.section_bytes(sec)
        name = self._strings(sec)
        out = []
        for i, (name_off, info, _other, shndx, value, size) in enumerate(
            _SYM.iter_unpack(data[: count * _SYM.size])
        ):
            if i == 0:
                continue
            version = versions[i] if versions is not None and i < len(versions) else None
            out.append(
                Symbol(
                    name=name(name_off),
                    value=value,
                    size=size,
                    bind=info >> 4,
                    type=info & 0xF,
                    defined=shndx != 0,
                    version=version,
                )
            )
        return out

    def _version_names(self, count: int) -> list[str | None] | None:
        """The version name of each of `count` dynamic symbols (.gnu.version holds one index a
        symbol; only `count` of them are read, whatever its size says)."""
        versym = self._of_type(SHT_GNU_VERSYM)
        if versym is None:
            return None
        index = self._version_index()
        raw = self.section_bytes(versym, 2 * count, prefix=True)
        ids = struct.unpack_from(f"<{len(raw) // 2}H", raw)
        return [index.get(i & 0x7FFF) for i in ids]

    def _version_index(self) -> dict[int, str]:
        """Version index (as used in .gnu.version) -> version name, from verneed and verdef."""
        out = {index: name for _library, name, index in self._verneed()}
        out.update({index: name for name, index in self._verdef()})
        return out

    # ---------------------------------------------------------------- notes

    def notes(self, section_name: str, limit: int = 1 << 20) -> list[tuple[str, int, bytes]]:
        """(owner, type, descriptor) of each note in a SHT_NOTE section."""
        sec = self.section(section_name)
        if sec is None:
            return []
        data = self.section_bytes(sec, limit)
        out: list[tuple[str, int, bytes]] = []
        offset = 0
        while offset + 12 <= len(data):
            if len(out) == MAX_NOTES:
                raise ElfError(
                    f"more than {MAX_NOTES} notes in {section_name}, more than aotipre reads"
                )
            namesz, descsz, ntype = struct.unpack_from("<III", data, offset)
            name_at = offset + 12
            desc_at = name_at + _align4(namesz)
            end = desc_at + _align4(descsz)
            if desc_at + descsz > len(data):
                break
            owner = data[name_at : name_at + namesz].rstrip(b"\0").decode("latin-1")
            out.append((owner, ntype, data[desc_at : desc_at + descsz]))
            offset = end
        return out


def _read(source: Source, offset: int, size: int, what: str = "the header") -> bytes:
    if offset < 0 or size < 0 or offset + size > source.size:
        raise ElfError(
            f"{what} lies past the end of the file ({offset}+{size} > {source.size} bytes; "
            "truncated?)"
        )
    try:
        return source.read(offset, size)
    except SourceError as exc:
        raise ElfError(str(exc)) from None


def _unpack(fmt: str, data: bytes, offset: int, table: str) -> tuple[int, ...]:
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > len(data):
        raise ElfError(f"the {table} table is truncated or its links point outside it")
    return struct.unpack_from(fmt, data, offset)


def _symbol_count(sec: Section) -> int:
    """The number of entries of a symbol table, checked before any of them is read."""
    if sec.entsize not in (0, _SYM.size):
        raise ElfError(f"section {sec.name}: symbol size {sec.entsize}")
    count = sec.size // _SYM.size
    if count > MAX_SYMBOLS:
        raise ElfError(f"{count} symbols in {sec.name}, more than aotipre reads ({MAX_SYMBOLS})")
    return count


def _entry_count(sec: Section) -> int:
    """How many entries a GNU version section has: its sh_info, or without one as many as its
    list holds (then at most MAX_VERSION_RECORDS, and one more is an error)."""
    return sec.info or MAX_VERSION_RECORDS + 1


def _walk(
    data: bytes, at: int, fmt: str, table: str, seen: set[int], count: int
) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(offset, fields) of up to `count` records of a GNU version table from byte `at`, each
    linked to the next by its last field (relative; 0 ends the list). `seen` holds the offsets
    read so far in the whole table: chains that loop or join, or more than MAX_VERSION_RECORDS
    records in all, are an ElfError, so a table costs at most one step per record (issue #30:
    records sharing one vernaux chain made the walk quadratic)."""
    for _ in range(count):
        if at in seen:
            raise ElfError(f"the {table} table links back to its record at byte {at}, already read")
        if len(seen) >= MAX_VERSION_RECORDS:
            raise ElfError(
                f"the {table} table has more than {MAX_VERSION_RECORDS} records, more than "
                "aotipre reads"
            )
        seen.add(at)
        fields = _unpack(fmt, data, at, table)
        yield at, fields
        if fields[-1] == 0:
            return
        at += fields[-1]


class _Names:
    """The names of one string table, decoded against one byte budget (MAX_NAME_BYTES): without
    it, names at many offsets of a table with no NUL would each run to its end."""

    def __init__(self, table: bytes, what: str) -> None:
        self._table = table
        self._what = what
        self._left = MAX_NAME_BYTES

    def __call__(self, offset: int) -> str:
        if not 0 <= offset < len(self._table):
            return ""
        end = self._table.find(b"\0", offset, offset + self._left + 1)
        if end < 0:
            end = len(self._table)  # the last name may lack its NUL
        if end - offset > self._left:
            raise ElfError(
                f"{self._what} take more than {MAX_NAME_BYTES} bytes, more than aotipre reads "
                "(a string table without NUL terminators?)"
            )
        self._left -= end - offset
        return self._table[offset:end].decode("utf-8", errors="replace")


def _align4(n: int) -> int:
    return (n + 3) & ~3


def version_key(version: str) -> tuple[int, ...]:
    """GLIBCXX_3.4.30 -> (3, 4, 30); GLIBC_2.2.5 -> (2, 2, 5); unparsable parts count as 0."""
    _, _, number = version.rpartition("_")
    out = []
    for part in number.split("."):
        out.append(int(part) if part.isdigit() else 0)
    return tuple(out)


def highest(versions: tuple[str, ...] | list[str], prefix: str) -> str | None:
    """The highest version named `<prefix><number>` (prefix `GLIBCXX_`, `GLIBC_`, `CXXABI_`)."""
    matching = [
        v for v in versions if v.startswith(prefix) and v[len(prefix) : len(prefix) + 1].isdigit()
    ]
    return max(matching, key=version_key) if matching else None
