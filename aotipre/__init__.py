"""aotipre: a deployment preflight checker for PyTorch AOTInductor (.pt2) packages.

The root holds the library's faces only: api.py (check() and inspect()), config.py (the settings
every front end reads), program.py (the in-memory programs check() accepts) and pytest_plugin.py;
every other module sits in a package named for its role, in the order of the data flow
(docs/how-it-works.md shows the tree): the CLI (cli/) on top, the fleet (fleet/) beside the
pipeline, then inspect (pt2/, binaries/, inputs/) -> checks/ -> runs (runner/, cpp/) -> triage/ ->
findings/ and report/, the tools beside a check (diff/, serving/, doctor/), and what they all stand
on (environment/, foundation/).
"""

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
