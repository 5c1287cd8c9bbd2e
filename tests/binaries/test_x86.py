"""The instruction scan: real machine code decoded (iced-x86), cross-checked with objdump, and
tiny shared objects built here with one extension each."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aotipre.binaries.elf import ElfFile
from aotipre.binaries.source import BytesSource, open_file
from aotipre.binaries.x86 import scan_elf
from tests.binaries.synth import compile_so, member

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="builds x86-64 code with gcc"
)

FUNCTIONS = {
    "avx2": 'void f(void){__asm__ volatile("vpaddd %ymm0, %ymm1, %ymm2");}',
    "avx512": 'void f(void){__asm__ volatile("vaddps %zmm0, %zmm1, %zmm2");}',
    "amx": 'void f(void){__asm__ volatile("tilerelease");}',
}


def _scan_source(tmp: Path, name: str):
    so = compile_so(tmp, FUNCTIONS[name], name=f"{name}.so")
    if so is None:
        pytest.skip("no C compiler or assembler for the extension")
    with open_file(so) as source:
        return scan_elf(ElfFile(source))


def test_each_extension_is_named(tmp_path: Path) -> None:
    avx2 = _scan_source(tmp_path, "avx2")
    assert avx2.use("avx2") is not None and avx2.evex == 0 and avx2.use("avx512f") is None
    avx512 = _scan_source(tmp_path, "avx512")
    use = avx512.use("avx512f")
    assert use is not None and use.count == 1 and avx512.evex == 1
    assert use.example.startswith("vaddps zmm2,zmm1,zmm0") and use.example.endswith(" in f")
    amx = _scan_source(tmp_path, "amx")
    assert amx.use("amx_tile") is not None and amx.use("avx512f") is None


def test_fixture_so_matches_objdump(fixture_dir: Path, tmp_path: Path) -> None:
    data = member(fixture_dir / "both.pt2", ".wrapper.so")
    scan = scan_elf(ElfFile(BytesSource(data)))
    assert scan.complete and scan.instructions > 1000
    assert scan.use("amx_tile") is None  # compiled with -mamx-tile, uses none
    exe = shutil.which("objdump")
    if exe is None:
        pytest.skip("no objdump (the oracle)")
    path = tmp_path / "model.so"
    path.write_bytes(data)
    text = subprocess.run(
        [exe, "-d", "-j", ".text", str(path)], capture_output=True, text=True
    ).stdout
    lines = re.findall(r"^\s+[0-9a-f]+:\t([0-9a-f ]+)\t", text, re.M)
    evex = sum(1 for raw in lines if raw.split()[0] == "62")
    assert scan.evex == evex
    assert not re.search(r"\t(tile\w+|tdp\w+|ldtilecfg|sttilecfg)\s", text)


def test_not_x86() -> None:
    from tests.binaries.synth import DATA

    scan = scan_elf(ElfFile(BytesSource((DATA / "sm80.cubin").read_bytes())))
    assert scan.error is not None and "not x86-64" in scan.error
