"""triage/accuracy_spec.py on real processes: the speculative rebuild's worker is stopped when
its guess is not needed, never outlives the triage, and its guess is the first candidate whose
fact holds (no torch, no compile)."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any

from aotipre.runner.proc import run_process
from aotipre.triage.accuracy import KNOBS
from aotipre.triage.accuracy_spec import Speculation

CPU = tuple(k for k in KNOBS if k.device in ("any", "cpu"))


def sleeper(started: list[int]) -> Any:
    """A trial whose worker sleeps past its 20-second limit, and says how it ended."""

    def trial(*, among: tuple[Any, ...], on_start: Any) -> Any:
        def record(pid: int) -> None:
            started.append(pid)
            on_start(pid)

        outcome = run_process(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            timeout_s=20,
            on_start=record,
        )
        return SimpleNamespace(knob="precision-casts", outcome=outcome)

    return trial


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_guess_that_is_not_needed_is_stopped_with_its_worker() -> None:
    started: list[int] = []
    spec = Speculation(CPU, sleeper(started))
    while not started:  # the worker is running
        os.sched_yield()
    spec.stop()
    (pid,) = started
    assert not alive(pid)
    ended = spec.trial.outcome
    assert not ended.ok and not ended.timed_out  # stopped, not left to its limit


def test_the_guess_is_the_first_candidate_whose_fact_holds() -> None:
    spec = Speculation(CPU, lambda **kw: None)
    assert spec.predicted({"low_precision": True, "rng": True}).id == "precision-casts"
    assert spec.predicted({"rng": True, "reduction": True}).id == "fallback-random"
    assert spec.predicted({"reduction": True}).id == "all-fallback"
    assert spec.predicted({"fp32_matmul": True}) is None
    spec.result()
