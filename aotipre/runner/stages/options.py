"""What the dynamic stages can be told (DynamicOptions) and how a device is spelled."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aotipre.foundation.bounds import RUN_NUMBERS, TRIAGE_NUMBERS
from aotipre.foundation.errors import UsageError
from aotipre.runner.perf import REGRESSION_TOLERANCE, Budgets


@dataclass(frozen=True)
class PerfOptions:
    """What the perf stage can be told (runner/stages/perf.py)."""

    runs: int = 20
    """Timed calls after the warm-up."""
    warmup: int = 3
    budget_s: float = 2.0
    """Warm-up and timed calls stop after this many seconds (at least 1 + 2 are made), so a
    slow model does not make the check slow."""
    budgets: Budgets = field(default_factory=Budgets)
    against: str | None = None
    """A baseline package measured in the same run with the same inputs."""
    tolerance: float = REGRESSION_TOLERANCE


@dataclass(frozen=True)
class DynamicOptions:
    """What the dynamic stages can be told (the CLI maps `check` flags onto this)."""

    device: str | None = None
    """cpu, cuda or cuda:N; None: the device the model was compiled (or exported) for."""
    recompile: bool = False
    """Compile the ExportedProgram even when the package has AOTI code for the device."""
    timeout_s: float = 300.0
    """Limit for each load, run, eager and probe step (the worker's watchdog enforces it)."""
    compile_timeout_s: float = 1800.0
    """Limit for the compile step."""
    rtol: float | None = None
    """Overrides the dtype-aware default relative tolerance of the eager comparison."""
    atol: float | None = None
    probe: bool = True
    """Run each dynamic dim at its min, max and max+1."""
    probe_budget: int = 1 << 22
    """Most elements any input may hold in a probe run; larger maxima are probed capped."""
    seed: int = 0
    """Seed of synthesized and probe inputs."""
    cache_dir: str | None = None
    """Compile cache location; None: ${XDG_CACHE_HOME:-~/.cache}/aotipre/compile."""
    use_cache: bool = True
    """False: neither read nor write the compile cache."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Added to the workers' environment (and shown in every stage's env)."""
    inductor_configs: Mapping[str, Any] = field(default_factory=dict)
    """Passed to aoti_compile_and_package (part of the cache key)."""
    python: str | None = None
    """Interpreter for the workers; None: the running one (sys.executable)."""
    cpp: bool = False
    """Also load and run the package with the C++ loader (cpp-load, concurrency stages)."""
    deployment_checks_inputs: bool = False
    """The serving process sets AOTI_RUNTIME_CHECK_INPUTS (--deployment-checks-inputs): what
    the runtime check refuses is not run again without it, and AOT613 is not reported."""
    unchecked_targets: tuple[str, ...] = ()
    """The --target deployments that do not set it when others do (AOT613 names them)."""
    state_calls: int = 3
    """Calls of one fresh copy of a model that mutates buffers, compared call by call with the
    ExportedProgram's (the state stage); 0 or 1: not checked."""
    compile_fault_rerun: bool = True
    """A compile that faults on CUDA runs once more with synchronous launches, to name the
    kernel (crash triage's first rung for the compile step; off with --no-escalate)."""
    prewarm_rerun: bool = True
    """On CUDA, start crash triage's synchronous re-run worker beside the model's first worker,
    so that a crash's re-run finds torch imported (runner/prewarm.py; off with --no-escalate)."""
    sanitizer: bool = False
    """That re-run goes under compute-sanitizer memcheck, when installed (--sanitizer; slow)."""
    compile_minify: bool = False
    """A compile that raised is minified by the AOTI minifier and its repro.py run again
    (--minify, under --escalate; slow: stages/compile_minify.py)."""
    minify_timeout_s: float = 1800.0
    """The minifier's budget, and again the repro's run (crash triage's --minify budget)."""
    compile_workaround: bool = True
    """A classified compile failure is compiled again with the knob that avoids its failing
    path, and the rebuild compared with eager (stages/compile_workaround.py; off with
    --no-escalate)."""
    workaround_budget_s: float = 900.0
    """Seconds for those rebuilds of one model (--accuracy-budget, the rebuilds' budget)."""
    artifacts: str | None = None
    """--artifacts DIR: a compile's minified repro is kept in DIR/<model>/compile-repro/."""
    exported_program: str | None = None
    """An archive holding the model's ExportedProgram (--exported-program): the eager reference
    of compare and probe for an AOTI-only package (runner/reference.py)."""
    expected: str | None = None
    """Golden outputs for the sample inputs (--expected: a torch.save of them), compared with
    the compiled model's."""
    weights: str | None = None
    """A weights file to swap into a fresh copy of the model (--weights: a torch.save state_dict
    or safetensors), run and compared with the ExportedProgram run with the same weights (the
    weights stage); None: no such stage step."""
    allow_pickle: bool = False
    """Load a package (or an --against baseline, or an --exported-program reference) that holds
    members torch unpickles without restriction (AOT081; --allow-pickle): the user trusts it.
    False: the stages do not load it and say why."""
    worker_command: tuple[str, ...] | None = None
    """Test hook: argv prefix that replaces `python worker/__main__.py` (the job path is
    appended)."""
    perf: PerfOptions | None = field(default_factory=PerfOptions)
    """The perf stage's options; None: no perf stage (and no measuring in load and run)."""

    def __post_init__(self) -> None:
        """A library caller gets the checks the flags get (aotipre.foundation.bounds): a NaN tolerance, a
        zero or endless timeout, a negative or 23-digit seed is one UsageError naming the field,
        not a worker that fails every comparison or overflows torch's generator."""
        budget = ("workaround_budget_s", TRIAGE_NUMBERS["accuracy-budget"][1])
        for name, parse in (*RUN_NUMBERS.values(), budget):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                parse(value, Path.cwd())
            except ValueError as exc:
                raise UsageError(f"DynamicOptions.{name} = {value!r}: {exc}") from None
        # workers, g++ and the C++ harness run in other folders: a relative cache folder would
        # name another place to each of them (the harness build failed, the doctor's canary too)
        if self.cache_dir:
            object.__setattr__(self, "cache_dir", os.path.abspath(self.cache_dir))


def parse_device(device: str) -> tuple[str, int]:
    """`cpu` -> ('cpu', -1); `cuda` -> ('cuda', -1); `cuda:1` -> ('cuda', 1). Raises UsageError."""
    text = device.strip().lower()
    kind, sep, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (sep and (kind == "cpu" or not index.isdigit())):
        raise UsageError(f"unsupported device {device!r}: use cpu, cuda or cuda:N")
    return kind, int(index) if sep else -1
