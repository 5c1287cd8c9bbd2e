"""A worker step's phases: what it is doing now, and when it entered each phase (`phase_at`),
which says where a step's time went (scripts/bench_accuracy_triage.py reads it)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from aotipre.runner.worker.core import WorkerCore


def test_each_phase_is_stamped_with_the_seconds_into_the_step_it_first_began() -> None:
    core: Any = WorkerCore.__new__(WorkerCore)
    flushed: list[str] = []
    current = {"id": "trace", "started": time.time() - 5.0}  # the step began 5 s ago
    core.rec = SimpleNamespace(data={"current": current}, flush=lambda: flushed.append("x"))
    entry: dict[str, Any] = {}
    for name in ("load", "call", "eager", "load"):
        core.phase(entry, name)
    at = entry["phase_at"]
    assert list(at) == ["load", "call", "eager"]  # a phase entered again keeps its first stamp
    assert 5.0 <= at["load"] <= at["call"] <= at["eager"]
    assert entry["phase"] == current["phase"] == "load" and len(flushed) == 4


def test_a_phase_outside_a_step_is_recorded_without_a_stamp() -> None:
    core: Any = WorkerCore.__new__(WorkerCore)
    core.rec = SimpleNamespace(data={}, flush=lambda: None)
    entry: dict[str, Any] = {}
    core.phase(entry, "load")
    assert entry == {"phase": "load"}
