"""Renderers: each turns a Report (or a PackageInfo for `inspect`) into text in one format."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aotipre.findings import Report
from aotipre.foundation.errors import UsageError
from aotipre.report.sanitize import sanitized

if TYPE_CHECKING:
    from aotipre.pt2.spec import PackageInfo

_FORMATS = ("table", "json", "junit", "sarif", "github", "markdown", "html")
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


HUMAN_FORMATS = frozenset({"table", "markdown", "github", "junit", "sarif", "html"})
"""Formats people read (directly, or as CI and code-scanning pages show them) or a CI runner
parses line by line: every string is `clean`ed. JSON keeps its strings, only made encodable."""


def render_report(report: Report, fmt: str) -> str:
    """`report` in `fmt`, through the one sanitiser (aotipre/report/sanitize.py)."""
    return CHECK_RENDERERS[fmt](sanitized(report, human=fmt in HUMAN_FORMATS))


def render_reports(
    reports: Sequence[Report], fmt: str, *, shard: Mapping[str, Any] | None = None
) -> str:
    """Many reports in `fmt`; `shard`: a CI shard's block (aotipre.fleet.shard.ShardPlan.to_dict()),
    which the JSON report carries."""
    human = fmt in HUMAN_FORMATS
    cleaned = [sanitized(r, human=human) for r in reports]
    if shard is not None and fmt == "json":
        from aotipre.report import json_format

        return json_format.render_reports(cleaned, shard=sanitized(shard, human=False))
    return BATCH_RENDERERS[fmt](cleaned)


def render_package(
    package: PackageInfo, fmt: str, findings: Sequence[Any] = (), rows: Sequence[Any] = ()
) -> str:
    """`aotipre inspect`'s output (table or json) with the binaries' findings and one row per
    model and target, all through the same sanitiser."""
    module = importlib.import_module(f"aotipre.report.{_MODULES.get(fmt, fmt)}")
    render: Callable[..., str] = module.render_package
    human = fmt in HUMAN_FORMATS
    return render(
        sanitized(package, human=human),
        [sanitized(f, human=human) for f in findings],
        [sanitized(r, human=human) for r in rows],
    )


def parse_report_spec(spec: str) -> tuple[str, str]:
    """`junit:out.xml` -> ('junit', 'out.xml'). Raises UsageError naming the formats."""
    fmt, sep, path = spec.partition(":")
    if not sep or not path or fmt not in CHECK_RENDERERS:
        raise UsageError(
            f"--report {spec!r} is not FORMAT:PATH",
            hint=f"FORMAT is one of {', '.join(CHECK_RENDERERS)}, e.g. --report junit:report.xml",
        )
    return fmt, path
