"""Invariants of the gate over many reports (hypothesis): "could not check" is never a pass,
the exit code is the policy applied to the findings and --fail-on, select/ignore/baseline
never hide a could-not-check, and a baseline accepts exactly the findings it recorded (same
package, code, model, input and dim) and nothing new.

The policy is written out here on its own (`expected_exit`), from README "Exit codes":
0 no finding at or above --fail-on, 1 at least one, 2 could not check; a report that could not
be read at all (`error`) is 2 whatever its findings; a stage that could not run (status
`error`) makes an otherwise passing report 2, while a finding at or above --fail-on already
fails the gate (1: the gate did not pass either way).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from aotipre.api import CheckOptions, _finish, check
from aotipre.cli import main
from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus, Verdict, codes
from aotipre.findings.baseline import apply_baseline, load_baseline, write_baseline

RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
CODES = [c.code for c in codes.ALL_CODES]
SETTINGS = settings(
    max_examples=int(os.environ.get("AOTIPRE_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    # scripts/mutate.py only needs to know that a test fails, not the smallest example
    **({"phases": [Phase.generate]} if os.environ.get("AOTIPRE_HYPOTHESIS_EXAMPLES") else {}),
)


def expected_exit(report: Report) -> int:
    if report.error is not None:
        return 2
    if any(RANK[f.severity] >= RANK[report.fail_on] for f in report.findings):
        return 1
    if any(s.status is StageStatus.ERROR for s in report.stages):
        return 2
    return 0


findings_st = st.builds(
    Finding,
    code=st.sampled_from(CODES),
    severity=st.sampled_from(list(Severity)),
    category=st.just(codes.ALL_CODES[0].category),
    message=st.text(max_size=20),
    model=st.sampled_from([None, "encoder", "decoder"]),
    input=st.sampled_from([None, "x", "mask"]),
    dim=st.sampled_from([None, 0, 1]),
    stage=st.sampled_from([None, "static", "run", "probe"]),
)
stages_st = st.builds(
    StageResult,
    name=st.sampled_from(["inspect", "static", "load", "run", "probe"]),
    status=st.sampled_from(list(StageStatus)),
    model=st.sampled_from([None, "encoder"]),
)
reports_st = st.builds(
    Report,
    package_path=st.sampled_from(["models/a.pt2", "models/b.pt2"]),
    findings=st.lists(findings_st, max_size=8),
    stages=st.lists(stages_st, max_size=6),
    fail_on=st.sampled_from(list(Severity)),
    error=st.sampled_from([None, None, None, "truncated or damaged zip archive"]),
)
prefixes_st = st.lists(
    st.sampled_from(["AOT", "AOT0", "AOT3", "AOT30", "AOT6", "AOT702"]), max_size=3
)


@SETTINGS
@given(reports_st)
def test_exit_code_is_the_policy(report: Report) -> None:
    assert int(report.exit_code) == expected_exit(report)
    verdict = {0: Verdict.PASS, 1: Verdict.FAIL, 2: Verdict.ERROR}[expected_exit(report)]
    assert report.verdict is verdict
    assert report.to_dict()["exit_code"] == expected_exit(report)
    assert report.to_dict()["verdict"] == verdict.value
    counts = Counter(f.severity.value for f in report.findings)
    assert report.counts() == {s.value: counts[s.value] for s in Severity}
    assert report.to_dict()["summary"] == report.counts()


@SETTINGS
@given(reports_st)
def test_could_not_check_is_never_a_pass(report: Report) -> None:
    if report.error is not None or any(s.status is StageStatus.ERROR for s in report.stages):
        assert report.verdict is not Verdict.PASS
        assert report.exit_code != 0
    if report.error is not None:
        assert report.verdict is Verdict.ERROR and report.exit_code == 2


@SETTINGS
@given(reports_st, prefixes_st, prefixes_st)
def test_select_and_ignore_keep_exactly_the_selected_codes(
    report: Report, select: list[str], ignore: list[str]
) -> None:
    opts = CheckOptions(select=tuple(select), ignore=tuple(ignore))
    out = _finish(report, opts)
    if report.error is not None:
        assert out.findings == report.findings and out.verdict is Verdict.ERROR
        return

    def kept(code: str) -> bool:
        if any(code.startswith(p) for p in ignore):
            return False
        return not select or any(code.startswith(p) for p in select)

    assert out.findings == [f for f in report.findings if kept(f.code)]
    assert int(out.exit_code) == expected_exit(out)
    # a stage that could not run stays so: dropping findings never turns it into a pass
    errors = [s for s in report.stages if s.status is StageStatus.ERROR]
    assert [s for s in out.stages if s.status is StageStatus.ERROR] == errors
    if errors:
        assert out.verdict is not Verdict.PASS


def keys(findings: list[Finding], package: str) -> Counter:
    return Counter((package, f.code, f.model, f.input, f.dim) for f in findings)


@SETTINGS
@given(
    old=st.lists(findings_st, max_size=8),
    new=st.lists(findings_st, max_size=8),
    keep=st.lists(st.booleans(), min_size=8, max_size=8),
    same_package=st.booleans(),
)
def test_a_baseline_accepts_exactly_what_it_recorded(
    tmp_path_factory: pytest.TempPathFactory,
    old: list[Finding],
    new: list[Finding],
    keep: list[bool],
    same_package: bool,
) -> None:
    folder = tmp_path_factory.mktemp("baseline")
    recorded = Report(package_path=str(folder / "a.pt2"), findings=old)
    baseline = write_baseline(folder / "base.json", [recorded])
    # the next run: some recorded findings again (their messages changed), plus new ones
    again = [
        Finding(f.code, f.severity, f.category, f.message + " (now)", model=f.model,
                input=f.input, dim=f.dim)
        for f, k in zip(old, keep) if k
    ]  # fmt: skip
    package = "a.pt2" if same_package else "b.pt2"
    current = Report(package_path=str(folder / package), findings=again + new)
    out = apply_baseline(current, baseline)
    accepted = keys(old, "a.pt2")
    left = keys(current.findings, package) - accepted
    assert keys(out.findings, package) == left
    if not same_package:
        assert out.findings == current.findings
    assert out.stages[-1].name == "baseline"
    accepted_n = len(current.findings) - len(out.findings)
    assert out.stages[-1].detail.startswith(f"{accepted_n} known finding(s) accepted")


@pytest.mark.parametrize("field", ["code", "model", "input", "dim"])
def test_a_baseline_entry_must_match_every_key_field(tmp_path: Path, field: str) -> None:
    base = Finding("AOT304", Severity.ERROR, codes.get("AOT304").category, "seq 129",
                   model="m", input="input_ids", dim=1)  # fmt: skip
    baseline = write_baseline(
        tmp_path / "b.json", [Report(str(tmp_path / "p.pt2"), findings=[base])]
    )
    other = {"code": "AOT303", "model": "n", "input": "attention_mask", "dim": 0}[field]
    moved = Finding(**{**base.__dict__, field: other, "message": "seq 130"})
    out = apply_baseline(Report(str(tmp_path / "p.pt2"), findings=[base, moved]), baseline)
    assert out.findings == [moved]
    assert out.verdict is Verdict.FAIL


def test_a_baseline_counts_identical_findings(tmp_path: Path) -> None:
    f = Finding("AOT304", Severity.ERROR, codes.get("AOT304").category, "m", input="x", dim=0)
    baseline = write_baseline(tmp_path / "b.json", [Report(str(tmp_path / "p.pt2"), findings=[f])])
    out = apply_baseline(Report(str(tmp_path / "p.pt2"), findings=[f, f]), baseline)
    assert out.findings == [f] and out.exit_code == 1


@SETTINGS
@given(reports_st)
def test_a_baseline_never_hides_a_could_not_check(
    tmp_path_factory: pytest.TempPathFactory, report: Report
) -> None:
    folder = tmp_path_factory.mktemp("b")
    report.package_path = str(folder / "a.pt2")
    # accept everything the report holds, as if it had been recorded
    everything = Report(package_path=report.package_path, findings=list(report.findings))
    baseline = write_baseline(folder / "b.json", [everything])
    out = apply_baseline(report, baseline)
    if report.error is not None:
        assert out is report  # unchanged
        return
    assert out.findings == []
    stage_errors = any(s.status is StageStatus.ERROR for s in report.stages)
    assert out.exit_code == (2 if stage_errors else 0)


def test_a_report_that_could_not_check_is_never_written_to_a_baseline(tmp_path: Path) -> None:
    f = Finding("AOT002", Severity.ERROR, codes.get("AOT002").category, "not a zip")
    broken = Report(str(tmp_path / "p.pt2"), findings=[f], error="not a zip")
    write_baseline(tmp_path / "b.json", [broken])
    assert json.loads((tmp_path / "b.json").read_text())["findings"] == []
    assert load_baseline(tmp_path / "b.json").entries == ()


# The same invariants through the real entry points (api.check and the CLI) on real packages.

Pkg = Callable[[str], Path]


@pytest.mark.parametrize("package", ["broken_truncated", "broken_json", "broken_bomb"])
@pytest.mark.parametrize(
    "opts", [{}, {"select": ("AOT3",)}, {"ignore": ("AOT",)}, {"fail_on": Severity.WARNING}]
)
def test_an_unreadable_package_is_exit_2_whatever_the_options(
    pkg: Pkg, package: str, opts: dict
) -> None:
    report = check(pkg(package), CheckOptions(static_only=True, **opts))
    assert report.verdict is Verdict.ERROR and report.exit_code == 2


def test_unreadable_inputs_are_exit_2_even_when_ignored(
    pkg: Pkg, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["check", str(pkg("both")), "-i", str(pkg("inputs_garbage")), "--static-only"]
    assert main([*args, "--ignore", "AOT0", "-f", "json"]) == 2
    assert json.loads(capsys.readouterr().out)["verdict"] == "error"
    baseline = tmp_path / "b.json"
    assert main([*args, "--write-baseline", str(baseline), "-f", "json"]) == 2
    capsys.readouterr()
    assert main([*args, "--baseline", str(baseline), "-f", "json"]) == 2


@pytest.mark.parametrize(
    "fail_on, inputs, rc",
    [
        ("error", "aoti_inputs", 0),  # AOT013 is a warning
        ("warning", "aoti_inputs", 1),
        ("error", "aoti_inputs_out_of_range", 1),
        ("warning", "aoti_inputs_out_of_range", 1),
    ],
)
def test_cli_exit_code_follows_fail_on(
    pkg: Pkg, capsys: pytest.CaptureFixture[str], fail_on: str, inputs: str, rc: int
) -> None:
    args = ["check", str(pkg("both")), "-i", str(pkg(inputs)), "--static-only", "-f", "json"]
    assert main([*args, "--fail-on", fail_on]) == rc
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == rc and data["fail_on"] == fail_on


@pytest.mark.parametrize(
    "severity, fail_on, rc",
    [
        (Severity.INFO, Severity.INFO, 1),
        (Severity.INFO, Severity.WARNING, 0),
        (Severity.INFO, Severity.ERROR, 0),
        (Severity.WARNING, Severity.INFO, 1),
        (Severity.WARNING, Severity.WARNING, 1),
        (Severity.WARNING, Severity.ERROR, 0),
        (Severity.ERROR, Severity.INFO, 1),
        (Severity.ERROR, Severity.WARNING, 1),
        (Severity.ERROR, Severity.ERROR, 1),
    ],
)
def test_severity_order_against_fail_on(severity: Severity, fail_on: Severity, rc: int) -> None:
    f = Finding("AOT013", severity, codes.get("AOT013").category, "m")
    assert Report("p.pt2", findings=[f], fail_on=fail_on).exit_code == rc
