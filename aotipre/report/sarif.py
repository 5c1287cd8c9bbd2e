"""SARIF 2.1.0: one run, one rule per code of the code table, results located at the package."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from aotipre import __version__
from aotipre.findings import Finding, Report, Severity, StageStatus, codes
from aotipre.findings.baseline import fingerprint
from aotipre.report.common import gpu_label

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_MEMBER_CODES = frozenset({"AOT003", "AOT006", "AOT007", "AOT008"})
"""Codes whose finding names an archive member (in `actual`) when it is known."""


def render_report(report: Report) -> str:
    return render_reports([report])


def render_reports(reports: Sequence[Report]) -> str:
    rule_index = {c.code: i for i, c in enumerate(codes.ALL_CODES)}
    artifacts: list[dict[str, Any]] = []
    artifact_index: dict[tuple[str, str | None], int] = {}

    def artifact(package: str, member: str | None = None) -> int:
        key = (package, member)
        if key not in artifact_index:
            entry: dict[str, Any] = {"location": {"uri": member or _uri(package)}}
            if member is not None:
                entry["parentIndex"] = artifact(package)
            else:
                entry["roles"] = ["analysisTarget"]
            artifact_index[key] = len(artifacts)
            artifacts.append(entry)
        return artifact_index[key]

    results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for report in reports:
        artifact(report.package_path)
        for finding in report.findings:
            results.append(_result(report, finding, rule_index, artifact))
        for stage in report.stages:
            if stage.status is StageStatus.ERROR:
                notifications.append(_notification(report, f"{stage.name}: {stage.detail}"))
        if report.error is not None and not any(
            s.status is StageStatus.ERROR for s in report.stages
        ):
            notifications.append(_notification(report, report.error))
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "aotipre",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule(c) for c in codes.ALL_CODES],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not notifications,
                "toolExecutionNotifications": notifications,
                "properties": {"config": sorted({r.config for r in reports if r.config})},
            }
        ],
        "artifacts": artifacts,
        "results": results,
        "columnKind": "unicodeCodePoints",
    }
    sarif = {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(sarif, indent=2, default=str) + "\n"


def _rule(code: codes.Code) -> dict[str, Any]:
    return {
        "id": code.code,
        "name": code.name,
        "shortDescription": {"text": code.summary},
        "fullDescription": {"text": code.summary},
        "help": {"text": code.hint, "markdown": code.hint},
        "defaultConfiguration": {"level": _LEVEL[code.severity]},
        "properties": {"category": code.category.value, "tags": [code.category.value]},
    }


def _result(
    report: Report,
    finding: Finding,
    rule_index: dict[str, int],
    artifact: Any,
) -> dict[str, Any]:
    member = _member(finding)
    index = artifact(report.package_path, member)
    location: dict[str, Any] = {
        "physicalLocation": {
            "artifactLocation": {"uri": member or _uri(report.package_path), "index": index}
        }
    }
    if finding.model or finding.input is not None:
        location["logicalLocations"] = [
            {
                "name": finding.input if finding.input is not None else finding.model,
                "fullyQualifiedName": finding.subject,
                "kind": "parameter" if finding.input is not None else "module",
            }
        ]
    text = finding.message + (f" ({finding.hint})" if finding.hint else "")
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": _LEVEL[finding.severity],
        "message": {"text": text},
        "locations": [location],
        "partialFingerprints": {"aotipre/v1": fingerprint(finding)},
        "properties": {
            "subject": finding.subject,
            "category": finding.category.value,
            "stage": finding.stage,
            "gate": "fail" if finding.severity.rank >= report.fail_on.rank else "pass",
        },
    }
    if finding.code in rule_index:
        result["ruleIndex"] = rule_index[finding.code]
    if finding.evidence:
        result["properties"]["evidence"] = list(finding.evidence)
    if report.gpu is not None:
        result["properties"]["gpu"] = gpu_label(report.gpu)
    return result


def _member(finding: Finding) -> str | None:
    if finding.code in _MEMBER_CODES and isinstance(finding.actual, str) and finding.actual:
        return finding.actual
    return None


def _notification(report: Report, text: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "level": "error",
        "message": {"text": f"{report.package_path}: could not check: {text}"},
    }
    if report.gpu is not None:
        out["properties"] = {"gpu": gpu_label(report.gpu)}
    return out


def _uri(path: str) -> str:
    """A relative, forward-slash URI for a path under the working directory; else as given."""
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:
            return PurePath(path).as_uri()
        if not rel.startswith(".."):
            return quote(PurePath(rel).as_posix())
        return PurePath(path).as_uri()
    return quote(PurePath(path).as_posix())
