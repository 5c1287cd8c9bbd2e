"""JUnit XML: the shape CI servers read (testsuites/testsuite/testcase), with consistent counts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from aotipre.findings import Report
from aotipre.report import junit
from tests.report.conftest import TRICKY, error_report, passing_report

OUTCOMES = ("failure", "error", "skipped")


def parse(text: str) -> ET.Element:
    """Parse and check what Jenkins, GitLab and the GitHub test-report actions rely on."""
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name")
        cases = suite.findall("testcase")
        assert [c.tag for c in suite if c.tag != "properties"] == ["testcase"] * len(cases)
        counts = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        for key, value in counts.items():
            assert int(suite.get(key, "-1")) == value, (key, suite.get("name"))
            totals[key] += value
        assert float(suite.get("time", "x")) >= 0
        for case in cases:
            assert case.get("name") and case.get("classname")
            assert float(case.get("time", "x")) >= 0
            assert sum(case.find(t) is not None for t in OUTCOMES) <= 1
            for tag in ("failure", "error"):
                child = case.find(tag)
                if child is not None:
                    assert child.get("message") and child.get("type") and child.text
    for key, value in totals.items():
        assert int(root.get(key, "-1")) == value
    return root


def cases_of(root: ET.Element) -> dict[str, ET.Element]:
    suite = root.find("testsuite")
    assert suite is not None
    return {c.get("name", ""): c for c in suite.findall("testcase")}


def test_one_testcase_per_stage_and_model(reports: list[Report]) -> None:
    root = parse(junit.render_report(reports[0]))
    cases = cases_of(root)
    assert list(cases) == [
        "inspect",
        "inputs",
        "static",
        "compile [encoder]",
        "run [encoder]",
        "run [decoder]",
        "findings",  # a finding whose stage has no result still appears, exactly once
    ]
    static = cases["static"].find("failure")
    assert static is not None
    assert static.get("type") == "AOT201" and "(and 1 more)" in static.get("message", "")
    assert "AOT008" in (static.text or "") and "hint:" in (static.text or "")
    run = cases["run [encoder]"].find("failure")
    assert run is not None and "Segmentation fault" in (run.text or "")
    assert cases["run [decoder]"].find("skipped") is not None
    assert cases["findings"].find("failure") is None  # info: below the gate
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("skipped"), suite.get("errors")) == ("2", "1", "0")


def test_warnings_below_the_gate_go_to_system_out_escaped() -> None:
    from tests.report.conftest import failing_report

    report = failing_report()
    text = junit.render_report(report)
    root = parse(text)
    out = cases_of(root)["static"].find("system-out")
    assert out is not None and "AOT013" in (out.text or "")
    assert "<tag> & | pipe" in (out.text or "")  # escaped in the file, intact when parsed
    assert "\x1b" not in text  # XML 1.0 cannot carry control characters at all
    assert TRICKY.replace("\x1b", "").replace("\r\n", "\n") in (out.text or "").replace(
        "\r\n", "\n"
    )


def test_every_finding_lands_in_exactly_one_testcase(reports: list[Report]) -> None:
    root = parse(junit.render_reports(reports))
    for report, suite in zip(reports, root.findall("testsuite")):
        texts = ["".join(c.itertext()) for c in suite.findall("testcase")]
        for finding in report.findings:
            head = f"{finding.code} {finding.severity.value} [{finding.subject}]"
            assert sum(t.count(head) for t in texts) == 1, head


def test_could_not_check_is_an_error() -> None:
    root = parse(junit.render_report(error_report()))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("errors") == "1"
    error = cases_of(root)["inspect"].find("error")
    assert error is not None and "AOT002" in (error.text or "")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "error" and props["exit_code"] == "2"


def test_error_without_an_error_stage_gets_its_own_testcase() -> None:
    report = passing_report()
    report.error = "model 'x' is not in the package"
    root = parse(junit.render_report(report))
    assert cases_of(root)["aotipre"].find("error") is not None


def test_many_packages_one_suite_each(reports: list[Report]) -> None:
    root = parse(junit.render_reports(reports))
    assert [s.get("name") for s in root] == [r.package_path for r in reports]
    assert (root.get("failures"), root.get("errors")) == ("2", "1")
