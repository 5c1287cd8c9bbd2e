"""Running models in isolated torch workers: child processes (proc), the worker script
(worker, the only torch importer), how it is started (launch), what its logs mean (classify),
the compile cache (cache), planned inputs and probes (synth), and the dynamic stages (stages/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    """A name of `__all__`, from aotipre.runner.proc when first asked for: the static lane
    imports submodules of this package (runner.reference, runner.synth) and starts no child."""
    if name in __all__:
        from aotipre.runner import proc

        return getattr(proc, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
