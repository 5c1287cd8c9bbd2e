"""The ELF reader on real shared objects (cross-checked with binutils' readelf where installed)
and on truncated and hostile bytes: a one-line ElfError, never another exception."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aotipre.binaries.elf import ElfError, ElfFile, highest
from aotipre.binaries.source import BytesSource, SourceError, open_file
from tests.binaries.synth import member

Pkg = Callable[[str], Path]


@pytest.fixture(scope="module")
def so_bytes(fixture_dir: Path) -> bytes:
    return member(fixture_dir / "both.pt2", ".wrapper.so")


def _readelf(path: Path, *args: str) -> str:
    exe = shutil.which("readelf")
    if exe is None:
        pytest.skip("binutils' readelf is not installed (the oracle of this test)")
    return subprocess.run([exe, "-W", *args, str(path)], capture_output=True, text=True).stdout


def test_real_so_matches_readelf(so_bytes: bytes, tmp_path: Path) -> None:
    path = tmp_path / "model.so"
    path.write_bytes(so_bytes)
    with open_file(path) as source:
        elf = ElfFile(source)
        needed = elf.needed()
        needs = elf.version_needs()
        symbols = elf.dynamic_symbols()
    assert elf.header.machine_name == "x86_64"
    dynamic = _readelf(path, "-d")
    assert list(needed) == re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    versions = _readelf(path, "-V")
    listed = set(re.findall(r"Name: (\S+)\s+Flags", versions))
    assert {v for vs in needs.values() for v in vs} == listed
    undefined = _readelf(path, "--dyn-syms")
    und = {m.group(1).split("@")[0] for m in re.finditer(r" UND (\S+)", undefined)}
    assert {s.name for s in symbols if not s.defined} == und
    # (g++ 12 with torch 2.13 here needs GLIBCXX_3.4.30; g++ 13 with torch 2.11 on the GPU
    # machine needs none: what readelf lists decides)
    glibcxx = highest([v for vs in needs.values() for v in vs], "GLIBCXX_")
    assert (glibcxx is not None) == any(v.startswith("GLIBCXX_") for v in listed)


def test_versions_of_the_system_libstdcxx() -> None:
    path = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not path.is_file():
        pytest.skip("no system libstdc++ at the Debian path")
    with open_file(path) as source:
        defined = ElfFile(source).version_definitions()
    oracle = set(re.findall(r"Name: (GLIBCXX_[\d.]+)", _readelf(path, "-V")))
    assert {v for v in defined if v.startswith("GLIBCXX_")} == oracle


@pytest.mark.parametrize("cut", [0, 3, 16, 63, 64, 200, 5000, -1000, -200, -1])
def test_truncated_so(so_bytes: bytes, cut: int) -> None:
    data = so_bytes[:cut]
    try:
        elf = ElfFile(BytesSource(data))
        elf.needed(), elf.version_needs(), elf.dynamic_symbols()
    except ElfError as exc:
        assert "\n" not in str(exc) and str(exc)
    else:  # a cut past every table still parses
        assert cut < 0


def test_hostile_headers(so_bytes: bytes) -> None:
    data = bytearray(so_bytes)
    data[0x3C:0x3E] = (0xFFFF).to_bytes(2, "little")  # e_shnum 65535
    with pytest.raises(ElfError, match="sections"):
        ElfFile(BytesSource(bytes(data)))
    data = bytearray(so_bytes)
    data[0x28:0x30] = (1 << 62).to_bytes(8, "little")  # e_shoff far past the end
    with pytest.raises(ElfError, match="past the end"):
        ElfFile(BytesSource(bytes(data)))
    with pytest.raises(ElfError, match="not an ELF"):
        ElfFile(BytesSource(b"aotipre: binary removed to keep the fixture small" + bytes(64)))
    big_endian = bytearray(so_bytes[:64])
    big_endian[5] = 2
    with pytest.raises(ElfError, match="only 64-bit little-endian"):
        ElfFile(BytesSource(bytes(big_endian)))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_mutated_so_never_crashes(so_bytes: bytes, data: st.DataObject) -> None:
    buf = bytearray(so_bytes)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(buf) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    try:
        elf = ElfFile(BytesSource(bytes(buf)))
        elf.needed(), elf.version_needs(), elf.dynamic_symbols(), elf.notes(".note.gnu.build-id")
    except ElfError as exc:
        assert "\n" not in str(exc)


def test_source_bounds() -> None:
    src = BytesSource(b"abc")
    with pytest.raises(SourceError):
        src.read(2, 5)


def test_program_headers_the_loader_cannot_read(so_bytes: bytes, tmp_path: Path) -> None:
    """The dynamic loader reads the program headers and each loadable segment's bytes first;
    when they lie past the end of the file dlopen refuses the .so (the ground truth here:
    ctypes' dlopen on the same bytes), and the reader says so (AOT050) instead of passing it."""
    import ctypes

    cases = []
    bad_phoff = bytearray(so_bytes)
    bad_phoff[0x20:0x28] = (0xFFFFFFFFFFFF).to_bytes(8, "little")  # e_phoff past the end
    cases.append((bytes(bad_phoff), "program header table lies past the end"))
    no_phdrs = bytearray(so_bytes)
    no_phdrs[0x38:0x3A] = (0).to_bytes(2, "little")  # e_phnum 0 in a shared object
    cases.append((bytes(no_phdrs), "without program headers"))
    assert ElfFile(BytesSource(so_bytes)).header.elf_type == 3  # a shared object
    for i, (data, why) in enumerate(cases):
        path = tmp_path / f"bad{i}.so"
        path.write_bytes(data)
        with pytest.raises(OSError):
            ctypes.CDLL(str(path))
        with pytest.raises(ElfError, match=why):
            ElfFile(BytesSource(data))
    # the last loadable segment's bytes cut off, its header intact (not dlopen'ed here: the
    # mapping past the end would fault the test process on first touch)
    phoff, phnum = int.from_bytes(so_bytes[0x20:0x28], "little"), so_bytes[0x38]
    ends = [
        int.from_bytes(so_bytes[h + 8 : h + 16], "little")
        + int.from_bytes(so_bytes[h + 32 : h + 40], "little")
        for h in range(phoff, phoff + 56 * phnum, 56)
        if so_bytes[h] == 1  # PT_LOAD
    ]
    with pytest.raises(ElfError, match=r"loadable segment \d+ .* past the end"):
        ElfFile(BytesSource(so_bytes[: max(ends) - 8]))
