"""Renderers: each turns a Report (or a PackageInfo for `inspect`) into text in one format."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from aotipre.errors import UsageError
from aotipre.findings import Report

_FORMATS = ("table", "json", "junit", "sarif", "github", "markdown")
_MODULES = {"json": "json_format"}


class _Renderers(Mapping[str, Callable[..., str]]):
    """format -> renderer, importing a renderer's module on first use (keeps start-up fast)."""

    def __init__(self, function: str) -> None:
        self._function = function

    def __getitem__(self, fmt: str) -> Callable[..., str]:
        if fmt not in _FORMATS:
            raise KeyError(fmt)
        module = importlib.import_module(f"aotipre.report.{_MODULES.get(fmt, fmt)}")
        render: Any = getattr(module, self._function)
        return render  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(_FORMATS)

    def __len__(self) -> int:
        return len(_FORMATS)


CHECK_RENDERERS: Mapping[str, Callable[[Report], str]] = _Renderers("render_report")
"""Formats of `aotipre check --format`; each renderer is a pure function Report -> str."""

BATCH_RENDERERS: Mapping[str, Callable[[Sequence[Report]], str]] = _Renderers("render_reports")
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
