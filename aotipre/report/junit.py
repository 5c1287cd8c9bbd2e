"""JUnit XML: one testsuite per package, one testcase per stage (and model); findings as failures."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from aotipre.findings import Finding, Report, StageResult, StageStatus
from aotipre.report.common import fails_gate, finding_text, gpu_label, package_labels

_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render_report(report: Report) -> str:
    return render_reports([report])


def render_reports(reports: Sequence[Report]) -> str:
    """`<testsuites>` holding one `<testsuite>` per report; counts agree with the elements."""
    root = ET.Element("testsuites", name="aotipre")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for report, label in zip(reports, package_labels(reports)):
        suite, counts, seconds = _suite(report, label)
        root.append(suite)
        for key in totals:
            totals[key] += counts[key]
        total_time += seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_time))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


@dataclass
class _Case:
    name: str
    stage: StageResult | None
    findings: list[Finding] = field(default_factory=list)


def _cases(report: Report) -> list[_Case]:
    """One case per stage result; each finding goes to exactly one case (its stage's)."""
    cases: list[_Case] = []
    index: dict[tuple[str, str | None, str | None], _Case] = {}
    matrix = len(report.runtimes) > 1  # several --python: a case per stage, model and torch
    for stage in report.stages:
        name = stage.name if stage.model is None else f"{stage.name} [{stage.model}]"
        runtime = stage.runtime if matrix else None
        case = _Case(f"{name} [{runtime}]" if runtime else name, stage)
        cases.append(case)
        index.setdefault((stage.name, stage.model, runtime), case)
    stray: _Case | None = None
    for finding in report.findings:
        stage_name = finding.stage or ""
        found = index.get((stage_name, finding.model, finding.runtime)) or index.get(
            (stage_name, None, finding.runtime)
        )
        if found is None:
            if stray is None:
                stray = _Case("findings", None)
                cases.append(stray)
            found = stray
        found.findings.append(finding)
    return cases


def _suite(report: Report, label: str) -> tuple[ET.Element, dict[str, int], float]:
    classname = "aotipre." + PurePath(label).name.replace(".", "_")
    suite = ET.Element("testsuite", name=_clean(label))
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("verdict", report.verdict.value),
        ("exit_code", str(int(report.exit_code))),
        ("fail_on", report.fail_on.value),
        ("inputs", report.inputs_source or ""),
        ("config", report.config or ""),
        ("error", report.error or ""),
        *((("gpu", gpu_label(report.gpu)),) if report.gpu is not None else ()),
    ):
        ET.SubElement(props, "property", name=key, value=_clean(value))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    cases = _cases(report)
    if report.error is not None and not any(
        c.stage is not None and c.stage.status is StageStatus.ERROR for c in cases
    ):
        cases.append(_Case("aotipre", StageResult("aotipre", StageStatus.ERROR, detail="")))
    for case in cases:
        duration = case.stage.duration_s if case.stage is not None else 0.0
        seconds += duration
        element = ET.SubElement(
            suite,
            "testcase",
            name=_clean(case.name),
            classname=classname,
            file=_clean(report.package_path),
            time=_seconds(duration),
        )
        counts["tests"] += 1
        outcome = _outcome(report, case, element)
        if outcome:
            counts[outcome] += 1
    suite.set("tests", str(counts["tests"]))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", str(counts["errors"]))
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", _seconds(seconds))
    return suite, counts, seconds


def _outcome(report: Report, case: _Case, element: ET.Element) -> str | None:
    """Add the failure/error/skipped child; return which counter it raises (None: passed)."""
    gating = [f for f in case.findings if fails_gate(f, report)]
    others = [f for f in case.findings if not fails_gate(f, report)]
    stage = case.stage
    outcome: str | None = None
    if stage is not None and stage.status is StageStatus.ERROR:
        detail = stage.detail or report.error or "the stage could not run"
        body = "\n\n".join([detail, *(_describe(f) for f in case.findings)])
        _child(element, "error", _first_line(detail), "could-not-check", body)
        outcome = "errors"
        others = []
    elif gating:
        first = gating[0]
        more = f" (and {len(gating) - 1} more)" if len(gating) > 1 else ""
        message = f"{first.code}: {_first_line(first.message)}{more}"
        body = "\n\n".join(_describe(f) for f in gating)
        _child(element, "failure", message, first.code, body)
        outcome = "failures"
    elif stage is not None and stage.status is StageStatus.SKIPPED and not case.findings:
        ET.SubElement(element, "skipped", message=_clean(stage.detail))
        outcome = "skipped"
    out_lines = [_describe(f) for f in others]
    if stage is not None and stage.detail and outcome not in ("errors", "skipped"):
        out_lines.insert(0, f"{stage.status.value}: {stage.detail}")
    if out_lines:
        ET.SubElement(element, "system-out").text = _clean("\n\n".join(out_lines))
    return outcome


def _child(parent: ET.Element, tag: str, message: str, kind: str, body: str) -> None:
    child = ET.SubElement(parent, tag, message=_clean(message), type=_clean(kind))
    child.text = _clean(body)


def _describe(finding: Finding) -> str:
    head = f"{finding.code} {finding.severity.value} [{finding.subject}]"
    return head + "\n" + finding_text(finding)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _clean(text: str) -> str:
    """Drop characters XML 1.0 cannot carry at all (control characters from worker logs)."""
    return _XML_ILLEGAL.sub("", text)
