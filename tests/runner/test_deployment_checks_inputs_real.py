"""--deployment-checks-inputs end to end: a package with a dynamic dim, built through the public
API, checked by the CLI as a default deployment (AOT613) and as one that sets the check (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.cli import main
from tests.runner.test_stages_real import host_needs_libstdcxx_preload

pytestmark = pytest.mark.slow

BUILD = """
import sys, torch

class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x))

torch.manual_seed(0)
x = torch.randn(8, 4)
batch = torch.export.Dim("batch", min=2, max=32)
ep = torch.export.export(Head().eval(), (x,), dynamic_shapes=({0: batch},))
torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1])
torch.save(((x,), {}), sys.argv[2])
"""


@pytest.fixture(scope="session")
def dynamic_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(head.pt2, its sample inputs): Linear(4, 3) + relu, batch dim dynamic in [2, 32]."""
    folder = tmp_path_factory.mktemp("deployment-checks-inputs")
    package, inputs = folder / "head.pt2", folder / "head_inputs.pt"
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(package), str(inputs)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return package, inputs


def test_a_deployment_that_checks_inputs_gets_no_aot613(
    dynamic_package: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package, inputs = dynamic_package
    args = ["check", str(package), "-i", str(inputs), "--no-config", "--format", "json"]
    args += ["--fail-on", "warning", "--cache-dir", str(tmp_path / "cache")]
    if host_needs_libstdcxx_preload(str(package)):  # the host's toolchain, not the package
        args += ["--ignore", "AOT515"]

    # a default deployment: batch 33 and a transposed input run without the check: AOT613
    rc = main(args)
    report = json.loads(capsys.readouterr().out)
    worse = [f["code"] for f in report["findings"] if f["severity"] != "info"]
    assert (rc, worse) == (1, ["AOT613"]), report["findings"]
    (f,) = [f for f in report["findings"] if f["code"] == "AOT613"]
    assert "=33 [args[0] dim 0] (max 32 + 1): ran silently" in f["message"]
    assert "--deployment-checks-inputs" in f["hint"]
    probe = next(s for s in report["stages"] if s["name"] == "probe")
    assert "(opt-in); without it: ran silently" in probe["detail"]

    # described as setting AOTI_RUNTIME_CHECK_INPUTS: no twin runs, no AOT613, the gate passes
    rc = main([*args, "--deployment-checks-inputs"])
    report = json.loads(capsys.readouterr().out)
    worse = [f["code"] for f in report["findings"] if f["severity"] != "info"]
    assert (rc, worse) == (0, []), report["findings"]
    probe = next(s for s in report["stages"] if s["name"] == "probe")
    assert probe["status"] == "passed"
    assert "without it" not in probe["detail"]
    assert "=33 [args[0] dim 0]: rejected by the runtime check (opt-in)" in probe["detail"]
    assert "args[0] non-contiguous: rejected by the runtime check (opt-in)" in probe["detail"]
    assert "the serving process must really set it" in probe["detail"]


def test_targets_say_whether_their_deployment_checks_inputs(
    dynamic_package: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package, inputs = dynamic_package
    args = ["check", str(package), "-i", str(inputs), "--no-config", "--format", "json"]
    args += ["--fail-on", "warning", "--cache-dir", str(tmp_path / "cache")]
    if host_needs_libstdcxx_preload(str(package)):
        args += ["--ignore", "AOT515"]

    # every target sets it: judged as --deployment-checks-inputs
    main([*args, "--target", "cpu,checks-inputs=yes"])
    report = json.loads(capsys.readouterr().out)
    assert "AOT613" not in {f["code"] for f in report["findings"]}, report["findings"]
    probe = next(s for s in report["stages"] if s["name"] == "probe")
    assert "the serving process must really set it" in probe["detail"]

    # one of two does not: AOT613 stays, naming that target
    main([*args, "--target", "cpu,checks-inputs=yes;cpu,checks-inputs=no"])
    report = json.loads(capsys.readouterr().out)
    (f,) = [f for f in report["findings"] if f["code"] == "AOT613"]
    assert f["message"].endswith("(no checks-inputs=yes): cpu,checks-inputs=no")
