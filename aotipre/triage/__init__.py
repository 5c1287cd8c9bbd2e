"""Crash triage: the escalation ladder that names the kernel a crashed run faulted in.

ladder (data) <- state <- steps <- schedule; conclude and artifacts read state; escalate runs
schedule -> conclude -> artifacts. parsers and codegen are pure text parsers."""

from __future__ import annotations

from aotipre.triage.diagnosis import Diagnosis, IndexBound, TensorStats
from aotipre.triage.ladder import LADDER, LadderStep

__all__ = ["LADDER", "Diagnosis", "IndexBound", "LadderStep", "TensorStats"]
