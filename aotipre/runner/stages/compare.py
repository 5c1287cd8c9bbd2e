"""The compare stage: when the archive holds the ExportedProgram, run it eagerly (the `eager`
step, without opening the .so) on the same inputs and compare the compiled run's outputs with
dtype-aware tolerances. Its comparison findings serve the probe stage too."""

from __future__ import annotations

from typing import Any

from aotipre.findings import StageResult, StageStatus
from aotipre.runner.classify import classify_run_failure
from aotipre.runner.stages.base import (
    PlannedStep,
    evidence,
    failure_of,
    first_line,
    ok,
    probe_label,
    tensor_input,
)
from aotipre.runner.stages.session import Session, Stage
from aotipre.runner.synth import ProbeCase


class CompareStage(Stage):
    name = "compare"
    labels = {
        "eager": "running the ExportedProgram eagerly",
        "compare": "comparing outputs",
    }

    def plan(self, s: Session) -> list[PlannedStep]:
        if not s.model.has_exported_program:
            return []
        return [
            PlannedStep("eager", "eager", {"save": "eager_run.pt"}),
            PlannedStep(
                "compare",
                "compare",
                {"a": "aoti_run.pt", "b": "eager_run.pt", "requires": ["run", "eager"]},
            ),
        ]

    def result(self, s: Session) -> StageResult:
        m = s.model
        if not m.has_exported_program:
            return s.skipped("compare", "the archive holds no ExportedProgram to compare with")
        eager, cmp = s.records.get("eager"), s.records.get("compare")
        run = s.records.get("run")
        if run is None or not ok(run):
            why = s.upstream_reason()
            if eager is not None:
                why += f"; {eager_note(s)}"
            return s.skipped("compare", why)
        if eager is None:
            return s.skipped("compare", s.upstream_reason())
        if not ok(eager):
            err = eager.error
            if eager.status == "worker_error":
                return s.stage(
                    "compare", StageStatus.ERROR, f"worker failed: {eager.detail}", [eager]
                )
            if eager.entry.get("phase") == "load_exported_program":
                s.add(
                    "AOT517",
                    f"the ExportedProgram of model '{m.name}' cannot be loaded by "
                    f"this torch: {err.get('type')}: {first_line(err.get('message'))}",
                    "compare",
                    evidence=evidence(err, eager.log),
                )
                return s.stage(
                    "compare",
                    StageStatus.SKIPPED,
                    "the ExportedProgram could not be loaded",
                    [eager],
                )
            fail = failure_of(classify_run_failure, eager, err)
            s.add(
                "AOT704",
                f"running the ExportedProgram eagerly on the same inputs failed: {fail.summary}",
                "compare",
                evidence=fail.evidence,
            )
            return s.stage("compare", StageStatus.FAILED, fail.summary, [eager])
        if cmp is None:
            return s.skipped("compare", s.upstream_reason())
        if not ok(cmp):
            err = cmp.error
            return s.stage(
                "compare",
                StageStatus.ERROR,
                f"comparison failed: {err.get('message') or cmp.detail}",
                [eager, cmp],
            )
        found = compare_findings(s, cmp.entry, "compare")
        n = len(cmp.entry.get("outputs") or [])
        if found:
            return s.stage("compare", StageStatus.FAILED, found, [eager, cmp])
        tol = _tolerance_text(cmp.entry)
        return s.stage(
            "compare",
            StageStatus.PASSED,
            f"{n} output(s) match the ExportedProgram run eagerly{tol}",
            [eager, cmp],
        )


def eager_note(s: Session) -> str:
    """What the ExportedProgram did on the same inputs, for a failed compiled run."""
    eager = s.records.get("eager")
    if eager is None:
        return "the ExportedProgram was not run"
    if ok(eager):
        return (
            "the ExportedProgram run eagerly on the same inputs succeeds: the failure is "
            "specific to the compiled code"
        )
    err = eager.error
    if eager.status == "error" and eager.entry.get("phase") == "call":
        return (
            "the ExportedProgram run eagerly fails on these inputs too "
            f"({err.get('type')}: {first_line(err.get('message'))}): the inputs are likely "
            "invalid for the model"
        )
    return "the ExportedProgram could not be run eagerly"


def compare_findings(
    s: Session, entry: dict[str, Any], stage: str, probe: ProbeCase | None = None
) -> str:
    """Findings for one comparison record; returns a one-line summary ('' when clean)."""
    at = f" at {probe_label(s.model, probe)}" if probe is not None else ""
    extra: dict[str, Any] = {}
    if probe is not None and probe.dims:
        spec = tensor_input(s.model, probe.dims[0][0])
        extra = {"input": spec.name if spec else None, "dim": probe.dims[0][1]}
    if entry.get("structure"):
        s.add("AOT703", f"{entry['structure']}{at}", stage, **extra)
        return str(entry["structure"])
    summaries = []
    for o in entry.get("outputs") or []:
        i = o.get("index")
        if o.get("structure"):
            msg = (
                f"output {i}{at}: the compiled model returns {o.get('dtype')}"
                f"{o.get('shape')}, the ExportedProgram {o.get('eager_dtype')}"
                f"{o.get('eager_shape')}"
            )
            s.add(
                "AOT703",
                msg,
                stage,
                expected=f"{o.get('eager_dtype')}{o.get('eager_shape')}",
                actual=f"{o.get('dtype')}{o.get('shape')}",
                **extra,
            )
            summaries.append(msg)
            continue
        if o.get("kind") == "value":
            if not o.get("equal"):
                msg = f"output {i}{at}: {o.get('aoti')} differs from eager {o.get('eager')}"
                s.add("AOT701", msg, stage, expected=o.get("eager"), actual=o.get("aoti"), **extra)
                summaries.append(msg)
            continue
        mism = int(o.get("mismatches") or 0)
        if not mism:
            continue
        numel = o.get("numel")
        parts = [
            f"{mism} of {numel} elements differ beyond rtol={o.get('rtol'):g}, "
            f"atol={o.get('atol'):g}"
            if o.get("rtol") is not None
            else f"{mism} of {numel} elements differ"
        ]
        if o.get("max_abs") is not None:
            parts.append(f"max abs error {o['max_abs']:.3g}")
        if o.get("max_rel") is not None:
            parts.append(f"max rel error {o['max_rel']:.3g}")
        if o.get("worst_index") is not None:
            parts.append(
                f"worst at {tuple(o['worst_index'])}: {o.get('worst_aoti'):.6g} vs "
                f"eager {o.get('worst_eager'):.6g}"
            )
        msg = f"output {i} ({o.get('dtype')}{o.get('shape')}){at}: " + "; ".join(parts)
        s.add(
            "AOT701",
            msg,
            stage,
            expected=o.get("worst_eager"),
            actual=o.get("worst_aoti"),
            **extra,
        )
        summaries.append(msg)
    return summaries[0] if summaries else ""


def _tolerance_text(entry: dict[str, Any]) -> str:
    tols = {
        (o.get("dtype"), o.get("rtol"), o.get("atol"))
        for o in entry.get("outputs") or []
        if o.get("rtol") is not None
    }
    if not tols:
        return ""
    return " (" + ", ".join(f"{d}: rtol={r:g}, atol={a:g}" for d, r, a in sorted(tols)) + ")"
