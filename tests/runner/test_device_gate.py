"""--device that the package or this host cannot run: an error finding and stages skipped with
the reason, before any worker starts (issue 11: a cpu package "loaded on cuda" and then an
ERROR with no finding)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.environment.host import detect_local
from aotipre.findings import Severity, StageStatus
from aotipre.pt2.reader import read_package
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from aotipre.runner.stages.devicegate import refuse_device

NO_WORKER = (sys.executable, "-c", "import sys; sys.exit('a worker was started')")
"""A worker command that fails loudly: had any worker run, the load would fail differently."""


def test_cpu_only_package_on_cuda_is_an_error_not_a_load(pkg: Callable[[str], Path]) -> None:
    info = read_package(pkg("aoti"))
    m = info.models[0]
    options = DynamicOptions(device="cuda", worker_command=NO_WORKER, use_cache=False)
    results, findings = run_dynamic_stages(info, m, str(pkg("aoti_inputs")), None, options)
    assert [f.code for f in findings] == ["AOT406"]
    f = findings[0]
    assert f.severity is Severity.ERROR and f.stage == "load"
    assert "AOTI code for cpu only" in f.message and "--device cuda" in f.message
    assert (f.expected, f.actual) == ("cpu", "cuda")
    for r in results:
        assert r.status is StageStatus.SKIPPED
        assert r.detail == "not run on cuda: its AOTI code is for cpu only (AOT406)"


def test_a_package_with_an_exported_program_may_compile_for_the_device(
    pkg: Callable[[str], Path],
) -> None:
    m = read_package(pkg("both")).models[0]
    assert refuse_device(m, "cuda", "cuda", check_host=False) is None
    assert refuse_device(m, "cpu", "cpu", check_host=True) is None


@pytest.mark.skipif("cuda" in detect_local().device_types, reason="this host has a CUDA GPU")
def test_cuda_on_a_host_without_cuda(pkg: Callable[[str], Path]) -> None:
    info = read_package(pkg("both"))
    m = info.models[0]
    options = DynamicOptions(device="cuda:0", use_cache=False)
    results, findings = run_dynamic_stages(info, m, None, m.sample_inputs_member, options)
    assert [f.code for f in findings] == ["AOT401"]
    assert findings[0].severity is Severity.ERROR
    assert "this host has no CUDA GPU" in findings[0].message
    assert all(r.status is StageStatus.SKIPPED for r in results)
    assert "no CUDA GPU" in results[0].detail
