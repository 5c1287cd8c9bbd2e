"""placement: which jobs need a GPU, what their GPU code runs on (read from real CUDA packages
built with the public API on an H200, tests/data/torch211), and which GPU kind of a cluster a
job goes to (the Ray engine's choice; tests/scale/test_ray.py runs it on a real cluster)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import api
from aotipre.api import CheckOptions
from aotipre.fleet.batch import PackageJob
from aotipre.fleet.placement import GPU_KINDS, GpuCode, Placement, gpu_code, needs_gpu, place
from aotipre.runner.stages.options import DynamicOptions

DATA = Path(__file__).parents[1] / "data" / "torch211"
MULTI_ARCH = DATA / "multi_arch_cuda.pt2"
"""Two fatbins, each with sm_90a SASS and compute_90a PTX (ISA 9.0; Triton's `.target sm_90a`):
code for compute capability 9.0 only."""
METADATA_ONLY = DATA / "aoti_cuda.pt2"
"""Compiled for sm_90; its cubins were cut to stubs that cannot be read: metadata only."""


def job(path: Path | str, **options: object) -> PackageJob:
    return PackageJob(str(path), CheckOptions(**options))  # type: ignore[arg-type]


def on(device: str) -> DynamicOptions:
    return dataclasses.replace(DynamicOptions(), device=device)


def test_fatbins_run_where_each_has_sass_or_ptx_for() -> None:
    code = gpu_code(job(MULTI_ARCH))
    assert code is not None and len(code.members) == 2
    assert code.label == "compute_90a, sm_90a"
    assert code.runs_on("9.0") is True  # sm_90a: exactly 9.0
    assert code.runs_on("10.0") is False  # compute_90a PTX: no newer GPU JIT-compiles it
    assert code.runs_on("12.0") is False
    assert code.runs_on("8.9") is False
    assert code.runs_on("7.5") is False


def test_unreadable_cubins_fall_back_to_the_compiled_compute_capability() -> None:
    code = gpu_code(job(METADATA_ONLY))
    assert code == GpuCode(compiled=("90",))
    assert code.label == "compiled for sm_90"
    # as the static check's AOT402 judges it: another compute capability is not the one
    assert (code.runs_on("9.0"), code.runs_on("10.0"), code.runs_on("8.0")) == (True, False, False)


def test_which_jobs_need_a_gpu(pkg: Callable[[str], Path]) -> None:
    cpu = pkg("aoti.pt2")
    assert gpu_code(job(cpu)) is None and not needs_gpu(job(cpu))
    assert gpu_code(job(MULTI_ARCH, static_only=True)) is None
    assert gpu_code(job(MULTI_ARCH, dynamic=on("cpu"))) is None
    # --device cuda on a CPU package: a GPU, of any kind (no GPU code to judge)
    forced = gpu_code(job(cpu, dynamic=on("cuda:0")))
    assert (
        forced == GpuCode()
        and forced.runs_on("7.5") is None
        and needs_gpu(job(cpu, dynamic=on("cuda")))
    )
    # a package that cannot be read needs none, unless --device cuda says so
    assert gpu_code(job("/nonexistent/x.pt2")) is None
    assert gpu_code(job("/nonexistent/x.pt2", dynamic=on("cuda"))) == GpuCode()
    # --model picks the models that count
    assert gpu_code(job(MULTI_ARCH, model="no-such-model")) is None


def multi_arch() -> GpuCode:
    code = gpu_code(job(MULTI_ARCH))
    assert code is not None
    return code


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ({"H100": 4}, Placement()),  # every GPU runs it: any
        ({"H100": 2, "B200": 2}, Placement(kind="H100")),  # its PTX is sm_90a: not on 10.0
        ({"T4": 4, "H100": 1}, Placement(kind="H100")),  # only the kind that runs it
        ({"T4": 4, "H100": 2, "H200": 3}, Placement(kind="H200")),  # the one with most GPUs
        ({"T4": 4, "H100": 2, "H200": 2}, Placement(kind="H100")),  # equals: first by name
        ({"A100": 8, "GH200": 1, None: 2}, Placement(kind="GH200")),
        ({None: 2}, Placement()),  # no kind known: anywhere, its load judges
        ({"RTX-6000": 1}, Placement()),  # a name of two generations: not judged
    ],
)
def test_a_job_goes_to_a_kind_that_runs_its_code(
    gpus: dict[str | None, float], expected: Placement
) -> None:
    assert place(multi_arch(), gpus) == expected


def test_no_kind_runs_it_says_why() -> None:
    where = place(multi_arch(), {"T4": 2, "A100": 1})
    assert where.kind is None
    assert where.why == (
        "no GPU of the Ray cluster runs its GPU code (compute_90a, sm_90a): it has 1 A100 "
        "(compute capability 8.0), 2 T4 (compute capability 7.5)"
    )
    unjudged = place(multi_arch(), {"T4": 2, None: 1, "RTX-6000": 0.5})
    assert unjudged.why is not None and unjudged.why.endswith(
        "it has 2 T4 (compute capability 7.5), and 1.5 GPU(s) of a kind aotipre cannot judge, "
        "where it is not sent"
    )


def test_unknown_code_goes_anywhere() -> None:
    assert place(GpuCode(), {"T4": 1, "H100": 1}) == Placement()


def test_every_kind_in_the_table_is_judged() -> None:
    code = multi_arch()
    for kind, cc in GPU_KINDS.items():
        assert code.runs_on(cc) is (cc == "9.0"), kind


@pytest.mark.parametrize("cc", ["7.5", "8.0", "8.9", "9.0", "10.0", "12.0"])
@pytest.mark.parametrize(("path", "code"), [(MULTI_ARCH, "AOT433"), (METADATA_ONLY, "AOT402")])
def test_placement_judges_as_the_static_check_does(path: Path, code: str, cc: str) -> None:
    """A kind is refused exactly where `check --target cuda,cc=CC` finds that the GPU code
    does not run (AOT433 from the code members, AOT402 from the metadata)."""
    report = api.check(path, CheckOptions(static_only=True, target=f"cuda,cc={cc}"))
    refused = any(f.code == code for f in report.findings)
    gpu = gpu_code(job(path))
    assert gpu is not None and gpu.runs_on(cc) is not refused


def test_every_member_must_run_not_just_one() -> None:
    """A package whose kernels were built for different GPUs runs only where all of them do."""
    from aotipre.binaries.cuda import GpuImage

    mixed = GpuCode(members=((GpuImage("sass", "90a"),), (GpuImage("sass", "80"),)))
    assert mixed.runs_on("9.0") is False  # the sm_80 member has no code for 9.0
    assert mixed.runs_on("8.0") is False  # the sm_90a member has none for 8.0
    assert mixed.label == "sm_80, sm_90a"
    assert place(mixed, {"H100": 1, "A100": 1}).why is not None
