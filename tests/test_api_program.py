"""The library entry point on in-memory programs: an ExportedProgram, an nn.Module + inputs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import aotipre
from aotipre.api import CheckOptions

Pkg = Callable[[str], Path]
STATIC = CheckOptions(static_only=True)


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def net(torch):  # type: ignore[no-untyped-def]
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 2)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return self.linear(x).relu()

    return Net()


def test_module_with_example_inputs(torch, net) -> None:  # type: ignore[no-untyped-def]
    batch = torch.export.Dim("batch", min=1, max=8)
    report = aotipre.check(
        net, STATIC, example_inputs=(torch.randn(3, 4),), dynamic_shapes=({0: batch},)
    )
    assert report.verdict.value == "pass", report.findings
    assert report.package_path == "<Net>" and report.inputs_source == "example_inputs"
    assert report.package is not None and report.package["path"] == "<Net>"
    model = report.package["models"][0]
    assert model["has_exported_program"] and not model["has_aoti"]


def test_exported_program_with_other_inputs(torch, net) -> None:  # type: ignore[no-untyped-def]
    program = torch.export.export(net, (torch.randn(2, 4),))
    report = aotipre.check(program, STATIC)
    assert report.verdict.value == "pass" and report.inputs_source == "archive"
    assert report.package_path == "<ExportedProgram>"
    report = aotipre.check(
        program, STATIC, example_inputs=(torch.randn(3, 4, dtype=torch.float64),), name="net"
    )
    assert report.package_path == "net" and int(report.exit_code) == 1
    assert sorted(f.code for f in report.findings) == ["AOT201", "AOT302"]  # float64, batch 3


def test_select_and_ignore_apply(torch, net) -> None:  # type: ignore[no-untyped-def]
    program = torch.export.export(net, (torch.randn(2, 4),))
    bad = (torch.randn(3, 4, dtype=torch.float64),)
    only = CheckOptions(static_only=True, select=("AOT2",))
    assert [f.code for f in aotipre.check(program, only, example_inputs=bad).findings] == ["AOT201"]
    none = CheckOptions(static_only=True, ignore=("AOT2", "AOT3"))
    assert aotipre.check(program, none, example_inputs=bad).verdict.value == "pass"


def test_wrong_subjects(torch, net, pkg: Pkg) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="not int"):
        aotipre.check(42, STATIC)
    with pytest.raises(TypeError, match="needs example_inputs"):
        aotipre.check(net, STATIC)
    with pytest.raises(TypeError, match="CheckOptions"):
        aotipre.check(str(pkg("aoti")), STATIC, example_inputs=(torch.ones(1),))


def test_new_modules_do_not_import_torch(pkg: Pkg) -> None:
    code = (
        "import sys\n"
        "import aotipre, aotipre.pytest_plugin, aotipre.fleet.batch, aotipre.config, aotipre.report\n"
        "from aotipre import config; from aotipre.fleet import batch\n"
        f"reports = batch.check_packages([{str(pkg('both'))!r}, {str(pkg('aoti'))!r}], "
        "config.Settings(static_only=True, jobs=2))\n"
        "from aotipre.report import BATCH_RENDERERS\n"
        "for render in BATCH_RENDERERS.values(): render(reports)\n"
        "aotipre.check\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
