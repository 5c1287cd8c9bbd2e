"""Baseline edges: how packages are named in it, what a damaged file says, and which stages
turn from failed to passed when their findings are accepted (only those failed by them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus, codes
from aotipre.findings.baseline import (
    apply_baseline,
    fingerprint,
    load_baseline,
    package_id,
    replace_findings,
    write_baseline,
)
from aotipre.foundation.errors import UsageError


def finding(code: str = "AOT304", **kw: object) -> Finding:
    c = codes.get(code)
    return c.finding("m", **kw)  # type: ignore[arg-type]


def test_package_id_is_relative_to_the_baseline_folder(tmp_path: Path) -> None:
    assert package_id(str(tmp_path / "m" / "a.pt2"), tmp_path) == "m/a.pt2"
    assert package_id(str(tmp_path / "a.pt2"), tmp_path / "ci") == "../a.pt2"
    assert package_id("<ExportedProgram>", tmp_path) == "<ExportedProgram>"


def test_fingerprint_follows_the_key(tmp_path: Path) -> None:
    a = finding(input="x", dim=0)
    assert fingerprint(a) == fingerprint(finding(input="x", dim=0, actual=99))
    assert len({fingerprint(a), fingerprint(finding(input="x", dim=1)),
                fingerprint(finding(input="y", dim=0)), fingerprint(finding("AOT303", input="x", dim=0)),
                fingerprint(finding(input="x", dim=0, model="m"))}) == 5  # fmt: skip


def test_dim_zero_and_no_dim_are_different_keys(tmp_path: Path) -> None:
    pkg = str(tmp_path / "p.pt2")
    baseline = write_baseline(tmp_path / "b.json", [Report(pkg, findings=[finding(dim=0)])])
    out = apply_baseline(Report(pkg, findings=[finding(dim=None), finding(dim=0)]), baseline)
    assert [f.dim for f in out.findings] == [None]


def test_a_baseline_written_elsewhere_matches_by_relative_path(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "models").mkdir()
    pkg = str(tmp_path / "models" / "a.pt2")
    write_baseline(tmp_path / "ci" / "b.json", [Report(pkg, findings=[finding()])])
    rows = json.loads((tmp_path / "ci" / "b.json").read_text())["findings"]
    assert rows == [
        {"package": "../models/a.pt2", "code": "AOT304", "model": None, "input": None,
         "dim": None, "severity": "error", "message": "m"}
    ]  # fmt: skip
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path / "models")  # the same package named from another folder
        baseline = load_baseline(tmp_path / "ci" / "b.json")
        out = apply_baseline(Report("a.pt2", findings=[finding()]), baseline)
    finally:
        os.chdir(cwd)
    assert out.findings == []


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "is not valid JSON"),
        ('{"schema_version": 2, "findings": []}', "schema_version is not 1"),
        ("[]", "schema_version is not 1"),
        ('{"schema_version": 1, "findings": {}}', "'findings' is not a list"),
        ('{"schema_version": 1, "findings": [3]}', "findings[0] is not an object"),
        ('{"schema_version": 1, "findings": [{"code": "AOT304"}]}', "'package' must be a string"),
        ('{"schema_version": 1, "findings": [{"package": "a"}]}', "'code' must be a string"),
        (
            '{"schema_version": 1, "findings": [{"package": "a", "code": "X", "dim": [1]}]}',
            "'dim' must be a string, an integer or null",
        ),
    ],
)
def test_a_damaged_baseline_is_a_usage_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert message in str(info.value)


def test_a_missing_baseline_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        load_baseline(tmp_path / "nope.json")
    assert "does not exist" in str(info.value)
    assert "--write-baseline" in (info.value.hint or "")


def test_entries_are_counted_and_dims_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    row = {"package": "p.pt2", "code": "AOT304", "model": "m", "input": "x", "dim": 1}
    path.write_text(json.dumps({"schema_version": 1, "findings": [row, row, {**row, "dim": "1"}]}))
    baseline = load_baseline(path)
    assert baseline.entries == ((("p.pt2", "AOT304", "m", "x", "1"), 3),)


def stage(name: str, status: StageStatus, model: str | None = None) -> StageResult:
    return StageResult(name, status, model=model)


def test_a_stage_passes_once_the_findings_that_failed_it_are_dropped() -> None:
    static = finding(stage="static")
    warn = finding("AOT013", stage="static")  # a warning: does not fail at fail-on error
    run = finding("AOT602", stage="run", model="m")
    report = Report(
        "p.pt2",
        stages=[stage("static", StageStatus.FAILED), stage("run", StageStatus.FAILED, "m"),
                stage("load", StageStatus.ERROR, "m"), stage("probe", StageStatus.FAILED, "m")],
        findings=[static, warn, run],
    )  # fmt: skip
    out = replace_findings(report, [warn, run])
    statuses = {s.name: s.status for s in out.stages}
    assert statuses == {
        "static": StageStatus.PASSED,  # failed only by the dropped error
        "run": StageStatus.FAILED,  # its error is kept
        "load": StageStatus.ERROR,  # could not run: never changed
        "probe": StageStatus.FAILED,  # nothing dropped was its own
    }
    assert out.findings == [warn, run]
    assert report.findings == [static, warn, run]  # the input is not changed


def test_a_stage_of_another_model_keeps_its_status() -> None:
    run_a = finding("AOT602", stage="run", model="a")
    report = Report(
        "p.pt2",
        stages=[stage("run", StageStatus.FAILED, "a"), stage("run", StageStatus.FAILED, "b")],
        findings=[run_a, finding("AOT602", stage="run", model="b")],
    )
    out = replace_findings(report, [report.findings[1]])
    assert [(s.model, s.status) for s in out.stages] == [
        ("a", StageStatus.PASSED),
        ("b", StageStatus.FAILED),
    ]


def test_dropping_a_warning_passes_its_stage_only_when_the_gate_fails_on_warnings() -> None:
    warn = finding("AOT013", stage="static")
    for fail_on, status in (
        (Severity.WARNING, StageStatus.PASSED),
        (Severity.ERROR, StageStatus.FAILED),
    ):
        report = Report("p.pt2", stages=[stage("static", StageStatus.FAILED)], findings=[warn],
                        fail_on=fail_on)  # fmt: skip
        assert replace_findings(report, []).stages[0].status is status


def test_a_baseline_is_written_into_folders_that_do_not_exist_yet(tmp_path: Path) -> None:
    path = tmp_path / "ci" / "gates" / "aotipre" / "b.json"
    write_baseline(path, [Report(str(tmp_path / "p.pt2"), findings=[finding()])])
    assert load_baseline(path).entries == ((("../../../p.pt2", "AOT304", "", "", ""), 1),)
    write_baseline(path, [])  # again, into the folder that exists now
    assert load_baseline(path).entries == ()


@pytest.mark.parametrize(
    "dim, accepted",
    [(2**63 - 1, True), (-(2**63), True), (2**63, False), (-(2**63) - 1, False), (2**64, False)],
)
def test_integer_fields_must_fit_64_bits(tmp_path: Path, dim: int, accepted: bool) -> None:
    path = tmp_path / "b.json"
    row = {"package": "p.pt2", "code": "AOT304", "dim": dim}
    path.write_text(json.dumps({"schema_version": 1, "findings": [row]}))
    if accepted:
        assert load_baseline(path).entries == ((("p.pt2", "AOT304", "", "", str(dim)), 1),)
        return
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert "findings[0]: 'dim' must be a string, an integer or null" in str(info.value)


def test_the_written_baseline_is_indented_json_for_review(tmp_path: Path) -> None:
    # a file meant to be committed and read in diffs: two-space indent, one key per line
    path = tmp_path / "b.json"
    write_baseline(path, [Report(str(tmp_path / "p.pt2"), findings=[finding(dim=0)])])
    assert path.read_text() == (
        '{\n  "schema_version": 1,\n  "tool": "aotipre",\n  "findings": [\n    {\n'
        '      "package": "p.pt2",\n      "code": "AOT304",\n      "model": null,\n'
        '      "input": null,\n      "dim": 0,\n      "severity": "error",\n'
        '      "message": "m"\n    }\n  ]\n}\n'
    )
