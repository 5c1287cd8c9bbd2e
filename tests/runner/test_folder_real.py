"""A package given as an extracted folder goes through the real dynamic stages: torch's loader
takes the folder (2.13's C++ loader), the stored sample inputs are read from it, and the
ExportedProgram in it is loaded for the eager comparison."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import StageStatus, Verdict
from aotipre.runner.stages import DynamicOptions


def _torch_version() -> tuple[int, int]:
    torch = pytest.importorskip("torch")
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


@pytest.mark.slow
@pytest.mark.torch_versions
def test_an_extracted_folder_loads_runs_and_compares(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    if _torch_version() < (2, 13):
        pytest.skip("torch's loader takes an extracted folder from 2.13 on (field notes)")
    with zipfile.ZipFile(pkg("both")) as zf:
        zf.extractall(tmp_path / "pkg")
    options = CheckOptions(
        dynamic=DynamicOptions(probe=False, cache_dir=str(tmp_path / "cache")), canary=False
    )
    report = check(tmp_path / "pkg", options)
    stages = {s.name: s for s in report.stages}
    assert report.verdict is Verdict.PASS, [(s.name, s.detail) for s in report.stages]
    assert report.inputs_source == "archive"
    assert stages["load"].status is StageStatus.PASSED
    assert "inputs stored in the archive (both/data/sample_inputs/model.pt)" in stages["run"].detail
    assert stages["compare"].status is StageStatus.PASSED
