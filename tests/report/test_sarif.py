"""SARIF 2.1.0: the required fields, one rule per code, results located at the package (member)."""

from __future__ import annotations

import json
from typing import Any

from aotipre.findings import Report, codes
from aotipre.report import sarif

LEVELS = {"none", "note", "warning", "error"}


def validate(text: str) -> dict[str, Any]:
    """The fields SARIF 2.1.0 requires (and GitHub code scanning reads)."""
    log = json.loads(text)
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    assert isinstance(log["runs"], list) and log["runs"]
    for run in log["runs"]:
        driver = run["tool"]["driver"]
        assert driver["name"] == "aotipre"
        rules = driver["rules"]
        ids = [r["id"] for r in rules]
        assert len(ids) == len(set(ids))
        for rule in rules:
            assert rule["shortDescription"]["text"] and rule["help"]["text"]
            assert rule["defaultConfiguration"]["level"] in LEVELS
        artifacts = run.get("artifacts", [])
        for result in run["results"]:
            assert result["ruleId"] in ids
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
            assert result["level"] in LEVELS
            assert isinstance(result["message"]["text"], str) and result["message"]["text"]
            assert result["locations"]
            for location in result["locations"]:
                art = location["physicalLocation"]["artifactLocation"]
                assert art["uri"]
                assert artifacts[art["index"]]["location"]["uri"] == art["uri"]
        for invocation in run["invocations"]:
            assert isinstance(invocation["executionSuccessful"], bool)
    return log


def test_required_fields_and_one_rule_per_code(reports: list[Report]) -> None:
    log = validate(sarif.render_reports(reports))
    (run,) = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [c.code for c in codes.ALL_CODES]
    assert len(run["results"]) == sum(len(r.findings) for r in reports)
    rule = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "AOT201")
    assert rule["help"]["text"] == codes.get("AOT201").hint


def test_results_point_at_the_package_and_member(reports: list[Report]) -> None:
    log = validate(sarif.render_report(reports[0]))
    run = log["runs"][0]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    loc = by_rule["AOT201"]["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "models/fail.pt2"
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == "encoder / ids#0"
    member = by_rule["AOT008"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert member["uri"] == "fail/data/x.so"
    parent = run["artifacts"][member["index"]]["parentIndex"]
    assert run["artifacts"][parent]["location"]["uri"] == "models/fail.pt2"
    assert {r["level"] for r in run["results"]} == {"error", "warning", "note"}
    assert by_rule["AOT604"]["properties"]["evidence"] == ["Segmentation fault", "at kernel_0"]
    assert all(r["partialFingerprints"]["aotipre/v1"] for r in run["results"])


def test_could_not_check_is_an_unsuccessful_execution(reports: list[Report]) -> None:
    ok = validate(sarif.render_report(reports[1]))["runs"][0]["invocations"][0]
    assert ok["executionSuccessful"] is True
    bad = validate(sarif.render_report(reports[2]))["runs"][0]["invocations"][0]
    assert bad["executionSuccessful"] is False
    assert "broken.pt2" in bad["toolExecutionNotifications"][0]["message"]["text"]
