"""Crash triage: the escalation ladder that names the kernel a crashed run faulted in.

ladder (data) <- state <- steps <- schedule; conclude and artifacts read state; escalate runs
schedule -> conclude -> artifacts. parsers and codegen are pure text parsers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aotipre.triage.diagnosis import Diagnosis, IndexBound, TensorStats
    from aotipre.triage.ladder import LADDER, LadderStep

__all__ = ["LADDER", "Diagnosis", "IndexBound", "LadderStep", "TensorStats"]

_EXPORTED_FROM = {
    "Diagnosis": "diagnosis",
    "IndexBound": "diagnosis",
    "TensorStats": "diagnosis",
    "LADDER": "ladder",
    "LadderStep": "ladder",
}
"""Each name of `__all__` and its module, imported when the name is first asked for: the
static lane's index check imports `triage.parsers` and `triage.codegen`, not the ladder."""


def __getattr__(name: str) -> Any:
    """A name of `__all__`, from its module (`_EXPORTED_FROM`)."""
    if name in _EXPORTED_FROM:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTED_FROM[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
