"""What the stages share: the record of one worker step, a planned step, the crash handed to
triage, and small helpers for describing models, outputs and probes."""

from __future__ import annotations

import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aotipre.pt2.spec import InputSpec, ModelInfo, PackageInfo
from aotipre.runner.classify import Failure, decisive_lines
from aotipre.runner.stages.options import DynamicOptions

if TYPE_CHECKING:
    from aotipre.findings import Finding
    from aotipre.pt2.archive import Archive
    from aotipre.runner.prewarm import Prewarmed
    from aotipre.runner.synth import ProbeCase


@dataclass
class StepRecord:
    """What became of one worker step."""

    id: str
    op: str
    status: str
    """ok, error (a Python exception), crash (a signal), timeout, worker_error (could not
    tell), skipped."""
    duration_s: float = 0.0
    entry: dict[str, Any] = field(default_factory=dict)
    """The worker's own record of the step (outputs, compare stats, error...)."""
    log: str = ""
    signal: str | None = None
    detail: str = ""
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    startup_s: float = 0.0
    """Worker start-up before this step (Python, import torch), kept apart from duration_s:
    set on the first step a worker ran (issue 14: load times without the torch import)."""
    process: str = ""
    """The worker process that ran it (`process_label`); '' when no worker did (a cache hit)."""

    @property
    def error(self) -> dict[str, Any]:
        err = self.entry.get("error")
        return err if isinstance(err, dict) else {}


@dataclass
class PlannedStep:
    """One step a stage asks the worker to run (`op` is the worker's operation; `body` holds
    its arguments, `requires` the ids of steps that must have succeeded)."""

    id: str
    op: str
    body: dict[str, Any] = field(default_factory=dict)
    probe: ProbeCase | None = None


@dataclass(frozen=True)
class RunCrash:
    """A run step that failed inside the compiled model, handed to crash triage (aotipre.triage)
    while the session's files (the loaded package, the step's log) still exist."""

    package: PackageInfo
    model: ModelInfo
    aoti_package: str
    """The package the run loaded: the archive itself, a compile-cache entry or a fresh compile."""
    aoti_model: str
    """The model name inside `aoti_package`."""
    compiled_with: Mapping[str, Any] | None
    """The inductor_configs aotipre compiled `aoti_package` with; None: the archive's own code."""
    device: str
    inputs: Mapping[str, Any]
    """The worker's inputs spec (`{"kind": "file" | "member" | "synth", ...}`)."""
    inputs_note: str
    record: StepRecord
    failure: Failure
    findings: tuple[Finding, ...]
    """What the run stage reported for it (AOT602, AOT603, ...)."""
    env: Mapping[str, str]
    """Environment the workers got on top of os.environ (options.extra_env, LD_PRELOAD, ...)."""
    options: DynamicOptions
    eager: str
    """What the ExportedProgram did eagerly on the same inputs: ok, failed, not run."""
    eager_error: str = ""
    host: Mapping[str, Any] = field(default_factory=dict)
    """Host traits of the compile-cache key (CPU ISA, GPU architecture)."""
    archive: Archive | None = field(default=None, compare=False, repr=False)
    """The package's archive as the caller of run_dynamic_stages opened it (open while that
    caller's check runs); None: triage opens `package.path` when it needs it."""
    vec_isa: tuple[str, ...] | None = None
    """The CPU ISAs torch's probe found usable in the session's load (its `vec_isa`), handed to
    triage's workers so that their compiles skip the probe (worker.pin_vec_isa); None: unknown."""
    prewarmed: tuple[Prewarmed, ...] = field(default=(), compare=False, repr=False)
    """The session's workers waiting for triage's first jobs (runner/prewarm.py), if it started
    them; a step claims one whose argv and environment are its own."""


def failure_of(
    classify: Callable[..., Failure], r: StepRecord, err: dict[str, Any] | None = None
) -> Failure:
    """What a failed step says, through one of runner/classify.py's classifiers (`err`: the
    error to read, when not the record's own)."""
    err = r.error if err is None else err
    return classify(
        exc_type=err.get("type"),
        message=err.get("message"),
        log=r.log,
        signal=r.signal,
        timed_out=r.status == "timeout",
    )


def ok(rec: StepRecord | None) -> bool:
    return rec is not None and rec.status == "ok"


def first_line(text: Any) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def evidence(err: dict[str, Any], log: str) -> tuple[str, ...]:
    return tuple(decisive_lines(str(err.get("message") or ""), log))


def describe_output(o: dict[str, Any]) -> str:
    if o.get("kind") != "tensor":
        return str(o.get("kind"))
    return f"{o.get('dtype')}[{', '.join(str(s) for s in o.get('shape') or [])}]"


def tensor_input(model: ModelInfo, index: int | None) -> InputSpec | None:
    if index is None:
        return None
    return next((i for i in model.tensor_inputs if i.tensor_index == index), None)


def symbol_label(model: ModelInfo, symbol: str) -> str:
    rng = model.symbol(symbol)
    return f"{rng.name} ({symbol})" if rng is not None and rng.name else symbol


def probe_label(model: ModelInfo, case: ProbeCase | None) -> str:
    if case is None:
        return ""
    dims = ", ".join(
        f"{spec.name} dim {d}" for t, d in case.dims if (spec := tensor_input(model, t)) is not None
    )
    where = f" [{dims}]" if dims else ""
    return f"{symbol_label(model, case.symbol)}={case.value}{where}"


def host_traits(device_type: str) -> dict[str, Any]:
    """What of this host changes the generated code: the CPU's ISA (cpu code is built with
    -march=native), the GPUs' compute capability (cuda)."""
    traits: dict[str, Any] = {"machine": platform.machine(), "system": platform.system()}
    from aotipre.environment.host import detect_local

    try:
        host = detect_local(probe_cuda=device_type == "cuda")
    except Exception:  # host detection is a cache-key refinement, never a reason to fail
        return traits
    traits["cpu_isa"] = sorted(host.cpu_isa) if host.cpu_isa is not None else None
    if device_type == "cuda":
        traits["compute_capabilities"] = list(host.compute_capabilities)
    return traits
