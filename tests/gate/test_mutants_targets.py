"""Can a target load and run a model's compiled code (checks/target.py), and what a `--target`
says (host.py): the cases the fixture packages do not reach, on the real `aoti` model with its
binaries' facts replaced by written ones (a SharedObject's symbol versions, imports and compile
flags; GPU images with their SASS/PTX and toolkits; an instruction scan's counts). The facts
are what aotipre.binaries reads from real files (tests/binaries hold those readers' tests); the
expectations come from the rules the module documents (the CUDA compatibility rules in
binaries/cuda.py, the x86-64 psABI levels in host.py).

Written for the mutation run (scripts/mutate.py, session 11)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.binaries.cuda import GpuImage
from aotipre.binaries.facts import BinaryFacts, CompileFlags, GpuMember, SharedObject
from aotipre.binaries.x86 import FeatureUse, IsaScan
from aotipre.checks.target import CANNOT_RUN, check_host, row_for
from aotipre.environment.host import (
    ISA_LEVELS,
    HostInfo,
    TorchRuntime,
    is_target_name,
    isa_flags,
    isa_words,
    parse_target,
    parse_targets,
)
from aotipre.findings import Finding, Severity
from aotipre.foundation.errors import UsageError
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo

Pkg = Callable[[str], Path]
SO = "aoti/data/aotinductor/model/cj44olkxn6sytspxsprmfm4o26t5ccs3ac2a2y4zh7ynxrlcwa6a.wrapper.so"


@pytest.fixture
def aoti(pkg: Pkg) -> ModelInfo:
    return read_package(pkg("aoti")).models[0]


def with_aoti(model: ModelInfo, **fields: object) -> ModelInfo:
    assert model.aoti is not None
    return dataclasses.replace(model, aoti=dataclasses.replace(model.aoti, **fields))  # type: ignore[arg-type]


def with_sos(model: ModelInfo, *sos: SharedObject, **fields: object) -> ModelInfo:
    return with_aoti(model, binaries=BinaryFacts(shared_objects=sos), **fields)


def so(**fields: object) -> SharedObject:
    base = SharedObject(member=SO, machine="x86_64", versions=("GLIBC_2.34",))
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def cuda_model(model: ModelInfo, *members: GpuMember) -> ModelInfo:
    return with_aoti(
        model, device_type="cuda", binaries=BinaryFacts(shared_objects=(so(),), gpu=members)
    )


def summary(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity.value) for f in findings]


# ---------------------------------------------------------------------------------------------
# the table row


def test_a_row_with_warnings_says_what_it_needs(aoti: ModelInfo) -> None:
    host = parse_target("cpu")
    warn = [
        Finding("AOT435", Severity.WARNING, "x", model="model", message="jit", hint="add SASS"),
        Finding("AOT409", Severity.WARNING, "x", model="model", message="disk"),
        Finding("AOT437", Severity.WARNING, "x", model="model", message="third", hint="third"),
    ]
    row = row_for(aoti, host, warn)
    assert row.status == "needs add SASS; AOT409"
    assert row.reasons == ("AOT435: jit", "AOT409: disk", "AOT437: third")
    assert row_for(aoti, host, warn[:1]).status == "needs add SASS"
    # another model's findings are not this row's
    other = [dataclasses.replace(f, model="other") for f in warn]
    assert row_for(aoti, host, other).status == "loads"


def test_a_row_cannot_run_only_when_every_error_is_about_running(aoti: ModelInfo) -> None:
    host = parse_target("cpu")
    run = Finding("AOT436", Severity.ERROR, "x", model="model", message="sigill")
    load = Finding("AOT431", Severity.ERROR, "x", model="model", message="glibc")
    assert "AOT436" in CANNOT_RUN and "AOT431" not in CANNOT_RUN
    assert row_for(aoti, host, [run]).status == "cannot run"
    assert row_for(aoti, host, [run, load]).status == "cannot load"


# ---------------------------------------------------------------------------------------------
# platform and machine


def test_the_metadata_machine_counts_only_without_a_readable_so(aoti: ModelInfo) -> None:
    host = dataclasses.replace(parse_target("cpu"), machine="x86_64")
    # the ELF header says x86_64, the metadata aarch64: the .so is what is loaded
    assert check_host(with_aoti(aoti, machine="aarch64"), host, soft=False) == []
    # no readable .so: the metadata's word
    unread = with_sos(aoti, so(error="truncated"), machine="aarch64")
    (f,) = check_host(unread, host, soft=False)
    assert f.code == "AOT404" and "compiled for aarch64 (metadata)" in f.message
    assert check_host(with_sos(aoti, so(error="x"), machine="amd64"), host, soft=False) == []


# ---------------------------------------------------------------------------------------------
# the C library and C++ runtime


def test_a_glibc_exactly_as_new_as_needed_loads(aoti: ModelInfo) -> None:
    model = with_sos(aoti, so(versions=("GLIBC_2.34", "GLIBCXX_3.4.30", "CXXABI_1.3.9")))
    exact = parse_target("cpu,glibc=2.34,libstdcxx=3.4.30")
    assert check_host(model, dataclasses.replace(exact, cxxabi="1.3.9"), soft=False) == []
    older = parse_target("cpu,glibc=2.33,libstdcxx=3.4.29")
    found = check_host(model, dataclasses.replace(older, cxxabi="1.3.8"), soft=False)
    assert summary(found) == [("AOT431", "error"), ("AOT432", "error"), ("AOT432", "error")]
    assert [(f.expected, f.actual) for f in found] == [
        ("GLIBC_2.34", "GLIBC_2.33"),
        ("GLIBCXX_3.4.30", "GLIBCXX_3.4.29"),
        ("CXXABI_1.3.9", "CXXABI_1.3.8"),
    ]


# ---------------------------------------------------------------------------------------------
# torch's exports


def test_missing_symbols_are_called_shim_functions_only_when_all_are(aoti: ModelInfo) -> None:
    imports = ("_ZN3c105ErrorC1Ev", "aoti_torch_new")
    model = with_sos(aoti, so(imports=imports))
    nothing = TorchRuntime("2.13.0", "libtorch /x", frozenset())
    host = dataclasses.replace(parse_target("cpu"), torch=nothing)
    (f,) = check_host(model, host, soft=False)
    assert f.code == "AOT430" and "imports 2 symbol(s) torch 2.13.0 does not export" in f.message
    c10 = TorchRuntime("2.13.0", "libtorch /x", frozenset({"_ZN3c105ErrorC1Ev"}))
    (f,) = check_host(model, dataclasses.replace(host, torch=c10), soft=False)
    assert "imports 1 shim function(s) torch 2.13.0 does not export" in f.message
    assert f.expected == ["aoti_torch_new"]


# ---------------------------------------------------------------------------------------------
# GPU code: SASS, PTX, the driver


def sass(arch: str, toolkit: str | None = None) -> GpuImage:
    return GpuImage("sass", arch, toolkit=toolkit)


def ptx(arch: str, version: tuple[int, int]) -> GpuImage:
    return GpuImage("ptx", arch, ptx_version=version)


def test_members_without_code_for_a_gpu_are_named_up_to_three(aoti: ModelInfo) -> None:
    members = [
        GpuMember(f"aoti/data/aotinductor/model/k{i}.cubin", (sass("80"),)) for i in range(4)
    ]
    host = parse_target("cuda,cc=9.0")
    (f,) = check_host(cuda_model(aoti, *members), host, soft=False)
    assert (
        f.code == "AOT433" and "model 'model': 4 of 4 GPU code member(s) have no SASS" in f.message
    )
    assert f.evidence == ("k0.cubin", "k1.cubin", "k2.cubin")
    (f,) = check_host(cuda_model(aoti, *members[:3]), host, soft=False)
    assert f.evidence == ("k0.cubin", "k1.cubin", "k2.cubin")


def test_the_driver_is_judged_on_the_sass_when_a_member_has_both(aoti: ModelInfo) -> None:
    # SASS sm_90 built by CUDA 12 runs from driver 525.60.13 (minor version compatibility); the
    # PTX ISA 9.0 beside it needs CUDA 13's driver (580.65.06) to be JIT-compiled
    both = GpuMember("k.fatbin", (ptx("90", (9, 0)), sass("90", "12.4")))
    model = cuda_model(aoti, both)
    assert check_host(model, parse_target("cuda,cc=9.0,driver=550"), soft=False) == []
    # a device that cannot run the SASS (sm_90 on 8.9... no: PTX compute_90 runs on 10.0) JITs
    found = check_host(model, parse_target("cuda,cc=10.0,driver=550"), soft=False)
    assert summary(found) == [("AOT435", "info"), ("AOT434", "error")]
    assert found[1].expected == "580.65.06" and "runs PTX ISA 9.0 (k.fatbin)" in found[1].message


def test_a_driver_exactly_as_new_as_needed_runs(aoti: ModelInfo) -> None:
    model = cuda_model(aoti, GpuMember("k.cubin", (sass("90", "12.8"),)))
    assert check_host(model, parse_target("cuda,cc=9.0,driver=525.60.13"), soft=False) == []
    (f,) = check_host(model, parse_target("cuda,cc=9.0,driver=525.60.12"), soft=False)
    assert (f.code, f.expected, f.actual) == ("AOT434", "525.60.13", "525.60.12")
    assert "it runs SASS built by CUDA 12.8 (k.cubin), which needs an NVIDIA driver >= " in (
        f.message
    )
    # an image whose driver is unknown (no toolkit note) is not judged
    unknown = cuda_model(aoti, GpuMember("k.cubin", (sass("90"),)))
    assert check_host(unknown, parse_target("cuda,cc=9.0,driver=400"), soft=False) == []


def test_the_newest_driver_any_member_needs_is_said(aoti: ModelInfo) -> None:
    old = GpuMember("a.cubin", (sass("90", "11.8"),))  # 450.80.02
    new = GpuMember("b.cubin", (sass("90", "13.0"),))  # 580.65.06
    mid = GpuMember("c.cubin", (sass("90", "12.1"),))  # 525.60.13
    for order in ((old, new, mid), (new, mid, old), (mid, old, new)):
        (f,) = check_host(
            cuda_model(aoti, *order), parse_target("cuda,cc=9.0,driver=470"), soft=False
        )
        assert (f.code, f.expected) == ("AOT434", "580.65.06") and "(b.cubin)" in f.message


# ---------------------------------------------------------------------------------------------
# CPU code: what the scan found, what the flags say


def avx512_so(**fields: object) -> SharedObject:
    flags = CompileFlags("znver4", ("avx2", "avx512f", "fma", "gfni"), ".debug_str")
    return so(flags=flags, **fields)


def scan_of(*uses: FeatureUse, complete: bool = True, error: str | None = None) -> Callable:
    result = IsaScan(1000, uses, scanned_bytes=100 if complete else 50, text_bytes=100, error=error)
    return lambda member: result


def use(flag: str, count: int = 3) -> FeatureUse:
    return FeatureUse(flag, count, f"an {flag} instruction at 0x10")


AVX2_HOST = "cpu,isa=avx2"
"""x86-64-v3: has avx2 and fma, lacks avx512f (a vector unit) and gfni (not one)."""


def test_unused_extensions_the_host_lacks_are_reported_only_if_notable(aoti: ModelInfo) -> None:
    # avx512f (a vector unit: notable) and gfni (not) are enabled, lacking on the host, unused
    model = with_sos(aoti, avx512_so(), cpu_isa=())
    found = check_host(model, parse_target(AVX2_HOST), soft=False, scan=scan_of(use("avx2")))
    (f,) = found
    assert (f.code, f.severity, f.expected) == ("AOT437", Severity.INFO, ["avx512f"])
    # used: an error (SIGILL), and no "unused" note for what the code uses
    found = check_host(
        model, parse_target(AVX2_HOST), soft=False, scan=scan_of(use("avx512f"), use("gfni"))
    )
    assert summary(found) == [("AOT436", "error")]
    assert found[0].expected == ["avx512f", "gfni"]
    # an incomplete scan cannot say the code does not use them
    found = check_host(
        model, parse_target(AVX2_HOST), soft=False, scan=scan_of(use("avx2"), complete=False)
    )
    assert found == []


def test_without_a_scan_the_compile_flags_decide(aoti: ModelInfo) -> None:
    model = with_sos(aoti, avx512_so(), cpu_isa=("AVX512", "ASIMD"))
    host = parse_target(AVX2_HOST)
    (f,) = check_host(model, host, soft=False, scan=scan_of(error="no decoder"))
    assert f.code == "AOT403" and "unknown (no decoder)" in f.message
    assert f.expected == ["AVX512"]  # the AOTI_CPU_ISA words of the x86 rank only
    # what the host has of the extensions: x86-64-v3's
    assert f.actual == ["abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "pni",
                        "popcnt", "sse4_1", "sse4_2", "ssse3"]  # fmt: skip
    # no AOTI_CPU_ISA word: the flags themselves
    (f,) = check_host(with_sos(aoti, avx512_so(), cpu_isa=()), host, soft=False)
    assert f.code == "AOT403" and f.expected == ["avx512f", "gfni"]
    assert "unknown (no instruction scan)" in f.message


def test_the_cpu_is_judged_beside_other_incompatibilities_but_not_another_platform(
    aoti: ModelInfo,
) -> None:
    model = with_sos(aoti, avx512_so(versions=("GLIBC_2.34",)), cpu_isa=())
    host = parse_target(AVX2_HOST + ",glibc=2.31")
    assert [f.code for f in check_host(model, host, soft=False)] == ["AOT431", "AOT403"]
    arm = dataclasses.replace(host, machine="aarch64", glibc=None)
    assert [f.code for f in check_host(model, arm, soft=False)] == ["AOT404"]


# ---------------------------------------------------------------------------------------------
# --target


def test_a_release_is_major_dot_minor() -> None:
    assert TorchRuntime("2.13.0+cpu", "x").release == "2.13"
    assert TorchRuntime("2.12", "x").release == "2.12"
    assert TorchRuntime("2.15.0.dev20260101", "x").release == "2.15"


def test_an_isa_word_needs_every_flag_of_it() -> None:
    assert isa_words(frozenset({"avx2"})) == frozenset()  # AVX2 needs fma too
    assert isa_words(frozenset({"avx2", "fma"})) == {"AVX2"}
    assert isa_words(frozenset()) == frozenset()
    assert isa_words(frozenset(ISA_LEVELS["avx512"])) == {"AVX2", "AVX512"}


def test_an_unknown_name_lists_the_configured_ones() -> None:
    with pytest.raises(UsageError, match=r"\(none is configured\)$"):
        parse_targets("fleet")
    with pytest.raises(UsageError, match=r"\(a100, h100\)$"):
        parse_targets("fleet", {"a100": "cuda,cc=8.0", "h100": "cuda,cc=9.0"})


def test_isa_flags_and_target_names() -> None:
    assert isa_flags("x86-64-v2") == frozenset(ISA_LEVELS["x86-64-v2"])
    assert is_target_name("fleet") and is_target_name("a100.prod-1")
    assert not is_target_name("cpu") and not is_target_name("CUDA:1")
    assert not is_target_name("cpu,isa=avx2") and not is_target_name("two words")
    host = parse_target("cuda:1,cc=9.0")
    assert (host.primary_device, host.device_types) == ("cuda", frozenset({"cpu", "cuda"}))
    assert isinstance(host, HostInfo) and host.is_target


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cpu,glibc=", "--target item 'glibc=' is not key=value"),
        ("cpu,isa", "--target item 'isa' is not key=value"),
        ("cpu,checks-inputs= ", "--target item 'checks-inputs=' is not key=value"),
        ("cpu,checks-inputs=maybe", "--target checks-inputs='maybe' is not yes or no"),
        ("tpu:0,cc=9.0", "--target device 'tpu:0' is not one of cpu, cuda, xpu, mps"),
    ],
)
def test_a_bad_target_item_is_one_usage_error(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_target(spec)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("word", "checks"),
    [("yes", True), ("TRUE", True), ("1", True), ("on", True), ("no", False), ("Off", False),
     ("0", False), ("false", False)],
)  # fmt: skip
def test_checks_inputs_is_yes_or_no(word: str, checks: bool) -> None:
    assert parse_target(f"cpu,checks-inputs={word}").checks_inputs is checks
    assert parse_target("cpu").checks_inputs is None


def test_the_hint_for_a_gpu_older_than_the_compile_gpu() -> None:
    from aotipre.checks.target import _below_compile_gpu

    assert "compiled on sm_90" in _below_compile_gpu("90", "8.0")["hint"]
    assert "(sm_86)" in _below_compile_gpu("90", "8.6")["hint"]
    assert _below_compile_gpu("90", "9.0") == {} and _below_compile_gpu("90", "10.0") == {}
    assert _below_compile_gpu("", "8.0") == {} and _below_compile_gpu(None, "8.0") == {}
    assert _below_compile_gpu("9a", "8.0") == {} and _below_compile_gpu("12345", "8.0") == {}
    assert "sm_100" in _below_compile_gpu("100", "9")["hint"]


def _bug_host(*issues: int) -> object:
    from aotipre.binaries.torch_bugs import KnownBug
    from aotipre.environment.host import HostInfo, TorchRuntime

    bugs = tuple(KnownBug(i, f"bug {i}", f"file.py:{i % 1000}", "python") for i in issues)
    return HostInfo(
        "target cpu", frozenset({"cpu"}), is_target=True, name="fleet",
        torch=TorchRuntime("2.15.0", "libtorch /t", frozenset(), bugs),
    )  # fmt: skip


def _bug_package(models: int, *, members: int = 3, total: int = 100) -> tuple[object, list]:
    from aotipre.pt2.spec import AotiPart, ConstantSpec, MemberInfo, ModelInfo, PackageInfo

    out = []
    names = []
    for i in range(models):
        so = f"p/data/aotinductor/m{i}/x.wrapper.so"
        names.append(MemberInfo(so, 1_500_000 * (i + 1), 0, 0))
        aoti = AotiPart(f"p/data/aotinductor/m{i}", "cpu", None, None, (), None, {}, None,
                        (so,), (), False)  # fmt: skip
        consts = (ConstantSpec("w", "w", "float32", (1024, 1024), "Parameter", False, 4_194_304),)
        out.append(ModelInfo(f"m{i}", False, aoti, None, None, (), (), (), None, "none",
                             constants=consts if i else ()))  # fmt: skip
    names += [MemberInfo(f"p/x{j}", 1, 1, 0) for j in range(members - len(names))]
    package = PackageInfo("p.pt2", "aoti", "p", "pt2", "0", tuple(out), tuple(names),
                          total_size=total)  # fmt: skip
    return package, out


def test_runtime_bugs_are_reported_where_the_package_meets_them() -> None:
    from aotipre.checks.target import (
        LARGE_PACKAGE_BYTES,
        LARGE_PACKAGE_MEMBERS,
        check_runtime_bugs,
    )

    host = _bug_host(194128, 191715, 196026, 196025)
    one, models = _bug_package(1)
    found = check_runtime_bugs(one, models, host)  # type: ignore[arg-type]
    assert [f.code for f in found] == ["AOT440", "AOT441"]
    assert found[0].message.startswith("target fleet: torch 2.15.0 has the C++ loader's JSON race")
    assert "(torch issue #194128; file.py:128)" in found[0].message
    assert found[0].evidence == ("file.py:128",) and found[0].severity is Severity.INFO
    # two models: each one's load also loads the other, with what that costs
    two, models = _bug_package(2)
    found = [f for f in check_runtime_bugs(two, models, host) if f.code == "AOT442"]  # type: ignore[arg-type]
    assert [f.model for f in found] == ["m0", "m1"]
    assert "loading 'm0' also loads 'm1' (1 .so of 3.0 MB, 4.2 MB of constants on cpu)" in (
        found[0].message
    )
    assert "loading 'm1' also loads 'm0' (1 .so of 1.5 MB)" in found[1].message
    assert all("(torch issue #196026;" in f.message for f in found)
    # a .so the archive does not list: its count, no size
    lost, models = _bug_package(2)
    lost = dataclasses.replace(lost, members=())  # type: ignore[type-var]
    (f,) = [
        f for f in check_runtime_bugs(lost, models, host) if f.model == "m0" and f.code == "AOT442"
    ]  # type: ignore[arg-type]
    assert "also loads 'm1' (1 .so, 4.2 MB of constants on cpu)" in f.message
    # the metadata read twice: from LARGE_PACKAGE_MEMBERS members or LARGE_PACKAGE_BYTES on
    for members, total, reported in (
        (LARGE_PACKAGE_MEMBERS - 1, LARGE_PACKAGE_BYTES - 1, False),
        (LARGE_PACKAGE_MEMBERS, 100, True),
        (3, LARGE_PACKAGE_BYTES, True),
    ):
        big, models = _bug_package(1, members=members, total=total)
        codes_found = [f.code for f in check_runtime_bugs(big, models, host)]  # type: ignore[arg-type]
        assert ("AOT443" in codes_found) is reported, (members, total)
    # nothing read, no bug, no AOTI code: nothing said
    assert check_runtime_bugs(one, models, _bug_host()) == []  # type: ignore[arg-type]
    no_code = [dataclasses.replace(m, aoti=None) for m in models]
    assert check_runtime_bugs(one, no_code, host) == []  # type: ignore[arg-type]


def test_sizes_read_as_people_write_them() -> None:
    from aotipre.checks.target import _size

    assert [_size(n) for n in (512, 1_000, 1_500, 1_000_000, 4_194_304, 3_200_000_000)] == [
        "512 bytes", "1.0 KB", "1.5 KB", "1.0 MB", "4.2 MB", "3.2 GB",
    ]  # fmt: skip


def test_the_compile_gpu_hint_at_its_limits() -> None:
    from aotipre.checks.target import _below_compile_gpu

    assert "(sm_05)" in _below_compile_gpu("9", "0.5")["hint"]
    assert "sm_1000" in _below_compile_gpu("1000", "9.0")["hint"]
    assert (
        _below_compile_gpu("85", "8.6") == {}
        and "(sm_84)" in _below_compile_gpu("85", "8.4")["hint"]
    )
