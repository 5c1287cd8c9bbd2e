"""The weights stage (`--weights FILE`): the swap a deployment makes without recompiling,
applied to a fresh copy of the compiled model the way torch does it (load_constants keyed by
state_dict names, check_full_update=True), then run on the inputs; the outputs are compared
with the ExportedProgram run with the same weights when there is one, else reported, and
outputs identical to the unswapped run after swapping in different weights are a finding
(the swap was silently ignored), and so is a match that holds only because the swap left
tensors of the program's state_dict at their compiled values (inlined ones: AOT066). Without
--weights it plans nothing and costs nothing."""

from __future__ import annotations

import os
from typing import Any

from aotipre.findings import StageResult, StageStatus
from aotipre.foundation.errors import AotipreError
from aotipre.inputs.weights import WeightsFile, read_weights
from aotipre.runner.stages.base import PlannedStep, describe_output, first_line, ok
from aotipre.runner.stages.compare import mismatch_text
from aotipre.runner.stages.session import Session, Stage

_SWAP_PHASES = ("swap", "call")
"""Where a failure is the swap's (load_constants itself, or the first call after it)."""


class WeightsStage(Stage):
    name = "weights"
    labels = {"weights": "swapping in --weights and running a fresh copy"}

    def __init__(self) -> None:
        self.file: WeightsFile | None = None
        self.error = ""

    def plan(self, s: Session) -> list[PlannedStep]:
        if not s.opts.weights:
            return []
        try:
            self.file = s.weights or read_weights(s.opts.weights)
        except AotipreError as exc:
            self.error = str(exc)
            return []
        body = {
            "file": os.path.abspath(self.file.path),
            "format": self.file.format,
            "reference": s.reference.path is not None,
            "requires": ["run"],
        }
        return [PlannedStep("weights", "weights", body)]

    def result(self, s: Session) -> StageResult:
        if not s.opts.weights:
            return s.skipped("weights", "no --weights FILE: no weight swap to check")
        if self.file is None:
            return StageResult("weights", StageStatus.ERROR, detail=self.error, model=s.model.name)
        label = f"--weights {self.file.path}"
        r = s.records.get("weights")
        if r is None or r.status == "skipped":
            return s.skipped("weights", s.upstream_reason())
        if r.status == "worker_error":
            return s.stage("weights", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        if not ok(r):
            phase = str(r.entry.get("phase") or "")
            why = _failure_text(r.error, r.log, r.signal, r.status)
            if phase not in _SWAP_PHASES and r.status == "error":
                return s.stage(
                    "weights", StageStatus.ERROR, f"could not check the swap ({phase}): {why}", [r]
                )
            where = "applying it" if phase == "swap" else "the first call after it"
            s.add(
                "AOT067",
                f"swapping the weights of {label} into a fresh copy of model '{s.model.name}' "
                f"(load_constants, check_full_update=True) failed at {where}: {why}",
                "weights",
                evidence=tuple(_stderr_errors(r.log)),
            )
            return s.stage("weights", StageStatus.FAILED, f"the swap failed: {why}", [r])
        return _judge(s, r.entry, label, [r])


def _judge(s: Session, entry: dict[str, Any], label: str, recs: list[Any]) -> StageResult:
    differing = [str(n) for n in entry.get("differing") or []]
    changed = bool(entry.get("changed"))
    outs = ", ".join(describe_output(o) for o in entry.get("outputs") or [])
    cmp = entry.get("compare")
    ref = f"{s.reference.label} run with the same weights"
    ignored = bool(differing) and not changed
    if ignored and not (cmp and not _differences(cmp)):
        s.add(
            "AOT069",
            f"after swapping in {label} ({len(differing)} tensor(s) differ from the compiled "
            f"values: {_names(differing)}), model '{s.model.name}' returns exactly the outputs "
            "of the unswapped copy: the swap was silently ignored",
            "weights",
            input=differing[0],
        )
        return s.stage(
            "weights", StageStatus.FAILED, "the swap changed no output: it was ignored", recs
        )
    if cmp:
        diffs = _differences(cmp)
        if diffs:
            first = diffs[0]
            s.add(
                "AOT068",
                f"after swapping in {label}, output {first.get('index')} of model "
                f"'{s.model.name}' differs from {ref}: "
                + (
                    str(cmp.get("structure") or first.get("structure") or "structure differs")
                    if cmp.get("structure") or first.get("structure")
                    else mismatch_text(first, "eager")
                ),
                "weights",
                expected=first.get("worst_eager"),
                actual=first.get("worst_aoti"),
            )
            return s.stage(
                "weights", StageStatus.FAILED, f"the swapped outputs differ from {ref}", recs
            )
        stale = [str(n) for n in entry.get("reference_missing") or []] if differing else []
        if stale:
            return _left_stale(s, stale, differing, label, recs)
        extra = entry.get("reference_unexpected") or []
        note = f" (the ExportedProgram has no {_names(extra)})" if extra else ""
        return s.stage(
            "weights",
            StageStatus.PASSED,
            f"{len(entry.get('outputs') or [])} output(s) after the swap match {ref}{note}",
            recs,
        )
    why = (
        f"the ExportedProgram refuses these weights ({entry['reference_refused']})"
        if entry.get("reference_refused")
        else s.reference.label
    )
    moved = "differ from" if changed else "equal"
    return s.stage(
        "weights",
        StageStatus.PASSED,
        f"swapped and ran, not compared ({why}): outputs {outs}, which {moved} the unswapped "
        f"run's; {len(differing)} tensor(s) differ from the compiled values",
        recs,
    )


def _left_stale(
    s: Session, stale: list[str], differing: list[str], label: str, recs: list[Any]
) -> StageResult:
    """The swap changed some tensors and left state_dict tensors of the program at their
    compiled values (the file lacks them; had the package constants for them, load_constants
    with check_full_update=True would have refused): the outputs match the program given the
    same file only because both keep those values, not the model the file's weights come from.
    AOT066 for each one the static check could not name (an inlined tensor it knew of is
    already reported there)."""
    known = {t.fqn for t in s.model.baked_state if t.inlinable}
    for name in stale:
        if name not in known:
            s.add(
                "AOT066",
                f"after swapping in {label} ({len(differing)} tensor(s) changed), '{name}' (a "
                f"state_dict tensor of {s.reference.label}) keeps its compiled value: {label} "
                "lacks it and the "
                "package has no constant for it (inlined into the kernels, or folded), so no "
                "weight update can change it",
                "weights",
                input=name,
            )
    return s.stage(
        "weights",
        StageStatus.FAILED,
        f"the swap changes {len(differing)} tensor(s) but leaves {_names(stale)} at the "
        f"compiled value (AOT066): the outputs match {s.reference.label} given {label} only "
        "because both keep that value",
        recs,
    )


def _differences(cmp: dict[str, Any]) -> list[dict[str, Any]]:
    if cmp.get("structure"):
        return [{"index": 0, "structure": cmp["structure"]}]
    return [
        o
        for o in cmp.get("outputs") or []
        if o.get("structure") or int(o.get("mismatches") or 0) or o.get("equal") is False
    ]


def _names(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _stderr_errors(log: str) -> list[str]:
    """The C++ runtime's own `Error: ...` lines (the Python exception is a generic
    `... API call failed at model_container_runner.cpp`)."""
    return [line.strip() for line in log.splitlines() if line.strip().startswith("Error: ")][:3]


def _failure_text(err: dict[str, Any], log: str, signal: str | None, status: str) -> str:
    if status == "crash":
        return f"the worker died ({signal or 'crash'})"
    if status == "timeout":
        return "timed out"
    text = f"{err.get('type')}: {first_line(err.get('message'))}"
    own = _stderr_errors(log)
    return f"{text} [{own[0]}]" if own else text
