"""Helpers the triage benchmarks share (scripts/bench_triage.py, scripts/bench_accuracy_triage.py):
a step timed in a fresh interpreter, and the torch version those interpreters import."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import NamedTuple

FRESH_TIMEOUT_S = 1800
"""The longest one step of a benchmark may take (a compile of the larger models included)."""


class FreshRun(NamedTuple):
    """One step of a benchmark as a person runs it: a script in a fresh `python` process."""

    seconds: float
    """Wall time from the process's start to its exit, interpreter start-up included."""
    returncode: int
    """The process's exit status."""
    log: str
    """Its stdout, then its stderr."""


def fresh(
    code: str, *args: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> FreshRun:
    """Run `code` with `args` in a fresh interpreter (this one's executable), with `env` over
    this process's environment and `cwd` as its working folder; timed end to end."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=FRESH_TIMEOUT_S,
    )
    return FreshRun(time.monotonic() - started, proc.returncode, proc.stdout + proc.stderr)


def torch_version() -> str | None:
    """The version of the torch a fresh interpreter imports (None where it imports none)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() or None
