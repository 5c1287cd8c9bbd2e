"""aotipre: a deployment preflight checker for PyTorch AOTInductor (.pt2) packages."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["CheckOptions", "Report", "check", "inspect", "__version__"]


def __getattr__(name: str) -> Any:
    """`aotipre.check`, `aotipre.inspect`, `aotipre.CheckOptions`, `aotipre.Report`, imported on
    first use so that `import aotipre` (e.g. by the pytest plugin) stays cheap."""
    if name in ("check", "inspect", "CheckOptions"):
        from aotipre import api

        return getattr(api, name)
    if name == "Report":
        from aotipre.findings import Report

        return Report
    raise AttributeError(f"module 'aotipre' has no attribute {name!r}")
