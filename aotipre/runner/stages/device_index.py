"""The device-index stage: a CUDA package loaded and run with device_index=1 (the Python loader,
and the C++ loader with --cpp), whose outputs must live on cuda:1. It needs a CUDA package and a
host with two GPUs; otherwise it is skipped and says why."""

from __future__ import annotations

import os

from aotipre.cpp import harness as cpp
from aotipre.findings import StageResult, StageStatus
from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.cpp_load import harness_common
from aotipre.runner.stages.session import Session, Stage

INDEX = 1
_CVD = "CUDA_VISIBLE_DEVICES"


def gpu_count() -> int:
    """GPUs on this host (nvidia-smi; torch-free)."""
    from aotipre.environment.host import detect_local

    try:
        return len(detect_local(probe_cuda=True).compute_capabilities)
    except Exception:  # host detection never fails a check
        return 0


class DeviceIndexStage(Stage):
    name = "device-index"
    labels = {"index_run": f"loading and running on cuda:{INDEX}"}

    def __init__(self) -> None:
        self.why_not = ""

    def plan(self, s: Session) -> list[PlannedStep]:
        if s.device_type != "cuda":
            self.why_not = "the package runs on the CPU (device_index applies to CUDA packages)"
            return []
        gpus = gpu_count()
        # the workers' own CUDA_VISIBLE_DEVICES (a package pinned to one GPU: aotipre.fleet.gpus)
        pinned = {**os.environ, **s.opts.extra_env}.get(_CVD)
        if pinned is not None and gpus > 0:
            gpus = min(gpus, len([d for d in pinned.split(",") if d.strip()]))
        if gpus < 2:
            why = f"this host has {gpus}"
            if pinned is not None:
                why = f"its workers see {gpus} ({_CVD}={pinned})"
            self.why_not = f"needs two GPUs to load on cuda:{INDEX}; {why}"
            return []
        steps = [PlannedStep("index_run", "index_run", {"device_index": INDEX})]
        if s.opts.cpp:
            common = {**harness_common(s), "device_index": INDEX}
            body = cpp.run_step("index_cpp", mode="run", **common)  # type: ignore[arg-type]
            steps.append(PlannedStep("index_cpp", "cpp_run", body))
        return steps

    def result(self, s: Session) -> StageResult:
        if self.why_not:
            return s.skipped(self.name, self.why_not)
        r = s.records.get("index_run")
        if r is None:
            return s.skipped(self.name, s.upstream_reason())
        want = f"cuda:{INDEX}"
        problems = self._python(s, r, want) + self._cpp(s, want)
        recs = [x for x in (r, s.records.get("index_cpp")) if x is not None]
        if problems:
            for p in problems:
                s.add("AOT529", p, self.name, expected=want)
            return s.stage(self.name, StageStatus.FAILED, problems[0], recs)
        return s.stage(
            self.name, StageStatus.PASSED, f"loaded and ran on {want}; outputs on {want}", recs
        )

    def _python(self, s: Session, r: StepRecord, want: str) -> list[str]:
        if not ok(r):
            err = r.error
            why = (
                f"{err.get('type')}: {str(err.get('message') or '').strip()[:300]}"
                if err
                else r.detail or r.status
            )
            return [f"aoti_load_package(..., device_index={INDEX}) failed: {why}"]
        devices = {
            str(o.get("device")) for o in r.entry.get("outputs") or [] if o.get("kind") == "tensor"
        }
        if devices - {want}:
            return [
                f"loaded with device_index={INDEX}, the outputs live on {', '.join(sorted(devices))}"
            ]
        return []

    def _cpp(self, s: Session, want: str) -> list[str]:
        r = s.records.get("index_cpp")
        if r is None:
            return []
        run = cpp.HarnessRun.from_entry(r.entry) if ok(r) else None
        if run is None or not run.ok:
            what = run.where() if run is not None else (r.detail or r.status)
            return [f"the C++ loader with device_index={INDEX} failed ({what})"]
        devices = {str(o.get("device")) for o in (run.result or {}).get("outputs") or []}
        if devices - {want}:
            return [
                f"the C++ loader with device_index={INDEX} put outputs on {', '.join(sorted(devices))}"
            ]
        return []
