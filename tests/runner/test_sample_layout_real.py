"""A sample laid out otherwise than compiled (AOT307): its severity follows what the deployment
does with it. Two real packages (tests/runner/build_layouts.py), each judged against plain torch
in a fresh process without AOTI_RUNTIME_CHECK_INPUTS, as a default deployment runs (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Report, Severity, Verdict
from aotipre.runner.stages import DynamicOptions
from tests.building import build

pytestmark = pytest.mark.slow

PLAIN = """
import json, sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
(x,), _ = torch.load(sys.argv[2])
eager = torch.load(sys.argv[3])
print(json.dumps([list(x.stride()), torch.allclose(m(x), eager, rtol=1e-4, atol=1e-5)]))
"""
"""Plain torch: the sample's strides, and whether the package's outputs for it match eager."""
CALL = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
(x,), _ = torch.load(sys.argv[2])
m(x)
"""
"""Plain torch: the package called on the sample."""


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(Path(__file__).with_name("build_layouts.py"), tmp_path_factory.mktemp("layouts"))


def plain_default_deployment(folder: Path, name: str) -> tuple[list[int], bool]:
    env = {k: v for k, v in os.environ.items() if k != "AOTI_RUNTIME_CHECK_INPUTS"}
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN, *(str(folder / f"{name}{s}") for s in (
            ".pt2", "_transposed.pt", "_eager.pt"))],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    strides, right = json.loads(proc.stdout.strip().splitlines()[-1])
    return strides, right


def run_check(folder: Path, name: str, tmp: Path, **dynamic: object) -> Report:
    return check(
        folder / f"{name}.pt2",
        CheckOptions(
            inputs=str(folder / f"{name}_transposed.pt"),
            dynamic=DynamicOptions(cache_dir=str(tmp / "cache"), **dynamic),  # type: ignore[arg-type]
        ),
    )


def layout_findings(report: Report) -> list[tuple[str, str, str | None, object, object]]:
    return [
        (f.stage or "", f.severity.value, f.input, f.expected, f.actual)
        for f in report.findings
        if f.code == "AOT307"
    ]


@pytest.mark.parametrize("name, right", [("rowwise", True), ("scan", False)])
def test_transposed_sample_is_judged_by_running_it_as_given(
    layouts: Path, tmp_path: Path, name: str, right: bool
) -> None:
    strides, plain_right = plain_default_deployment(layouts, name)
    assert strides == [1, 4] and plain_right is right  # the ground truth

    static = check(
        layouts / f"{name}.pt2",
        CheckOptions(inputs=str(layouts / f"{name}_transposed.pt"), static_only=True),
    )
    assert layout_findings(static) == [("static", "warning", "args[0]", 8, 1)]
    (said,) = [f.message for f in static.findings if f.code == "AOT307"]
    assert "may compute wrong results" in said and "the dynamic stages settle it" in said

    report = run_check(layouts, name, tmp_path)
    # the probe's run settles the static warning: an error only where the outputs are wrong
    severity = "warning" if right else "error"
    assert layout_findings(report) == [("probe", severity, "args[0]", 8, 1)]
    assert report.verdict is (Verdict.PASS if right else Verdict.FAIL)
    run = next(s for s in report.stages if s.name == "run")
    assert run.status.value == "passed" and "laid out as compiled" in run.detail


def test_a_deployment_that_checks_inputs_refuses_the_layout(layouts: Path, tmp_path: Path) -> None:
    # the right outputs, but AOTI_RUNTIME_CHECK_INPUTS=1 refuses the strides (plain torch)
    env = {**os.environ, "AOTI_RUNTIME_CHECK_INPUTS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", CALL, str(layouts / "rowwise.pt2"),
         str(layouts / "rowwise_transposed.pt")],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "unmatched stride value at 0" in proc.stderr

    static = check(
        layouts / "rowwise.pt2",
        CheckOptions(
            inputs=str(layouts / "rowwise_transposed.pt"),
            static_only=True,
            deployment_checks_inputs=True,
        ),
    )
    assert layout_findings(static) == [("static", "error", "args[0]", 8, 1)]
    (said,) = [f.message for f in static.findings if f.code == "AOT307"]
    assert (
        "sets AOTI_RUNTIME_CHECK_INPUTS (--deployment-checks-inputs), whose check refuses" in said
    )
    report = run_check(layouts, "rowwise", tmp_path, deployment_checks_inputs=True)
    assert [f.code for f in report.findings if f.severity is Severity.ERROR] == ["AOT307"]
    assert report.verdict is Verdict.FAIL


def test_no_probe_still_runs_the_sample_as_given(layouts: Path, tmp_path: Path) -> None:
    # scan.pt2 reads the transposed sample as if contiguous: plain torch, unchecked, returns
    # other outputs than eager. --no-probe turns the probes off, not this step: no PASS
    strides, right = plain_default_deployment(layouts, "scan")
    assert strides == [1, 4] and right is False  # the ground truth
    report = run_check(layouts, "scan", tmp_path, probe=False)
    assert layout_findings(report) == [("probe", "error", "args[0]", 8, 1)]
    assert [f.code for f in report.findings if f.severity is Severity.ERROR] == ["AOT307"]
    assert report.verdict is Verdict.FAIL
    probe = next(s for s in report.stages if s.name == "probe")
    assert probe.status.value == "failed" and "no probe: probing is off" in probe.detail
