"""Renderers: each turns a Report (or a PackageInfo for `inspect`) into text in one format."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aotipre.errors import UsageError
from aotipre.findings import Report
from aotipre.report import github, json_format, junit, markdown, sarif, table

CHECK_RENDERERS: dict[str, Callable[[Report], str]] = {
    "table": table.render_report,
    "json": json_format.render_report,
    "junit": junit.render_report,
    "sarif": sarif.render_report,
    "github": github.render_report,
    "markdown": markdown.render_report,
}
"""Formats of `aotipre check --format`; each renderer is a pure function Report -> str."""

BATCH_RENDERERS: dict[str, Callable[[Sequence[Report]], str]] = {
    "table": table.render_reports,
    "json": json_format.render_reports,
    "junit": junit.render_reports,
    "sarif": sarif.render_reports,
    "github": github.render_reports,
    "markdown": markdown.render_reports,
}
"""The same formats for one combined report over many packages (same keys as CHECK_RENDERERS)."""


def render_report(report: Report, fmt: str) -> str:
    return CHECK_RENDERERS[fmt](report)


def render_reports(reports: Sequence[Report], fmt: str) -> str:
    return BATCH_RENDERERS[fmt](reports)


def parse_report_spec(spec: str) -> tuple[str, str]:
    """`junit:out.xml` -> ('junit', 'out.xml'). Raises UsageError naming the formats."""
    fmt, sep, path = spec.partition(":")
    if not sep or not path or fmt not in CHECK_RENDERERS:
        raise UsageError(
            f"--report {spec!r} is not FORMAT:PATH",
            hint=f"FORMAT is one of {', '.join(CHECK_RENDERERS)}, e.g. --report junit:report.xml",
        )
    return fmt, path
