"""The binary readers' ISA and version logic: the x86-64 instruction scan (binaries/x86.py) on
tiny shared objects built here with gcc (objdump as the oracle of the instruction count), the
cubin header's SM (binaries/cuda.py) on the real cubins of tests/binaries/data with their header
fields set as the module's docstring describes each layout, which GPU image runs where and the
driver it needs (the CUDA compatibility rules the module cites), the symbol-version order
(binaries/elf.py), what a shared object needs and was compiled for (binaries/facts.py), and the
torch releases that could have produced a package (binaries/versions.py).

Written for the mutation run (scripts/mutate.py, session 11)."""

from __future__ import annotations

import platform
import re
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from aotipre.binaries import x86
from aotipre.binaries.cuda import GpuImage, read_cubin
from aotipre.binaries.elf import ElfFile, highest, version_key
from aotipre.binaries.facts import parse_flags, read_binary_facts
from aotipre.binaries.source import BytesSource, open_file
from aotipre.binaries.versions import ProducerRange, load_table, release_key
from aotipre.binaries.x86 import IsaScan, scan_elf
from aotipre.pt2.archive import open_archive
from tests.binaries.synth import DATA, compile_so

X86 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="builds x86-64 code with gcc"
)
ZMM = '__asm__ volatile("vaddps %zmm0, %zmm1, %zmm2");'
YMM = '__asm__ volatile("vpaddd %ymm0, %ymm1, %ymm2");'
NO_CET = ("-fcf-protection=none", "-fno-toplevel-reorder")
"""No endbr64 in front of a function (its first instruction is the one written), and the
functions laid out in the order written."""


def build(tmp: Path, source: str, *flags: str, name: str = "lib.so") -> Path:
    so = compile_so(tmp, source, *flags, name=name)
    if so is None:
        pytest.skip("no C compiler or assembler for the extension")
    return so


def scan(path: Path) -> IsaScan:
    with open_file(path) as source:
        return scan_elf(ElfFile(source))


# ---------------------------------------------------------------------------------------------
# x86.py


@X86
def test_uses_are_counted_most_used_first_then_by_name(tmp_path: Path) -> None:
    counted = scan(build(tmp_path, f"void f(void){{{YMM}{YMM}{ZMM}}}", *NO_CET, name="a.so"))
    assert [(u.flag, u.count) for u in counted.uses] == [("avx2", 2), ("avx512f", 1)]
    # one each: by name, whichever comes first in the code
    tied = scan(
        build(
            tmp_path,
            f"static __attribute__((noinline, used)) void g(void){{{ZMM}}}\n"
            f"void f(void){{{YMM}}}\n",
            "-g",
            *NO_CET,
            name="b.so",
        )
    )
    assert [(u.flag, u.count) for u in tied.uses] == [("avx2", 1), ("avx512f", 1)]
    # the example names the function, a static one too (.symtab), from its first instruction
    assert re.fullmatch(r"vaddps zmm2,zmm1,zmm0 at 0x[0-9a-f]+ in g", tied.uses[1].example)
    assert re.fullmatch(r"vpaddd ymm2,ymm1,ymm0 at 0x[0-9a-f]+ in f", tied.uses[0].example)


@X86
def test_every_instruction_of_text_is_decoded_once(tmp_path: Path) -> None:
    exe = shutil.which("objdump")
    if exe is None:
        pytest.skip("no objdump (the oracle)")
    so = build(tmp_path, f"void f(void){{{YMM}{ZMM}}}\nint g(int x){{return x * 3;}}\n")
    result = scan(so)
    text = subprocess.run(
        [exe, "-d", "-z", "-j", ".text", str(so)], capture_output=True, text=True, check=True
    ).stdout
    assert result.instructions == len(re.findall(r"^\s+[0-9a-f]+:\t[0-9a-f ]+\t", text, re.M))
    # the whole section, said so
    assert result.complete and result.scanned_bytes == result.text_bytes > 0
    assert result.notes == () and result.error is None


@X86
def test_a_text_larger_than_the_limit_is_scanned_in_part_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    so = build(tmp_path, f"void f(void){{{YMM}}}\n")
    size = scan(so).text_bytes
    monkeypatch.setattr(x86, "MAX_SCAN_BYTES", size - 16)
    part = scan(so)
    assert (part.scanned_bytes, part.text_bytes) == (size - 16, size)
    assert not part.complete
    assert part.notes == (f"scanned the first {size - 16} of {size} bytes of .text",)
    monkeypatch.setattr(x86, "MAX_SCAN_BYTES", size)
    whole = scan(so)
    assert whole.complete and whole.notes == ()


def test_a_scan_that_could_not_run_decoded_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    cubin = scan_elf(ElfFile(BytesSource((DATA / "sm80.cubin").read_bytes())))
    assert cubin.instructions == 0 and cubin.error == "not x86-64 code (cuda)"
    assert not cubin.complete
    # an error is never complete, even where the byte counts would say so
    assert not IsaScan(0, error="x").complete
    assert not IsaScan(10, scanned_bytes=5, text_bytes=10).complete
    assert IsaScan(10, scanned_bytes=10, text_bytes=10).complete


@X86
def test_a_scan_without_the_decoder_or_the_bytes_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    so = build(tmp_path, f"void f(void){{{YMM}}}\n")
    size = scan(so).text_bytes
    monkeypatch.setitem(sys.modules, "iced_x86", None)  # import fails
    missing = scan(so)
    assert (missing.instructions, missing.text_bytes) == (0, size)
    assert missing.error is not None and "iced-x86 is not installed" in missing.error
    monkeypatch.delitem(sys.modules, "iced_x86")
    from aotipre.binaries.elf import ElfError

    def fail(*args: object, **kw: object) -> bytes:
        raise ElfError("section data past the end")

    monkeypatch.setattr(ElfFile, "section_bytes", fail)
    broken = scan(so)
    assert (broken.instructions, broken.text_bytes, broken.error) == (
        0,
        size,
        "section data past the end",
    )


@X86
def test_an_elf_without_text_has_nothing_to_scan(tmp_path: Path) -> None:
    so = build(tmp_path, f"void f(void){{{YMM}}}\n")
    data = so.read_bytes().replace(b".text\0", b".txet\0", 1)  # the section's name only
    result = scan_elf(ElfFile(BytesSource(data)))
    assert (result.instructions, result.error) == (0, "no .text section")


def test_cpuinfo_names_of_features() -> None:
    assert x86.cpuinfo_flag("AVX512F") == "avx512f"
    assert x86.cpuinfo_flag("SSE3") == "pni" and x86.cpuinfo_flag("LZCNT") == "abm"
    assert x86.cpuinfo_flag("AMX_TILE") == "amx_tile"


# ---------------------------------------------------------------------------------------------
# cuda.py: the cubin header (docstring: ABI 8 keeps the SM in e_flags bits 8-15, older files in
# bits 0-7 with 0x800 for an arch-specific `a`; the tkinfo note's -arch names the `a`)


def cubin(name: str, abi: int, flags: int, *, note: bool = False) -> GpuImage:
    data = bytearray((DATA / name).read_bytes())
    data[8] = abi  # e_ident[EI_ABIVERSION]
    struct.pack_into("<I", data, 48, flags)  # e_flags of an ELF64 header
    if not note:
        data = bytearray(bytes(data).replace(b"-arch sm_", b"-xxxx sm_"))
    return read_cubin(BytesSource(bytes(data)))


@pytest.mark.parametrize(
    ("abi", "flags", "arch"),
    [
        (8, 0x6005904, "89"),  # bits 8-15: 0x59
        (8, 0x6005004, "80"),
        (8, 0x6006402, "100"),
        (7, 0x59, "89"),  # bits 0-7
        (7, 0x85A, "90a"),  # and 0x800: arch-specific
        (7, 0x5A, "90"),
        (0, 0x850, "80a"),
    ],
)
def test_the_sm_of_each_header_layout(abi: int, flags: int, arch: str) -> None:
    image = cubin("sm80.cubin", abi, flags)
    assert (image.kind, image.arch, image.toolkit) == ("sass", arch, "13.0")


def test_the_note_names_the_arch_only_of_the_same_sm() -> None:
    # sm80.cubin's note says `-arch sm_80`: a header saying sm_90 is not overridden by it
    assert cubin("sm80.cubin", 8, 0x6005A04, note=True).arch == "90"
    assert cubin("sm80.cubin", 8, 0x6005004, note=True).arch == "80"
    assert cubin("sm90a.cubin", 8, 0x6005A04, note=True).arch == "90a"


def test_which_device_runs_an_image() -> None:
    assert GpuImage("sass", "90").runs_on("9") and not GpuImage("sass", "91").runs_on("9")
    assert GpuImage("sass", "86").runs_on("8.9") and not GpuImage("sass", "86").runs_on("9.0")
    assert GpuImage("sass", "90a").runs_on("9.0") and not GpuImage("sass", "90a").runs_on("10.0")
    assert GpuImage("ptx", "80").runs_on("12.0") and not GpuImage("ptx", "80").runs_on("7.5")
    assert GpuImage("sass", "sm").runs_on("9.0") is False  # no architecture number


def test_the_driver_an_image_needs() -> None:
    # PTX: the driver of the first toolkit that reads its ISA; beyond the table, the newest
    assert GpuImage("ptx", "90", ptx_version=(8, 4)).min_driver() == "550.54.14"
    assert GpuImage("ptx", "90", ptx_version=(9, 0)).min_driver() == "580.65.06"
    # CUDA 13.1 and 13.2 (torch 2.15's default wheels): a 580 driver cannot JIT their PTX
    assert GpuImage("ptx", "90", ptx_version=(9, 1)).min_driver() == "590.44.01"
    assert GpuImage("ptx", "90", ptx_version=(9, 2)).min_driver() == "595.45.04"
    assert GpuImage("ptx", "90", ptx_version=(10, 0)).min_driver() == "595.45.04"
    # an ISA inside the table's span that no release has: unknown
    assert GpuImage("ptx", "90", ptx_version=(7, 9)).min_driver() is None
    assert GpuImage("ptx", "90").min_driver() is None  # no version known
    # SASS: any driver of its CUDA major (minor version compatibility)
    assert GpuImage("sass", "90", toolkit="12.8").min_driver() == "525.60.13"
    assert GpuImage("sass", "90", toolkit="11.0").min_driver() == "450.80.02"
    assert GpuImage("sass", "90").min_driver() is None  # no toolkit note


# ---------------------------------------------------------------------------------------------
# elf.py


def test_versions_compare_as_numbers_unparsable_parts_as_zero() -> None:
    assert version_key("GLIBCXX_3.4.30") == (3, 4, 30)
    assert version_key("GLIBC_2.x") == (2, 0)
    assert highest(["GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_2.17"], "GLIBC_") == "GLIBC_2.34"
    assert highest(["GLIBC_PRIVATE", "GLIBC_2.3"], "GLIBC_") == "GLIBC_2.3"
    assert highest(["GLIBC_PRIVATE"], "GLIBC_") is None
    assert highest(["GLIBCXX_3.4.30", "CXXABI_1.3.9"], "GLIBC_") is None


# ---------------------------------------------------------------------------------------------
# facts.py


FACTS_SOURCE = (
    "#include <stdlib.h>\n"
    "extern void aoti_torch_x(void);\n"
    "extern void __attribute__((weak)) weak_one(void);\n"
    "int AOTInductorModelCreate(void){return 0;}\n"
    "int helper(int x){return x + 1;}\n"
    "void h(int x){aoti_torch_x(); if (weak_one) weak_one(); if (x) abort();}\n"
)


@X86
def test_what_a_shared_object_needs_and_was_compiled_for(tmp_path: Path) -> None:
    so = build(tmp_path, FACTS_SOURCE, "-g", "-march=x86-64-v2", "-mavx2", "-mfma", "-mno-fma")
    package = tmp_path / "p.zip"
    member = "p/data/aotinductor/model/x.wrapper.so"
    with zipfile.ZipFile(package, "w") as z:
        z.write(so, member)
    facts = read_binary_facts(open_archive(package), (member,), ())
    (shared,) = facts.shared_objects
    assert shared.error is None and shared.machine == "x86_64"
    # from libtorch: undefined, not weak, not versioned (abort@GLIBC_2.2.5 comes from libc)
    assert shared.imports == ("aoti_torch_x",)
    assert shared.glibc is not None and shared.glibc.startswith("GLIBC_2.")
    # defined AOTInductor* functions only (not helper, not h)
    assert shared.entry_points == ("AOTInductorModelCreate",)
    # gcc's producer string (-grecord-gcc-switches): -march and the -m switches in order
    assert shared.flags is not None
    assert (shared.flags.march, shared.flags.enabled) == ("x86-64-v2", ("avx2",))


@X86
def test_no_compile_flags_without_a_producer_string(tmp_path: Path) -> None:
    so = build(tmp_path, "int f(int x){return x;}\n", "-g0", "-march=x86-64-v2")
    package = tmp_path / "p.zip"
    with zipfile.ZipFile(package, "w") as z:
        z.write(so, "p/x.so")
    (shared,) = read_binary_facts(open_archive(package), ("p/x.so",), ()).shared_objects
    # gcc writes `GCC: (...) <version>` in .comment, not its switches
    assert shared.flags is None


def test_compile_switches_in_order() -> None:
    flags = parse_flags(
        "-march=skylake -mtune=generic -mavx2 -mfma -mno-fma -mno-red-zone -m64 -mbmi2 "
        "-mno-sse4.2 -msse4.2 -mavx512f -mno-avx512f -O2",
        ".comment",
    )
    assert (flags.march, flags.source) == ("skylake", ".comment")
    assert flags.enabled == ("avx2", "bmi2", "sse4_2")
    assert parse_flags("-O2 -g", "x").enabled == () and parse_flags("-O2", "x").march is None


def test_gpu_members_are_read_by_their_magic_number(tmp_path: Path) -> None:
    package = tmp_path / "g.zip"
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("p/a.cubin", (DATA / "sm80.cubin").read_bytes())
        z.writestr("p/b.cubin", (DATA / "multi.fatbin").read_bytes())  # named by content
        z.writestr("p/c.cubin", b"\x00ELF" + b"\x00" * 60)
        z.writestr("p/d.cubin", b"")
    names = ("p/a.cubin", "p/b.cubin", "p/c.cubin", "p/d.cubin")
    a, b, c, d = read_binary_facts(open_archive(package), (), names).gpu
    assert [i.label for i in a.images] == ["sm_80"] and a.error is None
    assert len(b.images) > 1 and b.error is None
    assert c.images == () and c.error == "neither a cubin (ELF) nor a fatbin (no magic number)"
    assert d.images == () and d.error == c.error


# ---------------------------------------------------------------------------------------------
# versions.py


def test_a_release_is_its_first_two_numbers() -> None:
    assert release_key("2.13.1+cu128") == (2, 13)
    assert release_key("2.13") == (2, 13)
    assert release_key("2.x") == (2, 0)
    assert release_key("2") == (2,)


def test_the_producer_range_in_words() -> None:
    table = load_table()
    newest, oldest = table.releases[-1], table.releases[0]
    assert len(table.releases) >= 3
    middle = table.releases[1]
    assert ProducerRange((), False, ()).text == (
        f"no release of aotipre's table (2.11-{newest}) matches"
    )
    assert ProducerRange((), True, ()).text.startswith(f"newer than {newest} ")
    assert ProducerRange((newest,), False, ()).text == f"{newest} or newer"
    assert ProducerRange((oldest, newest), False, ()).text == f"{oldest} or newer"
    assert ProducerRange((oldest,), False, ()).text == oldest
    assert ProducerRange((oldest, middle), False, ()).text == f"{oldest}-{middle}"


def entry_points_of(release: str) -> tuple[str, ...]:
    """The AOTInductor* functions a package built by `release` defines (the table's data)."""
    table = load_table()
    return tuple(sorted(n for n, rels in table.entry_points.items() if release in rels))


def test_the_releases_that_could_have_built_a_package() -> None:
    from aotipre.binaries.versions import producer_range

    # 2.11 and 2.12 packages define the same entry points; 2.13 added AOTInductorGetLastError
    found = producer_range(entry_points_of("2.11"), ("aoti_torch_check", "_ZN3c105ErrorC1Ev"))
    assert (found.releases, found.newer_than_table) == (("2.11", "2.12"), False)
    assert found.evidence == (
        "not 2.13: lacks AOTInductorGetLastError, which 2.13 packages define",
        "not 2.14: lacks AOTInductorGetLastError, which 2.14 packages define",
        "not 2.15: lacks AOTInductorGetLastError, which 2.15 packages define",
    )
    # a shim function 2.12 added: not 2.11
    found = producer_range(entry_points_of("2.11"), ("aoti_torch_cpu_rand_like",))
    assert found.releases == ("2.12",)
    assert found.evidence[0] == (
        "not 2.11: imports aoti_torch_cpu_rand_like, which 2.11 does not export"
    )
    found = producer_range(entry_points_of("2.14"), ())
    assert found.releases == ("2.14",) and found.text == "2.14"
    assert found.evidence[0] == "not 2.11: defines AOTInductorGetLastError (from a later release)"
    found = producer_range(entry_points_of("2.15"), ())  # the newest row: "or newer"
    assert found.releases == ("2.15",) and found.text == "2.15 or newer"
    found = producer_range(entry_points_of("2.13"), ())
    assert found.releases == ("2.13",) and found.text == "2.13"


def test_an_entry_point_no_release_has_is_a_newer_torch() -> None:
    from aotipre.binaries.versions import producer_range

    found = producer_range((*entry_points_of("2.14"), "AOTInductorZ", "AOTInductorY"), ())
    assert (found.releases, found.newer_than_table) == ((), True)
    newest = load_table().releases[-1]
    assert found.evidence == (
        f"defines AOTInductorY, AOTInductorZ, which no release up to {newest} has",
    )
