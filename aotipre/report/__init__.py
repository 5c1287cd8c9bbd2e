"""Renderers: each turns a Report (or a PackageInfo for `inspect`) into text in one format."""

from __future__ import annotations

from collections.abc import Callable

from aotipre.findings import Report
from aotipre.report import json_format, table

CHECK_RENDERERS: dict[str, Callable[[Report], str]] = {
    "table": table.render_report,
    "json": json_format.render_report,
}
"""Formats of `aotipre check --format`; each renderer is a pure function Report -> str."""


def render_report(report: Report, fmt: str) -> str:
    return CHECK_RENDERERS[fmt](report)
