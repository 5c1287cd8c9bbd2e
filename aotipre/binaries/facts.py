"""The facts a model's compiled members state about what they need, gathered without loading
them: per shared object its NEEDED libraries, symbol versions, imports, entry points and the
compiler flags it was built with; per cubin/fatbin its GPU images. Cheap (tables and headers
only); the instruction scan (aotipre.binaries.x86) runs later and only when a target needs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aotipre.binaries.elf import STB_WEAK, ElfError, ElfFile, highest
from aotipre.binaries.source import SourceError, open_member
from aotipre.pt2.archive import Archive

if TYPE_CHECKING:
    from aotipre.binaries.cuda import GpuImage

MAX_PRODUCER_SCAN = 16 * 1024 * 1024
"""Most bytes of .debug_str / .comment searched for the compiler's command line."""
_PRODUCER = re.compile(rb"GNU C(?:\+\+)?[0-9]* [0-9][0-9.]* ([^\x00]{0,8192})")

# gcc -m<name> -> /proc/cpuinfo flag (the extensions whose absence can stop a package)
GCC_FLAGS = {
    "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "popcnt": "popcnt",
    "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "bmi": "bmi1", "bmi2": "bmi2",
    "lzcnt": "abm", "movbe": "movbe", "avx512f": "avx512f", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512bw": "avx512bw", "avx512cd": "avx512cd",
    "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2", "avx512ifma": "avx512ifma",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avxvnni": "avx_vnni", "amx-tile": "amx_tile", "amx-bf16": "amx_bf16",
    "amx-int8": "amx_int8", "amx-fp16": "amx_fp16", "gfni": "gfni", "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq", "sha": "sha_ni", "aes": "aes", "pclmul": "pclmulqdq",
    "adx": "adx", "rdrnd": "rdrand", "rdseed": "rdseed",
}  # fmt: skip


@dataclass(frozen=True)
class CompileFlags:
    """The CPU target a shared object was compiled for (from its DWARF producer string)."""

    march: str | None
    """The resolved -march (gcc resolves -march=native, e.g. `rocketlake`)."""
    enabled: tuple[str, ...]
    """/proc/cpuinfo flags of the extensions the compiler was allowed to use."""
    source: str
    """Where they were read: `.debug_str`, `.comment`."""


@dataclass(frozen=True)
class SharedObject:
    """One compiled `.so` of a model."""

    member: str
    machine: str | None = None
    needed: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    """Every symbol version it needs (GLIBC_2.34, GLIBCXX_3.4.30, CXXABI_1.3.9, ...)."""
    imports: tuple[str, ...] = ()
    """Undefined, non-weak, unversioned symbols: what libtorch (and others) must export."""
    entry_points: tuple[str, ...] = ()
    """The `AOTInductor*` functions it defines (they fingerprint the producing torch)."""
    flags: CompileFlags | None = None
    error: str | None = None
    """Why it could not be read as an ELF shared object."""

    @property
    def glibc(self) -> str | None:
        return highest(self.versions, "GLIBC_")

    @property
    def glibcxx(self) -> str | None:
        return highest(self.versions, "GLIBCXX_")

    @property
    def cxxabi(self) -> str | None:
        return highest(self.versions, "CXXABI_")

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "machine": self.machine,
            "needed": list(self.needed),
            "glibc": self.glibc,
            "glibcxx": self.glibcxx,
            "cxxabi": self.cxxabi,
            "shim_imports": sum(1 for s in self.imports if s.startswith("aoti_")),
            "imports": len(self.imports),
            "entry_points": len(self.entry_points),
            "march": self.flags.march if self.flags else None,
            "compiled_for": list(self.flags.enabled) if self.flags else None,
            "error": self.error,
        }


@dataclass(frozen=True)
class GpuMember:
    """One `.cubin` or `.fatbin` member and the GPU images it holds."""

    member: str
    images: tuple[GpuImage, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "images": [i.to_dict() for i in self.images],
            "error": self.error,
        }


@dataclass(frozen=True)
class BinaryFacts:
    """Everything read from one model's compiled members."""

    shared_objects: tuple[SharedObject, ...] = ()
    gpu: tuple[GpuMember, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "shared_objects": [s.to_dict() for s in self.shared_objects],
            "gpu": [g.to_dict() for g in self.gpu],
        }


def read_binary_facts(
    archive: Archive, shared: tuple[str, ...], gpu: tuple[str, ...]
) -> BinaryFacts:
    """Facts of the given members (`.so`; `.cubin`/`.fatbin`). Never raises for a bad member:
    its record carries the one-line reason."""
    if not shared and not gpu:
        return BinaryFacts()
    sos = tuple(_shared_object(archive, m) for m in shared)
    gpus = tuple(_gpu_member(archive, m) for m in gpu if not m.endswith(".spv"))
    return BinaryFacts(sos, gpus)


def _shared_object(archive: Archive, member: str) -> SharedObject:
    try:
        with open_member(archive, member) as source:
            elf = ElfFile(source)
            symbols = elf.dynamic_symbols()
            versions = sorted({v for vs in elf.version_needs().values() for v in vs})
            return SharedObject(
                member=member,
                machine=elf.header.machine_name,
                needed=elf.needed(),
                versions=tuple(versions),
                imports=tuple(
                    sorted(
                        s.name
                        for s in symbols
                        if not s.defined and s.bind != STB_WEAK and s.version is None and s.name
                    )
                ),
                entry_points=tuple(
                    sorted(s.name for s in symbols if s.defined and _is_entry_point(s.name))
                ),
                flags=_compile_flags(elf),
            )
    except (ElfError, SourceError, KeyError) as exc:
        return SharedObject(member=member, error=str(exc))


def _is_entry_point(name: str) -> bool:
    return name.startswith("AOTInductor") and name.isidentifier()


def _compile_flags(elf: ElfFile) -> CompileFlags | None:
    for name in (".debug_str", ".comment", ".debug_info"):
        sec = elf.section(name)
        if sec is None or sec.size == 0:
            continue
        try:
            data = elf.source.read(sec.offset, min(sec.size, MAX_PRODUCER_SCAN))
        except (SourceError, ValueError):
            continue
        found = _PRODUCER.search(data)
        if found:
            return parse_flags(found.group(1).decode("latin-1"), name)
    return None


def parse_flags(command: str, source: str) -> CompileFlags:
    """-march=X and the -m<ext> / -mno-<ext> switches of a compiler command line, in order."""
    march = None
    enabled: dict[str, bool] = {}
    for word in command.split():
        if word.startswith("-march="):
            march = word.split("=", 1)[1]
        elif word.startswith("-mno-") and word[5:] in GCC_FLAGS:
            enabled[GCC_FLAGS[word[5:]]] = False
        elif word.startswith("-m") and word[2:] in GCC_FLAGS:
            enabled[GCC_FLAGS[word[2:]]] = True
    return CompileFlags(march, tuple(sorted(f for f, on in enabled.items() if on)), source)


def _gpu_member(archive: Archive, member: str) -> GpuMember:
    # imported here: only a package with GPU code reads cubins (the static lane's start-up time)
    from aotipre.binaries.cuda import CudaBinaryError, read_cubin, read_fatbin

    try:
        with open_member(archive, member) as source:
            head = source.read(0, min(4, source.size))
            if head == b"\x7fELF":
                return GpuMember(member, (read_cubin(source),))
            if head == b"\x50\xed\x55\xba":
                return GpuMember(member, read_fatbin(source))
            return GpuMember(member, error="neither a cubin (ELF) nor a fatbin (no magic number)")
    except (CudaBinaryError, SourceError, ElfError, KeyError) as exc:
        return GpuMember(member, error=str(exc))


class IsaScanner:
    """Decodes a package's `.so` members on demand (aotipre.binaries.x86), each at most once."""

    def __init__(self, package: str | Archive) -> None:
        """`package`: the package's open Archive (a check's one open), or its path."""
        self.package = package
        self._done: dict[str, Any] = {}

    def __call__(self, member: str) -> Any:
        from aotipre.binaries.x86 import IsaScan
        from aotipre.foundation.errors import PackageError
        from aotipre.pt2.archive import archive_at

        if member not in self._done:
            package = self.package
            path, held = (package, None) if isinstance(package, str) else (package.path, package)
            try:
                with archive_at(path, held) as archive:
                    self._done[member] = self._scan(archive, member)
            except (PackageError, SourceError, ElfError, KeyError, OSError) as exc:
                self._done[member] = IsaScan(0, error=f"{member} could not be read: {exc}")
        return self._done[member]

    @staticmethod
    def _scan(archive: Archive, member: str) -> Any:
        from aotipre.binaries.x86 import scan_elf

        with open_member(archive, member) as source:
            return scan_elf(ElfFile(source))
