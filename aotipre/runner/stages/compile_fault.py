"""The compile step's rungs of the triage ladder: a compile that faulted on CUDA (an illegal
memory access or a device-side assert while aoti_compile_and_package autotuned a kernel) runs
once more in a fresh worker with synchronous launches (the faulting launch raises itself) and
every Triton launch traced, and under compute-sanitizer memcheck when asked (--sanitizer) and
installed. The printer, NaN-assert and minifier rungs need a model that compiled, so they do
not apply. The compile stage owns the re-run; it and the custom-ops stage read what it found."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from aotipre.runner import launch
from aotipre.runner.classify import classify_compile_failure
from aotipre.runner.sanitizer import SanitizerHit, find_sanitizer, memcheck_prefix, sanitizer_hits
from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.session import Session
from aotipre.runner.user_kernels import KernelLaunch, faulting_launch

RERUN_ID = "compile-rerun"


@dataclass
class CompileFault:
    """What the re-run of a faulted compile showed."""

    record: StepRecord | None
    """The re-run's step (None: it was not run; `note` says why)."""
    how: str
    """`synchronous launches` or `synchronous launches under compute-sanitizer memcheck`."""
    hits: list[SanitizerHit] = field(default_factory=list)
    note: str = ""
    """Why the sanitizer did not run, or what the re-run could not tell."""

    def summary(self) -> str:
        """One clause for the compile finding: what the re-run found."""
        if self.record is None:
            return self.note
        if self.hits:
            first = self.hits[0]
            where = f" in {first.kernel}" if first.kernel else ""
            return f"compute-sanitizer memcheck (compile re-run): {first.what}{where}"
        if ok(self.record):
            return f"a re-run with {self.how} compiled cleanly: the fault did not reproduce"
        if self.record.status == "timeout":
            return f"the re-run with {self.how} did not finish in time"
        return f"re-run with {self.how}" + (f"; {self.note}" if self.note else "")


def is_device_fault(rec: StepRecord) -> bool:
    """The compile failed with a CUDA fault (not a C++ error, a timeout or a missing op)."""
    fail = classify_compile_failure(
        exc_type=rec.error.get("type"), message=rec.error.get("message"), log=rec.log
    )
    return fail.kind == "device_fault"


def rerun_faulted_compile(
    s: Session, failed: StepRecord, body: dict[str, object]
) -> CompileFault | None:
    """Run the faulted compile `failed` (its step `body`) again; None when the rungs do not
    apply (not CUDA, not a device fault, --no-escalate)."""
    if s.device_type != "cuda" or not s.opts.compile_fault_rerun or not is_device_fault(failed):
        return None
    how = "synchronous launches"
    prefix: tuple[str, ...] = ()
    note = ""
    tool = find_sanitizer() if s.opts.sanitizer else None
    log = os.path.join(s.workdir, f"{RERUN_ID}.sanitizer.log")
    if tool is not None:
        prefix = memcheck_prefix(tool, log)
        how += " under compute-sanitizer memcheck"
    elif s.opts.sanitizer:
        note = "compute-sanitizer is not installed (not on PATH, $CUDA_HOME or /usr/local/cuda)"
    else:
        note = "--sanitizer re-runs it under compute-sanitizer memcheck"
    # the custom-ops stage compiles a model calling custom ops with CUDA_LAUNCH_BLOCKING=1
    synchronous = {**s.opts.extra_env, **s.extra_env}.get("CUDA_LAUNCH_BLOCKING") == "1"
    if synchronous and tool is None:
        return CompileFault(None, how, note=f"the compile already ran with {how}; {note}")
    s.say(f"the compile faulted on {s.device}: compiling again with {how}")
    out = os.path.join(s.workdir, RERUN_ID, "model.pt2")
    step = PlannedStep(RERUN_ID, "compile", {**body, "out": out, "trace_launches": True})
    records = s.run_followup([step], env=dict(launch.SYNC_ENV), prefix=prefix)
    record = next((r for r in records if r.id == RERUN_ID), None)
    if record is None:
        return CompileFault(None, how, note="the re-run's worker did not start the compile")
    hits = sanitizer_hits(_read(log)) if tool is not None else []
    return CompileFault(record, how, hits, note)


def faulting_kernel(s: Session) -> KernelLaunch | None:
    """The Triton launch the faulted compile was in: from the synchronous re-run when there
    was one, else from the compile's own launch markers."""
    for rec in (s.compile_rerun, s.records.get("compile")):
        if rec is not None and not ok(rec):
            found = faulting_launch(rec.log)
            if found is not None:
                return found
    return None


def _read(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""
