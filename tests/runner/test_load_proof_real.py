"""Which code a load runs, on packages built through the public API: the load stage names the
package's .so from the worker's memory map, and a load that only works through torch's
"Loading outdated pt2 file" fallback is AOT531 (plain torch shows both first)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import zipfile
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
class Sine(torch.nn.Module):
    def forward(self, x):
        return x.sin() + 1
x = torch.randn(2, 4)
torch._inductor.aoti_compile_and_package(
    torch.export.export(Sine(), (x,)), package_path=f"{out}/sine.pt2"
)
torch.save(((x,), {}), f"{out}/inputs.pt")
"""

PLAIN = """
import sys, torch
from torch.export.pt2_archive._package import load_pt2
m = torch._inductor.aoti_load_package(sys.argv[1])
x = torch.ones(2, 4)
assert torch.allclose(m(x), x.sin() + 1)
try:
    load_pt2(sys.argv[1])
    print("load_pt2 ok")
except RuntimeError as exc:
    print("load_pt2 failed:", exc)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("proof")
    build(BUILD, out)
    # the same package with its wrapper's metadata emptied
    with (
        zipfile.ZipFile(out / "sine.pt2") as src,
        zipfile.ZipFile(out / "fallback.pt2", "w", zipfile.ZIP_STORED) as dst,
    ):
        for info in src.infolist():
            empty = info.filename.endswith("wrapper_metadata.json")
            dst.writestr(info, b"" if empty else src.read(info))
    return out


def so_name(package: Path) -> str:
    with zipfile.ZipFile(package) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".so")]
    return name.rsplit("/", 1)[-1]


def _check(built: Path, package: str):  # type: ignore[no-untyped-def]
    dynamic = DynamicOptions(timeout_s=120.0, probe=False)
    options = CheckOptions(inputs=str(built / "inputs.pt"), dynamic=dynamic, canary=False)
    return check(str(built / package), options)


def test_the_load_names_the_packages_so(built: Path) -> None:
    report = _check(built, "sine.pt2")
    load = next(s for s in report.stages if s.name == "load")
    assert f"runs {so_name(built / 'sine.pt2')}" in load.detail
    assert not [f for f in report.findings if f.code in ("AOT531", "AOT532")]


def test_a_load_through_torchs_fallback_is_a_warning_not_an_error(built: Path) -> None:
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN, str(built / "fallback.pt2")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "Loading outdated pt2 file" in plain.stderr
    assert "load_pt2 failed: [json.exception.parse_error.101]" in plain.stdout

    report = _check(built, "fallback.pt2")

    assert report.exit_code == 0, [f.message for f in report.findings]
    (f,) = [f for f in report.findings if f.code == "AOT531"]
    assert f.stage == "static" and "is empty" in f.message
    run = next(s for s in report.stages if s.name == "run")
    assert run.status is StageStatus.PASSED


def test_the_worker_reports_the_fallback_it_saw(built: Path) -> None:
    """The dynamic stages alone, on a model whose reader did not flag the metadata: the load
    step records what load_pt2 raised behind torch's fallback."""
    info = read_package(built / "fallback.pt2")
    model = info.models[0]
    assert model.aoti is not None
    model = dataclasses.replace(
        model, aoti=dataclasses.replace(model.aoti, wrapper_metadata_unreadable=None)
    )
    options = DynamicOptions(timeout_s=120.0, probe=False, perf=None)
    results, findings = run_dynamic_stages(info, model, str(built / "inputs.pt"), None, options)
    (f,) = [f for f in findings if f.code == "AOT531"]
    assert f.stage == "load" and "parse_error.101" in f.message
    assert next(r for r in results if r.name == "run").status is StageStatus.PASSED
