"""The load stage: aoti_load_package in a worker; wrong device, CUDA missing, model not found,
an ABI mismatch, a timeout and a crash while loading are distinct findings, and a crash that
the libstdc++ retry (stages/libstdcxx.py) made go away is AOT515."""

from __future__ import annotations

import os
from functools import partial

from aotipre.findings import StageResult, StageStatus
from aotipre.runner.classify import classify_load_failure
from aotipre.runner.stages.base import PlannedStep, StepRecord, failure_of, ok
from aotipre.runner.stages.session import Session, Stage


class LoadStage(Stage):
    name = "load"
    labels = {"load": "loading"}

    def plan(self, s: Session) -> list[PlannedStep]:
        with_ep = s.model.has_exported_program and not s.need_compile
        body = {"with_ep": with_ep, "measure": s.opts.perf is not None}
        if s.direct_load and not with_ep and s.device == "cpu" and s.load_cost_recorded():
            # the worker loads with the C++ loader alone when load_package would do nothing
            # else with this package (worker.loading.same_as_load_package)
            body["as_load_package"] = True
        return [PlannedStep("load", "load", body)]

    def result(self, s: Session) -> StageResult:
        r = s.records.get("load")
        if r is None:
            return s.skipped("load", s.upstream_reason())
        target = f"model '{s.aoti_model}' of {os.path.basename(s.aoti_package or '')}"
        if ok(r):
            return self._loaded(s, r, target)
        if r.status == "worker_error":
            return s.stage("load", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        err = r.error
        if err.get("type") == "InputsFailed":
            return s.stage("load", StageStatus.ERROR, err.get("message", ""), [r])
        fail = failure_of(classify_load_failure, r, err)
        found = partial(s.add, stage="load", evidence=fail.evidence)
        if r.status == "timeout":
            found("AOT516", f"loading {target} did not finish within {s.opts.timeout_s:g} s")
        elif r.status == "crash":
            found(
                "AOT514",
                f"the process was killed by {r.signal} while loading {target}"
                + (
                    " (preloading the system libstdc++ did not help)"
                    if s.libstdcxx.crash is not None
                    else ""
                ),
            )
        elif fail.kind == "wrong_device":
            found(
                "AOT511",
                f"loading {target} on {s.device} was refused: {fail.summary}",
                expected=s.model.device_type,
                actual=s.device,
                hint=_wrong_device_hint(s.device, fail.summary),
            )
        elif fail.kind == "cuda_missing":
            found("AOT512", f"{target} needs CUDA, and this torch cannot use it: {fail.summary}")
        elif fail.kind == "model_not_found":
            found(
                "AOT513",
                f"the loader found no compiled code for model '{s.aoti_model}': {fail.summary}",
            )
        elif fail.kind == "abi":
            found(
                "AOT510",
                f"loading {target} failed: the compiled code does not match this "
                f"torch ({fail.summary})",
                hint="load it with the torch version that compiled it",
            )
        else:
            found("AOT510", f"loading {target} failed: {fail.summary}")
        return s.stage("load", StageStatus.FAILED, fail.summary, [r])

    def _loaded(self, s: Session, r: StepRecord, target: str) -> StageResult:
        how = r.entry.get("how", "")
        detail = f"loaded {target} on {s.device}" + (f" ({how})" if how else "")
        detail += _which_code(s, r, target)
        retry = s.libstdcxx
        if not retry.confirmed:
            return s.stage("load", StageStatus.PASSED, detail, [r])
        crash = retry.crash
        assert crash is not None
        fail = classify_load_failure(log=crash.log, signal=crash.signal)
        s.add(
            "AOT515",
            f"loading {target} crashed with {crash.signal} in this environment and "
            f"succeeded with LD_PRELOAD={retry.libstdcxx}: a libstdc++ mismatch between "
            "the toolchain that built the compiled code and this process's runtime (an "
            "environment problem, not a model bug); the other stages ran with the preload"
            + (" (diagnosed on an earlier model of this check)" if retry.earlier else ""),
            "load",
            evidence=fail.evidence,
        )
        detail += f"; needed LD_PRELOAD={retry.libstdcxx}"
        recs = [r] if retry.earlier else [crash, r]
        return s.stage("load", StageStatus.FAILED, detail, recs)


def _which_code(s: Session, r: StepRecord, target: str) -> str:
    """Which code the load ran, proven from the worker's memory map: the package's .so, named
    in the detail; none of its .so mapped is AOT532; a load that went through torch's
    "Loading outdated pt2 file" fallback is AOT531 (unless the static lane already said why)."""
    fallback = r.entry.get("fallback")
    aoti = s.model.aoti
    if fallback and (aoti is None or aoti.wrapper_metadata_unreadable is None):
        s.add(
            "AOT531",
            f"loading {target}: torch's load_pt2 failed ({fallback}); aoti_load_package "
            'logged "Loading outdated pt2 file" and loaded it with AOTIModelPackageLoader '
            "instead: deployments that call load_pt2 cannot load it",
            "load",
            evidence=(str(fallback),),
        )
    mapped = r.entry.get("mapped")
    if mapped is None:
        return ""
    if not mapped:
        s.add(
            "AOT532",
            f"loading {target} returned a model, but none of the package's shared objects "
            "is mapped into the process: the calls do not run the package's compiled code",
            "load",
        )
        return "; the package's .so is not mapped"
    return f"; runs {os.path.basename(mapped[0])}"


def _wrong_device_hint(device: str, summary: str) -> str | None:
    """The code's own hint, unless the loader said the device index does not exist here."""
    if "invalid device ordinal" not in summary:
        return None
    return (
        f"this host has no GPU {device}: GPUs are numbered from 0 (`nvidia-smi -L` lists them; "
        "CUDA_VISIBLE_DEVICES renumbers them); pass --device cuda:K for one of them"
    )
