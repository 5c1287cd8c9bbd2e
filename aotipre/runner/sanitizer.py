"""compute-sanitizer: where it is, the argv that runs a worker under memcheck, and its error
records. Used by the compile stage's fault re-run and by crash triage's sanitizer step."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass


def find_sanitizer() -> str | None:
    """compute-sanitizer on PATH, else under $CUDA_HOME or /usr/local/cuda; None: not installed."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if base:
            path = os.path.join(base, "bin", "compute-sanitizer")
            if os.access(path, os.X_OK):
                return path
    return None


def memcheck_prefix(tool: str, log: str) -> tuple[str, ...]:
    """What goes before the worker's argv: memcheck, its records written to `log`."""
    return (tool, "--tool", "memcheck", "--print-limit", "20", "--log-file", log)


@dataclass(frozen=True)
class SanitizerHit:
    """One compute-sanitizer error record."""

    what: str
    """`Invalid __global__ read of size 4 bytes`."""
    kernel: str | None
    lines: tuple[str, ...]


_SAN_ERROR = re.compile(r"^=+ (Invalid __\w+__ (?:read|write|atomic).*|Out-of-range .*|.*Error.*)$")
_SAN_TOOL_STATUS = re.compile(r"^=+ (?:ERROR SUMMARY|Program hit |Error: |Target application )")
"""The tool's own status lines (API errors after the fault, the exit, the count): no records."""
_SAN_AT = re.compile(r"^=+\s+at (?:0x[0-9a-f]+ in )?(?P<func>[\w:]+?)(?:\(|\+0x| in |$)")


def sanitizer_hits(text: str, limit: int = 5) -> list[SanitizerHit]:
    """compute-sanitizer's error records (memcheck): what, the kernel, the record's lines."""
    out: list[SanitizerHit] = []
    current: list[str] = []
    what = ""
    kernel: str | None = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line.startswith("="):
            continue
        m = _SAN_ERROR.match(line)
        if m and not _SAN_TOOL_STATUS.match(line):
            if current:
                out.append(SanitizerHit(what, kernel, tuple(current)))
            what, kernel, current = m.group(1).strip(), None, [line]
            continue
        if current:
            a = _SAN_AT.match(line)
            if a and kernel is None:
                kernel = a.group("func")
            if len(current) < 6:
                current.append(line)
    if current:
        out.append(SanitizerHit(what, kernel, tuple(current)))
    return out[:limit]
