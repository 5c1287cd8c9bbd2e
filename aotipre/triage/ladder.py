"""The escalation ladder as data: each step's environment, phase, purpose and applicability."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre.runner import launch

# Every step runs in a fresh worker process: a CUDA fault poisons the CUDA context for the rest of
# the process, so nothing after a fault can be trusted in the same process. Steps whose `after`
# steps are done (or skipped) and whose needs hold start in parallel; see escalate.py.

SYNC_ENV: Mapping[str, str] = launch.SYNC_ENV
"""Step 1's flags (the compile stage's fault re-run uses them too)."""
PRINTER = "aot_inductor.debug_intermediate_value_printer"
PRINTER_FILTER = "aot_inductor.filtered_kernel_names"
KERNELS_PLACEHOLDER = "{kernels}"
"""In a step's inductor_configs: replaced by the kernels named so far (comma-separated)."""


class Phase(str, enum.Enum):
    """When a step's instrument acts."""

    RUN_TIME = "run-time"
    """Environment of the run only: the package is re-run as it is."""
    COMPILE_TIME = "compile-time"
    """Needs a recompile of the ExportedProgram with the step's inductor configs."""


class Need(str, enum.Enum):
    """A condition a step needs; `NEEDS` says how each is tested and why a step is skipped."""

    CUDA = "cuda"
    EXPORTED_PROGRAM = "exported_program"
    KERNEL = "kernel"
    UNEXPLAINED = "unexplained"
    SANITIZER_FLAG = "sanitizer_flag"
    SANITIZER_TOOL = "sanitizer_tool"
    MINIFY_FLAG = "minify_flag"
    CATCHABLE = "catchable"
    EAGER_RUNS = "eager_runs"
    UNNAMED = "unnamed"
    SAMPLE_INPUTS = "sample_inputs"


@dataclass(frozen=True)
class LadderStep:
    """One rung of the ladder."""

    id: str
    """Stage name suffix in the report (`triage:printer-3`) and key of its results."""
    level: int
    """Its place in the ladder of the issue (1 deterministic re-run ... 5 minifier)."""
    title: str
    purpose: str
    """What it tells, in one sentence (shown in the stage detail and the README)."""
    phase: Phase
    tool: str
    """How escalate.py runs it: rerun, printer, sanitizer, minify."""
    run_env: Mapping[str, str] = field(default_factory=dict)
    """Environment of its run (on top of the crashing run's)."""
    cuda_env: Mapping[str, str] = field(default_factory=dict)
    """Added to run_env on CUDA only."""
    inductor_configs: Mapping[str, Any] = field(default_factory=dict)
    """Compile-time configs (COMPILE_TIME steps), on top of the crashing compile's own."""
    needs: tuple[Need, ...] = ()
    after: tuple[str, ...] = ()
    """Steps whose results it uses (it starts when they are done or skipped)."""
    speculative: bool = False
    """May start before its `after` steps with the kernel the first error names; it is run
    again if they name another kernel."""
    why_not: Mapping[Need, str] = field(default_factory=dict)
    """This step's own wording of a skip reason (instead of the need's general one)."""

    @property
    def stage_name(self) -> str:
        return f"triage:{self.id}"


LADDER: tuple[LadderStep, ...] = (
    LadderStep(
        id="sync-rerun",
        level=1,
        title="deterministic re-run",
        purpose="re-run the package with synchronous launches and no caching allocator, so the "
        "error is raised at the kernel that faults instead of a later call",
        phase=Phase.RUN_TIME,
        tool="rerun",
        run_env=SYNC_ENV,
        needs=(Need.CUDA, Need.UNNAMED),
        why_not={
            Need.CUDA: "no CUDA flags apply on CPU: cpp kernels run synchronously, so the error "
            "already comes from the kernel that failed"
        },
    ),
    LadderStep(
        id="printer-3",
        level=2,
        title="kernel-name printer",
        purpose="recompile with the intermediate value printer at level 3 (kernel names around "
        "every launch); the last before_launch without its after_launch is the faulting kernel",
        phase=Phase.COMPILE_TIME,
        tool="printer",
        cuda_env=SYNC_ENV,
        inductor_configs={PRINTER: "3"},
        needs=(Need.EXPORTED_PROGRAM, Need.UNNAMED),
    ),
    LadderStep(
        id="kernel-inputs",
        level=3,
        title="kernel inputs from the sample",
        purpose="read the statistics of the model inputs the faulting kernel reads straight "
        "from the sample, without a recompile, when no earlier call takes them (what the "
        "level-2 printer would show of them)",
        phase=Phase.RUN_TIME,
        tool="stats",
        needs=(Need.KERNEL, Need.SAMPLE_INPUTS),
        after=("sync-rerun", "printer-3"),
    ),
    LadderStep(
        id="printer-2",
        level=3,
        title="kernel input statistics",
        purpose="recompile with the printer at level 2, filtered to the faulting kernel and the "
        "one launched before it, for the statistics of the tensors it reads",
        phase=Phase.COMPILE_TIME,
        tool="printer",
        cuda_env=SYNC_ENV,
        inductor_configs={PRINTER: "2", PRINTER_FILTER: KERNELS_PLACEHOLDER},
        needs=(Need.EXPORTED_PROGRAM, Need.KERNEL, Need.UNEXPLAINED),
        after=("printer-3", "kernel-inputs"),
        speculative=True,
    ),
    LadderStep(
        id="nan-asserts",
        level=4,
        title="NaN asserts",
        purpose="recompile with TORCHINDUCTOR_NAN_ASSERTS (nan_asserts) to find the first tensor "
        "holding NaN/Inf (graph inputs on CPU, every Triton kernel on CUDA)",
        phase=Phase.COMPILE_TIME,
        tool="printer",
        cuda_env=SYNC_ENV,
        inductor_configs={"nan_asserts": True},
        needs=(Need.EXPORTED_PROGRAM, Need.UNEXPLAINED),
        after=("printer-2",),
    ),
    LadderStep(
        id="sanitizer",
        level=4,
        title="compute-sanitizer",
        purpose="re-run under compute-sanitizer memcheck, which names the kernel and the address "
        "of an invalid access",
        phase=Phase.RUN_TIME,
        tool="sanitizer",
        run_env=SYNC_ENV,
        needs=(Need.CUDA, Need.SANITIZER_FLAG, Need.SANITIZER_TOOL),
        why_not={Need.CUDA: "compute-sanitizer checks CUDA kernels only"},
    ),
    LadderStep(
        id="minify",
        level=5,
        title="AOTI minifier",
        purpose="shrink the ExportedProgram to the fewest nodes that still fail the same way, "
        "written as a repro.py",
        phase=Phase.COMPILE_TIME,
        tool="minify",
        needs=(Need.MINIFY_FLAG, Need.EXPORTED_PROGRAM, Need.CATCHABLE, Need.EAGER_RUNS),
    ),
)
BY_ID: dict[str, LadderStep] = {s.id: s for s in LADDER}

TRIGGERS: frozenset[str] = frozenset(
    {"exception", "kernel_check", "device_fault", "abort", "segfault", "signal"}
)
"""Failure kinds (runner.classify) of a run that escalate: a crash or error inside the compiled
model. Input checks, timeouts, SIGKILL (out of memory) and SIGILL (CPU ISA) do not."""


@dataclass(frozen=True)
class Facts:
    """What applicability is decided on; escalate.py keeps it current as steps finish."""

    device_type: str
    has_exported_program: bool
    exported_program_source: str
    """`the archive`, `--exported-program FILE`, or why there is none."""
    kernel: str | None = None
    explained: bool = False
    """Earlier steps explain the fault (an out-of-range index, NaN/Inf inputs)."""
    sanitizer_flag: bool = False
    sanitizer_tool: str | None = None
    minify_flag: bool = False
    signal: str | None = None
    failure_kind: str = "exception"
    eager: str = "not run"
    eager_error: str = ""
    sample_inputs: bool = False
    """The named kernel reads model inputs that no earlier call takes (conclude.sample_inputs_of):
    their statistics come from the sample without a recompile."""
    named_by_crash: str | None = None
    """How the crashed run's own output already names the faulting kernel, synchronously (a CPU
    kernel's exception, a CUDA device assertion), or None."""


Check = Callable[[Facts], bool]
Reason = Callable[[Facts], str]

NEEDS: dict[Need, tuple[Check, Reason]] = {
    Need.UNNAMED: (
        lambda f: f.named_by_crash is None,
        lambda f: f"the crash already names the faulting kernel {f.kernel}: {f.named_by_crash}",
    ),
    Need.CUDA: (
        lambda f: f.device_type == "cuda",
        lambda f: f"CUDA only (the run is on {f.device_type})",
    ),
    Need.EXPORTED_PROGRAM: (
        lambda f: f.has_exported_program,
        lambda f: (
            f"needs the ExportedProgram to recompile, and {f.exported_program_source}: "
            "pass --exported-program FILE (the torch.export.save of the same model)"
        ),
    ),
    Need.KERNEL: (
        lambda f: f.kernel is not None,
        lambda f: "no faulting kernel was named by an earlier step",
    ),
    Need.UNEXPLAINED: (
        lambda f: not f.explained,
        lambda f: "the kernel's input statistics already explain the fault",
    ),
    Need.SAMPLE_INPUTS: (
        lambda f: f.sample_inputs,
        lambda f: (
            f"{f.kernel} reads no model input straight from the sample (only weights, "
            "intermediate buffers, or inputs an earlier call takes)"
        ),
    ),
    Need.SANITIZER_FLAG: (
        lambda f: f.sanitizer_flag,
        lambda f: "opt-in: pass --sanitizer (compute-sanitizer is slow)",
    ),
    Need.SANITIZER_TOOL: (
        lambda f: f.sanitizer_tool is not None,
        lambda f: "compute-sanitizer was not found on PATH or under CUDA_HOME",
    ),
    Need.MINIFY_FLAG: (
        lambda f: f.minify_flag,
        lambda f: "opt-in: pass --minify (the minifier recompiles many times: minutes)",
    ),
    Need.CATCHABLE: (
        lambda f: f.signal is None and f.failure_kind != "device_fault",
        lambda f: (
            f"the run dies by {f.signal}, and the minifier tests every candidate in its own process"
            if f.signal
            else "a CUDA fault poisons the minifier's process after the first candidate"
        ),
    ),
    Need.EAGER_RUNS: (
        lambda f: f.eager != "failed",
        lambda f: (
            "the ExportedProgram fails eagerly on these inputs too "
            f"({f.eager_error or 'see the compare stage'}); the minifier needs eager values to cut "
            "the graph, and the full program is the repro"
        ),
    ),
}


def skip_reason(step: LadderStep, facts: Facts) -> str | None:
    """Why `step` does not apply (the first need that fails), or None when it does."""
    for need in step.needs:
        check, reason = NEEDS[need]
        if not check(facts):
            return step.why_not.get(need) or reason(facts)
    return None


def step_env(step: LadderStep, device_type: str) -> dict[str, str]:
    """The step's run environment on this device."""
    env = dict(step.run_env)
    if device_type == "cuda":
        env.update(step.cuda_env)
    return env


def step_configs(step: LadderStep, kernels: list[str]) -> dict[str, Any]:
    """The step's inductor configs with the kernel filter filled in."""
    out: dict[str, Any] = {}
    for key, value in step.inductor_configs.items():
        out[key] = ",".join(kernels) if value == KERNELS_PLACEHOLDER else value
    return out
