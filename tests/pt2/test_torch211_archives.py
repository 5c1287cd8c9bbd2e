"""Archives written by torch 2.11 (on the GPU test machine) read and check like 2.13 ones.

The files in tests/data/torch211/ were built by scripts/build_fixtures.py under torch
2.11.0+cu130 and slimmed by scripts/slim_package.py (binaries replaced by a stub; every metadata
member byte-identical), so they are for inspection only. multi_arch_cuda.pt2 is
tests/binaries/build_packages.py's multi_arch package (the small MLP compiled with
aot_inductor.emit_multi_arch_kernel=True), built on the H200 (torch 2.11.0+cu130) and slimmed
with --keep-gpu-code: its two fatbins are the real GPU code, its .so a stub.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Severity, Verdict
from aotipre.pt2.reader import read_package

DATA = Path(__file__).resolve().parents[1] / "data" / "torch211"
Pkg = Callable[[str], Path]


@pytest.mark.parametrize(
    "name, kind, device",
    [
        ("ep_only", "exported_program", "cpu"),
        ("both", "both", "cpu"),
        ("derived", "both", "cpu"),
        ("kwargs", "both", "cpu"),
        ("strides", "aoti", "cpu"),
        ("aoti_cuda", "aoti", "cuda"),
        ("both_cuda", "both", "cuda"),
    ],
)
def test_inspect(name: str, kind: str, device: str) -> None:
    info = read_package(DATA / f"{name}.pt2")
    assert info.kind == kind and info.archive_version == "0"
    (model,) = info.models
    assert model.device_type == device
    assert model.inputs, "an input contract was read"
    if model.has_exported_program:
        assert model.torch_version and model.torch_version.startswith("2.11")
        assert model.contract_source == "exported_program"
    else:
        assert model.contract_source == "wrapper_cpp"
    if device == "cuda":
        assert model.aoti is not None and model.aoti.compute_capability == "90"
        assert all(i.tensor is not None and i.tensor.device == "cuda" for i in model.inputs)


def test_aoti_only_cuda_contract_from_wrapper() -> None:
    (model,) = read_package(DATA / "aoti_cuda.pt2").models
    ids, mask = model.inputs
    assert ids.tensor is not None and mask.tensor is not None
    assert (ids.tensor.dtype, mask.tensor.dtype) == ("int64", "float32")
    bounds = ids.tensor.bounds
    assert bounds[0] is not None and (bounds[0].min, bounds[0].max) == (2, 64)
    assert bounds[1] is not None and (bounds[1].min, bounds[1].max) == (2, 128)


def test_aoti_only_211_inputs_read_with_the_symbols_of_the_first(pkg: Pkg) -> None:
    """torch 2.11's run_impl binds s43 and s53 from input_ids only and checks neither the mask's
    sizes against them nor its symbolic stride (no assert_size_stride, unlike 2.13): the mask's
    dims are the ones its range checks share with the ids' symbols, its layout the contiguous
    one, as the same model compiled by the torch of the fixtures says outright."""
    (model,) = read_package(DATA / "aoti_cuda.pt2").models
    (same,) = read_package(pkg("aoti")).models

    def layout(inputs: tuple) -> list[tuple[list[str], list[str]]]:  # type: ignore[type-arg]
        return [
            ([str(d) for d in i.tensor.shape], [str(d) for d in i.tensor.strides or ()])
            for i in inputs
        ]

    assert layout(model.inputs) == [(["s43", "s53"], ["s53", "1"])] * 2
    assert layout(model.inputs) == layout(same.inputs)


def test_derived_dim_from_211_export(pkg: Pkg) -> None:
    path = DATA / "derived.pt2"
    # AOT050: the .so of these slimmed archives is a stub (test_stub_binaries_are_not_loadable)
    good = check(
        path,
        CheckOptions(inputs=str(pkg("derived_inputs")), static_only=True, ignore=("AOT050",)),
    )
    assert good.verdict is Verdict.PASS, good.findings
    bad = check(
        path,
        CheckOptions(inputs=str(pkg("derived_inputs_bad")), static_only=True, ignore=("AOT050",)),
    )
    assert [f.code for f in bad.findings if f.severity is Severity.ERROR] == ["AOT306"]


def test_kwargs_structure_from_211_export(pkg: Pkg) -> None:
    report = check(
        DATA / "kwargs.pt2",
        CheckOptions(inputs=str(pkg("kwargs_inputs")), static_only=True, ignore=("AOT050",)),
    )
    assert report.verdict is Verdict.PASS, report.findings


def test_cuda_package_on_a_cpu_host(pkg: Pkg) -> None:
    path = DATA / "both_cuda.pt2"
    inputs = str(pkg("aoti_inputs"))
    soft = check(path, CheckOptions(inputs=inputs, static_only=True))
    host_codes = {f.code: f.severity for f in soft.findings if f.code.startswith("AOT4")}
    if "cuda" in (soft.host or {}).get("device_types", []):
        pytest.skip("this machine has CUDA")
    assert host_codes == {"AOT401": Severity.INFO}
    # sample inputs live on cpu while the package wants cuda
    assert any(f.code == "AOT202" for f in soft.findings)
    hard = check(path, CheckOptions(inputs=inputs))
    assert any(f.code == "AOT401" and f.severity is Severity.ERROR for f in hard.findings)


def test_cuda_target_compute_capability() -> None:
    path = DATA / "aoti_cuda.pt2"
    ok = check(path, CheckOptions(static_only=True, target="cuda,cc=9.0"))
    assert not [f for f in ok.findings if f.code.startswith("AOT4")]
    old = check(path, CheckOptions(static_only=True, target="cuda,cc=sm_80"))
    (f,) = [f for f in old.findings if f.code == "AOT402"]
    assert f.severity is Severity.ERROR and f.expected == "9.0" and f.actual == ["8.0"]
    cpu = check(path, CheckOptions(static_only=True, target="cpu"))
    assert any(f.code == "AOT401" and f.severity is Severity.ERROR for f in cpu.findings)


def test_stub_binaries_are_not_loadable() -> None:
    """The slimmed archives' .so and cubins are text stubs: aotipre reads the members and says
    the loader would fail on them (AOT050), and judges the cc from metadata only (AOT402)."""
    report = check(DATA / "aoti_cuda.pt2", CheckOptions(static_only=True, target="cuda,cc=8.0"))
    bad = [f for f in report.findings if f.code == "AOT050"]
    assert len(bad) == 4 and all(
        "not an ELF file" in f.message or "neither" in f.message for f in bad
    )
    (cc,) = [f for f in report.findings if f.code == "AOT402"]
    assert "metadata" in cc.message


def test_real_gpu_code_of_a_multi_arch_package() -> None:
    """AOT053 from the real fatbins inductor wrote on the H200: SASS for sm_90a and PTX for
    compute_90a (ISA 9.0; cuobjdump: `arch = sm_90a`, `.target sm_90a`), so it runs on that card
    only: a Blackwell or a Volta fleet gets neither (AOT433)."""
    pkg = DATA / "multi_arch_cuda.pt2"
    report = check(pkg, CheckOptions(static_only=True, target="cuda,cc=9.0"))
    (facts,) = [f for f in report.findings if f.code == "AOT053"]
    assert facts.severity is Severity.INFO
    assert facts.actual == ["compute_90a", "sm_90a"]
    assert "2 GPU code member(s) carry compute_90a, sm_90a (PTX ISA 9.0)" in facts.message
    assert not [f for f in report.findings if f.code in ("AOT433", "AOT434")], report.findings
    for other in ("7.0", "10.0"):
        fleet = check(pkg, CheckOptions(static_only=True, target=f"cuda,cc={other}"))
        assert "AOT433" in {f.code for f in fleet.findings}, other
