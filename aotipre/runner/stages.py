"""The dynamic stages (compile, load, run, compare, probe) of one model, run in torch workers."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from aotipre import codes
from aotipre.errors import InputsError, UsageError
from aotipre.findings import Finding, Severity, StageResult, StageStatus
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.pt2.archive import open_archive
from aotipre.pt2.spec import InputSpec, ModelInfo, PackageInfo
from aotipre.runner import cache as cache_mod
from aotipre.runner.classify import (
    Failure,
    InputCheck,
    classify_compile_failure,
    classify_load_failure,
    classify_run_failure,
    watchdog_fired,
)
from aotipre.runner.proc import ProcessOutcome, run_process
from aotipre.runner.synth import (
    PlanError,
    ProbeCase,
    ProbePlan,
    plan_probes,
    sample_tensor_shapes,
    synthesize,
)

# Entry point: `run_dynamic_stages(package, model, inputs_path, inputs_member, options)`.
#
# How the work is split into processes (wall time matters: `import torch` alone costs ~1.5 s):
#
# - One worker runs every step in order: [compile], load, run, [eager, compare], [probe ...].
#   Outputs go through torch.save files in a private temporary folder, so any later worker can
#   pick up where a dead one stopped.
# - When a worker dies (signal, per-step watchdog, backstop timeout) the step it was running is
#   classified from its own log; the remaining steps that still make sense run in a fresh worker
#   that loads the model again. A compile or load failure ends the model's run; a crashed run
#   skips compare and probes; a crashed probe only moves the other probes to a fresh worker.
# - On CUDA a worker also stops by itself after an unexpected error in a model call, because a
#   device fault poisons the CUDA context for the rest of the process.
# - A load that dies by SIGSEGV is retried once with the system libstdc++ preloaded; if that
#   loads, the crash was the environment's libstdc++ (AOT515), not the model, and the remaining
#   stages run with the preload (the stages' env says so).

__all__ = ["DynamicOptions", "RunCrash", "STAGES", "run_dynamic_stages"]

STAGES = ("compile", "load", "run", "compare", "probe")
"""The stage names, in order, as they appear in StageResult.name and Finding.stage."""
WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
RUNTIME_CHECK_ENV = {"AOTI_RUNTIME_CHECK_INPUTS": "1"}
STARTUP_SLACK_S = 120.0
"""Backstop on top of the per-step limits: interpreter start, `import torch`, CUDA init."""
SYSTEM_LIBSTDCXX = (
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/aarch64-linux-gnu/libstdc++.so.6",
    "/usr/lib64/libstdc++.so.6",
    "/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/lib64/libstdc++.so.6",
)
_PRELOAD_DIAGNOSED: dict[tuple[str, ...], tuple[str, StepRecord]] = {}
"""Per interpreter: the libstdc++ preload a load crash needed, and that crash (process-wide, so
the other models of one check start preloaded instead of crashing again)."""
_ENV_SHOWN = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "LD_PRELOAD", "OMP_NUM_THREADS")


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
    worker_command: tuple[str, ...] | None = None
    """Test hook: argv prefix that replaces `python worker.py` (the job path is appended)."""


# --------------------------------------------------------------------------------------------
# Step records


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

    @property
    def error(self) -> dict[str, Any]:
        err = self.entry.get("error")
        return err if isinstance(err, dict) else {}


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


@dataclass
class _Step:
    id: str
    op: str
    body: dict[str, Any] = field(default_factory=dict)
    probe: ProbeCase | None = None


# --------------------------------------------------------------------------------------------
# The entry point


def run_dynamic_stages(
    package: PackageInfo,
    model: ModelInfo,
    inputs_path: str | None,
    inputs_member: str | None,
    options: DynamicOptions,
    progress: Callable[[str], None] | None = None,
    on_run_crash: Callable[[RunCrash], None] | None = None,
) -> tuple[list[StageResult], list[Finding]]:
    """Compile (if needed), load, run, compare and probe one model in isolated torch workers.

    `inputs_path`: a user's torch.save file of `(args, kwargs)`; `inputs_member`: the archive
    member of stored sample inputs; neither: inputs are synthesized from the contract (seeded)
    and the run stage's detail says how. Returns one StageResult per stage in `STAGES` (each
    passed, failed, skipped with a reason, or error when it could not run) and the findings.
    Never raises because a worker crashed or hung; raises UsageError for a bad `device`.
    `on_run_crash` is called with a RunCrash when the run step failed inside the model (not an
    input check or a timeout), while the session's files still exist (crash triage).
    """
    session = _Session(package, model, inputs_path, inputs_member, options, progress)
    session.on_run_crash = on_run_crash
    try:
        return session.execute()
    finally:
        session.cleanup()


def parse_device(device: str) -> tuple[str, int]:
    """`cpu` -> ('cpu', -1); `cuda` -> ('cuda', -1); `cuda:1` -> ('cuda', 1). Raises UsageError."""
    text = device.strip().lower()
    kind, sep, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (sep and (kind == "cpu" or not index.isdigit())):
        raise UsageError(f"unsupported device {device!r}: use cpu, cuda or cuda:N")
    return kind, int(index) if sep else -1


class _Session:
    """One model's dynamic stages: planning, the worker loop, and turning records into results."""

    def __init__(
        self,
        package: PackageInfo,
        model: ModelInfo,
        inputs_path: str | None,
        inputs_member: str | None,
        options: DynamicOptions,
        progress: Callable[[str], None] | None,
    ) -> None:
        self.package = package
        self.model = model
        self.inputs_path = inputs_path
        self.inputs_member = inputs_member
        self.opts = options
        self.progress = progress
        self.on_run_crash: Callable[[RunCrash], None] | None = None
        self._inputs_spec: dict[str, Any] = {}
        self.device = options.device or model.device_type or "cpu"
        self.device_type, self.device_index = parse_device(self.device)
        self.workdir = tempfile.mkdtemp(prefix="aotipre-")
        self.records: dict[str, StepRecord] = {}
        self.findings: list[Finding] = []
        self.extra_env: dict[str, str] = {}
        self.jobs = 0
        self.inputs_note = ""
        self.compile_note = ""
        self.aoti_package: str | None = None
        self.aoti_model = model.name
        self.pending_cache: cache_mod.PendingEntry | None = None
        self.cache: cache_mod.CompileCache | None = None
        self.cache_key: str | None = None
        self.probe_plan: ProbePlan | None = None
        self.probe_note = ""
        self.libstdcxx: str | None = None
        """Set when a load crash went away with the system libstdc++ preloaded."""
        self._preload_crash: StepRecord | None = None
        """The first load crash, when a retry with the system libstdc++ followed it."""
        self._preload_earlier = False
        """The crash was diagnosed for an earlier model in this process: start preloaded."""
        known = _PRELOAD_DIAGNOSED.get(self._worker_key())
        if known is not None:
            self.extra_env["LD_PRELOAD"] = known[0]
            self.libstdcxx, self._preload_crash = known
            self._preload_earlier = True

    def cleanup(self) -> None:
        if self.pending_cache is not None and self.cache is not None:
            self.cache.discard(self.pending_cache)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.model.name}: {text}")

    # -- planning

    def execute(self) -> tuple[list[StageResult], list[Finding]]:
        m = self.model
        if not m.has_aoti and not m.has_exported_program:
            return self._all_skipped("the model has neither AOTI code nor an ExportedProgram"), []
        need_compile = m.has_exported_program and (
            self.opts.recompile
            or m.aoti is None
            or (m.aoti.device_type or "cpu") != self.device_type
        )
        try:
            inputs, shapes = self._plan_inputs()
        except (PlanError, InputsError) as exc:
            return self._all_skipped(f"no inputs to run with: {exc}", error=True), []
        self._inputs_spec = inputs

        steps: list[_Step] = []
        compile_started = time.monotonic()
        if need_compile:
            steps.extend(self._plan_compile(inputs))
        else:
            self.aoti_package = os.path.abspath(self.package.path)
        compile_lookup_s = time.monotonic() - compile_started
        steps.append(
            _Step("load", "load", {"with_ep": m.has_exported_program and not need_compile})
        )
        steps.append(_Step("run", "run", {"save": "aoti_run.pt"}))
        if m.has_exported_program:
            steps.append(_Step("eager", "eager", {"save": "eager_run.pt"}))
            steps.append(
                _Step(
                    "compare",
                    "compare",
                    {"a": "aoti_run.pt", "b": "eager_run.pt", "requires": ["run", "eager"]},
                )
            )
        if self.opts.probe:
            steps.extend(self._plan_probes(shapes))
        self._loop(steps, inputs)
        if need_compile and "compile" not in self.records:
            # a cache hit: the compile stage passed without a worker step
            self.records["compile"] = StepRecord(
                "compile", "compile", "ok", compile_lookup_s, detail=self.compile_note
            )
        return self._results(need_compile), self.findings

    def _plan_inputs(self) -> tuple[dict[str, Any], dict[int, tuple[int, ...]]]:
        m = self.model
        shapes: dict[int, tuple[int, ...]] = {}
        if self.inputs_path is not None:
            spec: dict[str, Any] = {"kind": "file", "path": os.path.abspath(self.inputs_path)}
            self.inputs_note = f"inputs from {self.inputs_path}"
            try:
                shapes = sample_tensor_shapes(m, load_sample_inputs(self.inputs_path))
            except InputsError as exc:
                self.probe_note = f"input shapes unknown ({exc})"
            return spec, shapes
        if self.inputs_member is not None:
            spec = {"kind": "member", "member": self.inputs_member}
            self.inputs_note = f"inputs stored in the archive ({self.inputs_member})"
            try:
                with open_archive(self.package.path) as archive:
                    data = archive.read(self.inputs_member)
                sample = load_sample_inputs_bytes(data, f"{self.package.path}:{self.inputs_member}")
                shapes = sample_tensor_shapes(m, sample)
            except Exception as exc:
                self.probe_note = f"input shapes unknown ({exc})"
            return spec, shapes
        plan = synthesize(self.package, m)
        self.inputs_note = "synthesized inputs (seed {}): {}".format(
            self.opts.seed, "; ".join(plan.notes) or "static shapes"
        )
        return {"kind": "synth", "tree": plan.tree, "seed": self.opts.seed}, dict(plan.shapes)

    def _plan_compile(self, inputs: dict[str, Any]) -> list[_Step]:
        m = self.model
        configs = dict(self.opts.inductor_configs)
        out_dir = os.path.join(self.workdir, "compiled")
        package_out = os.path.join(out_dir, cache_mod.PACKAGE_FILE)
        if self.opts.use_cache:
            self.cache = cache_mod.CompileCache(self.opts.cache_dir)
            self.cache_key = self._cache_key(inputs, configs)
            hit = self.cache.lookup(self.cache_key)
            if hit is not None:
                self.aoti_package = hit.package
                self.aoti_model = "model"
                self.compile_note = f"compile cache hit ({hit.directory})"
                self.say("compiled package found in the cache")
                return []
            self.pending_cache = self.cache.begin(self.cache_key)
            package_out = self.pending_cache.package
            self.compile_note = f"compiled into the cache (key {self.cache_key})"
        else:
            self.compile_note = "compiled without the cache"
        self.aoti_package = package_out
        self.aoti_model = "model"
        del m
        return [_Step("compile", "compile", {"out": package_out, "inductor_configs": configs})]

    def _cache_key(self, inputs: dict[str, Any], configs: dict[str, Any]) -> str:
        m = self.model
        names = [mem.name for mem in self.package.members]
        members = cache_mod.exported_program_members(names, self.package.root, m.name)
        content = cache_mod.hash_members(self.package.path, members)
        sample_member = f"{self.package.root}/data/sample_inputs/{m.name}.pt"
        stored = next((mem for mem in self.package.members if mem.name == sample_member), None)
        example: str | None = None
        if stored is None or stored.size == 0:
            example = _inputs_digest(inputs)
        return cache_mod.compile_key(
            content_hash=content,
            torch_version=cache_mod.torch_version(),
            device=self.device,
            configs=configs,
            host=_host_traits(self.device_type),
            example_inputs=example,
        )

    def _plan_probes(self, shapes: dict[int, tuple[int, ...]]) -> list[_Step]:
        m = self.model
        if not m.symbols:
            self.probe_note = "the model has no dynamic dims"
            return []
        if len(shapes) != len(m.tensor_inputs):
            self.probe_note = (
                self.probe_note or "the input shapes could not be matched to the contract"
            )
            return []
        plan = plan_probes(m, shapes, self.opts.probe_budget)
        self.probe_plan = plan
        eager = m.has_exported_program
        return [
            _Step(
                case.id,
                "probe",
                {
                    "shapes": {str(k): list(v) for k, v in case.shapes.items()},
                    "expect": case.expect,
                    "eager": eager,
                    "requires": ["run"],
                },
                probe=case,
            )
            for case in plan.cases
        ]

    # -- the worker loop

    def _loop(self, steps: list[_Step], inputs: dict[str, Any]) -> None:
        pending = list(steps)
        max_jobs = len(steps) + 3
        while pending and self.jobs < max_jobs:
            job_steps = pending
            if pending[0].op not in ("compile", "load"):
                job_steps = [_Step(f"load#{self.jobs}", "load", {"with_ep": False}), *pending]
            done_ids = self._run_job(job_steps, inputs)
            if self.pending_cache is not None and _ok(self.records.get("compile")):
                self._commit_compile()
            if self._retry_with_system_libstdcxx():
                pending = [s for s in steps if s.op != "compile"]
                for s in pending:
                    self.records.pop(s.id, None)
                continue
            pending = [s for s in pending if s.id not in done_ids]
            pending = self._still_sensible(pending)
        if self._preload_crash is not None and _ok(self.records.get("load")):
            self.libstdcxx = self.extra_env.get("LD_PRELOAD")
            if self.libstdcxx:
                _PRELOAD_DIAGNOSED[self._worker_key()] = (self.libstdcxx, self._preload_crash)

    def _retry_with_system_libstdcxx(self) -> bool:
        """After a SIGSEGV while loading, try once more with the system libstdc++ preloaded."""
        load = self.records.get("load")
        if load is None or load.status != "crash" or load.signal != "SIGSEGV":
            return False
        if self._preload_crash is not None:
            return False
        lib = find_system_libstdcxx()
        preloaded = " ".join(
            v for v in (os.environ.get("LD_PRELOAD"), self.opts.extra_env.get("LD_PRELOAD")) if v
        )
        if lib is None or lib in preloaded:
            return False
        self._preload_crash = load
        self.extra_env["LD_PRELOAD"] = f"{preloaded} {lib}".strip()
        self.say(f"loading crashed; retrying with LD_PRELOAD={lib}")
        return True

    def _still_sensible(self, pending: list[_Step]) -> list[_Step]:
        """Drop the steps whose prerequisites failed; keep the rest for a fresh worker."""
        rec = self.records
        if any(r.op == "compile" and not _ok(r) for r in rec.values()):
            return []
        loads = [r for r in rec.values() if r.op == "load"]
        if loads and not _ok(loads[-1]):
            return []
        run = rec.get("run")
        if run is not None and run.status in ("crash", "timeout", "worker_error"):
            return []
        out = []
        for step in pending:
            if step.op in ("compare", "probe") and run is not None and not _ok(run):
                continue
            if step.op == "compare" and rec.get("eager") is not None and not _ok(rec["eager"]):
                continue
            out.append(step)
        return out

    def _job_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(RUNTIME_CHECK_ENV)
        env.update(self.opts.extra_env)
        env.update(self.extra_env)
        return env

    def _shown_env(self, op: str) -> dict[str, str]:
        shown = {k: os.environ[k] for k in _ENV_SHOWN if k in os.environ}
        if op in ("run", "probe", "load", "eager"):
            shown.update(RUNTIME_CHECK_ENV)
        shown.update(self.opts.extra_env)
        shown.update(self.extra_env)
        return shown

    def _python(self) -> str:
        return self.opts.python or sys.executable

    def _worker_key(self) -> tuple[str, ...]:
        return self.opts.worker_command or (self._python(), WORKER_PATH)

    def _argv(self, job_path: str) -> tuple[str, ...]:
        if self.opts.worker_command:
            return (*self.opts.worker_command, job_path)
        return (self._python(), WORKER_PATH, job_path)

    def _run_job(self, steps: list[_Step], inputs: dict[str, Any]) -> set[str]:
        """Run one worker over `steps`; record every step it finished or died in; return their
        ids (steps it never reached are not in the set)."""
        tag = f"job{self.jobs}"
        self.jobs += 1
        job = {
            "protocol": 1,
            "tag": tag,
            "package": self.aoti_package,
            "source_package": os.path.abspath(self.package.path),
            "model": self.model.name,
            "aoti_model": self.aoti_model,
            "device": self.device,
            "workdir": self.workdir,
            "inputs": inputs,
            "seed": self.opts.seed,
            "rtol": self.opts.rtol,
            "atol": self.opts.atol,
            "step_timeout_s": self.opts.timeout_s,
            "compile_timeout_s": self.opts.compile_timeout_s,
            "steps": [{"id": s.id, "op": s.op, **s.body} for s in steps],
        }
        job_path = os.path.join(self.workdir, f"{tag}.json")
        result_path = os.path.join(self.workdir, f"{tag}.result.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        budget = sum(
            self.opts.compile_timeout_s if s.op == "compile" else self.opts.timeout_s for s in steps
        )
        argv = self._argv(job_path)
        outcome = run_process(
            argv,
            env=self._job_env(),
            timeout_s=budget + STARTUP_SLACK_S,
            cwd=self.workdir,
            result_path=result_path,
            on_output=self._on_output,
        )
        return self._absorb(steps, outcome, argv)

    def _on_output(self, line: str) -> None:
        if not line.startswith("@@aotipre start "):
            return
        sid = line.split(" ", 2)[2].strip()
        op, _, rest = sid.partition(":")
        label = {
            "compile": f"compiling for {self.device}",
            "load": "loading",
            "run": "running",
            "eager": "running the ExportedProgram eagerly",
            "compare": "comparing outputs",
        }.get(op.split("#")[0])
        if op == "probe":
            symbol, _, kind = rest.partition(":")
            label = f"probing {symbol} at its {kind}"
        if label:
            self.say(label)

    def _absorb(
        self, steps: list[_Step], outcome: ProcessOutcome, argv: tuple[str, ...]
    ) -> set[str]:
        result = outcome.result or {}
        steps_done = result.get("steps")
        done: dict[str, Any] = steps_done if isinstance(steps_done, dict) else {}
        current = result.get("current") if isinstance(result.get("current"), dict) else None
        seen: set[str] = set()
        timings = 0.0
        first: StepRecord | None = None
        for step in steps:
            entry = done.get(step.id)
            if not isinstance(entry, dict):
                continue
            seen.add(step.id)
            status = entry.get("status")
            rec = StepRecord(
                id=step.id,
                op=step.op,
                status=status if status in ("ok", "skipped") else "error",
                duration_s=float(entry.get("duration_s") or 0.0),
                entry=entry,
                log=str(entry.get("log") or ""),
                argv=argv,
                env=self._shown_env(step.op),
            )
            timings += rec.duration_s
            first = first or rec
            self._store(rec)
        finished = bool(result.get("done") or result.get("stopped"))
        if not outcome.ok and not (finished and current is None):
            # (a death after the worker finished or stopped, e.g. in a CUDA teardown, belongs
            # to no step: the steps it did not reach stay pending for a fresh worker)
            victim = self._victim(steps, seen, current)
            if victim is not None:
                seen.add(victim.id)
                rec = self._died(victim, outcome, current, argv)
                timings += rec.duration_s
                first = first or rec
                self._store(rec)
        if first is not None:
            # worker start-up (interpreter, import torch): shown apart from the first step's time
            first.startup_s += max(0.0, outcome.duration_s - timings)
        return seen

    def _store(self, rec: StepRecord) -> None:
        if rec.id.startswith("load#"):
            if rec.status == "ok":
                return  # a reload for a fresh worker: only its failure is news
            rec = replace(rec, id="load")
        self.records[rec.id] = rec

    def _victim(
        self, steps: list[_Step], seen: set[str], current: dict[str, Any] | None
    ) -> _Step | None:
        if current is not None:
            for step in steps:
                if step.id == current.get("id"):
                    return step
        for step in steps:
            if step.id not in seen:
                return step
        return None

    def _died(
        self,
        step: _Step,
        outcome: ProcessOutcome,
        current: dict[str, Any] | None,
        argv: tuple[str, ...],
    ) -> StepRecord:
        log = ""
        log_path = current.get("log") if current and current.get("id") == step.id else None
        if isinstance(log_path, str) and os.path.isfile(log_path):
            with open(log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - 64 * 1024))
                log = f.read().decode("utf-8", errors="replace")
        if not log:
            log = outcome.stderr_tail
        started = current.get("started") if current else None
        duration = (
            max(0.0, time.time() - float(started)) if isinstance(started, (int, float)) else 0.0
        )
        entry: dict[str, Any] = {"phase": current.get("phase")} if current else {}
        base = StepRecord(
            id=step.id,
            op=step.op,
            status="worker_error",
            duration_s=min(duration, outcome.duration_s),
            entry=entry,
            log=log,
            argv=argv,
            env=self._shown_env(step.op),
        )
        if outcome.timed_out or (outcome.returncode == 1 and watchdog_fired(log)):
            limit = watchdog_fired(log)
            detail = f"no result after {limit}" if limit else outcome.summary
            return replace(base, status="timeout", detail=detail)
        if outcome.crashed:
            return replace(base, status="crash", signal=outcome.signal_name, detail=outcome.summary)
        if outcome.interrupted:
            return replace(base, detail="interrupted")
        detail = outcome.summary
        if outcome.result_error and not outcome.result:
            detail = f"{detail}; {outcome.result_error}"
        tail = outcome.stderr_tail.strip().splitlines()[-3:]
        if tail:
            detail += " | " + " | ".join(line.strip() for line in tail)
        return replace(base, detail=detail)

    def _commit_compile(self) -> None:
        assert self.pending_cache is not None and self.cache is not None
        rec = self.records["compile"]
        try:
            entry = self.cache.commit(
                self.pending_cache,
                {
                    "source": os.path.abspath(self.package.path),
                    "model": self.model.name,
                    "device": self.device,
                    "torch": cache_mod.torch_version(),
                    "compile_s": round(rec.duration_s, 3),
                },
            )
        except OSError as exc:
            self.compile_note = f"compiled, but the cache entry could not be written: {exc}"
            return
        finally:
            self.pending_cache = None
        self.aoti_package = entry.package

    # -- results

    def _results(self, need_compile: bool) -> list[StageResult]:
        return [
            self._compile_stage(need_compile),
            self._load_stage(),
            self._run_stage(),
            self._compare_stage(),
            self._probe_stage(),
        ]

    def _all_skipped(self, why: str, *, error: bool = False) -> list[StageResult]:
        status = StageStatus.ERROR if error else StageStatus.SKIPPED
        return [StageResult(n, status, detail=why, model=self.model.name) for n in STAGES]

    def _stage(
        self, name: str, status: StageStatus, detail: str, recs: list[StepRecord]
    ) -> StageResult:
        env: dict[str, str] = {}
        command: tuple[str, ...] = ()
        for r in recs:
            env.update(r.env)
            command = command or r.argv
        startup = sum(r.startup_s for r in recs)
        if startup >= 0.005:
            detail += f" (+{startup:.2f}s worker start-up and import torch, not in the time)"
        return StageResult(
            name=name,
            status=status,
            duration_s=sum(r.duration_s for r in recs),
            detail=detail,
            model=self.model.name,
            env=env,
            command=command,
        )

    def _skipped(self, name: str, why: str) -> StageResult:
        return StageResult(name, StageStatus.SKIPPED, detail=why, model=self.model.name)

    def _upstream_reason(self) -> str:
        for name in ("compile", "load", "run"):
            r = self.records.get(name)
            if r is not None and not _ok(r):
                return f"the {name} stage did not succeed"
        return "a previous stage did not succeed"

    def _add(self, code: str, message: str, stage: str, **fields: Any) -> Finding:
        finding = codes.get(code).finding(message, model=self.model.name, stage=stage, **fields)
        self.findings.append(finding)
        return finding

    # compile

    def _compile_stage(self, need_compile: bool) -> StageResult:
        m = self.model
        if not need_compile:
            why = (
                f"the package has AOTI code for {self.device_type}"
                if m.has_aoti
                else "no ExportedProgram to compile"
            )
            return self._skipped("compile", why)
        r = self.records.get("compile")
        if r is None:
            return self._skipped("compile", "not reached")
        if _ok(r):
            return self._stage("compile", StageStatus.PASSED, r.detail or self.compile_note, [r])
        err = r.error
        fail = classify_compile_failure(
            exc_type=err.get("type"),
            message=err.get("message"),
            log=r.log,
            signal=r.signal,
            timed_out=r.status == "timeout",
        )
        where = f"compiling model '{m.name}' for {self.device}"
        if r.status == "timeout":
            self._add(
                "AOT503",
                f"{where} did not finish within {self.opts.compile_timeout_s:g} s",
                "compile",
                evidence=fail.evidence,
            )
        elif r.status == "crash":
            self._add(
                "AOT502",
                f"{where}: the compiler process was killed by {r.signal}",
                "compile",
                evidence=fail.evidence,
            )
        elif r.status == "worker_error":
            return self._stage("compile", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        else:
            kernel = f" (kernel {fail.kernel})" if fail.kernel else ""
            self._add(
                "AOT501",
                f"{where} failed{kernel}: {fail.summary}",
                "compile",
                evidence=fail.evidence,
            )
        return self._stage("compile", StageStatus.FAILED, fail.summary, [r])

    # load

    def _load_stage(self) -> StageResult:
        r = self.records.get("load")
        if r is None:
            return self._skipped("load", self._upstream_reason())
        m = self.model
        target = f"model '{self.aoti_model}' of {os.path.basename(self.aoti_package or '')}"
        if _ok(r):
            how = r.entry.get("how", "")
            detail = f"loaded {target} on {self.device}" + (f" ({how})" if how else "")
            if self.libstdcxx and self._preload_crash is not None:
                crash = self._preload_crash
                fail = classify_load_failure(log=crash.log, signal=crash.signal)
                self._add(
                    "AOT515",
                    f"loading {target} crashed with {crash.signal} in this environment and "
                    f"succeeded with LD_PRELOAD={self.libstdcxx}: a libstdc++ mismatch between "
                    "the toolchain that built the compiled code and this process's runtime (an "
                    "environment problem, not a model bug); the other stages ran with the preload"
                    + (
                        " (diagnosed on an earlier model of this check)"
                        if self._preload_earlier
                        else ""
                    ),
                    "load",
                    evidence=fail.evidence,
                )
                detail += f"; needed LD_PRELOAD={self.libstdcxx}"
                recs = [r] if self._preload_earlier else [crash, r]
                return self._stage("load", StageStatus.FAILED, detail, recs)
            return self._stage("load", StageStatus.PASSED, detail, [r])
        if r.status == "worker_error":
            return self._stage("load", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        err = r.error
        if err.get("type") == "InputsFailed":
            return self._stage("load", StageStatus.ERROR, err.get("message", ""), [r])
        fail = classify_load_failure(
            exc_type=err.get("type"),
            message=err.get("message"),
            log=r.log,
            signal=r.signal,
            timed_out=r.status == "timeout",
        )
        if r.status == "timeout":
            self._add(
                "AOT516",
                f"loading {target} did not finish within {self.opts.timeout_s:g} s",
                "load",
                evidence=fail.evidence,
            )
        elif r.status == "crash":
            self._add(
                "AOT514",
                f"the process was killed by {r.signal} while loading {target}"
                + (
                    " (preloading the system libstdc++ did not help)"
                    if self._preload_crash is not None
                    else ""
                ),
                "load",
                evidence=fail.evidence,
            )
        elif fail.kind == "wrong_device":
            self._add(
                "AOT511",
                f"loading {target} on {self.device} was refused: {fail.summary}",
                "load",
                evidence=fail.evidence,
                expected=m.device_type,
                actual=self.device,
            )
        elif fail.kind == "cuda_missing":
            self._add(
                "AOT512",
                f"{target} needs CUDA, and this torch cannot use it: {fail.summary}",
                "load",
                evidence=fail.evidence,
            )
        elif fail.kind == "model_not_found":
            self._add(
                "AOT513",
                f"the loader found no compiled code for model '{self.aoti_model}': {fail.summary}",
                "load",
                evidence=fail.evidence,
            )
        elif fail.kind == "abi":
            self._add(
                "AOT510",
                f"loading {target} failed: the compiled code does not match this "
                f"torch ({fail.summary})",
                "load",
                evidence=fail.evidence,
                hint="load it with the torch version that compiled it",
            )
        else:
            self._add(
                "AOT510", f"loading {target} failed: {fail.summary}", "load", evidence=fail.evidence
            )
        return self._stage("load", StageStatus.FAILED, fail.summary, [r])

    # run

    def _run_stage(self) -> StageResult:
        r = self.records.get("run")
        if r is None:
            return self._skipped("run", self._upstream_reason())
        detail_inputs = self.inputs_note
        if _ok(r):
            outputs = r.entry.get("outputs") or []
            self._nan_findings(outputs, "run")
            shapes = ", ".join(_describe(o) for o in outputs)
            return self._stage("run", StageStatus.PASSED, f"{detail_inputs}; outputs {shapes}", [r])
        if r.status == "worker_error":
            return self._stage("run", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        err = r.error
        if err.get("type") == "InputsFailed":
            return self._stage(
                "run",
                StageStatus.ERROR,
                f"the inputs could not be loaded: {err.get('message')}",
                [r],
            )
        fail = classify_run_failure(
            exc_type=err.get("type"),
            message=err.get("message"),
            log=r.log,
            signal=r.signal,
            timed_out=r.status == "timeout",
        )
        note = ""
        if fail.kind != "input_check" and self.records.get("eager") is not None:
            note = f" ({self._eager_note()})"
        before = len(self.findings)
        self._run_failure_findings(fail, r, "run", "running the model", note)
        if self.on_run_crash is not None and fail.kind not in ("input_check", "timeout"):
            self.on_run_crash(self._run_crash(r, fail, self.findings[before:]))
        return self._stage("run", StageStatus.FAILED, f"{detail_inputs}; {fail.summary}", [r])

    def _run_crash(self, r: StepRecord, fail: Failure, findings: list[Finding]) -> RunCrash:
        eager = self.records.get("eager")
        state = "not run" if eager is None else ("ok" if _ok(eager) else "failed")
        err = eager.error if eager is not None else {}
        return RunCrash(
            package=self.package,
            model=self.model,
            aoti_package=self.aoti_package or os.path.abspath(self.package.path),
            aoti_model=self.aoti_model,
            compiled_with=dict(self.opts.inductor_configs) if "compile" in self.records else None,
            device=self.device,
            inputs=self._inputs_spec,
            inputs_note=self.inputs_note,
            record=r,
            failure=fail,
            findings=tuple(findings),
            env={**self.opts.extra_env, **self.extra_env},
            options=self.opts,
            eager=state,
            eager_error=f"{err.get('type')}: {_first(err.get('message'))}" if err else "",
            host=_host_traits(self.device_type),
        )

    def _eager_note(self) -> str:
        """What the ExportedProgram did on the same inputs, for a failed compiled run."""
        eager = self.records.get("eager")
        if eager is None:
            return "the ExportedProgram was not run"
        if _ok(eager):
            return (
                "the ExportedProgram run eagerly on the same inputs succeeds: the failure is "
                "specific to the compiled code"
            )
        err = eager.error
        if eager.status == "error" and eager.entry.get("phase") == "call":
            return (
                "the ExportedProgram run eagerly fails on these inputs too "
                f"({err.get('type')}: {_first(err.get('message'))}): the inputs are likely "
                "invalid for the model"
            )
        return "the ExportedProgram could not be run eagerly"

    def _run_failure_findings(
        self, fail: Failure, r: StepRecord, stage: str, doing: str, note: str = ""
    ) -> None:
        m = self.model
        kernel = f" in kernel {fail.kernel}" if fail.kernel else ""
        if fail.kind == "timeout":
            self._add(
                "AOT606",
                f"{doing} did not finish within {self.opts.timeout_s:g} s{kernel}",
                stage,
                evidence=fail.evidence,
            )
        elif fail.kind in ("segfault", "abort", "killed", "illegal_instruction", "signal"):
            if m.aoti is not None and m.aoti.weights_on_disk and self.aoti_model == m.name:
                self._add(
                    "AOT607",
                    f"{doing} crashed ({r.signal}) because the package keeps its weights on "
                    "disk (data/aotinductor/"
                    f"{m.name}/weights_config.json) and aoti_load_package does not load them: "
                    "the compiled code read constants that were never set",
                    stage,
                    evidence=fail.evidence,
                )
            elif fail.kind == "abort":
                self._add(
                    "AOT603",
                    f"{doing} aborted (SIGABRT){kernel}: {fail.summary}{note}",
                    stage,
                    evidence=fail.evidence,
                )
            elif fail.kind == "segfault":
                self._add(
                    "AOT604",
                    f"{doing} crashed with {r.signal}{kernel}{note}",
                    stage,
                    evidence=fail.evidence,
                )
            else:
                self._add(
                    "AOT605",
                    f"{doing} was killed by {r.signal}{kernel}",
                    stage,
                    evidence=fail.evidence,
                )
        elif fail.kind == "input_check":
            guards = [c for c in fail.checks if c.kind == "size_stride"]
            for check in fail.checks:
                if check.kind != "size_stride":
                    self._check_finding(check, stage, fail.evidence)
            if guards:
                self._size_stride_finding(guards, stage, fail.evidence)
        elif fail.kind == "device_fault":
            self._add(
                "AOT608",
                f"{doing} hit a CUDA fault{kernel}: {fail.summary}{note}",
                stage,
                evidence=fail.evidence,
            )
        else:
            self._add(
                "AOT602",
                f"{doing} raised{kernel}: {fail.summary}{note}",
                stage,
                evidence=fail.evidence,
            )

    def _check_finding(self, check: InputCheck, stage: str, evidence: tuple[str, ...]) -> None:
        spec = _tensor_input(self.model, check.tensor_index)
        name = (
            spec.name
            if spec is not None
            else (f"tensor input {check.tensor_index}" if check.tensor_index is not None else None)
        )
        where = f"input '{name}'" if name else "an input"
        fields: dict[str, Any] = {
            "input": name,
            "position": spec.position if spec is not None else None,
            "dim": check.dim,
            "expected": check.expected,
            "actual": check.actual,
            "evidence": evidence or (check.line,),
        }
        kind = check.kind
        rejected = "the runtime input check rejected"
        if kind == "dtype":
            self._add(
                "AOT201",
                f"{rejected} {where}: dtype {check.actual}, compiled for {check.expected}",
                stage,
                **fields,
            )
        elif kind == "device":
            self._add(
                "AOT202",
                f"{rejected} {where}: on {check.actual}, compiled for {check.expected}",
                stage,
                **fields,
            )
        elif kind == "static_dim":
            self._add(
                "AOT302",
                f"{rejected} {where}: dim {check.dim} is {check.actual}, compiled "
                f"as {check.expected}",
                stage,
                **fields,
            )
        elif kind == "dim_too_small":
            self._add(
                "AOT303",
                f"{rejected} {where}: dim {check.dim} is {check.actual}, below the "
                f"minimum {check.expected}",
                stage,
                **fields,
            )
        elif kind == "dim_too_large":
            self._add(
                "AOT304",
                f"{rejected} {where}: dim {check.dim} is {check.actual}, above the "
                f"maximum {check.expected}",
                stage,
                **fields,
            )
        elif kind == "stride":
            self._add(
                "AOT307",
                f"{rejected} {where}: stride {check.actual} at dim {check.dim}, "
                f"compiled for {check.expected}",
                stage,
                **fields,
            )
        elif kind == "input_count":
            fields.update(input=None, position=None, dim=None)
            self._add(
                "AOT101",
                f"the compiled model takes {check.expected} tensor inputs, it was "
                f"given {check.actual}",
                stage,
                **fields,
            )
        elif kind == "kwargs":
            fields.update(input=None, position=None, dim=None)
            self._add(
                "AOT103",
                f"keyword arguments {check.actual} were given, the model expects {check.expected}",
                stage,
                **fields,
            )
        else:  # size_stride guards are reported together by _size_stride_finding
            return

    def _size_stride_finding(
        self, guards: list[InputCheck], stage: str, evidence: tuple[str, ...]
    ) -> None:
        parts = []
        for g in guards:
            exp, act = g.expected, g.actual
            if exp["size"] != act["size"]:
                parts.append(f"dim {g.dim} has size {act['size']}, expected {exp['size']}")
            if exp["stride"] != act["stride"]:
                parts.append(f"dim {g.dim} has stride {act['stride']}, expected {exp['stride']}")
        self._add(
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

    def _nan_findings(self, outputs: list[dict[str, Any]], stage: str) -> None:
        eager = self.records.get("eager")
        eager_outs = (eager.entry.get("outputs") or []) if eager is not None and _ok(eager) else []
        for i, o in enumerate(outputs):
            nan, inf = int(o.get("nan") or 0), int(o.get("inf") or 0)
            if not nan and not inf:
                continue
            ref = eager_outs[i] if i < len(eager_outs) else {}
            also = bool(ref.get("nan") or ref.get("inf"))
            what = " and ".join(
                x for x in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if x
            )
            msg = f"output {i} ({_describe(o)}) of the compiled model holds {what}"
            if also:
                msg += "; the ExportedProgram run eagerly produces them too"
            self._add(
                "AOT702",
                msg,
                stage,
                severity=Severity.WARNING if also else Severity.ERROR,
                expected=0,
                actual=nan + inf,
            )

    # compare

    def _compare_stage(self) -> StageResult:
        m = self.model
        if not m.has_exported_program:
            return self._skipped("compare", "the archive holds no ExportedProgram to compare with")
        eager, cmp = self.records.get("eager"), self.records.get("compare")
        run = self.records.get("run")
        if run is None or not _ok(run):
            why = self._upstream_reason()
            if eager is not None:
                why += f"; {self._eager_note()}"
            return self._skipped("compare", why)
        if eager is None:
            return self._skipped("compare", self._upstream_reason())
        if not _ok(eager):
            err = eager.error
            if eager.status == "worker_error":
                return self._stage(
                    "compare", StageStatus.ERROR, f"worker failed: {eager.detail}", [eager]
                )
            if eager.entry.get("phase") == "load_exported_program":
                self._add(
                    "AOT517",
                    f"the ExportedProgram of model '{m.name}' cannot be loaded by "
                    f"this torch: {err.get('type')}: {_first(err.get('message'))}",
                    "compare",
                    evidence=_evidence(err, eager.log),
                )
                return self._stage(
                    "compare",
                    StageStatus.SKIPPED,
                    "the ExportedProgram could not be loaded",
                    [eager],
                )
            fail = classify_run_failure(
                exc_type=err.get("type"),
                message=err.get("message"),
                log=eager.log,
                signal=eager.signal,
                timed_out=eager.status == "timeout",
            )
            self._add(
                "AOT704",
                f"running the ExportedProgram eagerly on the same inputs failed: {fail.summary}",
                "compare",
                evidence=fail.evidence,
            )
            return self._stage("compare", StageStatus.FAILED, fail.summary, [eager])
        if cmp is None:
            return self._skipped("compare", self._upstream_reason())
        if not _ok(cmp):
            err = cmp.error
            return self._stage(
                "compare",
                StageStatus.ERROR,
                f"comparison failed: {err.get('message') or cmp.detail}",
                [eager, cmp],
            )
        found = self._compare_findings(cmp.entry, "compare")
        n = len(cmp.entry.get("outputs") or [])
        if found:
            return self._stage("compare", StageStatus.FAILED, found, [eager, cmp])
        tol = _tolerance_text(cmp.entry)
        return self._stage(
            "compare",
            StageStatus.PASSED,
            f"{n} output(s) match the ExportedProgram run eagerly{tol}",
            [eager, cmp],
        )

    def _compare_findings(
        self, entry: dict[str, Any], stage: str, probe: ProbeCase | None = None
    ) -> str:
        """Findings for one comparison record; returns a one-line summary ('' when clean)."""
        at = f" at {_probe_label(self.model, probe)}" if probe is not None else ""
        extra: dict[str, Any] = {}
        if probe is not None and probe.dims:
            spec = _tensor_input(self.model, probe.dims[0][0])
            extra = {"input": spec.name if spec else None, "dim": probe.dims[0][1]}
        if entry.get("structure"):
            self._add("AOT703", f"{entry['structure']}{at}", stage, **extra)
            return str(entry["structure"])
        summaries = []
        for o in entry.get("outputs") or []:
            i = o.get("index")
            if o.get("structure"):
                msg = (
                    f"output {i}{at}: the compiled model returns {o.get('dtype')}"
                    f"{o.get('shape')}, the ExportedProgram {o.get('eager_dtype')}"
                    f"{o.get('eager_shape')}"
                )
                self._add(
                    "AOT703",
                    msg,
                    stage,
                    expected=f"{o.get('eager_dtype')}{o.get('eager_shape')}",
                    actual=f"{o.get('dtype')}{o.get('shape')}",
                    **extra,
                )
                summaries.append(msg)
                continue
            if o.get("kind") == "value":
                if not o.get("equal"):
                    msg = f"output {i}{at}: {o.get('aoti')} differs from eager {o.get('eager')}"
                    self._add(
                        "AOT701", msg, stage, expected=o.get("eager"), actual=o.get("aoti"), **extra
                    )
                    summaries.append(msg)
                continue
            mism = int(o.get("mismatches") or 0)
            if not mism:
                continue
            numel = o.get("numel")
            parts = [
                f"{mism} of {numel} elements differ beyond rtol={o.get('rtol'):g}, "
                f"atol={o.get('atol'):g}"
                if o.get("rtol") is not None
                else f"{mism} of {numel} elements differ"
            ]
            if o.get("max_abs") is not None:
                parts.append(f"max abs error {o['max_abs']:.3g}")
            if o.get("max_rel") is not None:
                parts.append(f"max rel error {o['max_rel']:.3g}")
            if o.get("worst_index") is not None:
                parts.append(
                    f"worst at {tuple(o['worst_index'])}: {o.get('worst_aoti'):.6g} vs "
                    f"eager {o.get('worst_eager'):.6g}"
                )
            msg = f"output {i} ({o.get('dtype')}{o.get('shape')}){at}: " + "; ".join(parts)
            self._add(
                "AOT701",
                msg,
                stage,
                expected=o.get("worst_eager"),
                actual=o.get("worst_aoti"),
                **extra,
            )
            summaries.append(msg)
        return summaries[0] if summaries else ""

    # probe

    def _probe_stage(self) -> StageResult:
        if not self.opts.probe:
            return self._skipped("probe", "probing is off")
        plan = self.probe_plan
        if plan is None or not plan.cases:
            why = self.probe_note or "; ".join(plan.notes if plan else ()) or "nothing to probe"
            return self._skipped("probe", why)
        run = self.records.get("run")
        if run is None or not _ok(run):
            return self._skipped(
                "probe",
                f"{self._upstream_reason()} (probe inputs are derived from the sample inputs)",
            )
        recs = [
            self.records[c.id]
            for c in plan.cases
            if c.id in self.records and self.records[c.id].status != "skipped"
        ]
        if not recs:
            return self._skipped("probe", self._upstream_reason())
        before = len(self.findings)
        parts = []
        for case in plan.cases:
            r = self.records.get(case.id)
            if r is None:
                parts.append(f"{case.symbol}={case.value} not run")
                continue
            parts.append(self._probe_case(case, r))
        errors = [r for r in recs if r.status == "worker_error"]
        status = StageStatus.PASSED
        if any(f.severity is Severity.ERROR for f in self.findings[before:]):
            status = StageStatus.FAILED
        elif errors:
            status = StageStatus.ERROR
        detail = "; ".join(parts)
        if plan.notes:
            detail += " (" + "; ".join(plan.notes) + ")"
        return self._stage("probe", status, detail, recs)

    def _declared_range(self, symbol: str) -> tuple[int | None, int | None]:
        rng = self.model.symbol(symbol)
        return (rng.min, rng.max) if rng is not None else (None, None)

    def _probe_case(self, case: ProbeCase, r: StepRecord) -> str:
        m = self.model
        label = _probe_label(m, case)
        spec = _tensor_input(m, case.dims[0][0]) if case.dims else None
        subject: dict[str, Any] = {
            "input": spec.name if spec else None,
            "position": spec.position if spec else None,
            "dim": case.dims[0][1] if case.dims else None,
        }
        if r.status == "worker_error":
            return f"{label}: worker failed ({r.detail})"
        err = r.entry.get("aoti_error") or r.error
        if case.kind == "over":
            outcome = r.entry.get("outcome")
            if r.status == "ok" and outcome == "accepted":
                self._add(
                    "AOT611",
                    f"{label}, one above the maximum {case.bound}, ran without being rejected",
                    "probe",
                    expected=f"<= {case.bound}",
                    actual=case.value,
                    **subject,
                )
                return f"{label}: accepted (not rejected)"
            if r.status == "error" or (r.status == "ok" and outcome == "rejected"):
                fail = classify_run_failure(
                    exc_type=err.get("type"), message=err.get("message"), log=r.log
                )
                if fail.kind == "input_check":
                    return f"{label}: rejected by the runtime check"
            if r.status == "ok" and outcome == "rejected":
                self._add(
                    "AOT612",
                    f"{label}, one above the maximum {case.bound}, failed inside "
                    f"the model instead of being rejected by the input check: {fail.summary}",
                    "probe",
                    severity=Severity.WARNING,
                    evidence=fail.evidence,
                    **subject,
                )
                return f"{label}: failed unclean"
            fail = classify_run_failure(
                exc_type=err.get("type"),
                message=err.get("message"),
                log=r.log,
                signal=r.signal,
                timed_out=r.status == "timeout",
            )
            what = (
                f"crashed ({r.signal})"
                if r.status == "crash"
                else ("timed out" if r.status == "timeout" else f"failed: {fail.summary}")
            )
            self._add(
                "AOT612",
                f"{label}, one above the maximum {case.bound}, {what} instead of "
                "being rejected by the input check",
                "probe",
                evidence=fail.evidence,
                **subject,
            )
            return f"{label}: {what}"
        capped = f" (capped from {case.bound} by the probe budget)" if case.capped else ""
        if r.status != "ok":
            fail = classify_run_failure(
                exc_type=err.get("type"),
                message=err.get("message"),
                log=r.log,
                signal=r.signal,
                timed_out=r.status == "timeout",
            )
            what = (
                f"crashed ({r.signal})"
                if r.status == "crash"
                else ("timed out" if r.status == "timeout" else f"failed: {fail.summary}")
            )
            kernel = f" in kernel {fail.kernel}" if fail.kernel else ""
            lo, hi = self._declared_range(case.symbol)
            severity = None
            if fail.kind == "input_check" and r.status == "error":
                # The compiled code accepts a narrower range than declared: a contract problem
                # (inputs in between are rejected under the runtime check), not a broken model.
                severity = Severity.WARNING
                what = (
                    f"is rejected by the compiled model's runtime check ({fail.summary}), "
                    "although the declared range allows it"
                )
                small = next((c for c in fail.checks if c.kind == "dim_too_small"), None)
                if small is not None and case.value <= 1 and small.expected == 2:
                    what += (
                        "; AOTInductor specializes dynamic sizes 0 and 1 away, so size "
                        f"{case.value} is refused whenever AOTI_RUNTIME_CHECK_INPUTS=1"
                    )
            self._add(
                "AOT610",
                f"{label}{capped}, the {case.kind}imum of the declared range "
                f"[{lo}, {hi}], {what}{kernel}",
                "probe",
                evidence=fail.evidence,
                expected=f"runs for {lo} <= {case.symbol} <= {hi}",
                actual=f"{case.symbol}={case.value}: {fail.summary}",
                **({"severity": severity} if severity else {}),
                **subject,
            )
            return f"{label}: {what}"
        cmp = r.entry.get("compare")
        if isinstance(cmp, dict):
            found = self._compare_findings(cmp, "probe", case)
            if found:
                return f"{label}: outputs differ from eager"
        if r.entry.get("eager_error"):
            e = r.entry["eager_error"]
            return f"{label}{capped}: ran (eager failed: {e.get('type')})"
        return f"{label}{capped}: ok"


# --------------------------------------------------------------------------------------------
# Helpers


def _ok(rec: StepRecord | None) -> bool:
    return rec is not None and rec.status == "ok"


def _first(text: Any) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _evidence(err: dict[str, Any], log: str) -> tuple[str, ...]:
    from aotipre.runner.classify import decisive_lines

    return tuple(decisive_lines(str(err.get("message") or ""), log))


def _describe(o: dict[str, Any]) -> str:
    if o.get("kind") != "tensor":
        return str(o.get("kind"))
    return f"{o.get('dtype')}[{', '.join(str(s) for s in o.get('shape') or [])}]"


def _tensor_input(model: ModelInfo, index: int | None) -> InputSpec | None:
    if index is None:
        return None
    return next((i for i in model.tensor_inputs if i.tensor_index == index), None)


def _symbol_label(model: ModelInfo, symbol: str) -> str:
    rng = model.symbol(symbol)
    return f"{rng.name} ({symbol})" if rng is not None and rng.name else symbol


def _probe_label(model: ModelInfo, case: ProbeCase | None) -> str:
    if case is None:
        return ""
    dims = ", ".join(
        f"{spec.name} dim {d}"
        for t, d in case.dims
        if (spec := _tensor_input(model, t)) is not None
    )
    where = f" [{dims}]" if dims else ""
    return f"{_symbol_label(model, case.symbol)}={case.value}{where}"


def _tolerance_text(entry: dict[str, Any]) -> str:
    tols = {
        (o.get("dtype"), o.get("rtol"), o.get("atol"))
        for o in entry.get("outputs") or []
        if o.get("rtol") is not None
    }
    if not tols:
        return ""
    return " (" + ", ".join(f"{d}: rtol={r:g}, atol={a:g}" for d, r, a in sorted(tols)) + ")"


def _inputs_digest(inputs: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    if inputs.get("kind") == "file":
        with open(inputs["path"], "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    else:
        digest.update(json.dumps(inputs, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _host_traits(device_type: str) -> dict[str, Any]:
    """What of this host changes the generated code: the CPU's ISA (cpu code is built with
    -march=native), the GPUs' compute capability (cuda)."""
    traits: dict[str, Any] = {"machine": platform.machine(), "system": platform.system()}
    from aotipre.host import detect_local

    try:
        host = detect_local(probe_cuda=device_type == "cuda")
    except Exception:  # host detection is a cache-key refinement, never a reason to fail
        return traits
    traits["cpu_isa"] = sorted(host.cpu_isa) if host.cpu_isa is not None else None
    if device_type == "cuda":
        traits["compute_capabilities"] = list(host.compute_capabilities)
    return traits


def find_system_libstdcxx() -> str | None:
    """The libstdc++ to preload after a load crash: the one of the C++ compiler AOTI builds with
    (what the compiled .so was linked against), else the first system one that exists."""
    from aotipre.doctor.toolchain import compiler_libstdcxx

    lib = compiler_libstdcxx()
    if lib is not None:
        return lib
    for path in SYSTEM_LIBSTDCXX:
        if os.path.isfile(path):
            return path
    return None
