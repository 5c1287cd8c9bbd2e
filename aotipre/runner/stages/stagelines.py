"""The start and end lines of one model's dynamic stages, from the worker's step markers.

The stages plan their steps up front, in pipeline order, and one worker runs them in that order;
a stage's verdict is only known once the last worker is done (Stage.result). So the lines follow
the work itself: a stage starts when its first step starts (the first stage: when its worker is
launched, whose start-up it pays for) and ends when a step of a later stage starts, or when the
last worker ends. The end line says what became of its steps: `done`, `failed` (a step raised),
`crashed` or `timed out` (the worker died in it); the stage's verdict is the report's. A stage
that started no step (skipped, or judged from other stages' steps) gets one line with its
result's status once the results are made (one line for all, `dynamic stages skipped`, when
none of them started and all ended alike).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from aotipre.findings import StageResult
from aotipre.foundation.progress import stage_ended, stage_started
from aotipre.runner.stages.base import PlannedStep, StepRecord

_OUTCOMES = {
    "ok": "done",
    "skipped": "done",
    "error": "failed",
    "worker_error": "failed",
    "timeout": "timed out",
    "crash": "crashed",
}
"""The end line's word for a step's status (worker marker or record); the worst one wins."""
_RANK = {"done": 0, "failed": 1, "timed out": 2, "crashed": 2}
_START = "@@aotipre start "
_END = "@@aotipre end "


class StageLines:
    """Says `<stage> started` and `<stage> <outcome> (N s)` through `say` (Session.say, which
    names the model) as the worker's markers arrive; `records` is the session's (for the step a
    worker died in, which has no end marker)."""

    def __init__(
        self,
        say: Callable[[str], None],
        records: Mapping[str, StepRecord],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.say = say
        self.records = records
        self.clock = clock
        self.owner: dict[str, str] = {}
        """The stage of each planned step, by step id (a reload `load#N` or a follow-up step
        belongs to none: it counts toward the stage that is open)."""
        self.opened: set[str] = set()
        self._open: tuple[str, float] | None = None
        self._worst: dict[str, str] = {}

    def plan(self, stage: str, steps: Sequence[PlannedStep]) -> None:
        for step in steps:
            self.owner.setdefault(step.id, stage)

    def launch(self, steps: Sequence[PlannedStep]) -> None:
        """The first worker is about to start: its first step's stage starts now."""
        if steps and steps[0].id in self.owner:
            self._enter(self.owner[steps[0].id])

    def on_output(self, line: str) -> None:
        """A line of the worker's stderr (only its markers matter here)."""
        if line.startswith(_START):
            stage = self.owner.get(line[len(_START) :].strip())
            if stage is not None:
                self._enter(stage)
        elif line.startswith(_END):
            sid, _, status = line[len(_END) :].strip().rpartition(" ")
            stage = self.owner.get(sid)
            if stage is not None:
                self._note(stage, _OUTCOMES.get(status, "done"))

    def close(self) -> None:
        """The last worker is done: the open stage ends."""
        self._enter(None)

    def results(self, results: Sequence[StageResult]) -> None:
        """One line for each stage that started no step, with its result's status; one line
        for them all when none started and all ended alike (`dynamic stages skipped`: no worker
        could or should run, the report says why)."""
        statuses = {result.status for result in results}
        if not self.opened and len(statuses) == 1:
            self.say(stage_ended("dynamic stages", statuses.pop().value))
            return
        for result in results:
            if result.name not in self.opened:
                self.say(stage_ended(result.name, result.status.value))

    def _enter(self, stage: str | None) -> None:
        now = self.clock()
        if self._open is not None:
            name, since = self._open
            if name == stage:
                return
            for sid, owner in self.owner.items():  # a worker that died in this stage's step
                rec = self.records.get(sid)
                if owner == name and rec is not None:
                    self._note(name, _OUTCOMES.get(rec.status, "done"))
            self.say(stage_ended(name, self._worst.pop(name, "done"), now - since))
            self._open = None
        if stage is not None:
            self._open = (stage, now)
            self.opened.add(stage)
            self.say(stage_started(stage))

    def _note(self, stage: str, outcome: str) -> None:
        if _RANK[outcome] >= _RANK.get(self._worst.get(stage, "done"), 0):
            self._worst[stage] = outcome
