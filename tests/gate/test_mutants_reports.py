"""Each report format's gate decisions on fixed in-memory reports: what fails the gate (JUnit
failures, SARIF's `gate` and notifications, GitHub's error commands), which test case a finding
lands in, the counts summed over packages, which strings are cleaned for people, and what the
terminal table shows (the package, the configuration, the torch of each stage, the targets).

Written for the mutation run (scripts/mutate.py, session 11)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from aotipre.findings import Report, Severity, StageResult, StageStatus, codes
from aotipre.report import common, github, junit, render_report, render_reports, sarif, table

RT_A = {"python": "/a/python", "python_version": "3.11", "torch": "2.13.0+cpu", "torch_path": "/a"}
RT_B = {"python": "/b/python", "python_version": "3.12", "torch": "2.14.0+cpu", "torch_path": "/b"}


def passed(name: str, detail: str = "", model: str | None = None, runtime: str | None = None):
    return StageResult(name, StageStatus.PASSED, 0.5, detail, model=model, runtime=runtime)


def errored(name: str, detail: str) -> StageResult:
    return StageResult(name, StageStatus.ERROR, 0.0, detail)


def finding(code: str, stage: str, **fields: object):  # type: ignore[no-untyped-def]
    return codes.get(code).finding(f"{code} happened", stage=stage, **fields)


# ---------------------------------------------------------------------------------------------
# common.py


def test_counts_are_summed_over_reports_from_zero() -> None:
    assert common.combined_counts([]) == {"info": 0, "warning": 0, "error": 0}
    one = Report("a.pt2", findings=[finding("AOT013", "static")])
    two = Report("b.pt2", findings=[finding("AOT013", "static"), finding("AOT201", "static")])
    assert common.combined_counts([one, two]) == {"info": 0, "warning": 2, "error": 1}


def test_a_finding_at_the_gates_severity_fails_it() -> None:
    warning = finding("AOT013", "static")
    assert common.fails_gate(warning, Report("a", fail_on=Severity.WARNING))
    assert not common.fails_gate(warning, Report("a", fail_on=Severity.ERROR))


# ---------------------------------------------------------------------------------------------
# report/__init__.py: people's formats are cleaned, JSON keeps the text


def test_json_keeps_control_characters_people_formats_show_them_escaped() -> None:
    report = Report("a.pt2", findings=[codes.get("AOT013").finding("red \x1b[31m text")])
    data = json.loads(render_report(report, "json"))
    assert data["findings"][0]["message"] == "red \x1b[31m text"
    many = json.loads(render_reports([report, report], "json"))
    assert many["reports"][0]["findings"][0]["message"] == "red \x1b[31m text"
    for fmt in ("table", "markdown", "github", "junit", "sarif"):
        assert "\x1b" not in render_report(report, fmt), fmt
        assert "\x1b" not in render_reports([report, report], fmt), fmt


# ---------------------------------------------------------------------------------------------
# junit.py


def suite_of(text: str) -> ET.Element:
    suite = ET.fromstring(text.encode()).find("testsuite")
    assert suite is not None
    return suite


def cases_of(text: str) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in suite_of(text).findall("testcase")}


def test_one_torch_is_no_matrix_its_findings_stay_in_their_stage() -> None:
    report = Report(
        "a.pt2",
        stages=[passed("run", model="m", runtime="torch 2.13.0+cpu")],
        findings=[finding("AOT604", "run", model="m")],
        runtimes=[RT_A],
    )
    cases = cases_of(junit.render_report(report))
    assert list(cases) == ["run [m]"]
    assert cases["run [m]"].find("failure") is not None


def test_a_matrix_has_a_case_per_stage_model_and_torch() -> None:
    report = Report(
        "a.pt2",
        stages=[
            passed("run", model="m", runtime="torch 2.13.0+cpu"),
            passed("run", model="m", runtime="torch 2.14.0+cpu"),
        ],
        findings=[finding("AOT604", "run", model="m", runtime="torch 2.14.0+cpu")],
        runtimes=[RT_A, RT_B],
    )
    cases = cases_of(junit.render_report(report))
    assert list(cases) == ["run [m] [torch 2.13.0+cpu]", "run [m] [torch 2.14.0+cpu]"]
    assert cases["run [m] [torch 2.13.0+cpu]"].find("failure") is None
    assert cases["run [m] [torch 2.14.0+cpu]"].find("failure") is not None


def test_one_failure_names_its_code_and_no_more() -> None:
    report = Report("a.pt2", stages=[passed("static")], findings=[finding("AOT201", "static")])
    failure = cases_of(junit.render_report(report))["static"].find("failure")
    assert failure is not None and failure.get("message") == "AOT201: AOT201 happened"
    report.findings.append(finding("AOT202", "static"))
    failure = cases_of(junit.render_report(report))["static"].find("failure")
    assert failure is not None
    assert failure.get("message") == "AOT201: AOT201 happened (and 1 more)"


def test_a_stage_that_could_not_run_is_the_error_case_no_other() -> None:
    report = Report(
        "a.pt2",
        stages=[passed("inspect", "ok"), errored("load", "the loader refused it")],
        error="the loader refused it",
    )
    suite = suite_of(junit.render_report(report))
    assert [c.get("name") for c in suite.findall("testcase")] == ["inspect", "load"]
    assert (suite.get("tests"), suite.get("errors")) == ("2", "1")


def test_system_out_starts_with_the_stages_own_line() -> None:
    report = Report(
        "a.pt2",
        stages=[passed("static", "1 finding(s)")],
        findings=[finding("AOT022", "static")],  # an info: below the gate
    )
    out = cases_of(junit.render_report(report))["static"].find("system-out")
    assert out is not None and out.text is not None
    assert out.text.startswith("passed: 1 finding(s)\n\nAOT022 info")
    skipped = Report("a.pt2", stages=[StageResult("run", StageStatus.SKIPPED, 0, "no inputs")])
    case = cases_of(junit.render_report(skipped))["run"]
    assert case.find("skipped") is not None and case.find("system-out") is None


# ---------------------------------------------------------------------------------------------
# sarif.py


def notifications(text: str) -> list[str]:
    invocation = json.loads(text)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is (not invocation["toolExecutionNotifications"])
    return [n["message"]["text"] for n in invocation["toolExecutionNotifications"]]


def test_could_not_check_is_one_notification_per_cause() -> None:
    both = Report("a.pt2", stages=[passed("inspect"), errored("load", "refused")], error="refused")
    assert notifications(sarif.render_report(both)) == ["a.pt2: could not check: load: refused"]
    alone = Report("a.pt2", stages=[passed("inspect")], error="model 'x' is not in it")
    assert notifications(sarif.render_report(alone)) == [
        "a.pt2: could not check: model 'x' is not in it"
    ]
    assert notifications(sarif.render_report(Report("a.pt2", stages=[passed("inspect")]))) == []


def test_sarif_results_gate_and_locate() -> None:
    report = Report(
        "a.pt2",
        fail_on=Severity.WARNING,
        findings=[
            finding("AOT013", "static", model="m"),  # a warning at the gate's severity
            finding("AOT022", "static", input="ids"),  # an info, an input without a model
            finding("AOT201", "static", model="m", input="ids"),
            finding("AOT002", "inspect"),  # neither
        ],
    )
    results = json.loads(sarif.render_report(report))["runs"][0]["results"]
    assert [r["properties"]["gate"] for r in results] == ["fail", "pass", "fail", "fail"]
    assert [r["level"] for r in results] == ["warning", "note", "error", "error"]
    logical = [r["locations"][0].get("logicalLocations") for r in results]
    assert logical[0] == [{"name": "m", "fullyQualifiedName": "m", "kind": "module"}]
    assert logical[1][0]["name"] == "ids" and logical[1][0]["kind"] == "parameter"
    assert logical[2][0]["name"] == "ids" and logical[2][0]["kind"] == "parameter"
    assert logical[3] is None
    report.fail_on = Severity.ERROR
    results = json.loads(sarif.render_report(report))["runs"][0]["results"]
    assert [r["properties"]["gate"] for r in results] == ["pass", "pass", "fail", "fail"]


# ---------------------------------------------------------------------------------------------
# github.py


def test_a_stage_that_could_not_run_is_an_error_command_when_nothing_else_says_so() -> None:
    broken = Report("a.pt2", stages=[passed("inspect"), errored("load", "refused")])
    lines = github.render_report(broken).splitlines()
    assert lines[0] == "::error file=a.pt2,title=aotipre%3A load could not run::load: refused"
    assert lines[1].startswith("aotipre: ERROR a.pt2 (exit 2;")
    fine = Report("a.pt2", stages=[passed("inspect")])
    assert github.render_report(fine).splitlines() == [
        "aotipre: PASS a.pt2 (exit 0; 0 error, 0 warning, 0 info; fail-on error)"
    ]


# ---------------------------------------------------------------------------------------------
# table.py


PACKAGE = {
    "kind": "both",
    "models": [{"name": "m", "device_type": "cpu", "has_exported_program": True, "has_aoti": True}],
}


def test_the_table_shows_the_package_and_configuration_only_when_known() -> None:
    text = table.render_report(Report("a.pt2", stages=[passed("inspect")]))
    assert "package:" not in text and "config:" not in text
    text = table.render_report(
        Report("a.pt2", package=PACKAGE, config="aotipre.toml", stages=[passed("inspect")])
    )
    assert "\npackage: both; models: m (ExportedProgram+AOTI, cpu)\n" in text
    assert "\nconfig: aotipre.toml\n" in text
    assert text.endswith("verdict: PASS (exit 0; 0 error, 0 warning, 0 info; fail-on error)\n")


def test_the_table_names_the_torch_of_each_stage_in_a_matrix_only() -> None:
    one = Report("a.pt2", stages=[passed("run", model="m", runtime="torch 2.13.0+cpu")],
                 runtimes=[RT_A])  # fmt: skip
    text = table.render_report(one)
    assert "[torch" not in text and "workers: torch 2.13.0+cpu in /a/python" in text
    two = Report(
        "a.pt2",
        stages=[
            passed("run", model="m", runtime="torch 2.13.0+cpu"),
            passed("run", model="m", runtime="torch 2.14.0+cpu"),
            passed("inspect"),  # no model, no torch: read by aotipre itself
        ],
        runtimes=[RT_A, RT_B],
    )
    rows = [line.split() for line in table.render_report(two).splitlines()]
    assert ["run", "m", "[torch", "2.13.0+cpu]", "passed", "0.50s"] in rows
    assert ["run", "m", "[torch", "2.14.0+cpu]", "passed", "0.50s"] in rows
    assert ["inspect", "passed", "0.50s"] in rows


def target_row(target: str, status: str) -> dict[str, object]:
    return {"target": target, "model": "m", "status": status, "reasons": ["AOT431: glibc"]}


@pytest.mark.parametrize(
    ("rows", "shown"),
    [
        ([], False),
        ([target_row("this machine", "loads")], False),
        ([target_row("this machine", "cannot load")], True),
        ([target_row("a100", "loads"), target_row("h100", "loads")], True),
    ],
)
def test_the_targets_table_only_when_there_is_news(rows: list, shown: bool) -> None:
    text = table.render_report(Report("a.pt2", stages=[passed("inspect")], targets=rows))
    assert ("target: " in text) is shown


def test_many_tables_end_with_the_worst() -> None:
    fail = Report("b.pt2", findings=[finding("AOT201", "static")])
    text = table.render_reports([Report("a.pt2"), fail])
    assert text.endswith("overall: FAIL (exit 1; 2 package(s); 1 error, 0 warning, 0 info)\n")


# ---------------------------------------------------------------------------------------------
# the GPU of each package (issue #25)


def test_junit_sarif_and_github_name_the_gpu_of_each_package() -> None:
    """A failing package checked on GPU 1 and a passing one on no pinned GPU: the machine
    formats say which GPU saw the finding and the stage that could not run."""
    label = "1 NVIDIA H100 80GB HBM3 (GPU-bbbb2222)"
    bad = Report(
        package_path="bad.pt2",
        gpu={"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb2222"},
        findings=[codes.get("AOT602").finding("the run crashed", stage="run")],
        stages=[StageResult("load", StageStatus.ERROR, detail="worker died")],
    )
    good = Report(package_path="good.pt2")
    suites = ET.fromstring(junit.render_reports([bad, good])).findall("testsuite")
    props = [{p.get("name"): p.get("value") for p in s.iter("property")} for s in suites]
    assert props[0]["gpu"] == label and "gpu" not in props[1]
    run = json.loads(sarif.render_reports([bad, good]))["runs"][0]
    assert [r["properties"]["gpu"] for r in run["results"]] == [label]
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["properties"] == {"gpu": label}
    lines = github.render_reports([bad, good]).splitlines()
    assert lines[-2].startswith("aotipre: FAIL bad.pt2") and lines[-2].endswith(f"; gpu {label})")
    assert lines[-1].startswith("aotipre: PASS good.pt2") and "gpu" not in lines[-1]
