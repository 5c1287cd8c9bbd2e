"""The probe stage: each dynamic dim at its min and max (capped by --probe-budget elements per
input), and max+1, which the runtime input check must reject cleanly."""

from __future__ import annotations

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
from aotipre.runner.synth import ProbeCase, ProbePlan, plan_probes

_PROBE_WORDS = {
    "min": "at its min",
    "max": "at its max",
    "over": "one past its max",
    "min:unchecked": "at its min without the runtime check",
    "over:unchecked": "one past its max without the runtime check",
}
"""How a probe case reads in the progress line (`probing s77 one past its max`)."""
UNCHECKED = ":unchecked"
"""A case's twin run the way a default deployment runs it: AOTI_RUNTIME_CHECK_INPUTS unset."""
OPT_IN = "AOTI_RUNTIME_CHECK_INPUTS=1, which aotipre sets and a default deployment does not"


class ProbeStage(Stage):
    name = "probe"

    def __init__(self) -> None:
        self.plan_: ProbePlan | None = None
        self.why_not = ""
        """Why no probe was planned."""

    def progress(self, s: Session, op: str, rest: str) -> str | None:
        if op != "probe":
            return None
        symbol, _, kind = rest.partition(":")
        return f"probing {symbol} {_PROBE_WORDS.get(kind, 'at ' + kind)}"

    def plan(self, s: Session) -> list[PlannedStep]:
        if not s.opts.probe:
            return []
        m = s.model
        shapes = s.inputs.shapes
        self.why_not = s.inputs.shapes_unknown
        if not m.symbols:
            self.why_not = "the model has no dynamic dims"
            return []
        if len(shapes) != len(m.tensor_inputs):
            self.why_not = self.why_not or "the input shapes could not be matched to the contract"
            return []
        plan = plan_probes(m, shapes, s.opts.probe_budget)
        self.plan_ = plan
        eager = m.has_exported_program
        steps = [
            PlannedStep(
                case.id,
                "probe",
                {
                    "shapes": {str(k): list(v) for k, v in case.shapes.items()},
                    "expect": case.expect,
                    "eager": eager,
                    "requires": ["run"],
                },
                probe=case,
            )
            for case in plan.cases
        ]
        # the cases the runtime check refuses, again as a default deployment runs them (last:
        # the worker releases its checked copy of the model for them)
        steps += [
            PlannedStep(
                case.id + UNCHECKED,
                "probe",
                {
                    "shapes": {str(k): list(v) for k, v in case.shapes.items()},
                    "expect": "reject",
                    "unchecked": True,
                    # not the checked case: on torch 2.11 CUDA its refusal is a step error
                    "requires": ["run"],
                },
                probe=case,
            )
            for case in plan.cases
            if case.kind in ("over", "min")
        ]
        return steps

    def result(self, s: Session) -> StageResult:
        if not s.opts.probe:
            return s.skipped("probe", "probing is off")
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
                f"{OPT_IN}), although the declared range allows it"
            )
            small = next((c for c in fail.checks if c.kind == "dim_too_small"), None)
            if small is not None and case.value <= 1 and small.expected == 2:
                what += (
                    "; AOTInductor specializes dynamic sizes 0 and 1 away, so size "
                    f"{case.value} is refused whenever AOTI_RUNTIME_CHECK_INPUTS=1"
                )
            _unchecked(s, case, f"{label} (the declared minimum)", unchecked)
        s.add(
            "AOT610",
            f"{label}{capped}, the {case.kind}imum of the declared range "
            f"[{lo}, {hi}], {what}{kernel}",
            "probe",
            evidence=fail.evidence,
            expected=f"runs for {lo} <= {case.symbol} <= {hi}",
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
    if r.status == "ok":
        outputs = r.entry.get("outputs") or []
        bad = sum(int(o.get("nan") or 0) + int(o.get("inf") or 0) for o in outputs)
        what = "ran silently" + (f" ({bad} output values NaN/Inf)" if bad else "")
        evidence: tuple[str, ...] = ()
    else:
        fail = failure_of(classify_run_failure, r, r.entry.get("aoti_error") or r.error)
        what, evidence = _what_failed(r, fail.summary), fail.evidence
    found.append((case, label, what, evidence))
    return f"; without it: {what}"


def unchecked_finding(s: Session, found: list[Any]) -> None:
    """One AOT613 for the model: the sizes the runtime check refused that a default deployment
    (AOTI_RUNTIME_CHECK_INPUTS unset) ran anyway or failed on."""
    if not found:
        return
    cases = "; ".join(f"{label}: {what}" for _, label, what, _ in found)
    first = found[0][0]
    rng = s.model.symbol(first.symbol)
    s.add(
        "AOT613",
        f"the runtime input check refused {len(found)} probe size(s) only because aotipre runs "
        f"with {OPT_IN}; without it the compiled model took them: {cases}. Outputs for sizes "
        "outside the compiled range are not checked by anything",
        "probe",
        evidence=next((e for *_, e in found if e), ()),
        expected=f"{first.symbol} in [{rng.min}, {rng.max}]" if rng is not None else None,
        actual="; ".join(f"{c.symbol}={c.value}: {what}" for c, _, what, _ in found),
    )
