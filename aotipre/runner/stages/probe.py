"""The probe stage: each dynamic dim at its min and max (capped by --probe-budget elements per
input), and max+1, which the runtime input check must reject cleanly; each input of rank 2 or
more in a non-contiguous layout, which the check must reject too. What the check refuses runs
again without it, as a default deployment runs it, unless the deployment is described as
setting the check itself (--deployment-checks-inputs). Every probe call of a stateful model starts
from the state the model was loaded in (worker/startstate.py): the state stage alone reports
state that advances between calls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aotipre.findings import Severity, StageResult, StageStatus
from aotipre.runner.classify import classify_run_failure
from aotipre.runner.stages.base import (
    PlannedStep,
    StepRecord,
    failure_of,
    ok,
    probe_label,
    tensor_input,
)
from aotipre.runner.stages.compare import compare_findings
from aotipre.runner.stages.session import Session, Stage
from aotipre.runner.synth import ProbeCase, ProbePlan, plan_layouts, plan_offsets, plan_probes

_PROBE_WORDS = {
    "min": "at its min",
    "max": "at its max",
    "over": "one past its max",
    "beyond": "above its sample's size (no max)",
    "min:unchecked": "at its min without the runtime check",
    "over:unchecked": "one past its max without the runtime check",
    "layout": "laid out non-contiguously",
    "layout:unchecked": "laid out non-contiguously without the runtime check",
    "offset": "one element into its storage",
}
"""How a probe case reads in the progress line (`probing s77 one past its max`)."""
SAMPLE_LAYOUT = "sample-layout"
"""The step that runs the sample as given, its tensors in layouts other than compiled, without
the runtime check (a default deployment), compared with its values laid out as compiled."""
UNCHECKED = ":unchecked"
"""A case's twin run the way a default deployment runs it: AOTI_RUNTIME_CHECK_INPUTS unset."""
OPT_IN = "AOTI_RUNTIME_CHECK_INPUTS=1, which aotipre sets and a default deployment does not"
OPT_IN_SET = "AOTI_RUNTIME_CHECK_INPUTS=1, which aotipre sets and so does the deployment"
DEPLOYMENT_CHECKS = (
    "the deployment is described as setting AOTI_RUNTIME_CHECK_INPUTS "
    "(--deployment-checks-inputs), so refused inputs were not run again without the check; "
    "the serving process must really set it (e.g. =1: any value not starting with '0' "
    "enables it, read once per loaded model at its first run)"
)
"""The probe detail's note when the deployment checks its inputs (no AOT613 then)."""


def _opt_in(s: Session) -> str:
    """How the runtime check's setting reads in a message: who sets it."""
    return OPT_IN_SET if s.opts.deployment_checks_inputs else OPT_IN


class ProbeStage(Stage):
    name = "probe"

    def __init__(self) -> None:
        self.plan_: ProbePlan | None = None
        self.why_not = ""
        """Why no probe was planned."""

    def progress(self, s: Session, op: str, rest: str) -> str | None:
        if op == SAMPLE_LAYOUT:
            return "running the sample as given, without the runtime check"
        if op != "probe":
            return None
        symbol, _, kind = rest.partition(":")
        if kind.startswith(("layout", "offset")) and self.plan_ is not None:
            case = next((c for c in self.plan_.cases if c.id == f"probe:{symbol}:{kind}"), None)
            symbol = case.symbol if case is not None else symbol
        return f"probing {symbol} {_PROBE_WORDS.get(kind, 'at ' + kind)}"

    def plan(self, s: Session) -> list[PlannedStep]:
        # the sample as given runs even with --no-probe: no PASS may hide the wrong outputs a
        # default deployment computes with its layout
        steps = self._plan_probes(s) if s.opts.probe else []
        if s.inputs.relaid:  # last: the worker releases its checked copy of the model for it
            steps.append(
                PlannedStep(
                    SAMPLE_LAYOUT, "sample_layout", {"unchecked": True, "requires": ["run"]}
                )
            )
        return steps

    def _plan_probes(self, s: Session) -> list[PlannedStep]:
        m = s.model
        shapes = s.inputs.shapes
        self.why_not = s.inputs.shapes_unknown
        if len(shapes) != len(m.tensor_inputs):
            if not m.symbols:
                self.why_not = "the model has no dynamic dims"
            self.why_not = self.why_not or "the input shapes could not be matched to the contract"
            return []
        plan = ProbePlan(())
        if m.symbols:
            plan = plan_probes(m, shapes, s.opts.probe_budget)
        layouts = plan_layouts(m, shapes)
        offsets = plan_offsets(m, shapes)
        if not m.symbols and not layouts and not offsets:
            self.why_not = "the model has no dynamic dims and no tensor input with values"
            return []
        plan = ProbePlan((*plan.cases, *layouts, *offsets), plan.notes)
        self.plan_ = plan
        eager = s.reference.path is not None
        steps = [
            PlannedStep(
                case.id,
                "probe",
                {
                    "shapes": {str(k): list(v) for k, v in case.shapes.items()},
                    "layout": list(case.layout),
                    "offset": list(case.offset),
                    "expect": case.expect,
                    "eager": eager,
                    "requires": ["run"],
                },
                probe=case,
            )
            for case in plan.cases
        ]
        if s.opts.deployment_checks_inputs:  # the deployment refuses them too: no twins
            return steps
        # the cases the runtime check refuses, again as a default deployment runs them (last:
        # the worker releases its checked copy of the model for them)
        steps += [
            PlannedStep(
                case.id + UNCHECKED,
                "probe",
                {
                    "shapes": {str(k): list(v) for k, v in case.shapes.items()},
                    "layout": list(case.layout),
                    "expect": "reject",
                    "unchecked": True,
                    # not the checked case: on torch 2.11 CUDA its refusal is a step error
                    "requires": ["run"],
                },
                probe=case,
            )
            for case in plan.cases
            if case.kind in ("over", "min", "layout")
        ]
        return steps

    def result(self, s: Session) -> StageResult:
        probed = self._probe_result(s) if s.opts.probe else s.skipped("probe", "probing is off")
        given = sample_layout_findings(s)
        if given is None:
            return probed
        part, rec, wrong = given
        status = StageStatus.FAILED if wrong else StageStatus.PASSED
        if rec.status == "worker_error":
            status = StageStatus.ERROR
        if probed.status is StageStatus.SKIPPED:
            return s.stage("probe", status, f"{part} (no probe: {probed.detail})", [rec])
        if probed.status is not StageStatus.PASSED and status is not StageStatus.FAILED:
            status = probed.status
        return replace(
            probed,
            status=status,
            detail=f"{part}; {probed.detail}",
            duration_s=probed.duration_s + rec.duration_s,
        )

    def _probe_result(self, s: Session) -> StageResult:
        plan = self.plan_
        if plan is None or not plan.cases:
            why = self.why_not or "; ".join(plan.notes if plan else ()) or "nothing to probe"
            return s.skipped("probe", why)
        run = s.records.get("run")
        if run is None or not ok(run):
            return s.skipped(
                "probe",
                f"{s.upstream_reason()} (probe inputs are derived from the sample inputs)",
            )
        recs = [
            s.records[sid]
            for c in plan.cases
            for sid in (c.id, c.id + UNCHECKED)
            if sid in s.records and s.records[sid].status != "skipped"
        ]
        if not recs:
            return s.skipped("probe", s.upstream_reason())
        before = len(s.findings)
        parts = []
        unchecked: list[tuple[ProbeCase, str, str, tuple[str, ...]]] = []
        for case in plan.cases:
            r = s.records.get(case.id)
            if r is None:
                parts.append(f"{case.symbol}={case.value} not run")
                continue
            if case.kind == "layout":
                parts.append(_layout_case(s, case, r, unchecked))
            elif case.kind == "offset":
                parts.append(_offset_case(s, case, r))
            else:
                parts.append(_probe_case(s, case, r, unchecked))
        unchecked_finding(s, unchecked)
        # a twin that could not tell (worker_error) leaves the checked verdict standing
        errors = [r for r in recs if r.status == "worker_error" and not r.id.endswith(UNCHECKED)]
        status = StageStatus.PASSED
        if any(f.severity is Severity.ERROR for f in s.findings[before:]):
            status = StageStatus.FAILED
        elif errors:
            status = StageStatus.ERROR
        detail = "; ".join(parts)
        if plan.notes:
            detail += " (" + "; ".join(plan.notes) + ")"
        if s.opts.deployment_checks_inputs:
            detail += f"; {DEPLOYMENT_CHECKS}"
        return s.stage("probe", status, detail, recs)


def _what_failed(r: StepRecord, summary: str) -> str:
    if r.status == "crash":
        return f"crashed ({r.signal})"
    return "timed out" if r.status == "timeout" else f"failed: {summary}"


def _probe_case(s: Session, case: ProbeCase, r: StepRecord, unchecked: list[Any]) -> str:
    m = s.model
    label = probe_label(m, case)
    spec = tensor_input(m, case.dims[0][0]) if case.dims else None
    subject: dict[str, Any] = {
        "input": spec.name if spec else None,
        "position": spec.position if spec else None,
        "dim": case.dims[0][1] if case.dims else None,
    }
    if r.status == "worker_error":
        return f"{label}: worker failed ({r.detail})"
    err = r.entry.get("aoti_error") or r.error
    if case.kind == "over":
        return _over_max(s, case, r, err, label, subject, unchecked)
    capped = f" (capped from {case.bound} by the probe budget)" if case.capped else ""
    if r.status != "ok":
        fail = failure_of(classify_run_failure, r, err)
        what = _what_failed(r, fail.summary)
        kernel = f" in kernel {fail.kernel}" if fail.kernel else ""
        rng = m.symbol(case.symbol)
        lo, hi = (rng.min, rng.max) if rng is not None else (None, None)
        severity = None
        if fail.kind == "input_check" and r.status == "error":
            # The compiled code accepts a narrower range than declared: a contract problem
            # (inputs in between are rejected under the runtime check), not a broken model.
            severity = Severity.WARNING
            what = (
                f"is rejected by the compiled model's runtime check ({fail.summary}; "
                f"{_opt_in(s)}), although the declared range allows it"
            )
            small = next((c for c in fail.checks if c.kind == "dim_too_small"), None)
            if small is not None and case.value <= 1 and small.expected == 2:
                what += (
                    "; AOTInductor specializes dynamic sizes 0 and 1 away, so size "
                    f"{case.value} is refused whenever AOTI_RUNTIME_CHECK_INPUTS=1"
                )
            _unchecked(s, case, f"{label} (the declared minimum)", unchecked)
        where = (
            f"twice the sample's size, inside its range [{lo}, no max] (the runtime check "
            "refuses no large size)"
            if case.kind == "beyond"
            else f"the {case.kind}imum of the declared range [{lo}, {hi}]"
        )
        s.add(
            "AOT610",
            f"{label}{capped}, {where}, {what}{kernel}",
            "probe",
            evidence=fail.evidence,
            expected=f"runs for {lo} <= {case.symbol}" + (f" <= {hi}" if hi is not None else ""),
            actual=f"{case.symbol}={case.value}: {fail.summary}",
            **({"severity": severity} if severity else {}),
            **subject,
        )
        return f"{label}: {what}"
    cmp = r.entry.get("compare")
    if isinstance(cmp, dict):
        found = compare_findings(s, cmp, "probe", case)
        if found:
            return f"{label}: outputs differ from eager"
    if r.entry.get("eager_error"):
        e = r.entry["eager_error"]
        return f"{label}{capped}: ran (eager failed: {e.get('type')})"
    return f"{label}{capped}: ok"


def _over_max(
    s: Session,
    case: ProbeCase,
    r: StepRecord,
    err: dict[str, Any],
    label: str,
    subject: dict[str, Any],
    unchecked: list[Any],
) -> str:
    """max+1: the runtime input check must reject it, not the model crash or accept it."""
    outcome = r.entry.get("outcome")
    if r.status == "ok" and outcome == "accepted":
        s.add(
            "AOT611",
            f"{label}, one above the maximum {case.bound}, ran without being rejected",
            "probe",
            expected=f"<= {case.bound}",
            actual=case.value,
            **subject,
        )
        return f"{label}: accepted (not rejected)"
    if r.status == "error" or (r.status == "ok" and outcome == "rejected"):
        fail = classify_run_failure(exc_type=err.get("type"), message=err.get("message"), log=r.log)
        if fail.kind == "input_check":
            without = _unchecked(s, case, f"{label} (max {case.bound} + 1)", unchecked)
            return f"{label}: rejected by the runtime check (opt-in){without}"
    if r.status == "ok" and outcome == "rejected":
        s.add(
            "AOT612",
            f"{label}, one above the maximum {case.bound}, failed inside "
            f"the model instead of being rejected by the input check: {fail.summary}",
            "probe",
            severity=Severity.WARNING,
            evidence=fail.evidence,
            **subject,
        )
        return f"{label}: failed unclean"
    fail = failure_of(classify_run_failure, r, err)
    what = _what_failed(r, fail.summary)
    s.add(
        "AOT612",
        f"{label}, one above the maximum {case.bound}, {what} instead of "
        "being rejected by the input check",
        "probe",
        evidence=fail.evidence,
        **subject,
    )
    return f"{label}: {what}"


def _layout_case(s: Session, case: ProbeCase, r: StepRecord, unchecked: list[Any]) -> str:
    """An input with its sample's shape and values but a non-contiguous layout: the compiled
    code indexes inputs with the strides it was compiled for, so the runtime check must refuse
    it; what a default deployment (no check) does with it is the twin's part."""
    spec = tensor_input(s.model, case.layout[0])
    label = (
        f"{case.symbol} with strides {tuple(case.strides)} (the sample's values, not contiguous)"
    )
    short = f"{case.symbol} non-contiguous"
    subject: dict[str, Any] = {"input": case.symbol, "position": spec.position if spec else None}
    if r.status == "worker_error":
        return f"{short}: worker failed ({r.detail})"
    err = r.entry.get("aoti_error") or r.error
    outcome = r.entry.get("outcome")
    if r.status == "ok" and outcome == "accepted":
        wrong = layout_difference(r.entry.get("layout_compare"))
        if not wrong:
            return f"{short}: accepted, same outputs as contiguous"
        s.add(
            "AOT614",
            f"{label} ran under the runtime check and returned {wrong}",
            "probe",
            expected="refused by the runtime check, or the same outputs as the contiguous input",
            actual=wrong,
            **subject,
        )
        return f"{short}: accepted, outputs differ"
    fail = failure_of(classify_run_failure, r, err)
    if fail.kind == "input_check" and (r.status == "error" or outcome == "rejected"):
        without = _unchecked(s, case, label, unchecked)
        return f"{short}: rejected by the runtime check (opt-in){without}"
    what = _what_failed(r, fail.summary)
    s.add(
        "AOT614",
        f"{label} {what} instead of being refused by the runtime input check",
        "probe",
        evidence=fail.evidence,
        **subject,
    )
    return f"{short}: {what}"


def _offset_case(s: Session, case: ProbeCase, r: StepRecord) -> str:
    """An input with its sample's values one element into a larger buffer (`buf[1:]`): a slice
    a server hands the model. It must return the aligned input's outputs, or be refused the
    same way by every deployment (GPU code compiled with alignment_asserts_inputs refuses it
    with or without AOTI_RUNTIME_CHECK_INPUTS)."""
    spec = tensor_input(s.model, case.offset[0])
    short = f"{case.symbol} at storage offset 1"
    label = f"{case.symbol} as a view one element into its storage (`buf[1:]`, not 16-byte aligned)"
    subject: dict[str, Any] = {"input": case.symbol, "position": spec.position if spec else None}
    if r.status == "worker_error":
        return f"{short}: worker failed ({r.detail})"
    err = r.entry.get("aoti_error") or r.error
    if r.status == "ok" and r.entry.get("outcome") == "accepted":
        wrong = layout_difference(r.entry.get("layout_compare"))
        if not wrong:
            return f"{short}: same outputs as aligned"
        s.add(
            "AOT616",
            f"{label} ran and returned {wrong.replace('contiguous', 'aligned')}",
            "probe",
            expected="the same outputs as the aligned input",
            actual=wrong,
            **subject,
        )
        return f"{short}: outputs differ"
    fail = failure_of(classify_run_failure, r, err)
    # torch 2.15's assert_alignment (aoti_runtime/utils.h): "Expect the tensor to be 16 bytes
    # aligned. Fail due to storage_offset=1 itemsize=4"
    message = str((err or {}).get("message") or "") if isinstance(err, dict) else ""
    refused = r.status == "error" and "bytes aligned. Fail due to storage_offset" in message
    what = _what_failed(r, fail.summary)
    s.add(
        "AOT616",
        f"{label} {what}"
        + (
            " (the compiled code asserts 16-byte aligned inputs at every call, with or without "
            "AOTI_RUNTIME_CHECK_INPUTS: compiled with alignment_asserts_inputs)"
            if refused
            else ""
        ),
        "probe",
        evidence=fail.evidence,
        expected="the same outputs as the aligned input",
        actual=fail.summary,
        **({"severity": Severity.WARNING} if refused else {}),
        **subject,
    )
    return f"{short}: {'refused' if refused else what}"


def layout_difference(cmp: Any) -> str:
    """'' when a layout run's outputs equal the contiguous run's, else how they differ."""
    if not isinstance(cmp, dict):
        return "outputs that could not be compared"
    if cmp.get("structure"):
        return f"differently structured outputs ({cmp['structure']})"
    parts = []
    for o in cmp.get("outputs") or []:
        i = o.get("index")
        if o.get("kind") == "value" and not o.get("equal"):
            parts.append(f"output {i}: {o.get('aoti')} instead of {o.get('eager')}")
        elif o.get("structure"):
            parts.append(f"output {i}: {o.get('dtype')}{o.get('shape')}")
        elif o.get("mismatches"):
            biggest = o.get("max_abs")
            by = f", max abs diff {biggest:.3g}" if isinstance(biggest, (int, float)) else ""
            parts.append(f"output {i}: {o['mismatches']} of {o.get('numel')} values{by}")
    if not parts:
        return ""
    return f"outputs that differ from the contiguous input's ({'; '.join(parts)})"


def _unchecked(s: Session, case: ProbeCase, label: str, found: list[Any]) -> str:
    """What a default deployment did with a case the runtime check refused (its twin step,
    run with AOTI_RUNTIME_CHECK_INPUTS unset), added to `found` when it ran or failed; returns
    the probe detail's clause."""
    r = s.records.get(case.id + UNCHECKED)
    if r is None or r.status == "skipped":
        return ""
    if r.status == "worker_error":
        return f"; without it: not known ({r.detail})"
    if r.status == "ok" and r.entry.get("outcome") == "rejected":
        return "; without it: rejected as well"
    evidence: tuple[str, ...] = ()
    if r.status == "ok" and case.kind == "layout":
        wrong = layout_difference(r.entry.get("layout_compare"))
        if not wrong:
            return "; without it: ran and returned the same outputs as contiguous"
        what = f"ran silently and returned {wrong}"
    elif r.status == "ok":
        outputs = r.entry.get("outputs") or []
        bad = sum(int(o.get("nan") or 0) + int(o.get("inf") or 0) for o in outputs)
        what = "ran silently" + (f" ({bad} output values NaN/Inf)" if bad else "")
    else:
        fail = failure_of(classify_run_failure, r, r.entry.get("aoti_error") or r.error)
        what, evidence = _what_failed(r, fail.summary), fail.evidence
    found.append((case, label, what, evidence))
    return f"; without it: {what}"


def unchecked_finding(s: Session, found: list[Any]) -> None:
    """One AOT613 for the model: the sizes and layouts the runtime check refused that a default
    deployment (AOTI_RUNTIME_CHECK_INPUTS unset) ran anyway or failed on."""
    if not found:
        return
    cases = "; ".join(f"{label}: {what}" for _, label, what, _ in found)
    sizes = [c for c, *_ in found if c.kind != "layout"]
    layouts = [c for c, *_ in found if c.kind == "layout"]
    why = []
    if sizes:
        why.append("Outputs for sizes outside the compiled range are not checked by anything")
    if layouts:
        why.append(
            "The compiled code reads every input as laid out with the strides it was compiled "
            "for; pass contiguous tensors (.contiguous())"
        )
    expected = []
    if sizes and (rng := s.model.symbol(sizes[0].symbol)) is not None:
        expected.append(f"{sizes[0].symbol} in [{rng.min}, {rng.max}]")
    if layouts:
        expected.append("contiguous inputs")
    if s.opts.unchecked_targets:
        why.append(
            "The targets that do not set it (no checks-inputs=yes): "
            + ", ".join(s.opts.unchecked_targets)
        )
    s.add(
        "AOT613",
        f"the runtime input check refused {len(found)} probe input(s) only because aotipre runs "
        f"with {OPT_IN}; without it the compiled model took them: {cases}. {'. '.join(why)}",
        "probe",
        evidence=next((e for *_, e in found if e), ()),
        expected="; ".join(expected) or None,
        actual="; ".join(
            f"{c.symbol} strides {c.strides}: {what}"
            if c.kind == "layout"
            else f"{c.symbol}={c.value}: {what}"
            for c, _, what, _ in found
        ),
    )


def sample_layout_findings(s: Session) -> tuple[str, StepRecord, bool] | None:
    """What a default deployment does with the sample as given, its tensors laid out otherwise
    than compiled (the sample-layout step): one AOT307 per such input, an error when it failed
    or returned other outputs than the compiled layout (the deployment computes wrong results),
    a warning when they match (harmless without AOTI_RUNTIME_CHECK_INPUTS; an error with
    --deployment-checks-inputs, whose check refuses it). Returns the probe detail's clause, the
    step's record and whether the outputs were wrong; None when the step did not run."""
    r = s.records.get(SAMPLE_LAYOUT)
    relaid = s.inputs.relaid
    if r is None or r.status == "skipped" or not relaid:
        return None
    said = ", ".join(f"{x.input} with strides {x.actual}" for x in relaid)
    if r.status == "worker_error":
        return f"sample as given ({said}): not known ({r.detail})", r, False
    checks = s.opts.deployment_checks_inputs
    evidence: tuple[str, ...] = ()
    if r.status == "ok":
        wrong = layout_difference(r.entry.get("layout_compare"))
        if wrong:
            what = (
                f"ran silently and returned {wrong.replace('contiguous input', 'compiled layout')}"
                ": a default deployment computes wrong results with it"
            )
        else:
            what = (
                "ran and returned the same outputs as its values laid out as compiled: harmless "
                "in a default deployment, "
                + (
                    "but the deployment sets AOTI_RUNTIME_CHECK_INPUTS "
                    "(--deployment-checks-inputs), whose check refuses it"
                    if checks
                    else "refused wherever AOTI_RUNTIME_CHECK_INPUTS is set"
                )
            )
        short = "outputs differ from the compiled layout's" if wrong else "same outputs"
    else:
        fail = failure_of(classify_run_failure, r, r.entry.get("aoti_error") or r.error)
        wrong, evidence = fail.summary, fail.evidence
        what = f"{_what_failed(r, fail.summary)}"
        short = what
    severity = Severity.ERROR if wrong or checks else Severity.WARNING
    for x in relaid:
        others = [o.input for o in relaid if o is not x]
        s.add(
            "AOT307",
            f"input '{x.input}' has strides {x.actual}, the package was compiled for "
            f"{x.strides}; the sample as given"
            + (f" (with {', '.join(repr(o) for o in others)} as given too)" if others else "")
            + f", run without AOTI_RUNTIME_CHECK_INPUTS as a default deployment runs it, {what}",
            "probe",
            severity=severity,
            input=x.input,
            position=x.position,
            dim=x.dim,
            expected=x.strides[x.dim],
            actual=x.actual[x.dim],
            evidence=evidence,
        )
    return f"sample as given ({said}) without the runtime check: {short}", r, bool(wrong)
