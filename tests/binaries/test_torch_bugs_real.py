"""Known runtime bugs read from installed torch folders (binaries/torch_bugs.py), each verdict
grounded: the fingerprints are read from the torches installed here (2.13 and, where CI built
them, 2.14.1 and 2.15.0), and #196026 (every model of a multi-model package constructed by
load_package(path, name)) is checked against what plain torch does in a fresh process with a
two-model package built through the public API (aot_compile + package_aoti)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.binaries.torch_bugs import LOAD_PACKAGE_PY, PACKAGE_PY, VEC_ISA_PY, read_known_bugs
from tests.building import build

REPO = Path(__file__).resolve().parents[2]
PYTHONS = {
    "this": Path(sys.executable),
    "2.14": REPO / ".venv-2.14" / "bin" / "python",
    "2.15": REPO / ".venv-2.15" / "bin" / "python",
}


def _torch_folder(python: Path) -> Path:
    found = sorted(python.parents[1].glob("lib/python3*/site-packages/torch"))
    if not found:
        pytest.skip(f"no torch next to {python}")
    return found[0]


@pytest.mark.parametrize("which", list(PYTHONS))
def test_the_installed_torches_show_their_bugs_with_evidence(which: str) -> None:
    python = PYTHONS[which]
    if not python.is_file():
        pytest.skip(f"no .venv-{which} (bash .ci/run builds it)")
    folder = _torch_folder(python)
    bugs = {b.issue: b for b in read_known_bugs(str(folder), str(folder / "lib"))}
    # the files themselves: each evidence names a line that holds what it says
    package = (folder.joinpath(*PACKAGE_PY)).read_text().splitlines()
    for issue, call in (
        (191715, "get_device_information("),
        (196025, "load_metadata_from_package("),
    ):
        if issue in bugs:
            line = int(bugs[issue].evidence.split(":")[1].split()[0])
            assert call in package[line - 1], (issue, bugs[issue].evidence)
    vec_isa = folder.joinpath(*VEC_ISA_PY).read_text()
    assert (191715 in bugs) is ("cpuinfo_vec_isa_list" not in vec_isa)
    if 194128 in bugs:
        with open(folder / "lib" / "libtorch_cpu.so", "rb") as f:
            assert bugs[194128].evidence.split()[-1].encode() in f.read()
    assert {b.applies_to for b in bugs.values()} <= {"python", "cpp"}


def test_a_torch_with_the_fixes_shows_none(tmp_path: Path) -> None:
    """The fixes as their PRs describe them (#192394: cpuinfo_vec_isa_list; #196026: load_pt2
    takes aoti_model_names; #196025: no load_metadata_from_package before the loader), in a
    copy of this torch's loader sources; a libtorch without Python sources reads its library
    only."""
    folder = _torch_folder(Path(sys.executable))
    fixed = tmp_path / "torch"
    for parts in (PACKAGE_PY, LOAD_PACKAGE_PY, VEC_ISA_PY):
        dst = fixed.joinpath(*parts)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(folder.joinpath(*parts), dst)
    (fixed / "lib").mkdir()
    assert {b.issue for b in read_known_bugs(str(fixed), str(fixed / "lib"))} == {
        191715,
        196025,
        196026,
    }
    vec = fixed.joinpath(*VEC_ISA_PY)
    vec.write_text(vec.read_text() + "\ndef cpuinfo_vec_isa_list():\n    return []\n")
    pkg = fixed.joinpath(*PACKAGE_PY)
    text = pkg.read_text()
    text = text.replace("def load_pt2(\n", "def load_pt2(\n    aoti_model_names=None,\n", 1)
    text = text.replace("load_metadata_from_package(", "loader.get_metadata(", 1)
    pkg.write_text(text)
    assert read_known_bugs(str(fixed), str(fixed / "lib")) == ()


BUILD = """
import sys, torch
import torch._inductor.package
out = sys.argv[1]
class Small(torch.nn.Module):
    def forward(self, x):
        return x + 1
class Big(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(1024, 1024))
    def forward(self, x):
        return x @ self.w
files = {}
for name, model, x in (("small", Small(), torch.randn(4)), ("big", Big(), torch.randn(2, 1024))):
    ep = torch.export.export(model, (x,))
    files[name] = torch._inductor.aot_compile(ep.module(), (x,), options={"aot_inductor.package": True})
torch._inductor.package.package_aoti(f"{out}/two.pt2", files)
"""

CONSTRUCTED = """
import sys, torch
import torch._inductor.package
real = torch._C._aoti.AOTIModelPackageLoader
seen = []
class Counting(real):
    def __init__(self, path, name, *args, **kwargs):
        seen.append(name)
        super().__init__(path, name, *args, **kwargs)
torch._C._aoti.AOTIModelPackageLoader = Counting
torch._inductor.package.load_package(sys.argv[1], "small")
print(sorted(set(seen)))
"""


@pytest.mark.slow
def test_every_model_constructed_is_reported_where_torch_does_it(tmp_path: Path) -> None:
    built = build(BUILD, tmp_path)
    package = built / "two.pt2"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    proc = subprocess.run(
        [sys.executable, "-c", CONSTRUCTED, str(package)],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    constructed = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    folder = _torch_folder(Path(sys.executable))
    out = tmp_path / "report.json"
    subprocess.run(
        [
            sys.executable, "-m", "aotipre", "check", str(package), "--static-only", "--no-config",
            "--target", f"cpu,libtorch={folder}", "--format", "json", "--output", str(out),
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    doc = json.loads(out.read_text())
    found = [f for f in doc["findings"] if f["code"] == "AOT442"]
    shown = {b.issue for b in read_known_bugs(str(folder), str(folder / "lib"))}
    emitted = {f["code"] for f in doc["findings"]}
    assert ("AOT440" in emitted) is (194128 in shown) and ("AOT441" in emitted) is (191715 in shown)
    assert "AOT443" not in emitted  # a small package: the second metadata read costs nothing
    if constructed == "['big', 'small']":  # load_package(path, "small") built 'big' too
        small = next(f for f in found if f["model"] == "small")
        # 'big' holds one 1024 x 1024 float32 parameter: 4.2 MB of constants on the CPU
        assert "also loads 'big' (1 .so" in small["message"], small
        assert "4.2 MB of constants on cpu" in small["message"], small
        assert "torch/_inductor/package/package.py:" in small["message"]
    else:
        assert constructed == "['small']", constructed
        assert not found, found


def test_the_metadata_read_twice_is_reported_for_large_packages_only_fake() -> None:
    """#196025 read from this torch, with fake packages: reported for 1,000 members (or 1 GiB)
    and more, where opening the archive again costs something, not for a smaller one."""
    from aotipre.checks.target import LARGE_PACKAGE_MEMBERS, check_runtime_bugs
    from aotipre.environment.host import HostInfo, TorchRuntime
    from aotipre.pt2.spec import AotiPart, MemberInfo, ModelInfo, PackageInfo

    folder = _torch_folder(Path(sys.executable))
    bugs = tuple(b for b in read_known_bugs(str(folder), str(folder / "lib")) if b.issue == 196025)
    if not bugs:
        pytest.skip("this torch reads the metadata once")
    host = HostInfo(
        "target cpu", frozenset({"cpu"}), is_target=True,
        torch=TorchRuntime("2.13.0", "libtorch here", frozenset(), bugs),
    )  # fmt: skip
    aoti = AotiPart("data/aotinductor/model", "cpu", None, None, (), None, {}, None, (), (), False)
    model = ModelInfo("model", False, aoti, None, None, (), (), (), None, "none")

    def package(members: int) -> PackageInfo:
        names = tuple(MemberInfo(f"p/data/x{i}", 10, 10, 0) for i in range(members))
        return PackageInfo("p.pt2", "aoti", "p", "pt2", "0", (model,), names, total_size=10)

    assert check_runtime_bugs(package(LARGE_PACKAGE_MEMBERS - 1), [model], host) == []
    (f,) = check_runtime_bugs(package(LARGE_PACKAGE_MEMBERS), [model], host)
    assert f.code == "AOT443" and "1000-member package" in f.message
    assert "#196025" in f.message and "_package.py:" in f.message


RACE = (
    "_ZZN5torch8inductor12_GLOBAL__N_114load_json_fileERKNSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEEE8json_obj"
)


def test_the_json_race_symbol_is_found_wherever_the_chunks_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared object whose .strtab holds the static's mangled name (a C static of that name,
    built here), searched in pieces cut at every offset around it: always found; one without
    it, a folder without libtorch_cpu.so and a file that is not ELF: none."""
    from aotipre.binaries import torch_bugs
    from tests.binaries.synth import compile_so

    src = f"__attribute__((used)) static int {RACE} = 1;\nint use(void) {{ return {RACE}; }}\n"
    so = compile_so(tmp_path, src, name="libtorch_cpu.so")
    plain = compile_so(tmp_path, "int use(void) { return 1; }\n", name="plain.so")
    if so is None or plain is None:
        pytest.skip("no C compiler here")
    assert torch_bugs._json_race(str(so)) == RACE
    at = so.read_bytes().find(RACE.encode())
    assert at > 0
    for chunk in (1, 7, 64, 100, 511, 513):
        monkeypatch.setattr(torch_bugs, "CHUNK", chunk)
        assert torch_bugs._json_race(str(so)) == RACE, chunk
    assert torch_bugs._json_race(str(plain)) is None
    (tmp_path / "text").write_text("not an ELF file")
    assert torch_bugs._json_race(str(tmp_path / "text")) is None
    assert torch_bugs._json_race(str(tmp_path / "missing.so")) is None
    (bug,) = read_known_bugs(str(tmp_path / "nowhere"), str(tmp_path))
    assert (bug.issue, bug.applies_to) == (194128, "cpp") and RACE in bug.evidence
    monkeypatch.setattr(torch_bugs, "MAX_STRTAB_BYTES", 16)
    assert torch_bugs._json_race(str(so)) is None  # a table over the limit is not searched


def test_the_known_bug_numbers_of_this_torch() -> None:
    """What this torch shows is a subset of the four fingerprinted bugs, each present exactly
    when its file evidence is (libtorch_cpu's bytes for #194128)."""
    import mmap

    from aotipre.binaries.torch_bugs import _JSON_RACE

    folder = _torch_folder(Path(sys.executable))
    bugs = {b.issue: b for b in read_known_bugs(str(folder), str(folder / "lib"))}
    assert set(bugs) <= {194128, 191715, 196025, 196026}
    with open(folder / "lib" / "libtorch_cpu.so", "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert (194128 in bugs) is bool(_JSON_RACE.search(data))  # type: ignore[call-overload]
        data.close()
    import re

    signature = re.search(r"^def load_pt2\((.*?)\)\s*->", folder.joinpath(*PACKAGE_PY).read_text(),
                          re.M | re.S)  # fmt: skip
    loader = folder.joinpath(*LOAD_PACKAGE_PY).read_text()
    assert signature is not None and "load_pt2(" in loader
    assert (196026 in bugs) is ("aoti_model_names" not in signature.group(1))


def test_a_torch_folder_with_part_of_the_loader_shows_what_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the entry point (no _package.py), or only _package.py: nothing to fingerprint
    #196026 with, and no error; a .strtab exactly at the size limit is still searched."""
    from aotipre.binaries import torch_bugs

    folder = _torch_folder(Path(sys.executable))
    for present in (LOAD_PACKAGE_PY, PACKAGE_PY):
        part = tmp_path / "-".join(present) / "torch"
        dst = part.joinpath(*present)
        dst.parent.mkdir(parents=True)
        shutil.copy(folder.joinpath(*present), dst)
        assert 196026 not in {b.issue for b in read_known_bugs(str(part), str(part / "lib"))}
    from tests.binaries.synth import compile_so

    src = f"__attribute__((used)) static int {RACE} = 1;\nint use(void) {{ return {RACE}; }}\n"
    so = compile_so(tmp_path, src, name="libtorch_cpu.so")
    if so is None:
        pytest.skip("no C compiler here")
    from aotipre.binaries.elf import ElfFile
    from aotipre.binaries.source import open_file

    with open_file(so) as source:
        table = ElfFile(source).section(".strtab")
    assert table is not None
    monkeypatch.setattr(torch_bugs, "MAX_STRTAB_BYTES", table.size)
    assert torch_bugs._json_race(str(so)) == RACE


def test_the_strtab_is_read_in_bounded_overlapping_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pieces of CHUNK + 512 bytes from offset 0, CHUNK apart, the last one clipped to the
    table: memory stays bounded whatever the table's size, and no name is cut unseen."""
    from aotipre.binaries import torch_bugs
    from aotipre.binaries.elf import ElfFile
    from tests.binaries.synth import compile_so

    names = [f"a_symbol_name_that_fills_the_string_table_{i:04d}" for i in range(200)]
    src = "".join(f"__attribute__((used)) static int {n} = {i};\n" for i, n in enumerate(names))
    so = compile_so(tmp_path, src, name="plain.so")  # a .strtab of about 10 KB
    if so is None:
        pytest.skip("no C compiler here")
    reads: list[tuple[int, int]] = []
    real = ElfFile.section_bytes_at

    def spy(self: ElfFile, section: object, start: int, size: int) -> bytes:
        reads.append((start, size))
        return real(self, section, start, size)  # type: ignore[arg-type]

    monkeypatch.setattr(ElfFile, "section_bytes_at", spy)
    monkeypatch.setattr(torch_bugs, "CHUNK", 100)
    assert torch_bugs._json_race(str(so)) is None
    total = reads[-1][0] + reads[-1][1]
    assert total > 5000 and len(reads) == -(-total // 100)
    assert [s for s, _ in reads] == list(range(0, len(reads) * 100, 100))
    assert all(size == 612 for _, size in reads if _ + 612 <= total)
    assert reads[-1][1] == total - reads[-1][0] and total - reads[-1][0] <= 612
    assert reads[-1][0] < total <= reads[-1][0] + 612
