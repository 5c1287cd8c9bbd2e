"""The cpp-load stage (with --cpp): the package loaded and run by the C++ loader, as a C++
server does it. The worker builds aotipre's harness against the installed torch (cached per
torch version and compiler, aotipre/cpp), writes the flat inputs, runs the harness in a child
process and compares its outputs with the Python loader's run. A crash or exception is a finding
like the Python stages' (AOT521-AOT525). When the Python load needed a libstdc++ preload
(AOT515), the harness runs without it, and AOT515 says whether C++ deployments are affected."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from aotipre.checks.custom_ops import Registration
from aotipre.cpp import harness as cpp
from aotipre.findings import StageResult, StageStatus, codes
from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.compare import mismatch_text
from aotipre.runner.stages.session import Session, Stage

CPP_OUTPUTS = "cpp_run.pt"
PYTHON_OUTPUTS = "aoti_run.pt"
"""What the run stage saves (stages/run.py)."""


def harness_common(s: Session) -> dict[str, object]:
    """Arguments every harness run of the session shares."""
    registration = Registration.from_env(s.opts.extra_env)
    return {
        "package": s.aoti_package or os.path.abspath(s.package.path),
        "model": s.aoti_model,
        "inputs": os.path.join(s.workdir, "cpp_inputs.pt"),
        "device_index": s.device_index,
        "libraries": registration.libraries,
        "timeout_s": s.opts.timeout_s,
    }


def shared_steps(s: Session) -> list[PlannedStep]:
    """Build the harness and write its inputs (once per session; cpp-load plans them)."""
    root = cpp.cache_root(s.opts.cache_dir, s.opts.use_cache, s.workdir)
    build = cpp.build_step(root)
    inputs = cpp.inputs_step(os.path.join(s.workdir, "cpp_inputs.pt"))
    return [
        PlannedStep(build["id"], build["op"], build),
        PlannedStep(inputs["id"], inputs["op"], inputs),
    ]


def not_asked(s: Session, name: str) -> StageResult:
    return s.skipped(name, "the C++ loader is checked with --cpp (config: cpp = true)")


def build_failed(s: Session, name: str) -> StageResult | None:
    """The stage's result when the harness could not be built or fed, else None."""
    for sid in ("cpp_build", "cpp_inputs"):
        r = s.records.get(sid)
        if r is None:
            return s.skipped(name, s.upstream_reason())
        if not ok(r):
            return s.stage(name, StageStatus.ERROR, f"{sid}: {_why(r)}", [r])
    return None


class CppLoadStage(Stage):
    name = "cpp-load"
    labels = {
        "cpp_build": "building the C++ harness (once per torch version)",
        "cpp_run": "loading and running with the C++ loader",
    }

    def plan(self, s: Session) -> list[PlannedStep]:
        if not s.opts.cpp:
            return []
        # a libstdc++ preload the Python load needed is not the C++ deployment's: run without
        unset = (
            ()
            if "LD_PRELOAD" in s.opts.extra_env or "LD_PRELOAD" in os.environ
            else ("LD_PRELOAD",)
        )
        run = cpp.run_step(
            "cpp_run",
            mode="run",
            outputs=os.path.join(s.workdir, CPP_OUTPUTS),
            unset_env=unset,
            **harness_common(s),  # type: ignore[arg-type]
        )
        compare = cpp.compare_step(os.path.join(s.workdir, CPP_OUTPUTS), PYTHON_OUTPUTS, "cpp_run")
        compare["requires"] = ["cpp_run", "run"]
        return [
            *shared_steps(s),
            PlannedStep("cpp_run", "cpp_run", run),
            PlannedStep("cpp_compare", "cpp_compare", compare),
        ]

    def result(self, s: Session) -> StageResult:
        if not s.opts.cpp:
            _note_aot515(
                s,
                "; whether C++ deployments are affected too: check again with --cpp, or run "
                "aotipre doctor",
            )
            return not_asked(s, self.name)
        build = s.records.get("cpp_build")
        if build is not None and not ok(build):
            s.add("AOT520", f"the C++ harness could not be built: {_why(build)}", self.name)
        failed = build_failed(s, self.name)
        if failed is not None:
            return failed
        r = s.records.get("cpp_run")
        if r is None or not ok(r):
            return s.stage(self.name, StageStatus.ERROR, _why(r), [r] if r else [])
        run = cpp.HarnessRun.from_entry(r.entry)
        if run is None:
            return s.stage(self.name, StageStatus.ERROR, "the harness left no record", [r])
        found = cpp.harness_findings(
            run, model=s.model.name, stage=self.name, timeout_s=s.opts.timeout_s
        )
        self._python_only(s, run)
        if found:
            for f in found:
                if f.code == "AOT521" and "torch.library.custom_op" in f.message:
                    f = codes.get("AOT122").finding(
                        f.message, model=f.model, stage=f.stage, evidence=f.evidence
                    )
                s.findings.append(f)
            return s.stage(self.name, StageStatus.FAILED, found[0].message, [r])
        detail = f"AOTIModelPackageLoader loaded and ran model '{s.aoti_model}' ({_timing(run)})"
        return self._compared(s, r, detail)

    def _compared(self, s: Session, r: StepRecord, detail: str) -> StageResult:
        c = s.records.get("cpp_compare")
        if c is None:
            return s.stage(
                self.name,
                StageStatus.PASSED,
                f"{detail}; not compared ({s.upstream_reason()})",
                [r],
            )
        if not ok(c):
            return s.stage(self.name, StageStatus.ERROR, f"{detail}; compare: {_why(c)}", [r, c])
        outputs = c.entry.get("outputs") or []
        bad = [o for o in outputs if o.get("structure") or o.get("mismatches")]
        if c.entry.get("structure") or bad:
            worst = max((float(o.get("max_abs") or 0) for o in bad), default=0.0)
            s.add(
                "AOT525",
                f"the C++ loader's outputs differ from the Python loader's: "
                f"{c.entry.get('structure') or f'{len(bad)} output(s) beyond tolerance, largest absolute difference {worst:g}'}",
                self.name,
                evidence=tuple(_differs(o) for o in bad),
            )
            return s.stage(self.name, StageStatus.FAILED, f"{detail}; outputs differ", [r, c])
        same = "identical to" if c.entry.get("identical") else "within tolerance of"
        return s.stage(
            self.name,
            StageStatus.PASSED,
            f"{detail}; {len(outputs)} output(s) {same} the Python loader's",
            [r, c],
        )

    def _python_only(self, s: Session, run: cpp.HarnessRun) -> None:
        """AOT515 (a Python load crash that a libstdc++ preload fixed): say what C++ does."""
        if "LD_PRELOAD" not in run.unset_env:
            return
        if run.ok:
            note = (
                "; the C++ loader (aotipre's harness, built against this torch) loads and runs "
                "it without the preload: only Python processes are affected, C++ deployments "
                "are not"
            )
        elif run.signal:
            note = f"; the C++ loader crashes too ({run.signal} while {run.where()}): C++ deployments are affected as well"
        else:
            note = "; whether C++ deployments are affected is unknown (the C++ loader failed otherwise)"
        _note_aot515(s, note)


def _note_aot515(s: Session, note: str) -> None:
    s.findings[:] = [
        dataclasses.replace(f, message=f.message + note) if f.code == "AOT515" else f
        for f in s.findings
    ]


def _why(r: StepRecord | None) -> str:
    if r is None:
        return "the step did not run"
    if r.detail:
        return r.detail
    err = r.error
    return f"{err.get('type')}: {str(err.get('message') or '').strip()[:400]}" if err else r.status


def _timing(run: cpp.HarnessRun) -> str:
    r = run.result or {}
    return f"load {float(r.get('construct_s') or 0):.3f}s, run {float(r.get('run_s') or 0):.3f}s"


def _differs(o: dict[str, Any]) -> str:
    """One output of the C++/Python comparison that differs (the C++ side first)."""
    head = f"output {o.get('index')}"
    if o.get("structure"):
        return (
            f"{head}: the C++ loader returns {o.get('dtype')}{o.get('shape')}, the Python "
            f"loader {o.get('eager_dtype')}{o.get('eager_shape')}"
        )
    return f"{head} ({o.get('dtype')}{o.get('shape')}): " + mismatch_text(o, "Python")
