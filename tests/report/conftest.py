"""In-memory reports for the renderer tests: a failing, a passing and an unreadable package."""

from __future__ import annotations

import pytest

from aotipre.findings import Report, Severity, StageResult, StageStatus, codes

TRICKY = "50% of 'x': a,b\r\nnext line <tag> & | pipe \x1b[31m"
"""A message with every character some format must escape."""


def failing_report() -> Report:
    report = Report(package_path="models/fail.pt2", tool_version="0.1.0")
    report.package = {
        "kind": "both",
        "models": [
            {"name": "encoder", "device_type": "cpu"},
            {"name": "decoder", "device_type": "cpu"},
        ],
    }
    report.inputs_source = "models/inputs.pt"
    report.stages = [
        StageResult("inspect", StageStatus.PASSED, 0.01, "both, 2 model(s)"),
        StageResult("inputs", StageStatus.PASSED, 0.0, "models/inputs.pt"),
        StageResult("static", StageStatus.FAILED, 0.002, "3 finding(s)"),
        StageResult("compile", StageStatus.PASSED, 1.5, "packaged AOTI code", model="encoder"),
        StageResult("run", StageStatus.FAILED, 0.4, "crashed", model="encoder"),
        StageResult("run", StageStatus.SKIPPED, 0.0, "static checks found errors", model="decoder"),
    ]
    report.findings = [
        codes.get("AOT201").finding(
            "input 'ids' has dtype float32, the package expects int64",
            model="encoder",
            input="ids",
            position=0,
            stage="static",
            expected="int64",
            actual="float32",
        ),
        codes.get("AOT013").finding(
            TRICKY, model="decoder", input="hidden", position=0, dim=0, stage="static"
        ),
        codes.get("AOT008").finding(
            "member fail/data/x.so is corrupt (CRC mismatch)",
            stage="static",
            actual="fail/data/x.so",
        ),
        codes.get("AOT604").finding(
            "the process crashed with SIGSEGV while running model 'encoder'",
            model="encoder",
            stage="run",
            evidence=("Segmentation fault", "at kernel_0"),
        ),
        codes.get("AOT022").finding("no sample inputs", model="decoder", stage="elsewhere"),
    ]
    return report


def passing_report() -> Report:
    report = Report(package_path="models/pass.pt2", tool_version="0.1.0")
    report.package = {"kind": "aoti", "models": [{"name": "model", "device_type": "cpu"}]}
    report.stages = [
        StageResult("inspect", StageStatus.PASSED, 0.01, "aoti, 1 model(s)"),
        StageResult("static", StageStatus.PASSED, 0.0, "1 finding(s)"),
    ]
    report.findings = [
        codes.get("AOT013").finding("a warning", model="model", stage="static", dim=1)
    ]
    return report


def error_report() -> Report:
    report = Report(package_path="models/broken.pt2", tool_version="0.1.0")
    report.error = "models/broken.pt2: truncated or damaged zip archive"
    report.stages = [
        StageResult("inspect", StageStatus.ERROR, 0.0, "truncated or damaged zip archive")
    ]
    report.findings = [
        codes.get("AOT002").finding("truncated or damaged zip archive", stage="inspect")
    ]
    return report


@pytest.fixture
def reports() -> list[Report]:
    """[failing (exit 1), passing with a warning (exit 0), could not check (exit 2)]."""
    out = [failing_report(), passing_report(), error_report()]
    assert [int(r.exit_code) for r in out] == [1, 0, 2]
    assert out[0].findings[1].severity is Severity.WARNING
    return out
