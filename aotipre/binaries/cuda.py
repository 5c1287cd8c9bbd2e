"""What GPU code a package carries: SASS architectures, PTX targets and PTX ISA versions, read
from `.cubin` (a CUDA ELF) and `.fatbin` (NVIDIA's container) members without loading them.

Formats, as measured on files made by nvcc/ptxas/fatbinary 13.0 (tests/binaries/data/):

- cubin: ELF64, e_machine 190 (EM_CUDA). ELF ABI version 8 (CUDA 12.8+ tools) keeps the SM in
  e_flags bits 8-15 (0x5a = sm_90); older files keep it in bits 0-7, with 0x800 marking an
  arch-specific `a` target. The `.note.nv.tkinfo` note holds the producing tool, its release
  ("Cuda compilation tools, release 13.0") and the command line (`-arch sm_90a`), which is the
  only place an ABI-8 file says `sm_90a` rather than `sm_90`.
- fatbin: header {u32 magic 0xBA55ED50, u16 version, u16 header size, u64 size of the entries};
  each entry {u16 kind (1 PTX, 2 ELF), u16, u32 header size, u64 payload size, ..., at +24 u16
  minor and u16 major of the PTX ISA (PTX entries), at +28 u32 SM, at +40 flags (0x2000 LZ4,
  0x8000 zstd compressed payload; 0x100000 an arch-specific `a` target, 0x200000 a
  family-specific `f` one, SASS and PTX alike: cuobjdump's `arch = sm_90a`)}. Triton's PTX for
  an H100/H200 is `.target sm_90a`: torch's multi-arch fatbins there carry compute_90a PTX.

Which device runs what (CUDA C programming guide, "binary compatibility"): SASS for sm_XY runs
on compute capability X.Z with Z >= Y; an arch-specific sm_XYa only on X.Y; PTX for compute_XY
is JIT-compiled by the driver for any X.Y or newer (compute_XYa: X.Y only; a family-specific
sm_XYf or compute_XYf: X.Z with Z >= Y), and only by a driver at least as new as the toolkit
whose PTX ISA it uses.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from aotipre.binaries.elf import EM_CUDA, MAX_SECTIONS, ElfError, ElfFile
from aotipre.binaries.source import Source, SourceError

FATBIN_MAGIC = 0xBA55ED50
MAX_FATBIN_ENTRIES = 256
"""Entries of one fatbin (real: a multi-arch AOTI kernel holds a SASS and a PTX entry per
architecture, 2 in the torch 2.11 fixture, 3 in tests/binaries/data/multi.fatbin). The cubins
of one fatbin also share one budget of MAX_SECTIONS sections: entries x sections stays bounded."""
_FATBIN_HEADER = struct.Struct("<IHHQ")
_ENTRY_ARCH_SUFFIX = ((0x100000, "a"), (0x200000, "f"))
"""Fatbin entry flag -> the suffix of the entry's SM (measured on nvcc 13.0 fatbins of sm_90a,
sm_100f and sm_90 SASS and PTX: only these bits differ)."""
_ENTRY_HEAD = struct.Struct("<HHIQ")

PTX_ISA_TOOLKIT = {
    (7, 0): "11.0", (7, 1): "11.1", (7, 2): "11.2", (7, 3): "11.3", (7, 4): "11.4",
    (7, 5): "11.5", (7, 6): "11.6", (7, 7): "11.7", (7, 8): "11.8", (8, 0): "12.0",
    (8, 1): "12.1", (8, 2): "12.2", (8, 3): "12.3", (8, 4): "12.4", (8, 5): "12.5",
    (8, 6): "12.8", (8, 7): "12.8", (8, 8): "12.9", (9, 0): "13.0", (9, 1): "13.1",
    (9, 2): "13.2",
}  # fmt: skip
"""PTX ISA version -> the first public CUDA release that reads it (PTX ISA release notes,
"PTX Release History"; 8.6 came with 12.7, which was never released; 9.2 is CUDA 13.2, the
default CUDA of torch 2.15's wheels)."""

TOOLKIT_DRIVER = {
    "11.0": "450.36.06", "11.1": "455.23", "11.2": "460.27.03", "11.3": "465.19.01",
    "11.4": "470.42.01", "11.5": "495.29.05", "11.6": "510.39.01", "11.7": "515.43.04",
    "11.8": "520.61.05", "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03",
    "12.3": "545.23.06", "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03",
    "12.8": "570.26", "12.9": "575.51.03", "13.0": "580.65.06", "13.1": "590.44.01",
    "13.2": "595.45.04",
}  # fmt: skip
"""CUDA release -> the Linux driver it shipped with (CUDA release notes, table 3). A driver
JIT-compiles PTX only of an ISA it knows: the PTX's toolkit release needs at least this driver."""

MAJOR_DRIVER = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}
"""CUDA major -> the oldest driver that runs SASS built by any release of it (minor version
compatibility; CUDA compatibility guide)."""


class CudaBinaryError(Exception):
    """A .cubin or .fatbin member that cannot be read (one line)."""


@dataclass(frozen=True)
class GpuImage:
    """One piece of GPU code: SASS for one SM, or PTX for one virtual architecture."""

    kind: str
    """sass or ptx."""
    arch: str
    """e.g. `90`, `90a`, `100f`."""
    ptx_version: tuple[int, int] | None = None
    """PTX entries: the PTX ISA version (from the fatbin entry header)."""
    toolkit: str | None = None
    """SASS from a cubin with a tkinfo note: the producing CUDA release, e.g. `13.0`."""

    @property
    def label(self) -> str:
        return f"sm_{self.arch}" if self.kind == "sass" else f"compute_{self.arch}"

    def runs_on(self, cc: str) -> bool:
        """Can a device of compute capability `cc` ('9.0') run this image?"""
        major, minor = _cc_pair(cc)
        digits = re.match(r"(\d+)", self.arch)
        if digits is None:
            return False
        n = int(digits.group(1))
        a_major, a_minor = divmod(n, 10)
        specific = self.arch.endswith("a")
        if specific:
            return (major, minor) == (a_major, a_minor)
        if self.kind == "sass" or self.arch.endswith("f"):  # f: its family, SASS or PTX
            return major == a_major and minor >= a_minor
        return (major, minor) >= (a_major, a_minor)

    def min_driver(self) -> str | None:
        """The oldest Linux driver that can run this image (None when unknown)."""
        if self.kind == "ptx" and self.ptx_version is not None:
            toolkit = PTX_ISA_TOOLKIT.get(self.ptx_version)
            if toolkit is None:  # newer than the table: at least the newest release known
                newer = max(PTX_ISA_TOOLKIT)
                if self.ptx_version > newer:
                    return TOOLKIT_DRIVER[PTX_ISA_TOOLKIT[newer]]
                return None
            return TOOLKIT_DRIVER.get(toolkit)
        if self.kind == "sass" and self.toolkit:
            return MAJOR_DRIVER.get(self.toolkit.split(".")[0])
        return None

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "arch": self.arch,
            "ptx_version": None
            if self.ptx_version is None
            else ".".join(map(str, self.ptx_version)),
            "toolkit": self.toolkit,
        }


def read_cubin(source: Source) -> GpuImage:
    """The SASS image of a cubin (ELF, e_machine EM_CUDA)."""
    try:
        elf = ElfFile(source)
    except ElfError as exc:
        raise CudaBinaryError(f"not a cubin: {exc}") from None
    return _cubin_image(elf)


def _cubin_image(elf: ElfFile) -> GpuImage:
    if elf.header.machine != EM_CUDA:
        raise CudaBinaryError(f"an ELF file for {elf.header.machine_name}, not a CUDA cubin")
    flags = elf.header.flags
    if elf.header.abi_version >= 8:
        sm, specific = (flags >> 8) & 0xFF, False
    else:
        sm, specific = flags & 0xFF, bool(flags & 0x800)
    arch = f"{sm}{'a' if specific else ''}"
    toolkit = None
    try:
        notes = elf.notes(".note.nv.tkinfo")
    except ElfError:
        notes = []
    for _owner, _type, desc in notes:
        text = desc.decode("latin-1")
        release = re.search(r"release (\d+\.\d+)", text)
        if release:
            toolkit = release.group(1)
        named = re.search(r"-arch[= ]+sm_(\d+[af]?)\b", text)
        if named and named.group(1).rstrip("af") == str(sm):
            arch = named.group(1)
    return GpuImage("sass", arch, toolkit=toolkit)


def read_fatbin(source: Source) -> tuple[GpuImage, ...]:
    """The SASS and PTX images of a fatbin container."""
    head = _read(source, 0, _FATBIN_HEADER.size)
    magic, _version, header_size, entries_size = _FATBIN_HEADER.unpack(head)
    if magic != FATBIN_MAGIC:
        raise CudaBinaryError(f"not a fatbin (magic {magic:#x}, expected {FATBIN_MAGIC:#x})")
    if header_size < _FATBIN_HEADER.size or header_size + entries_size > source.size:
        raise CudaBinaryError(
            f"the fatbin header says {header_size}+{entries_size} bytes, the member has "
            f"{source.size} (truncated?)"
        )
    out: list[GpuImage] = []
    offset = header_size
    end = header_size + entries_size
    entries = sections = 0  # sections: of the embedded cubins together
    while offset < end:
        entries += 1
        if entries > MAX_FATBIN_ENTRIES:
            raise CudaBinaryError(
                f"more than {MAX_FATBIN_ENTRIES} fatbin entries, more than aotipre reads"
            )
        kind, _ver, entry_header, payload = _ENTRY_HEAD.unpack(
            _read(source, offset, _ENTRY_HEAD.size)
        )
        if entry_header < 32 or offset + entry_header + payload > end:
            raise CudaBinaryError(f"fatbin entry at byte {offset} runs past the container")
        minor, major, sm = struct.unpack("<HHI", _read(source, offset + 24, 8))
        flags = struct.unpack("<I", _read(source, offset + 40, 4))[0] if entry_header >= 44 else 0
        arch = str(sm) + "".join(suffix for bit, suffix in _ENTRY_ARCH_SUFFIX if flags & bit)
        if kind == 1:
            out.append(GpuImage("ptx", arch, ptx_version=(major, minor)))
        elif kind == 2:
            image = GpuImage("sass", arch)
            if not flags & 0xA000:  # an uncompressed cubin says more about itself
                try:
                    cubin = ElfFile(_Slice(source, offset + entry_header, payload))
                    sections += len(cubin.sections)
                    image = _cubin_image(cubin)
                except (ElfError, CudaBinaryError):
                    pass
                if sections > MAX_SECTIONS:
                    raise CudaBinaryError(
                        f"the cubins of this fatbin have more than {MAX_SECTIONS} sections "
                        "together, more than aotipre reads"
                    )
            out.append(image)
        offset += entry_header + payload
    return tuple(out)


class _Slice:
    def __init__(self, source: Source, start: int, size: int) -> None:
        self._source, self._start, self.size = source, start, size

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or offset + length > self.size:
            raise SourceError(f"reads past the end of a fatbin entry ({self.size} bytes)")
        return self._source.read(self._start + offset, length)


def _read(source: Source, offset: int, length: int) -> bytes:
    if offset + length > source.size:
        raise CudaBinaryError(
            f"truncated: needs bytes {offset}..{offset + length}, the member has {source.size}"
        )
    try:
        return source.read(offset, length)
    except SourceError as exc:
        raise CudaBinaryError(str(exc)) from None


def _cc_pair(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)
