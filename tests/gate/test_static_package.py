"""Static checks of the package and its fit with the host (checks/package.py) on the real
fixture packages; where a fact of the package is varied (a torch version, a compute
capability), the real contract is copied with that one field changed (dataclasses.replace)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.binaries.facts import IsaScanner
from aotipre.checks.package import check_package as check_package_with_facts
from aotipre.checks.target import check_host
from aotipre.environment.host import HostInfo, parse_target
from aotipre.findings import Finding, Severity
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo, PackageInfo

Pkg = Callable[[str], Path]


def model(pkg: Pkg, name: str) -> ModelInfo:
    return read_package(pkg(name)).models[0]


def with_aoti(m: ModelInfo, **fields: object) -> ModelInfo:
    assert m.aoti is not None
    return dataclasses.replace(m, aoti=dataclasses.replace(m.aoti, **fields))  # type: ignore[arg-type]


FACTS = {"AOT051", "AOT052"}
"""Infos of every CPU AOTI package (the -march its .so was compiled for) and of an AOTI-only one
(the torch that produced it): facts, not the findings these tests are about (their own tests:
test_facts_of_the_compiled_code below, tests/checks/test_static_fixtures.py)."""


def check_package(info: PackageInfo, models: list[ModelInfo]) -> list[Finding]:
    return [
        f
        for f in check_package_with_facts(info, models)
        if not (f.code in FACTS and f.severity is Severity.INFO)
    ]


def summary(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity.value) for f in findings]


@pytest.mark.parametrize(
    "version, flagged",
    [("2.10.0", True), ("2.10.9+cu128", True), ("2.11.0", False), ("2.12.1", False),
     ("2.13.0+cpu", False), ("2.14.0", False), ("2.15.2+cu130", False), ("2.16.0", True),
     ("3.11.0", True), ("1.13.0", True), ("garbage", False)],
)  # fmt: skip
def test_torch_version_range(pkg: Pkg, version: str, flagged: bool) -> None:
    m = dataclasses.replace(model(pkg, "both"), torch_version=version)
    got = [f for f in check_package(read_package(pkg("both")), [m]) if f.code == "AOT405"]
    assert bool(got) is flagged
    if flagged:
        assert got[0].severity is Severity.WARNING and got[0].actual == version


def test_export_and_aoti_bounds(pkg: Pkg) -> None:
    found = [f for f in check_package(read_package(pkg("both")), [model(pkg, "both")])]
    (f,) = found
    assert (f.code, f.input, f.dim, f.expected, f.actual) == ("AOT013", "input_ids", 0, 1, 2)
    assert "has min 1 in the ExportedProgram, but the AOTI code checks min 2" in f.message
    # one finding per symbol and side, although both inputs carry the same bound
    assert check_package(read_package(pkg("ep_only")), [model(pkg, "ep_only")]) == []
    assert check_package(read_package(pkg("aoti")), [model(pkg, "aoti")]) == []


def test_a_narrower_aoti_maximum_is_reported(pkg: Pkg) -> None:
    m = model(pkg, "both")
    narrow = tuple(
        dataclasses.replace(
            i,
            tensor=dataclasses.replace(
                i.tensor, bounds=(i.tensor.bounds[0], dataclasses.replace(i.tensor.bounds[1], max=100))
            ),
        )
        for i in m.inputs
    )  # fmt: skip
    found = check_package(read_package(pkg("both")), [dataclasses.replace(m, inputs=narrow)])
    assert [(f.code, f.dim, f.expected, f.actual) for f in found] == [
        ("AOT013", 0, 1, 2),
        ("AOT013", 1, 128, 100),
    ]
    assert (
        "has max 128 in the ExportedProgram, but the AOTI code checks max 100" in found[1].message
    )


def test_facts_of_the_compiled_code(pkg: Pkg) -> None:
    # every CPU AOTI package: the -march of its .so (AOT051); AOTI-only: the producing torch
    # (AOT052); an ExportedProgram-only archive has no compiled code to tell of
    def facts(name: str) -> list[tuple[str, str]]:
        info = read_package(pkg(name))
        return summary(check_package_with_facts(info, list(info.models)))

    assert ("AOT051", "info") in facts("both") and ("AOT052", "info") not in facts("both")
    assert {("AOT051", "info"), ("AOT052", "info")} <= set(facts("aoti"))
    assert facts("ep_only") == []


def test_package_level_findings(pkg: Pkg) -> None:
    assert summary(check_package(read_package(pkg("broken_crc")), [model(pkg, "broken_crc")])) == [
        ("AOT008", "error")
    ]
    assert summary(check_package(read_package(pkg("weights_on_disk")), [model(pkg, "weights_on_disk")])) == [
        ("AOT011", "error")
    ]  # fmt: skip
    odd = with_aoti(model(pkg, "aoti"), device_type="npu")
    assert summary(check_package(read_package(pkg("aoti")), [odd])) == [("AOT014", "warning")]
    assert check_package(read_package(pkg("aoti")), [with_aoti(odd, device_type="cuda:1")]) == []


def test_no_contract(pkg: Pkg) -> None:
    m = dataclasses.replace(
        model(pkg, "aoti"), contract_source="none", notes=("wrapper.cpp absent",)
    )
    (f,) = check_package(read_package(pkg("aoti")), [m])
    assert f.code == "AOT012" and "wrapper.cpp absent" in f.message


def local(**fields: object) -> HostInfo:
    base = HostInfo("this machine", frozenset({"cpu"}), cpu_isa=frozenset({"AVX2", "AVX512"}),
                    platform="linux", machine="x86_64")  # fmt: skip
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def host_codes(
    m: ModelInfo, host: HostInfo, soft: bool = False, scan: IsaScanner | None = None
) -> list[tuple[str, str]]:
    return summary(check_host(m, host, soft=soft, scan=scan))


AVX512 = Path(__file__).resolve().parents[1] / "data" / "isa" / "avx512.pt2"
"""CPU code compiled for -march=skylake-avx512 with inductor's AVX-512 vector code (and VNNI
enabled), whatever the host that runs the tests (tests/data/isa/build.py)."""


def test_cpu_package_on_hosts() -> None:
    # what the package needs is judged from its decoded instructions (the scan): AVX512F/BW/VL/DQ;
    # VNNI is enabled by the compiler flags, unused
    scan = IsaScanner(str(AVX512))
    m = with_aoti(read_package(AVX512).model("encoder"), cpu_isa=("AVX512",))
    assert host_codes(m, local(), scan=scan) == []
    # enabled but unused extensions the target lacks: it loads (info)
    assert host_codes(m, parse_target("cpu,isa=avx512"), scan=scan) == [("AOT437", "info")]
    assert host_codes(m, parse_target("cpu,isa=avx2"), scan=scan) == [
        ("AOT436", "error"),  # AVX-512 instructions the target lacks: SIGILL
        ("AOT437", "info"),
    ]
    assert host_codes(m, parse_target("cpu,isa=avx2"), soft=True, scan=scan) == [
        ("AOT436", "info"),
        ("AOT437", "info"),
    ]
    # without an instruction scan the enabled extensions are all it knows: it may die (AOT403)
    (f,) = check_host(m, parse_target("cpu,isa=avx512"), soft=False)
    assert (f.code, f.severity) == ("AOT403", Severity.ERROR)
    assert "is unknown (no instruction scan): it may die with SIGILL" in f.message
    assert host_codes(m, local(cpu_isa=None)) == []  # unknown: not claimed
    assert host_codes(m, parse_target("cpu,platform=darwin")) == [("AOT404", "error")]
    assert host_codes(m, parse_target("cpu,platform=Linux")) == []
    assert host_codes(m, parse_target("cpu,machine=aarch64")) == [("AOT404", "error")]
    assert host_codes(m, parse_target("cpu,machine=x86_64")) == []
    # a cpu package on a cuda deployment: cpu is there, but not where it deploys (an error,
    # as the code table documents)
    assert host_codes(m, parse_target("cuda")) == [("AOT406", "error")]
    assert host_codes(m, local(device_types=frozenset({"cpu", "cuda"}))) == []


def test_unknown_isa_words_are_not_missing(pkg: Pkg) -> None:
    # the metadata words (AOTI_CPU_ISA) count where the .so records no compiler command line
    aoti = model(pkg, "aoti").aoti
    assert aoti is not None and aoti.binaries is not None
    bare = dataclasses.replace(aoti.binaries, shared_objects=tuple(
        dataclasses.replace(so, flags=None) for so in aoti.binaries.shared_objects))  # fmt: skip
    m = with_aoti(model(pkg, "aoti"), binaries=bare, cpu_isa=("AVX512", "SOMETHING_NEW"))
    assert host_codes(m, parse_target("cpu,isa=avx512")) == []
    amx = with_aoti(m, cpu_isa=("AVX512", "AMX_TILE"))
    (f,) = check_host(amx, parse_target("cpu,isa=avx512"), soft=False)
    assert (f.code, f.severity) == ("AOT403", Severity.ERROR)
    assert "with AMX_BF16, AMX_INT8, AMX_TILE enabled (AOTI_CPU_ISA AVX512 AMX_TILE)" in f.message
    assert "SOMETHING_NEW" not in f.message


def test_cuda_package_on_hosts(pkg: Pkg) -> None:
    m = with_aoti(model(pkg, "aoti"), device_type="cuda", compute_capability="90", cpu_isa=())
    assert host_codes(m, local()) == [("AOT401", "error")]
    assert host_codes(m, local(), soft=True) == [("AOT401", "info")]
    assert host_codes(m, parse_target("cuda,cc=9.0")) == []
    assert host_codes(m, parse_target("cuda,cc=8.0+9.0")) == []
    assert host_codes(m, parse_target("cuda,cc=8.0")) == [("AOT402", "error")]
    assert host_codes(m, parse_target("cuda")) == []  # capability unknown: not claimed
    assert host_codes(m, parse_target("cpu")) == [("AOT401", "error")]
    (f,) = check_host(m, parse_target("cuda,cc=8.0"), soft=False)
    assert (f.expected, f.actual) == ("9.0", ["8.0"])
    xpu = with_aoti(m, device_type="xpu", compute_capability=None)
    assert host_codes(xpu, local()) == [("AOT406", "error")]


def test_exported_program_only_has_no_host_findings(pkg: Pkg) -> None:
    assert check_host(model(pkg, "ep_only"), parse_target("cuda,cc=9.0"), soft=False) == []


def test_an_unbounded_export_maximum_with_an_aoti_maximum(pkg: Pkg) -> None:
    m = model(pkg, "both")
    m = dataclasses.replace(m, symbols=tuple(dataclasses.replace(s, max=None) for s in m.symbols))
    found = check_package(read_package(pkg("both")), [m])
    assert [(f.code, f.dim, f.expected, f.actual) for f in found] == [
        ("AOT013", 0, 1, 2),
        ("AOT013", 0, None, 64),
        ("AOT013", 1, None, 128),
    ]


def test_dims_without_aoti_bounds_are_not_compared(pkg: Pkg) -> None:
    m = model(pkg, "both")
    m = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, bounds=(None, None))) for i in m.inputs
    ))  # fmt: skip
    assert check_package(read_package(pkg("both")), [m]) == []


@pytest.mark.parametrize(
    "cc, shown", [("90", "9.0"), ("100", "10.0"), ("9", "9"), ("sm90", "sm90")]
)
def test_compute_capability_is_shown_as_major_minor(pkg: Pkg, cc: str, shown: str) -> None:
    m = with_aoti(model(pkg, "aoti"), device_type="cuda", compute_capability=cc, cpu_isa=())
    (f,) = check_host(m, parse_target("cuda,cc=7.5"), soft=False)
    assert f.expected == shown


def test_opaque_objects_are_named_four_at_most(pkg: Pkg) -> None:
    info = read_package(pkg("both"))
    members = tuple(f"both/data/constants/opaque_obj_{n}" for n in range(5))

    def aot080(opaque: tuple[str, ...]) -> Finding:
        (f,) = check_package(dataclasses.replace(info, opaque_objects=opaque), [])
        assert (f.code, f.severity, f.stage) == ("AOT080", Severity.WARNING, "static")
        assert f.actual == list(opaque)
        return f

    tail = (
        ") that torch.export.load and load_pt2 unpickle with pickle.loads; aotipre did not "
        "unpickle them"
    )
    assert aot080(members).message == (
        "the package stores 5 opaque Python object(s) (opaque_obj_0, opaque_obj_1, "
        "opaque_obj_2, opaque_obj_3 and 1 more" + tail
    )
    assert aot080(members[:4]).message == (
        "the package stores 4 opaque Python object(s) (opaque_obj_0, opaque_obj_1, "
        "opaque_obj_2, opaque_obj_3" + tail
    )
    assert check_package(info, []) == []  # the fixture stores none


def with_symbol_min(m: ModelInfo, old: int, new: int) -> ModelInfo:
    symbols = tuple(dataclasses.replace(s, min=new) if s.min == old else s for s in m.symbols)
    return dataclasses.replace(m, symbols=symbols)


def test_an_aoti_minimum_of_2_over_0_or_1_carries_the_zero_one_hint(pkg: Pkg) -> None:
    # both.pt2: export lets the batch (s43) go down to 1, the AOTI code checks >= 2
    info = read_package(pkg("both"))
    (one,) = check_package(info, [model(pkg, "both")])
    assert (one.code, one.expected, one.actual) == ("AOT013", 1, 2)
    assert one.hint is not None
    assert "AOTInductor specializes sizes 0 and 1 away" in one.hint
    assert "to accept 1, export under" in one.hint
    (zero,) = check_package(info, [with_symbol_min(model(pkg, "both"), 1, 0)])
    assert (zero.code, zero.expected, zero.actual) == ("AOT013", 0, 2)
    assert zero.hint is not None and "to accept 0, export under" in zero.hint


def test_other_narrower_minimums_carry_no_hint(pkg: Pkg) -> None:
    # an AOTI minimum of 3 over an export minimum of 2 (both symbols): sizes 0 and 1 are not
    # involved, so the finding keeps the code's own hint, not the zero-one one
    m = model(pkg, "both")
    m = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, bounds=tuple(
            dataclasses.replace(b, min=3) for b in i.tensor.bounds)))
        for i in m.inputs
    ))  # fmt: skip
    m = with_symbol_min(m, 1, 2)
    found = check_package(read_package(pkg("both")), [m])
    assert [(f.code, f.dim, f.expected, f.actual) for f in found] == [
        ("AOT013", 0, 2, 3),
        ("AOT013", 1, 2, 3),
    ]
    assert [f.hint for f in found] == [
        "inputs inside the export range but outside the AOTI range are rejected at run time"
    ] * 2


def aot051(pkg: Pkg, **fields: object) -> list[Finding]:
    """The CPU-target facts of aoti.pt2 with its AOTI part's `fields` replaced."""
    m = with_aoti(model(pkg, "aoti"), **fields)
    return [
        f for f in check_package_with_facts(read_package(pkg("aoti")), [m]) if f.code == "AOT051"
    ]


def without_flags(pkg: Pkg) -> object:
    aoti = model(pkg, "aoti").aoti
    assert aoti is not None and aoti.binaries is not None
    return dataclasses.replace(aoti.binaries, shared_objects=tuple(
        dataclasses.replace(so, flags=None) for so in aoti.binaries.shared_objects))  # fmt: skip


def test_the_cpu_target_from_the_compiler_flags_alone() -> None:
    # the -march read from the .so's compiler command line, no AOTI_CPU_ISA metadata: still
    # told. The package's flags are fixed (tests/data/isa/build.py: -march=skylake-avx512 and
    # inductor's AVX-512 flags), whatever host and torch built the fixtures (a torch that builds
    # without DWARF records no command line at all)
    info = read_package(AVX512)
    m = with_aoti(info.model("encoder"), cpu_isa=())
    (f,) = [f for f in check_package_with_facts(info, [m]) if f.code == "AOT051"]
    assert f.severity is Severity.INFO
    assert f.message.startswith("model 'encoder': CPU code compiled for -march=skylake-avx512 (")
    assert all(ext in f.message for ext in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))
    assert "avx512_vnni" in f.message  # inductor's -mavx512vnni beside the -march
    assert "metadata AOTI_CPU_ISA" not in f.message
    assert f.evidence[0].endswith(".wrapper.so: .debug_str")


def test_the_cpu_target_from_the_metadata_alone(pkg: Pkg) -> None:
    # no compiler command line in the .so: the metadata words are all there is
    (f,) = aot051(pkg, binaries=without_flags(pkg), cpu_isa=("AVX512", "AMX_TILE"))
    assert f.message == (
        "model 'model': CPU code compiled for an unknown -march (enabled: no AVX-512/AMX; "
        "metadata AOTI_CPU_ISA: AVX512 AMX_TILE)"
    )
    assert f.actual == ["AVX512", "AMX_TILE"]
    assert f.evidence[0].endswith(".wrapper.so: metadata")


def test_no_cpu_target_without_flags_or_metadata_or_on_gpu(pkg: Pkg) -> None:
    assert aot051(pkg, binaries=without_flags(pkg), cpu_isa=()) == []
    # the .so of a cuda package is host code: its -march is not the device's target
    assert aot051(pkg, device_type="cuda", compute_capability="90", cpu_isa=()) == []


def test_the_gpu_code_members_and_their_images(pkg: Pkg) -> None:
    from aotipre.binaries.cuda import GpuImage
    from aotipre.binaries.facts import GpuMember

    aoti = model(pkg, "aoti").aoti
    assert aoti is not None and aoti.binaries is not None

    def aot053(*gpu: GpuMember) -> Finding:
        binaries = dataclasses.replace(aoti.binaries, gpu=gpu)
        m = with_aoti(model(pkg, "aoti"), device_type="cuda", binaries=binaries)
        (f,) = [
            f
            for f in check_package_with_facts(read_package(pkg("aoti")), [m])
            if f.code == "AOT053"
        ]
        return f

    sass = GpuMember("m/a.cubin", images=(GpuImage("sass", "90"),))
    fat = GpuMember("m/b.fatbin", images=(GpuImage("sass", "80"), GpuImage("ptx", "90", (8, 4))))
    f = aot053(sass, fat)
    assert f.message == (
        "model 'model': 2 GPU code member(s) carry compute_90, sm_80, sm_90 (PTX ISA 8.4)"
    )
    assert f.actual == ["compute_90", "sm_80", "sm_90"]
    assert aot053(sass).message == "model 'model': 1 GPU code member(s) carry sm_90; no PTX"
