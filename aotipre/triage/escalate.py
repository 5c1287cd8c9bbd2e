"""Runs the ladder after a crash: applicable steps in fresh worker processes, in parallel where
they are independent, with the compile cache; then turns their evidence into a Diagnosis."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.foundation.errors import PackageError
from aotipre.foundation.progress import stage_ended
from aotipre.runner.stages.base import RunCrash
from aotipre.triage.artifacts import write_bundle
from aotipre.triage.conclude import conclude
from aotipre.triage.diagnosis import Diagnosis
from aotipre.triage.ladder import TRIGGERS
from aotipre.triage.schedule import Triage
from aotipre.triage.state import TriageOptions

__all__ = ["Escalation", "TriageOptions", "escalate"]


@dataclass
class Escalation:
    """What the ladder produced for one crash."""

    stages: list[StageResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds from the start of triage: `kernel_named`, `done`."""


def escalate(
    crash: RunCrash,
    options: TriageOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> Escalation:
    """Run the ladder for one crashed run; never raises because a step crashed or hung."""
    escalation = _ladder(crash, options or TriageOptions(), progress)
    if progress is not None and not escalation.timings:  # the ladder did not run: one line
        for stage in escalation.stages:
            progress(f"{crash.model.name}: {stage_ended(stage.name, stage.status.value)}")
    return escalation


def _ladder(
    crash: RunCrash, opts: TriageOptions, progress: Callable[[str], None] | None
) -> Escalation:
    if not opts.escalate:
        return Escalation(
            stages=[_stage_skipped(crash, "triage", "escalation is off (--no-escalate)")]
        )
    if crash.failure.kind not in TRIGGERS:
        why = {
            "killed": "SIGKILL is usually the out-of-memory killer, not a kernel fault",
            "illegal_instruction": "SIGILL means this CPU lacks an instruction the code uses "
            "(see AOT403), not a kernel fault",
        }.get(crash.failure.kind, f"a {crash.failure.kind} failure is not a crash in a kernel")
        return Escalation(stages=[_stage_skipped(crash, "triage", why)])
    try:
        triage = Triage(crash, opts, progress)
    except (OSError, PackageError) as exc:  # the crashed package or its inputs went away
        stage = _stage_skipped(crash, "triage", f"crash triage could not start: {exc}")
        return Escalation(stages=[replace(stage, status=StageStatus.ERROR)])
    try:
        return _escalate(triage)
    finally:
        triage.cleanup()


def _escalate(triage: Triage) -> Escalation:
    """The ladder (schedule.py), its conclusion (conclude.py), the repro bundle (artifacts.py)."""
    result = Escalation(timings=triage.run_ladder())
    concluded = conclude(triage)
    result.stages = concluded.stages
    result.findings = concluded.findings
    result.diagnosis = concluded.diagnosis
    result.timings["done"] = time.monotonic() - triage.started
    triage.say(f"done in {result.timings['done']:.1f} s")
    if triage.opts.artifacts:
        try:
            where = write_bundle(triage, concluded.diagnosis, triage.opts.artifacts)
            triage.say(f"repro bundle written to {where}")
        except OSError as exc:
            result.stages.append(
                StageResult(
                    "triage:artifacts",
                    StageStatus.ERROR,
                    detail=f"the repro bundle could not be written: {exc}",
                    model=triage.crash.model.name,
                )
            )
    for stage in result.stages:  # one line for each step that did not run
        if stage.name not in triage.stages_started:
            triage.say_stage(stage_ended(stage.name, stage.status.value))
    return result


def _stage_skipped(crash: RunCrash, name: str, why: str) -> StageResult:
    return StageResult(name, StageStatus.SKIPPED, detail=why, model=crash.model.name)
