"""The values of the weights a compiled model carries in its .so (the default:
aot_inductor.package_constants_in_so) or in a `wrapper_weights.blob` member, read in place and
digested per weight without loading any code: the release diff's WEIGHT_VALUES_CHANGED for
packages whose weights are not archive members.

Where torch puts them (torch/_inductor/codecache.py `_compile_consts`, runtime
aoti_runtime/model_base.h `load_constants`): the non-folded constants of wrapper.cpp's
`constants_info_`, in its order, each `data_size` bytes (already padded to 64 on CPU), back to
back between the symbols `_binary_constants_bin_start` and `_binary_constants_bin_end` (section
.lrodata, or .ldata when a buffer is mutated). Above 2 GB the weights are appended to the .so
file instead, page-aligned, followed by an 8-byte magic number, and the blob holds only (their
size + 8, that magic number) (`USE_MMAP_SELF`). With package_constants_on_disk_format=
"binary_blob" the blob member holds them from its first byte.
"""

from __future__ import annotations

import struct
import zlib

from aotipre.binaries.elf import SHT_NOBITS, ElfError, ElfFile
from aotipre.binaries.source import Source, SourceError, open_member
from aotipre.pt2.archive import Archive
from aotipre.pt2.spec import ModelInfo

START, END = "_binary_constants_bin_start", "_binary_constants_bin_end"
CHUNK_BYTES = 1 << 20
"""Bytes read at a time while digesting (memory stays bounded whatever a weight's size)."""
_MMAP_HEADER = struct.Struct("<qq")


def compiled_weight_digests(archive: Archive, model: ModelInfo) -> dict[str, tuple[int, int]] | str:
    """fqn -> (bytes, CRC-32 of those bytes) of each non-folded constant the compiled model
    carries in its .so or its weights blob member, streamed; or one line saying why its values
    cannot be read (its weights live elsewhere, the blob's size disagrees with wrapper.cpp, the
    .so is not a readable ELF file)."""
    aoti = model.aoti
    if aoti is None:
        return "no compiled code"
    stored = [c for c in model.constants if c.from_folded is not True]
    if any(c.data_size is None or c.data_size < 0 for c in stored):
        return "wrapper.cpp records no size for some constant"
    sizes = [(c.fqn or c.name, int(c.data_size or 0)) for c in stored]
    total = sum(n for _, n in sizes)
    try:
        if aoti.weights_blob is not None:
            with open_member(archive, aoti.weights_blob) as source:
                if source.size < total:
                    return (
                        f"the weights blob holds {source.size} bytes, wrapper.cpp's constants "
                        f"{total}"
                    )
                return _digests(source, 0, sizes)
        if aoti.weights_on_disk:
            return "the weights are stored outside the .so (weights_config.json)"
        if len(aoti.shared_objects) != 1:
            return f"{len(aoti.shared_objects)} compiled .so members (one expected)"
        with open_member(archive, aoti.shared_objects[0]) as source:
            found = _blob(source, total)
            if isinstance(found, str):
                return found
            return _digests(source, found, sizes)
    except (ElfError, SourceError, KeyError) as exc:
        return f"the .so cannot be read: {exc}"


def _blob(source: Source, total: int) -> int | str:
    """The file offset of the first constant's bytes, or why there is none that holds `total`."""
    elf = ElfFile(source)
    symbols = {s.name: s for s in elf.dynamic_symbols() if s.defined and s.name in (START, END)}
    if len(symbols) < 2:
        symbols = {s.name: s for s in elf.static_symbols() if s.defined and s.name in (START, END)}
    if len(symbols) < 2:
        return f"the .so has no {START}/{END} symbols (stripped, or not torch's layout)"
    start, end = symbols[START].value, symbols[END].value
    section = next(
        (
            s
            for s in elf.sections
            if s.type != SHT_NOBITS and s.addr and s.addr <= start and end <= s.addr + s.size
        ),
        None,
    )
    if section is None or end < start:
        return "the constants blob lies in no section of the .so"
    offset = section.offset + (start - section.addr)
    held = end - start
    if held == total or (total == 0 and held <= 1):
        return offset
    if held == _MMAP_HEADER.size and total > 0:  # weights appended to the file (above 2 GB)
        size, magic = _MMAP_HEADER.unpack(source.read(offset, _MMAP_HEADER.size))
        if size != total + 8 or size > source.size:
            return f"the appended weights are {size} bytes, wrapper.cpp's constants {total} + 8"
        (trailer,) = struct.unpack("<q", source.read(source.size - 8, 8))
        if trailer != magic:
            return "the appended weights do not end with the magic number the .so records"
        return source.size - size
    return f"the constants blob holds {held} bytes, wrapper.cpp's constants {total}"


def _digests(
    source: Source, offset: int, sizes: list[tuple[str, int]]
) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for fqn, size in sizes:
        crc, done = 0, 0
        while done < size:
            n = min(CHUNK_BYTES, size - done)
            crc = zlib.crc32(source.read(offset + done, n), crc)
            done += n
        out[fqn] = (size, crc)
        offset += size
    return out
