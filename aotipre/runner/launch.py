"""How the parent starts a torch worker (aotipre/runner/worker.py): its script, its argv, the
environment every model call gets, and the start-up slack on top of the per-step limits.

Read these through the module (`launch.WORKER_PATH`), not `from ... import`: the fake-worker
harness (tests/fakes/cli_with_fake_worker.py) swaps the script at run time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
RUNTIME_CHECK_ENV = {"AOTI_RUNTIME_CHECK_INPUTS": "1"}
STARTUP_SLACK_S = 120.0
"""Backstop on top of the per-step limits: interpreter start, `import torch`, CUDA init."""


def worker_argv(
    python: str | None, worker_command: Sequence[str] | None, job_path: str
) -> tuple[str, ...]:
    """`python worker.py JOB` (the running interpreter by default), or the test hook's argv."""
    if worker_command:
        return (*worker_command, job_path)
    return (python or sys.executable, WORKER_PATH, job_path)


def worker_key(python: str | None, worker_command: Sequence[str] | None) -> tuple[str, ...]:
    """What identifies a kind of worker process (per-interpreter facts are cached under it)."""
    return tuple(worker_command or ()) or (python or sys.executable, WORKER_PATH)
