"""A Python scalar argument changed from its exported value, on an AOTI-only package built
through the public API: plain torch in a fresh process shows the compiled model ignores the
value and the ExportedProgram refuses it; aotipre says so statically with --exported-program
(AOT105), and a reference run that breaks an export guard is a finding (AOT110)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import StageStatus
from aotipre.pt2.reader import read_package
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.building import build

pytestmark = pytest.mark.slow

BUILD = """
import sys, torch
out = sys.argv[1]
class Scale(torch.nn.Module):
    def forward(self, x, alpha: float):
        return x * alpha
x = torch.ones(4)
ep = torch.export.export(Scale(), (x, 0.5))
torch.export.save(ep, f"{out}/scale_ep.pt2")
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/scale.pt2")
torch.save(((x, 0.5), {}), f"{out}/exported_value.pt")
torch.save(((x, 2.0), {}), f"{out}/other_value.pt")
"""

PLAIN = """
import json, sys, torch
out = sys.argv[1]
x = torch.ones(4)
m = torch._inductor.aoti_load_package(f"{out}/scale.pt2")
try:
    torch.export.load(f"{out}/scale_ep.pt2").module()(x, 2.0)
    eager = "ran"
except Exception as exc:
    eager = str(exc)
print(json.dumps({"compiled": m(x, 2.0).tolist(), "eager": eager}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scalar")
    return build(BUILD, out)


def test_plain_torch_ignores_the_value_and_the_program_refuses_it(built: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN, str(built)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    plain = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plain["compiled"] == [0.5] * 4  # alpha=2.0 passed, 0.5 used
    assert "Guard failed: alpha == 0.5" in plain["eager"]


def _check(built: Path, inputs: str, reference: bool):  # type: ignore[no-untyped-def]
    dynamic = DynamicOptions(
        exported_program=str(built / "scale_ep.pt2") if reference else None,
        timeout_s=120.0,
        perf=None,
        probe=False,
    )
    options = CheckOptions(inputs=str(built / inputs), dynamic=dynamic, canary=False)
    return check(str(built / "scale.pt2"), options)


def test_the_exported_value_passes_and_is_named(built: Path) -> None:
    report = _check(built, "exported_value.pt", reference=True)
    assert report.exit_code == 0, [f.message for f in report.findings]
    (f,) = [f for f in report.findings if f.code == "AOT107"]
    assert "alpha (args[1]) = 0.5" in f.message


def test_another_value_fails_statically_with_the_exported_one(built: Path) -> None:
    report = _check(built, "other_value.pt", reference=True)
    (f,) = [f for f in report.findings if f.code == "AOT105"]
    assert "is 2.0, but export specialized it to 0.5" in f.message and f.input == "alpha"
    assert report.exit_code == 1


def test_without_the_program_the_sample_value_is_not_taken_as_what_runs(built: Path) -> None:
    report = _check(built, "other_value.pt", reference=False)
    (f,) = [f for f in report.findings if f.code == "AOT108"]
    assert "args[1]=2.0: not what will run" in f.message


def test_a_reference_run_that_breaks_a_guard_is_a_finding_about_the_inputs(built: Path) -> None:
    """The dynamic stages alone (a library caller, no static lane): the eager reference's
    guard failure is AOT110, an error, not a warning that the reference could not run."""
    info = read_package(built / "scale.pt2")
    options = DynamicOptions(
        exported_program=str(built / "scale_ep.pt2"), timeout_s=120.0, perf=None, probe=False
    )
    results, findings = run_dynamic_stages(
        info, info.models[0], str(built / "other_value.pt"), None, options
    )
    compare = next(r for r in results if r.name == "compare")
    assert compare.status is StageStatus.FAILED
    (f,) = [f for f in findings if f.code == "AOT110"]
    assert "alpha == 0.5" in f.message
    assert not [f for f in findings if f.code == "AOT704"]
