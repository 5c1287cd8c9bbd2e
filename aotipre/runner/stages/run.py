"""The run stage: the sample inputs through the loaded model under AOTI_RUNTIME_CHECK_INPUTS=1.
Runtime input-check rejections become structured findings (input, dim, expected, actual); an
exception, an abort, a segfault, a CUDA fault and a timeout are distinct findings; a failure
inside the model is handed to crash triage (Session.on_run_crash) as a RunCrash."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.runner.classify import Failure, InputCheck, classify_run_failure
from aotipre.runner.stages.base import (
    PlannedStep,
    RunCrash,
    StepRecord,
    describe_output,
    failure_of,
    first_line,
    host_traits,
    ok,
    tensor_input,
)
from aotipre.runner.stages.compare import eager_note
from aotipre.runner.stages.nonfinite import nonfinite_findings
from aotipre.runner.stages.session import Session, Stage


class RunStage(Stage):
    name = "run"

    labels = {"run": "running", "disk-weights": "loading with load_weights_from_disk=True"}

    def plan(self, s: Session) -> list[PlannedStep]:
        steps = []
        m = s.model
        if m.aoti is not None and m.aoti.weights_on_disk and s.aoti_model == m.name:
            # before the run, which crashes under aoti_load_package: the loader that does work
            steps.append(PlannedStep("disk-weights", "disk_weights_run", {"requires": ["load"]}))
        steps.append(
            PlannedStep("run", "run", {"save": "aoti_run.pt", "measure": s.opts.perf is not None})
        )
        return steps

    def result(self, s: Session) -> StageResult:
        r = s.records.get("run")
        if r is None:
            return s.skipped("run", s.upstream_reason())
        detail_inputs = s.inputs.note
        if ok(r):
            outputs = r.entry.get("outputs") or []
            nonfinite_findings(s, r.entry, "run")
            shapes = ", ".join(describe_output(o) for o in outputs)
            return s.stage("run", StageStatus.PASSED, f"{detail_inputs}; outputs {shapes}", [r])
        if r.status == "worker_error":
            return s.stage("run", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        err = r.error
        if err.get("type") == "InputsFailed":
            return s.stage(
                "run",
                StageStatus.ERROR,
                f"the inputs could not be loaded: {err.get('message')}",
                [r],
            )
        fail = failure_of(classify_run_failure, r, err)
        note = ""
        if fail.kind != "input_check" and s.records.get("eager") is not None:
            note = f" ({eager_note(s)})"
        before = len(s.findings)
        _failure_findings(s, fail, r, "run", "running the model", note)
        if s.on_run_crash is not None and fail.kind not in _NOT_A_CRASH:
            s.on_run_crash(_run_crash(s, r, fail, s.findings[before:]))
        return s.stage("run", StageStatus.FAILED, f"{detail_inputs}; {fail.summary}", [r])


_NOT_A_CRASH = ("input_check", "timeout", "unregistered_pytree", "data_bound")
"""Failures that triage cannot explain: no kernel is at fault."""


def _run_crash(s: Session, r: StepRecord, fail: Failure, findings: list[Finding]) -> RunCrash:
    eager = s.records.get("eager")
    state = "not run" if eager is None else ("ok" if ok(eager) else "failed")
    err = eager.error if eager is not None else {}
    return RunCrash(
        package=s.package,
        model=s.model,
        aoti_package=s.aoti_package or os.path.abspath(s.package.path),
        aoti_model=s.aoti_model,
        compiled_with=dict(s.opts.inductor_configs) if "compile" in s.records else None,
        device=s.device,
        inputs=s.inputs.spec,
        inputs_note=s.inputs.note,
        record=r,
        failure=fail,
        findings=tuple(findings),
        env={**s.opts.extra_env, **s.extra_env},
        options=s.opts,
        eager=state,
        eager_error=f"{err.get('type')}: {first_line(err.get('message'))}" if err else "",
        host=host_traits(s.device_type),
        archive=s.callers_archive,
        vec_isa=_probed_vec_isa(s),
        prewarmed=s.prewarmed,
    )


def _probed_vec_isa(s: Session) -> tuple[str, ...] | None:
    if s.probe.probed is not None:
        return s.probe.probed
    load = s.records.get("load")
    names = load.entry.get("vec_isa") if load is not None else None
    return tuple(str(n) for n in names) if isinstance(names, list) else None


def _failure_findings(
    s: Session, fail: Failure, r: StepRecord, stage: str, doing: str, note: str = ""
) -> None:
    m = s.model
    kernel = f" in kernel {fail.kernel}" if fail.kernel else ""
    found = partial(s.add, stage=stage, evidence=fail.evidence)
    if fail.kind == "timeout":
        found("AOT606", f"{doing} did not finish within {s.opts.timeout_s:g} s{kernel}")
    elif fail.kind in ("segfault", "abort", "killed", "illegal_instruction", "signal"):
        if m.aoti is not None and m.aoti.weights_on_disk and s.aoti_model == m.name:
            found(
                "AOT607",
                f"{doing} crashed ({r.signal}) because the package keeps its weights on "
                "disk (data/aotinductor/"
                f"{m.name}/weights_config.json) and aoti_load_package does not load them: "
                "the compiled code read constants that were never set; " + disk_weights_loader(s),
            )
        elif fail.kind == "abort":
            found("AOT603", f"{doing} aborted (SIGABRT){kernel}: {fail.summary}{note}")
        elif fail.kind == "segfault":
            found("AOT604", f"{doing} crashed with {r.signal}{kernel}{note}")
        else:
            found("AOT605", f"{doing} was killed by {r.signal}{kernel}")
    elif fail.kind == "input_check":
        guards = [c for c in fail.checks if c.kind == "size_stride"]
        for check in fail.checks:
            if check.kind != "size_stride":
                _check_finding(s, check, stage, fail.evidence)
        if guards:
            _size_stride_finding(s, guards, stage, fail.evidence)
    elif fail.kind == "data_bound":
        x = fail.extra
        names = _inputs_holding(s, int(x["value"]))
        where = (
            f"input '{names[0]}' holds {x['value']}" if len(names) == 1 else
            f"a value read from the inputs ({x['symbol']}, e.g. a tensor's .item()) was "
            f"{x['value']}"
        )  # fmt: skip
        s.add(
            "AOT615",
            f"{doing} stopped at the model's own data-dependent bound: {where}, and the model "
            f"requires {x['symbol']} {x['relation']} {x['bound']} (a torch._check in the model, "
            f"enforced by the compiled code at every call){note}",
            stage,
            input=names[0] if len(names) == 1 else None,
            expected=f"{x['symbol']} {x['relation']} {x['bound']}",
            actual=x["value"],
            evidence=fail.evidence,
        )
    elif fail.kind == "unregistered_pytree":
        _unregistered_pytree_finding(s, fail, stage, doing)
    elif fail.kind == "device_fault":
        found("AOT608", f"{doing} hit a CUDA fault{kernel}: {fail.summary}{note}")
    else:
        found("AOT602", f"{doing} raised{kernel}: {fail.summary}{note}")


def _inputs_holding(s: Session, value: int) -> list[str]:
    """The one-element integer inputs whose sample value is `value` (checks/indices.py)."""
    if s.sample is None or s.inputs_path is None and s.inputs_member is None:
        return []
    from aotipre.checks.indices import inputs_holding

    try:
        return inputs_holding(s.model, s.sample, s.archive, value)
    except Exception:  # naming the input is a courtesy; the finding stands without it
        return []


def _unregistered_pytree_finding(s: Session, fail: Failure, stage: str, doing: str) -> None:
    type_name = str(fail.extra.get("type") or "")
    library = type_name.split(".")[0] if "." in type_name else ""
    where = (
        f"; it is registered by '{library}', which the serving process must import before "
        "calling the model"
        if library and library not in ("__main__", "builtins")
        else ""
    )
    s.add(
        "AOT809",
        f"{doing} computed its outputs, but torch could not rebuild them into their output "
        f"type{' ' + type_name if type_name else ''}: that pytree type is not registered in this process{where} (a "
        "Python-side failure, not a kernel crash: plain aoti_load_package fails the same way)",
        stage,
        expected=type_name or None,
        evidence=fail.evidence,
    )


_CHECK_FINDINGS = {
    "dtype": ("AOT201", "{where}: dtype {actual}, compiled for {expected}"),
    "device": ("AOT202", "{where}: on {actual}, compiled for {expected}"),
    "static_dim": ("AOT302", "{where}: dim {dim} is {actual}, compiled as {expected}"),
    "dim_too_small": ("AOT303", "{where}: dim {dim} is {actual}, below the minimum {expected}"),
    "dim_too_large": ("AOT304", "{where}: dim {dim} is {actual}, above the maximum {expected}"),
    "stride": ("AOT307", "{where}: stride {actual} at dim {dim}, compiled for {expected}"),
}
"""Runtime input-check rejections of one input: code and message (after 'the runtime input
check rejected ')."""


def _check_finding(s: Session, check: InputCheck, stage: str, evidence: tuple[str, ...]) -> None:
    spec = tensor_input(s.model, check.tensor_index)
    name = (
        spec.name
        if spec is not None
        else (f"tensor input {check.tensor_index}" if check.tensor_index is not None else None)
    )
    fields: dict[str, Any] = {
        "input": name,
        "position": spec.position if spec is not None else None,
        "dim": check.dim,
        "expected": check.expected,
        "actual": check.actual,
        "evidence": evidence or (check.line,),
    }
    kind = check.kind
    if kind in _CHECK_FINDINGS:
        code, text = _CHECK_FINDINGS[kind]
        where = f"input '{name}'" if name else "an input"
        message = text.format(
            where=where, dim=check.dim, actual=check.actual, expected=check.expected
        )
        s.add(code, f"the runtime input check rejected {message}", stage, **fields)
    elif kind == "input_count":
        fields.update(input=None, position=None, dim=None)
        s.add(
            "AOT101",
            f"the compiled model takes {check.expected} tensor inputs, it was given {check.actual}",
            stage,
            **fields,
        )
    elif kind == "kwargs":
        fields.update(input=None, position=None, dim=None)
        s.add(
            "AOT103",
            f"keyword arguments {check.actual} were given, the model expects {check.expected}",
            stage,
            **fields,
        )
    # size_stride guards are reported together by _size_stride_finding


def _size_stride_finding(
    s: Session, guards: list[InputCheck], stage: str, evidence: tuple[str, ...]
) -> None:
    parts = []
    for g in guards:
        exp, act = g.expected, g.actual
        if exp["size"] != act["size"]:
            parts.append(f"dim {g.dim} has size {act['size']}, expected {exp['size']}")
        if exp["stride"] != act["stride"]:
            parts.append(f"dim {g.dim} has stride {act['stride']}, expected {exp['stride']}")
    s.add(
        "AOT601",
        "a size/stride assertion in the compiled model failed at run time: "
        + "; ".join(parts)
        + " (inputs that share a dynamic dim disagree, or a derived dim is off)",
        stage,
        dim=guards[0].dim if len(guards) == 1 else None,
        expected=[g.expected for g in guards],
        actual=[g.actual for g in guards],
        evidence=evidence or tuple(g.line for g in guards),
    )


def disk_weights_loader(s: Session) -> str:
    """What the loader that reads weights from disk did with the same inputs (its step ran
    before the crashing run, in the same worker)."""
    r = s.records.get("disk-weights")
    how = "torch.export.pt2_archive._package.load_pt2(path, load_weights_from_disk=True)"
    if r is None or r.status == "skipped":
        return f"{how} was not tried"
    if ok(r):
        shapes = ", ".join(describe_output(o) for o in r.entry.get("outputs") or [])
        return (
            f"{how} loads it and runs these inputs (outputs {shapes}): deploy with that loader, "
            "or recompile with aot_inductor.package_constants_in_so=True"
        )
    if r.status == "crash":
        return f"{how} crashed too ({r.signal})"
    err = r.error
    return f"{how} failed too: {err.get('type')}: {first_line(err.get('message'))}"
