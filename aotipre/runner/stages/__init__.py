"""The dynamic stages of one model (compile, load, run, perf, compare, probe), run in torch workers.

Entry point: `run_dynamic_stages(package, model, inputs_path, inputs_member, options)`.

Layout (one stage, one module; data flows down the list):

- options.py: DynamicOptions, parse_device.
- base.py: StepRecord (what became of one worker step), PlannedStep, RunCrash (handed to
  crash triage), helpers that describe outputs, inputs and probes.
- session.py: the Stage interface (plan worker steps, turn their records into a StageResult
  and findings) and the thin Session that owns the shared state (package, open archive,
  inputs, device, records, findings) and runs the worker loop.
- jobs.py: one worker process over a list of steps, and the record of the step it died in.
- inputs.py: which inputs the workers get (file, archive member, synthesized) and their shapes.
- libstdcxx.py: the retry of a crashing load with a libstdc++ preloaded (AOT515).
- compile.py, load.py, custom_ops.py, run.py, perf.py, compare.py, state.py, weights.py, probe.py,
  cpp_load.py, concurrency.py, device_index.py: the stages, in the order of PIPELINE (custom-ops reads the
  compile and load steps; perf right after run: its timed calls run in the same worker, before
  the eager run and the probes change what the process holds; cpp-load and concurrency run
  the C++ harness with --cpp; device-index needs a CUDA package and two GPUs).

A new stage is one module with a Stage subclass, added to PIPELINE below.
"""

from __future__ import annotations

from collections.abc import Callable

from aotipre.findings import Finding, StageResult
from aotipre.inputs.meta import SampleInputs
from aotipre.inputs.weights import WeightsFile
from aotipre.pt2.archive import Archive
from aotipre.pt2.reader import OpenPackage
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.runner.launch import RUNTIME_CHECK_ENV, STARTUP_SLACK_S, WORKER_PATH
from aotipre.runner.perf import PerfRecord
from aotipre.runner.stages.base import RunCrash, StepRecord
from aotipre.runner.stages.compare import CompareStage
from aotipre.runner.stages.compile import CompileStage
from aotipre.runner.stages.concurrency import ConcurrencyStage
from aotipre.runner.stages.cpp_load import CppLoadStage
from aotipre.runner.stages.custom_ops import CustomOpsStage
from aotipre.runner.stages.device_index import DeviceIndexStage
from aotipre.runner.stages.libstdcxx import find_system_libstdcxx
from aotipre.runner.stages.load import LoadStage
from aotipre.runner.stages.mismatch import OutputMismatch, hand_mismatch
from aotipre.runner.stages.options import DynamicOptions, PerfOptions, parse_device
from aotipre.runner.stages.perf import PerfStage
from aotipre.runner.stages.probe import ProbeStage
from aotipre.runner.stages.run import RunStage
from aotipre.runner.stages.session import Session, Stage
from aotipre.runner.stages.state import StateStage
from aotipre.runner.stages.weights import WeightsStage

__all__ = [
    "PIPELINE",
    "RUNTIME_CHECK_ENV",
    "SAME_INPUTS",
    "STAGES",
    "STARTUP_SLACK_S",
    "WORKER_PATH",
    "DynamicOptions",
    "OutputMismatch",
    "PerfOptions",
    "RunCrash",
    "Stage",
    "StepRecord",
    "find_system_libstdcxx",
    "parse_device",
    "run_dynamic_stages",
]

PIPELINE: tuple[type[Stage], ...] = (
    CompileStage,
    LoadStage,
    CustomOpsStage,
    RunStage,
    PerfStage,
    CompareStage,
    StateStage,
    WeightsStage,
    ProbeStage,
    CppLoadStage,
    ConcurrencyStage,
    DeviceIndexStage,
)
"""The stages, in the order they plan steps and report."""
STAGES = tuple(stage.name for stage in PIPELINE)
"""The stage names, in order, as they appear in StageResult.name and Finding.stage."""
SAME_INPUTS: tuple[type[Stage], ...] = (CompileStage, LoadStage, RunStage, PerfStage)
"""The stages `aotipre diff OLD NEW --inputs` runs on NEW: its run on the inputs, whose saved
outputs and timings the perf stage's --against path hands to OLD's workers (perf.py)."""


def run_dynamic_stages(
    package: PackageInfo,
    model: ModelInfo,
    inputs_path: str | None,
    inputs_member: str | None,
    options: DynamicOptions,
    progress: Callable[[str], None] | None = None,
    on_run_crash: Callable[[RunCrash], None] | None = None,
    *,
    on_perf: Callable[[PerfRecord, PerfRecord | None], None] | None = None,
    on_mismatch: Callable[[OutputMismatch], None] | None = None,
    archive: Archive | None = None,
    sample: SampleInputs | None = None,
    weights: WeightsFile | None = None,
    pipeline: tuple[type[Stage], ...] = PIPELINE,
    baseline: OpenPackage | None = None,
) -> tuple[list[StageResult], list[Finding]]:
    """Compile (if needed), load, run, compare and probe one model in isolated torch workers.

    `inputs_path`: a user's torch.save file of `(args, kwargs)`; `inputs_member`: the archive
    member of stored sample inputs; neither: inputs are synthesized from the contract (seeded)
    and the run stage's detail says how. `archive`: the package's archive, already open (else
    it is opened here, once, when needed); `sample`: those inputs, already read; `weights`:
    options.weights, already read (the weights stage reads it otherwise); `baseline`: the perf
    stage's --against package, already open (else the perf stage reads it). Returns one
    StageResult per stage in `STAGES` (each passed, failed, skipped with a reason, or error
    when it could not run) and the findings. Never raises because a worker crashed or hung;
    raises UsageError for a bad `device`. `on_run_crash` is called with a RunCrash when the
    run step failed inside the model (not an input check or a timeout), while the session's
    files still exist (crash triage). `on_perf` gets the perf stage's record of the model (and
    of the --against baseline). `on_mismatch` gets an OutputMismatch when the stages found
    wrong outputs (AOT701/AOT702 on the sample inputs, AOT068, AOT525: mismatch.TRIGGERS)
    once they have all reported, while the session's files exist (accuracy triage).
    `pipeline`: the stages to run, in PIPELINE's order (SAME_INPUTS: those of `aotipre diff
    --inputs`); one StageResult per stage of it.
    """
    session = Session(
        [stage() for stage in pipeline],
        package,
        model,
        inputs_path,
        inputs_member,
        options,
        progress,
        archive=archive,
        sample=sample,
        weights=weights,
        baseline=baseline,
    )
    session.on_run_crash = on_run_crash
    session.on_perf = on_perf
    session.on_mismatch = on_mismatch
    try:
        results = session.execute()
        hand_mismatch(session)  # accuracy triage: every stage has reported, the files exist
        return results
    finally:
        session.cleanup()
