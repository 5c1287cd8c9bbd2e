"""A small, bounded ELF64 reader (standard library only): sections, dynamic entries, version
needs and definitions, dynamic and static symbols, notes.

Why not pyelftools: importing it costs ~45 ms, a fifth of the static lane's whole budget, and
aotipre needs only these few tables. Nothing here loads or runs the file. Every count and size
is bounded before it is read (the members are untrusted); every failure is an ElfError with one
line. Little-endian ELF64 only: x86-64 and aarch64 shared objects and CUDA cubins are all that.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from aotipre.binaries.source import Source, SourceError

MAX_SECTIONS = 4096
MAX_SEGMENTS = 4096
MAX_SYMBOLS = 4_000_000
"""libtorch_cpu.so exports about 200,000 symbols; a package .so a few thousand."""
MAX_TABLE_BYTES = 256 * 1024 * 1024
"""Largest string or symbol table read into memory (libtorch_cpu.so's .dynstr is ~30 MB)."""
MAX_DYNAMIC = 100_000
MAX_VERSION_ENTRIES = 10_000

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


@dataclass(frozen=True)
class Symbol:
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
        names = b""
        if 0 < shstrndx < shnum:
            h = headers[shstrndx]
            names = self._bytes_at(h[4], min(h[5], 1 << 20), "the section name table")
        out = []
        for h in headers:
            out.append(
                Section(
                    name=_cstr(names, h[0]),
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

    def section_bytes(self, section: Section, limit: int = MAX_TABLE_BYTES) -> bytes:
        """The contents of a section (empty for NOBITS); ElfError when larger than `limit`."""
        if section.type == SHT_NOBITS or section.size == 0:
            return b""
        if section.size > limit:
            raise ElfError(
                f"section {section.name} is {section.size} bytes, more than aotipre reads ({limit})"
            )
        return self._bytes_at(section.offset, section.size, f"section {section.name}")

    def _bytes_at(self, offset: int, size: int, what: str) -> bytes:
        return _read(self.source, offset, size, what)

    def _linked(self, section: Section) -> bytes:
        if not 0 < section.link < len(self.sections):
            raise ElfError(f"section {section.name} links to no string table")
        return self.section_bytes(self.sections[section.link])

    # ---------------------------------------------------------------- dynamic

    def dynamic_entries(self) -> list[tuple[int, int]]:
        sec = self._of_type(SHT_DYNAMIC)
        if sec is None:
            return []
        if sec.size > MAX_DYNAMIC * _DYN.size:
            raise ElfError(f"the dynamic section is {sec.size} bytes (too large)")
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
        strings = self._linked(sec)
        return tuple(_cstr(strings, v) for tag, v in self.dynamic_entries() if tag == DT_NEEDED)

    def version_needs(self) -> dict[str, tuple[str, ...]]:
        """SHT_GNU_verneed: library -> the symbol versions it must define (GLIBC_2.34, ...)."""
        out: dict[str, list[str]] = {}
        for library, name, _index in self._verneed():
            out.setdefault(library, []).append(name)
        return {k: tuple(v) for k, v in out.items()}

    def version_definitions(self) -> tuple[str, ...]:
        """SHT_GNU_verdef: the symbol versions this library defines (libc: GLIBC_2.2.5...)."""
        return tuple(name for name, _index in self._verdef())

    def _version_entries(
        self, sh_type: int, fmt: str, what: str
    ) -> Iterator[tuple[tuple[int, ...], int, bytes, bytes]]:
        """(header fields, offset, section bytes, linked string table) of each entry of a GNU
        version section, following each entry's last field (the offset of the next one); at
        most MAX_VERSION_ENTRIES whatever its sh_info claims."""
        sec = self._of_type(sh_type)
        if sec is None:
            return
        data, strings = self.section_bytes(sec), self._linked(sec)
        offset = 0
        for _ in range(min(sec.info or MAX_VERSION_ENTRIES, MAX_VERSION_ENTRIES)):
            fields = _unpack(fmt, data, offset, what)
            yield fields, offset, data, strings
            if fields[-1] == 0:
                break
            offset += fields[-1]

    def _verneed(self) -> list[tuple[str, str, int]]:
        """(library, version name, version index) of each SHT_GNU_verneed entry."""
        out = []
        for head, offset, data, strings in self._version_entries(
            SHT_GNU_VERNEED, "<HHIII", "version-needs"
        ):
            _v, cnt, file_off, aux, _next = head
            library = _cstr(strings, file_off)
            at = offset + aux
            for _ in range(min(cnt, MAX_VERSION_ENTRIES)):
                _h, _fl, index, name_off, anext = _unpack("<IHHII", data, at, "version-needs")
                out.append((library, _cstr(strings, name_off), index & 0x7FFF))
                if anext == 0:
                    break
                at += anext
        return out

    def _verdef(self) -> list[tuple[str, int]]:
        """(version name, version index) of each SHT_GNU_verdef entry."""
        out = []
        for head, offset, data, strings in self._version_entries(
            SHT_GNU_VERDEF, "<HHHHIII", "version-definitions"
        ):
            _v, _fl, index, cnt, _h, aux, _next = head
            if cnt:
                (name_off,) = _unpack("<I", data, offset + aux, "version-definitions")
                out.append((_cstr(strings, name_off), index & 0x7FFF))
        return out

    # ---------------------------------------------------------------- symbols

    def dynamic_symbols(self) -> list[Symbol]:
        """Every .dynsym entry (index 0 skipped), with its version name when versioned."""
        sec = self._of_type(SHT_DYNSYM)
        if sec is None:
            return []
        versions = self._version_names(sec)
        return self._symbols(sec, versions)

    def static_symbols(self) -> list[Symbol]:
        """.symtab entries (absent from a stripped file)."""
        sec = self._of_type(SHT_SYMTAB)
        return [] if sec is None else self._symbols(sec, None)

    def _symbols(self, sec: Section, versions: list[str | None] | None) -> list[Symbol]:
        if sec.entsize not in (0, _SYM.size):
            raise ElfError(f"section {sec.name}: symbol size {sec.entsize}")
        count = sec.size // _SYM.size
        if count > MAX_SYMBOLS:
            raise ElfError(f"{count} symbols in {sec.name}, more than aotipre reads")
        data = self.section_bytes(sec)
        strings = self._linked(sec)
        out = []
        for i, (name, info, _other, shndx, value, size) in enumerate(
            _SYM.iter_unpack(data[: count * _SYM.size])
        ):
            if i == 0:
                continue
            version = versions[i] if versions is not None and i < len(versions) else None
            out.append(
                Symbol(
                    name=_cstr(strings, name),
                    value=value,
                    size=size,
                    bind=info >> 4,
                    type=info & 0xF,
                    defined=shndx != 0,
                    version=version,
                )
            )
        return out

    def _version_names(self, dynsym: Section) -> list[str | None] | None:
        versym = self._of_type(SHT_GNU_VERSYM)
        if versym is None:
            return None
        index = self._version_index()
        raw = self.section_bytes(versym)
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
        while offset + 12 <= len(data) and len(out) < 1000:
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


def _cstr(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", errors="replace")


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
