"""The custom-ops stage: what registering custom operators did in the workers (--import,
--library). It has no worker step of its own; it reads the compile and load steps: a registration
that failed (AOT123), an operator still missing (AOT121, in place of the generic compile or load
finding), and a user Triton kernel that faulted while the compile autotuned it (named in the
compile finding). On CUDA, a model that calls custom operators is compiled with synchronous
launches (CUDA_LAUNCH_BLOCKING=1, shown in the stages' env), so such a fault is raised by the
launch that caused it."""

from __future__ import annotations

import re

from aotipre.checks.custom_ops import Registration, register_hint
from aotipre.findings import StageResult, StageStatus
from aotipre.foundation.errors import PackageError
from aotipre.pt2.ops import CustomOp, archive_custom_ops, split_target
from aotipre.runner.compile_classes import CODES as COMPILE_CLASS_CODES
from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.compile_fault import faulting_kernel
from aotipre.runner.stages.session import Session, Stage
from aotipre.runner.user_kernels import describe

CUSTOM_OPS_PHASE = "custom-ops"
"""The phase a worker records while it registers them (runner/worker/cpp.py: custom_ops_at_start)."""
_MISSING = (
    re.compile(r"Could not find schema for (\w+::\w+(?:\.\w+)?)"),
    re.compile(r"Failed deserializing node Node\(target='(torch\.ops\.\w+\.\w+(?:\.\w+)?)'"),
)
_GENERIC = {
    "compile": ("AOT501", "AOT502", "AOT503", *COMPILE_CLASS_CODES.values()),
    "load": ("AOT510", "AOT514", "AOT516"),
}
"""The findings of the compile and load stages this stage may make precise."""


class CustomOpsStage(Stage):
    name = "custom-ops"

    def __init__(self) -> None:
        self.ops: tuple[CustomOp, ...] = ()
        self.registration = Registration()

    def plan(self, s: Session) -> list[PlannedStep]:
        self.registration = Registration.from_env(s.opts.extra_env)
        try:
            self.ops = archive_custom_ops(
                s.archive, s.package.root, s.model.name, s.model.has_exported_program
            )
        except PackageError:  # the reader reported it; nothing to add here
            self.ops = ()
        blocking = "CUDA_LAUNCH_BLOCKING"
        if (
            self.ops
            and s.need_compile
            and s.device_type == "cuda"
            and blocking not in s.opts.extra_env
        ):
            s.extra_env[blocking] = "1"
        return []

    def result(self, s: Session) -> StageResult:
        failed = [r for r in (s.records.get("compile"), s.records.get("load")) if r and not ok(r)]
        for r in failed:
            if r.error.get("type") == "CustomOpsFailed":
                message = str(r.error.get("message") or "")
                self._replace(s, r, "AOT123", f"{message} (the {r.id} step did not run)")
                return s.stage(self.name, StageStatus.FAILED, message, [])
            if r.entry.get("phase") == CUSTOM_OPS_PHASE:  # the worker died registering them
                what = {"timeout": "timed out", "crash": "killed the worker"}.get(
                    r.status, "ended the worker"
                )
                message = (
                    f"registering custom operators ({self.registration.how()}) {what}: {r.detail}"
                )
                self._replace(s, r, "AOT123", f"{message} (the {r.id} step did not run)")
                return s.stage(self.name, StageStatus.FAILED, message, [])
        for r in failed:
            op = self._missing(r)
            if op is not None:
                how = self.registration.how()
                message = (
                    f"{op.qualified} is not registered in the {r.id} worker (registered: {how}); "
                    f"torch: {_first(r.error.get('message'))}"
                )
                self._replace(s, r, "AOT121", message, hint=register_hint(op))
                return s.stage(self.name, StageStatus.FAILED, f"{op.qualified} missing", [])
        launch = faulting_kernel(s)  # the compile stage's finding names it
        if launch is not None and launch.user:
            return s.stage(self.name, StageStatus.FAILED, describe(launch), [])
        if not self.ops and not self.registration.given:
            return s.skipped(self.name, "the model calls no custom operator")
        load = s.records.get("load")
        listed = ", ".join(op.qualified for op in self.ops) or "no custom operator"
        if not ok(load):
            return s.skipped(self.name, f"{s.upstream_reason()} (calls {listed})")
        return s.stage(
            self.name,
            StageStatus.PASSED,
            f"calls {listed}; registered by {self.registration.how()}",
            [],
        )

    def _missing(self, r: StepRecord) -> CustomOp | None:
        text = f"{r.error.get('message') or ''}\n{r.log}"
        for pattern in _MISSING:
            m = pattern.search(text)
            if m is None:
                continue
            parts = split_target(m.group(1))
            if parts is None:
                continue
            name = f"{parts[0]}::{parts[1]}"
            known = next((op for op in self.ops if op.name == name), None)
            return known or CustomOp(name, parts[2], False, ())
        return None

    def _replace(
        self, s: Session, r: StepRecord, code: str, message: str, **fields: object
    ) -> None:
        """Put `code` in place of the compile or load stage's generic finding for `r`."""
        generic = _GENERIC.get(r.id, ())
        old = [f for f in s.findings if f.stage == r.id and f.code in generic]
        evidence: tuple[str, ...] = old[0].evidence if old else ()
        s.findings[:] = [f for f in s.findings if f not in old]
        s.add(code, message, r.id, evidence=evidence, **fields)  # type: ignore[arg-type]


def _first(text: object) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= 160 else line[:160] + "..."
    return ""
