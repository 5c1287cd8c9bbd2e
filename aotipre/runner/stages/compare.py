"""The compare stage: the compiled run's outputs against each reference there is, with
dtype-aware tolerances: the ExportedProgram run eagerly (the `eager` step, without opening the
.so; the archive's own or --exported-program's, runner/reference.py) and golden outputs
(--expected FILE). Its comparison findings serve the probe stage too."""

from __future__ import annotations

from typing import Any

from aotipre.findings import StageResult, StageStatus
from aotipre.runner.classify import classify_run_failure
from aotipre.runner.stages.base import (
    PlannedStep,
    StepRecord,
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
        steps = []
        if s.reference.path is not None:
            steps += [
                PlannedStep("eager", "eager", {"save": "eager_run.pt"}),
                PlannedStep(
                    "compare",
                    "compare",
                    {"a": "aoti_run.pt", "b": "eager_run.pt", "requires": ["run", "eager"]},
                ),
            ]
        if s.expected is not None:
            body = {"a": "aoti_run.pt", **s.expected.step, "requires": ["run"]}
            steps.append(PlannedStep("compare-expected", "compare", body))
        return steps

    def result(self, s: Session) -> StageResult:
        ref = s.reference
        expected = s.expected
        if ref.path is None and expected is None:
            return s.skipped(
                "compare",
                f"no reference to compare with: {ref.label}; pass --exported-program FILE or "
                "--expected FILE",
            )
        run = s.records.get("run")
        eager = s.records.get("eager")
        if run is None or not ok(run):
            why = s.upstream_reason()
            if eager is not None:
                why += f"; {eager_note(s)}"
            return s.skipped("compare", why)
        parts: list[Compared] = []
        if ref.path is not None:
            parts.append(_against_eager(s))
        if expected is not None:
            parts.append(_compared(s, s.records.get("compare-expected"), expected.label, []))
        status = max((p[0] for p in parts), key=lambda st: _RANK[st])
        return s.stage(
            "compare", status, "; ".join(p[1] for p in parts), [r for p in parts for r in p[2]]
        )


Compared = tuple[StageStatus, str, list[StepRecord]]
"""One reference's comparison: its status, detail and step records."""
_RANK = {
    StageStatus.PASSED: 0,
    StageStatus.SKIPPED: 1,
    StageStatus.FAILED: 2,
    StageStatus.ERROR: 3,
}
"""Two references: the stage reports the worse of the two comparisons."""


def _against_eager(s: Session) -> Compared:
    m = s.model
    ref = s.reference
    eager, cmp = s.records.get("eager"), s.records.get("compare")
    if eager is None:
        return StageStatus.SKIPPED, s.upstream_reason(), []
    if not ok(eager):
        err = eager.error
        if eager.status == "worker_error":
            return StageStatus.ERROR, f"worker failed: {eager.detail}", [eager]
        if eager.entry.get("phase") == "load_exported_program":
            s.add(
                "AOT517",
                f"{ref.label} (model '{m.name}') cannot be loaded by this torch: "
                f"{err.get('type')}: {first_line(err.get('message'))}",
                "compare",
                evidence=evidence(err, eager.log),
            )
            return StageStatus.SKIPPED, "the ExportedProgram could not be loaded", [eager]
        fail = failure_of(classify_run_failure, eager, err)
        guard = _guard_failure(err)
        if guard:
            s.add(
                "AOT110",
                f"the inputs break a guard that export recorded for the model ({guard}): "
                f"{ref.label} refuses them, while the compiled model, which does not check that "
                "guard, ran them and computed with what it was exported for",
                "compare",
                expected=guard,
                evidence=fail.evidence,
            )
            return StageStatus.FAILED, f"the inputs break an export guard: {guard}", [eager]
        s.add(
            "AOT704",
            f"running {ref.label} eagerly on the same inputs failed: {fail.summary}",
            "compare",
            evidence=fail.evidence,
        )
        return StageStatus.FAILED, fail.summary, [eager]
    return _compared(s, cmp, f"{ref.label} run eagerly", [eager])


def _guard_failure(err: dict[str, Any]) -> str:
    """`alpha == 0.5` of the ExportedProgram module's `Guard failed: alpha == 0.5` ('' if the
    eager failure is another)."""
    for line in str(err.get("message") or "").splitlines():
        _, found, rest = line.partition("Guard failed: ")
        if found and rest.strip():
            return rest.strip()
    return ""


def _compared(
    s: Session, cmp: StepRecord | None, against: str, before: list[StepRecord]
) -> Compared:
    if cmp is None:
        return StageStatus.SKIPPED, s.upstream_reason(), before
    if not ok(cmp):
        err = cmp.error
        why = err.get("message") or cmp.detail
        return StageStatus.ERROR, f"comparison with {against} failed: {why}", [*before, cmp]
    found = compare_findings(s, cmp.entry, "compare", against=against)
    if found:
        return StageStatus.FAILED, found, [*before, cmp]
    n = len(cmp.entry.get("outputs") or [])
    tol = _tolerance_text(cmp.entry)
    return StageStatus.PASSED, f"{n} output(s) match {against}{tol}", [*before, cmp]


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


EXPECTED_STRUCTURE_HINT = (
    "the --expected file holds outputs of another count, shape or dtype: outputs saved for "
    "other inputs (another batch or sequence length) or by another model; save the outputs of "
    "these inputs (torch.save(model(*args, **kwargs), path)) with the inputs you check"
)
"""AOT703's hint against expected outputs: recompiling (the code's hint) changes nothing there."""


def compare_findings(
    s: Session,
    entry: dict[str, Any],
    stage: str,
    probe: ProbeCase | None = None,
    *,
    against: str | None = None,
) -> str:
    """Findings for one comparison record; returns a one-line summary ('' when clean).
    `against`: the reference compared with, named in each finding (default: the ExportedProgram
    run eagerly, as `s.reference` names it)."""
    against = against or f"{s.reference.label} run eagerly"
    word = "expected" if against.startswith("the expected") else "eager"
    ref = f" (compared with {against})"
    at = f" at {probe_label(s.model, probe)}" if probe is not None else ""
    extra: dict[str, Any] = {}
    if probe is not None and probe.dims:
        spec = tensor_input(s.model, probe.dims[0][0])
        extra = {"input": spec.name if spec else None, "dim": probe.dims[0][1]}
    # against --expected the file is what differs, not how the package was compiled
    structure_hint = {"hint": EXPECTED_STRUCTURE_HINT} if word == "expected" else {}
    if entry.get("structure"):
        what = str(entry["structure"])
        if word == "expected":
            what = what.replace("the ExportedProgram", "the expected outputs")
        s.add("AOT703", f"{what}{at}{ref}", stage, **extra, **structure_hint)
        return what + ref
    summaries = []
    other = "the ExportedProgram" if word == "eager" else "the expected outputs"
    for o in entry.get("outputs") or []:
        i = o.get("index")
        if o.get("structure"):
            msg = (
                f"output {i}{at}: the compiled model returns {o.get('dtype')}"
                f"{o.get('shape')}, {other} {o.get('eager_dtype')}"
                f"{o.get('eager_shape')}"
            )
            s.add(
                "AOT703",
                msg + ref,
                stage,
                expected=f"{o.get('eager_dtype')}{o.get('eager_shape')}",
                actual=f"{o.get('dtype')}{o.get('shape')}",
                **extra,
                **structure_hint,
            )
            summaries.append(msg + ref)
            continue
        if o.get("kind") == "value":
            if not o.get("equal"):
                msg = f"output {i}{at}: {o.get('aoti')} differs from {word} {o.get('eager')}"
                s.add(
                    "AOT701",
                    msg + ref,
                    stage,
                    expected=o.get("eager"),
                    actual=o.get("aoti"),
                    **extra,
                )
                summaries.append(msg + ref)
            continue
        mism = int(o.get("mismatches") or 0)
        if not mism:
            continue
        msg = f"output {i} ({o.get('dtype')}{o.get('shape')}){at}: " + mismatch_text(o, word)
        s.add(
            "AOT701",
            msg + ref,
            stage,
            expected=o.get("worst_eager"),
            actual=o.get("worst_aoti"),
            **extra,
        )
        summaries.append(msg + ref)
    return summaries[0] if summaries else ""


def mismatch_text(o: dict[str, Any], word: str) -> str:
    """How one tensor output of a comparison record differs: how many elements, the largest
    errors, the worst element on both sides (`word` names the reference side)."""
    mism, numel = o.get("mismatches"), o.get("numel")  # called for outputs that differ only
    parts = [
        f"{mism} of {numel} elements differ beyond rtol={o.get('rtol'):g}, atol={o.get('atol'):g}"
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
            f"{word} {o.get('worst_eager'):.6g}"
        )
    return "; ".join(parts)


def _tolerance_text(entry: dict[str, Any]) -> str:
    tols = {
        (o.get("dtype"), o.get("rtol"), o.get("atol"))
        for o in entry.get("outputs") or []
        if o.get("rtol") is not None
    }
    if not tols:
        return ""
    return " (" + ", ".join(f"{d}: rtol={r:g}, atol={a:g}" for d, r, a in sorted(tols)) + ")"
