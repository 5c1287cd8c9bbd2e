"""JSON rendering: the complete report (schema_version, verdict, package, stages, findings)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aotipre import __version__
from aotipre.findings import SCHEMA_VERSION, Finding, Report
from aotipre.pt2.spec import PackageInfo, package_to_dict
from aotipre.report.common import combined_counts, combined_verdict, worst_exit_code

if TYPE_CHECKING:
    from aotipre.checks.target import TargetRow


def render_report(report: Report) -> str:
    return dumps(report.to_dict())


def render_package(
    package: PackageInfo, findings: Sequence[Finding] = (), rows: Sequence[TargetRow] = ()
) -> str:
    return dumps(
        {
            "schema_version": 1,
            "package": package_to_dict(package, members=True),
            "findings": [f.to_dict() for f in findings],
            "targets": [r.to_dict() for r in rows],
        }
    )


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"


def render_reports(reports: Sequence[Report], shard: Mapping[str, Any] | None = None) -> str:
    """Many packages: the worst verdict and exit code, every complete report, summed counts;
    a CI shard's run (`check --shard`) also its `shard` block (aotipre.fleet.shard.ShardPlan)."""
    verdicts = [r.verdict.value for r in reports]
    summary: dict[str, Any] = {"packages": len(reports)}
    summary.update({v: verdicts.count(v) for v in ("pass", "fail", "error")})
    summary.update(combined_counts(reports))
    return dumps(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "aotipre", "version": __version__},
            "verdict": combined_verdict(reports).value,
            "exit_code": int(worst_exit_code(reports)),
            **({"shard": dict(shard)} if shard is not None else {}),
            "reports": [r.to_dict() for r in reports],
            "summary": summary,
        }
    )
