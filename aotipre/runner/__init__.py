"""Running models in isolated torch workers: child processes (proc), the worker script
(worker, the only torch importer), how it is started (launch), what its logs mean (classify),
the compile cache (cache), planned inputs and probes (synth), and the dynamic stages (stages/)."""

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
