"""JSON rendering: the complete report (schema_version, verdict, package, stages, findings)."""

from __future__ import annotations

import json
from typing import Any

from aotipre.findings import Report
from aotipre.pt2.spec import PackageInfo, package_to_dict


def render_report(report: Report) -> str:
    return dumps(report.to_dict())


def render_package(package: PackageInfo) -> str:
    return dumps({"schema_version": 1, "package": package_to_dict(package, members=True)})


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
