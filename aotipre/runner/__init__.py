"""Worker-process control: running isolated children (proc) and, later, the torch worker itself."""

from __future__ import annotations

from aotipre.runner.proc import (
    ProcessOutcome,
    children_guard,
    decode_signal,
    kill_all_children,
    live_children,
    run_process,
)

__all__ = [
    "ProcessOutcome",
    "children_guard",
    "decode_signal",
    "kill_all_children",
    "live_children",
    "run_process",
]
