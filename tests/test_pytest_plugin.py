"""The pytest plugin in a real pytest run (pytester): fixture, marker, config, failure message."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from importlib.metadata import distributions
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest_plugins = ("pytester",)

Pkg = Callable[[str], Path]
REPO = Path(__file__).resolve().parents[1]


def plugin_args() -> list[str]:
    """Autoloaded through the installed entry point; `-p` when this environment predates it."""
    installed = any(  # as pluggy looks: every distribution, not only the first of a name
        ep.group == "pytest11" and ep.value == "aotipre.pytest_plugin"
        for dist in distributions()
        for ep in dist.entry_points
    )
    return [] if installed else ["-p", "aotipre.pytest_plugin"]


def test_registered_as_a_pytest11_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"aotipre": "aotipre.pytest_plugin"}


@pytest.fixture
def project(
    pytester: pytest.Pytester, pkg: Pkg, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    # the reports' tables wrap at $COLUMNS when it is set (pytest-xdist's workers set it to 80):
    # the inner runs print them at their natural widths, as with no terminal
    monkeypatch.delenv("COLUMNS", raising=False)
    (pytester.path / "models").mkdir()
    shutil.copy(pkg("aoti"), pytester.path / "models" / "model.pt2")
    shutil.copy(pkg("aoti_inputs"), pytester.path / "models" / "good.pt")
    shutil.copy(pkg("aoti_inputs_bad_dtype"), pytester.path / "models" / "bad.pt")
    pytester.makepyprojecttoml(
        """
[tool.pytest.ini_options]
[tool.aotipre]
static-only = true
[tool.aotipre.inputs]
"models/model.pt2" = "models/good.pt"
"""
    )
    return pytester


def test_fixture_and_marker(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
import pytest

def test_fixture_pass(aotipre_check):
    report = aotipre_check("models/model.pt2")  # inputs and static-only from [tool.aotipre]
    assert report.verdict.value == "pass" and report.inputs_source.endswith("good.pt")

def test_fixture_fail(aotipre_check):
    aotipre_check("models/model.pt2", inputs="models/bad.pt")

def test_fixture_without_gate(aotipre_check):
    report = aotipre_check("models/model.pt2", inputs="models/bad.pt", gate=False)
    errors = [f.code for f in report.findings if f.severity.value == "error"]
    assert int(report.exit_code) == 1 and errors == ["AOT201"]

def test_fixture_bad_option(aotipre_check):
    aotipre_check("models/model.pt2", static_onyl=True)

@pytest.mark.aotipre("models/model.pt2", fail_on="warning")
def test_marker_pass():
    pass

@pytest.mark.aotipre(package="models/model.pt2", inputs="models/bad.pt")
def test_marker_fail():
    pass

@pytest.mark.aotipre("models/missing.pt2")
def test_marker_cannot_check():
    pass
"""
    )
    result = project.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=4)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_fixture_fail*",
            "aotipre gate FAIL for */models/model.pt2",
            "code    severity    subject*message",
            "AOT201  error*has dtype float32, the package expects int64",
            "verdict: FAIL (exit 1; 1 error*",
        ]
    )
    assert "unknown key 'static-onyl' (did you mean 'static-only'?)" in out
    assert "aotipre gate ERROR for */models/missing.pt2".replace("*", "") in out.replace(
        str(project.path), ""
    )
    assert "_call_" not in out and "pytest_plugin.py" not in out  # no plugin traceback


def test_in_memory_module(project: pytest.Pytester) -> None:
    if importlib.util.find_spec("torch") is None:  # not imported here: pytester's teardown
        pytest.skip("needs torch")  # drops modules imported during the test, torch can't reload
    project.makepyfile(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        return x.relu()

def test_gate_a_module(aotipre_check):
    report = aotipre_check(Net(), example_inputs=(torch.randn(2, 3),))
    assert report.package_path == "<Net>"

def test_gate_fails_on_wrong_inputs(aotipre_check):
    program = torch.export.export(Net(), (torch.randn(2, 3),))
    aotipre_check(program, example_inputs=(torch.randn(2, 3, dtype=torch.float64),))
"""
    )
    result = project.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["aotipre gate FAIL for <ExportedProgram>", "AOT201*"])
