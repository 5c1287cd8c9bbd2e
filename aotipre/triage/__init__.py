"""Crash triage: the escalation ladder that names the kernel a crashed run faulted in."""

from __future__ import annotations

from aotipre.triage.diagnosis import Diagnosis, IndexBound, TensorStats
from aotipre.triage.ladder import LADDER, LadderStep

__all__ = ["LADDER", "Diagnosis", "IndexBound", "LadderStep", "TensorStats"]
