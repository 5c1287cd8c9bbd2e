"""The thin session of one model's dynamic stages: the shared state (package, archive, inputs,
device, records, findings), the stages' interface, and the worker loop that runs their steps.

How the work is split into processes (wall time matters: `import torch` alone costs ~1.5 s):

- One worker runs every planned step in order: [compile], load, run, [eager, compare],
  [probe ...]. Outputs go through torch.save files in a private temporary folder, so any later
  worker can pick up where a dead one stopped.
- When a worker dies (signal, per-step watchdog, backstop timeout) the step it was running is
  classified from its own log (stages/jobs.py); the remaining steps that still make sense run
  in a fresh worker that loads the model again. A compile or load failure ends the model's
  run; a crashed run skips compare and probes; a crashed probe only moves the other probes to a
  fresh worker.
- On CUDA a worker also stops by itself after an unexpected error in a model call, because a
  device fault poisons the CUDA context for the rest of the process.
- A load that dies by SIGSEGV is retried once with a libstdc++ preloaded (stages/libstdcxx.py).
- torch's CPU-ISA probe (seconds to most of a minute per process, the same answer each time)
  runs once per host: every worker is handed the host's recorded answer, or the first load's
  (runner/loadcost.py); the perf stage still reports what it costs a fresh process. Without a
  record, the probe and the loader's imports are measured in a process of their own started
  beside the first worker (runner/loadmeasure.py), which loads as on a recorded host.
"""

from __future__ import annotations

import os
import shutil
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from aotipre.findings import Finding, StageResult, StageStatus, codes
from aotipre.foundation import tempdirs
from aotipre.foundation.errors import InputsError, PackageError
from aotipre.inputs.meta import SampleInputs
from aotipre.inputs.weights import WeightsFile
from aotipre.pt2.archive import Archive, open_archive
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.runner import launch, loadcost, loadmeasure, prewarm
from aotipre.runner.reference import expected_outputs_for, exported_program_for
from aotipre.runner.stages import jobs
from aotipre.runner.stages.base import PlannedStep, RunCrash, StepRecord, ok
from aotipre.runner.stages.devicegate import refuse_device
from aotipre.runner.stages.inputs import WorkerInputs, plan_inputs
from aotipre.runner.stages.libstdcxx import LibstdcxxRetry
from aotipre.runner.stages.options import DynamicOptions, parse_device
from aotipre.runner.stages.stagelines import StageLines
from aotipre.runner.synth import PlanError

if TYPE_CHECKING:
    from aotipre.pt2.reader import OpenPackage
    from aotipre.runner.perf import PerfRecord
    from aotipre.runner.prewarm import Prewarmed

_ENV_SHOWN = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "LD_PRELOAD", "OMP_NUM_THREADS")
_MODEL_CALLS = ("run", "probe", "load", "eager")
"""Worker operations that call into the compiled or exported model (they get RUNTIME_CHECK_ENV)."""


class Stage(ABC):
    """One dynamic stage: the worker steps it needs, and what their records mean.

    A stage plans its steps from the session's shared state (`plan`, in pipeline order, before
    any worker runs), may act between workers (`after_job`), turns the records of its steps into
    one StageResult plus findings (`result`, in pipeline order, after the last worker), and
    releases what it holds (`cleanup`). Adding a stage is one new module with a Stage subclass,
    listed in aotipre/runner/stages/__init__.py.
    """

    name: ClassVar[str]
    """The stage's name in StageResult.name and Finding.stage."""
    labels: ClassVar[dict[str, str]] = {}
    """Progress text per worker step id (before any `#` or `:`); `{device}` is filled in."""

    def plan(self, session: Session) -> list[PlannedStep]:
        return []

    def progress(self, session: Session, op: str, rest: str) -> str | None:
        """The progress line for a step of this stage that starts (`op:rest` is its id)."""
        label = self.labels.get(op.split("#")[0])
        return label.format(device=session.device) if label else None

    def after_job(self, session: Session) -> None:
        """Called after each worker exits."""
        return None

    @abstractmethod
    def result(self, session: Session) -> StageResult: ...

    def cleanup(self, session: Session) -> None:
        """Called once the model's stages are done, whatever happened."""
        return None


class Session:
    """One model's dynamic stages: the shared state, the stages in order, the worker loop."""

    def __init__(
        self,
        stages: Sequence[Stage],
        package: PackageInfo,
        model: ModelInfo,
        inputs_path: str | None,
        inputs_member: str | None,
        options: DynamicOptions,
        progress: Callable[[str], None] | None,
        *,
        archive: Archive | None = None,
        sample: SampleInputs | None = None,
        weights: WeightsFile | None = None,
        baseline: OpenPackage | None = None,
    ) -> None:
        self.stages = tuple(stages)
        self.package = package
        self.model = model
        self.inputs_path = inputs_path
        self.inputs_member = inputs_member
        self.sample = sample
        """The sample inputs already read (from `inputs_path` or `inputs_member`), if any."""
        self.weights = weights
        """options.weights already read (the static check's read), if any."""
        self.opts = options
        self.progress = progress
        self.on_run_crash: Callable[[RunCrash], None] | None = None
        self.on_mismatch: Callable[[Any], None] | None = None
        """Called by the compare stage with a mismatch.OutputMismatch (accuracy triage)."""
        self.on_perf: Callable[[PerfRecord, PerfRecord | None], None] | None = None
        """Called by the perf stage with the model's record (and the --against baseline's)."""
        self.device = options.device or model.device_type or "cpu"
        self.device_type, self.device_index = parse_device(self.device)
        self.workdir = tempdirs.make_dir("aotipre-")
        self.records: dict[str, StepRecord] = {}
        self.findings: list[Finding] = []
        self.extra_env: dict[str, str] = {}
        self.jobs = 0
        self.inputs = WorkerInputs({}, {}, "")
        self.aoti_package: str | None = None
        """The package the workers load: the archive, a compile-cache entry or a fresh compile."""
        self.aoti_model = model.name
        self.direct_load = True
        """The load stage may load with the C++ loader alone when the host's record allows it
        (False: an --against side that must be loaded by load_package, like the other side)."""
        self.need_compile = False
        """The ExportedProgram is compiled for this device (set by the compile stage's plan)."""
        self.compile_rerun: StepRecord | None = None
        """A compile that faulted on CUDA, run again with synchronous launches (and under
        compute-sanitizer when asked): set by the compile stage (stages/compile_fault.py)."""
        self.reference = exported_program_for(options.exported_program, package, model)
        """The ExportedProgram run eagerly as the reference (compare, probe), or why none."""
        self.expected = expected_outputs_for(options.expected, model)
        """Golden outputs compare checks the compiled outputs against, if any."""
        self._archive = archive
        self._own_archive = False
        self.baseline = baseline
        """The --against package as the caller opened it (open while the caller's check runs),
        read by the perf stage instead of opening it again; None: it reads the path itself."""
        self.libstdcxx = LibstdcxxRetry(
            launch.worker_key(options.python, options.worker_command), self.extra_env
        )
        self.lines = StageLines(self.say, self.records)
        """Each stage's start and end line (progress), from the worker's step markers."""
        self.prewarmed: tuple[Prewarmed, ...] = ()
        """Crash triage's first workers, started beside the first worker that runs the model on
        CUDA (runner/prewarm.py); stopped at cleanup unless triage claimed them."""
        self.probe = loadcost.HandOver(
            cache_dir=options.cache_dir,
            use_cache=options.use_cache,
            python=options.python,
            worker_command=options.worker_command,
            costs=options.perf is not None,
        )
        """torch's CPU-ISA probe: the host's record, else the first load's answer, handed to
        every worker (runner/loadcost.py)."""

    # -- shared state

    @property
    def archive(self) -> Archive:
        """The package's open archive: the caller's, else opened here once."""
        if self._archive is None:
            self._archive = open_archive(self.package.path)
            self._own_archive = True
        return self._archive

    @property
    def callers_archive(self) -> Archive | None:
        """The archive the caller passed in (open for as long as the caller's check runs; the
        session's own is closed when the session ends, so it is never handed on)."""
        return None if self._own_archive else self._archive

    def cleanup(self) -> None:
        self.probe.stop()
        for warm in self.prewarmed:
            warm.stop()
        for stage in self.stages:
            stage.cleanup(self)
        if self._own_archive and self._archive is not None:
            self._archive.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.model.name}: {text}")

    def add(self, code: str, message: str, stage: str, **fields: Any) -> Finding:
        finding = codes.get(code).finding(message, model=self.model.name, stage=stage, **fields)
        self.findings.append(finding)
        return finding

    def stage(
        self, name: str, status: StageStatus, detail: str, recs: list[StepRecord]
    ) -> StageResult:
        """A stage's result from the records of its steps (their env, command and durations)."""
        env: dict[str, str] = {}
        command: tuple[str, ...] = ()
        for r in recs:
            env.update(r.env)
            command = command or r.argv
        processes = tuple(dict.fromkeys(r.process for r in recs if r.process))
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
            processes=processes,
        )

    def skipped(self, name: str, why: str) -> StageResult:
        return StageResult(name, StageStatus.SKIPPED, detail=why, model=self.model.name)

    def upstream_reason(self) -> str:
        for name in ("compile", "load", "run"):
            r = self.records.get(name)
            if r is not None and not ok(r):
                return f"the {name} stage did not succeed"
        return "a previous stage did not succeed"

    # -- the pipeline

    def execute(self) -> tuple[list[StageResult], list[Finding]]:
        results, findings = self._execute()
        self.lines.results(results)  # a line for each stage that started no worker step
        return results, findings

    def _execute(self) -> tuple[list[StageResult], list[Finding]]:
        m = self.model
        if not m.has_aoti and not m.has_exported_program:
            return self._all_skipped("the model has neither AOTI code nor an ExportedProgram"), []
        refused = self._pickle_refusal()
        if refused is not None:
            return self._all_skipped(refused), self.findings
        refusal = refuse_device(
            m,
            self.device,
            self.device_type,
            check_host=self.opts.worker_command is None and self.opts.python is None,
        )
        if refusal is not None:
            self.add(
                refusal.code,
                refusal.message,
                "load",
                hint=refusal.hint,
                expected=refusal.expected,
                actual=refusal.actual,
            )
            return self._all_skipped(f"not run on {self.device}: {refusal.short}"), self.findings
        try:
            self.inputs = plan_inputs(
                self.package,
                self.model,
                inputs_path=self.inputs_path,
                inputs_member=self.inputs_member,
                sample=self.sample,
                archive=lambda: self.archive,
                seed=self.opts.seed,
            )
        except (PlanError, InputsError) as exc:
            return self._all_skipped(f"no inputs to run with: {exc}", error=True), []
        planned = [(stage, stage.plan(self)) for stage in self.stages]
        for stage, mine in planned:
            self.lines.plan(stage.name, mine)
        steps = [step for _, mine in planned for step in mine]
        self.lines.launch(steps)
        self._loop(steps)
        self.lines.close()
        results = [stage.result(self) for stage in self.stages]
        return self._unreported(planned, results), self.findings

    def _unreported(
        self, planned: list[tuple[Stage, list[PlannedStep]]], results: list[StageResult]
    ) -> list[StageResult]:
        """`results`, with each skipped stage that could not run turned into an error: one of
        its steps has no record though nothing it needs failed (no worker reported on it, e.g.
        the workers ran out). A stage that did not run is never a pass, nor a plain skip."""
        unrun = [s for _, mine in planned for s in mine if s.id not in self.records]
        missing = {s.id for s in self._still_sensible(unrun)}
        out = []
        for (_, mine), result in zip(planned, results, strict=True):
            lost = [s.id for s in mine if s.id in missing]
            if lost and result.status is StageStatus.SKIPPED:
                result = replace(
                    result,
                    status=StageStatus.ERROR,
                    detail=f"could not run: no worker reported on step(s) {', '.join(lost)} "
                    f"({self.jobs} worker(s) ran)",
                )
            out.append(result)
        return out

    def _pickle_refusal(self) -> str | None:
        """Why no worker may load anything: the package, or the --exported-program reference
        the workers load too, holds members torch unpickles without restriction (the reader's
        scan, AOT081) and the user did not opt in (--allow-pickle). Each is said as AOT081."""
        if self.opts.allow_pickle:
            return None
        from aotipre.checks.package import pickle_findings
        from aotipre.pt2.reader import read_package

        sources = [(self.package, "the package", "")]
        ref = self.reference.path
        if ref is not None and os.path.abspath(ref) != os.path.abspath(self.package.path):
            try:
                label = f"the reference ExportedProgram {ref}"
                sources.append((read_package(ref), label, label))
            except PackageError:
                pass  # not a package aotipre reads: the stages that need it say so
        for package, subject, label in sources:
            found = pickle_findings(package, label=label)
            if not found:
                continue
            for finding in found:
                self.findings.append(replace(finding, model=self.model.name, stage="load"))
            count = sum(len(f.actual) if isinstance(f.actual, list) else 1 for f in found)
            return (
                f"not run because {subject} holds {count} member(s) that loading it unpickles "
                "without restriction (AOT081): pass --allow-pickle to load it if you trust it"
            )
        return None

    def _all_skipped(self, why: str, *, error: bool = False) -> list[StageResult]:
        status = StageStatus.ERROR if error else StageStatus.SKIPPED
        return [StageResult(s.name, status, detail=why, model=self.model.name) for s in self.stages]

    # -- the worker loop

    def _loop(self, steps: list[PlannedStep]) -> None:
        pending = list(steps)
        max_jobs = len(steps) + 3
        while pending and self.jobs < max_jobs:
            job_steps = pending
            if pending[0].op not in ("c_shims", "compile", "load"):  # c_shims: the EP only
                job_steps = [PlannedStep(f"load#{self.jobs}", "load", {"with_ep": False}), *pending]
            done_ids = self._run_job(job_steps).seen
            for stage in self.stages:
                stage.after_job(self)
            if self.libstdcxx.should_retry(self.records.get("load"), self.opts.extra_env, self.say):
                pending = [s for s in steps if s.op != "compile"]
                for s in pending:
                    self.records.pop(s.id, None)
                continue
            pending = [s for s in pending if s.id not in done_ids]
            pending = self._still_sensible(pending)
        self.libstdcxx.finish(self.records.get("load"))

    def _still_sensible(self, pending: list[PlannedStep]) -> list[PlannedStep]:
        """Drop the steps whose prerequisites failed; keep the rest for a fresh worker."""
        rec = self.records
        if any(r.op == "compile" and not ok(r) for r in rec.values()):
            return []
        loads = [r for r in rec.values() if r.op == "load"]
        if loads and not ok(loads[-1]):
            return []
        run = rec.get("run")
        if run is not None and run.status in ("crash", "timeout", "worker_error"):
            return []
        return [
            step
            for step in pending
            if not any(
                (r := rec.get(req)) is not None and not ok(r)
                for req in step.body.get("requires", ())
            )
        ]

    def run_followup(
        self, steps: list[PlannedStep], env: dict[str, str], prefix: tuple[str, ...] = ()
    ) -> list[StepRecord]:
        """One more worker over `steps`, with `env` added and `prefix` before its argv (a tool
        that runs it, e.g. compute-sanitizer): its records are returned, not stored."""
        return self._run_job(steps, env=env, prefix=prefix, store=False).records

    def _run_job(
        self,
        steps: list[PlannedStep],
        *,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
        store: bool = True,
    ) -> jobs.JobResult:
        """Run one worker over `steps` and store the records of the steps it finished or died
        in (their ids are the result's `seen`)."""
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
            "inputs": self.inputs.spec,
            "ep_package": self.reference.path,
            "ep_model": self.reference.model,
            "seed": self.opts.seed,
            "rtol": self.opts.rtol,
            "atol": self.opts.atol,
            # the compiled model's mutated buffers, put back before each compared call
            "mutated_buffers": list(self.model.mutated_buffers),
            "step_timeout_s": self.opts.timeout_s,
            "compile_timeout_s": self.opts.compile_timeout_s,
        }
        job_env = {**self._job_env(), **(env or {})}
        pinned = self.probe.pin(job_env, wait=any(s.op == "compile" for s in steps))
        if pinned is not None:
            job["vec_isa"] = pinned
        budget = launch.job_budget_s(
            ({"op": s.op, **s.body} for s in steps),
            self.opts.timeout_s,
            self.opts.compile_timeout_s,
        )
        if store and any(s.op == "run" for s in steps):
            self._prewarm_rerun(budget)
        argv_for = self._forked(steps, job_env, prefix) or (
            lambda path: (
                *prefix,
                *launch.worker_argv(self.opts.python, self.opts.worker_command, path),
            )
        )
        done = jobs.run_job(
            job,
            steps,
            workdir=self.workdir,
            argv_for=argv_for,
            env=job_env,
            budget_s=budget,
            shown_env=lambda op: {**self._shown_env(op), **(env or {})},
            on_output=self._on_output,
            warm=prewarm.take_first(argv_for, job_env, budget) if self.jobs == 1 else None,
        )
        if done.records:
            # worker start-up (interpreter, import torch): shown apart from the first step's time
            done.records[0].startup_s += done.startup_s
        for rec in done.records:
            if rec.op == "load" and rec.status == "ok":
                self.probe.learn(rec.entry)
        for rec in done.records if store else ():
            self._store(rec)
        return done

    def _forked(
        self, steps: list[PlannedStep], env: dict[str, str], prefix: tuple[str, ...]
    ) -> Callable[[str], tuple[str, ...]] | None:
        """The argv of a client of the command's fork server (runner/forkserver.py), for a job
        of the real worker with no wrapper; None: a fresh worker."""
        if prefix or self.opts.worker_command:
            return None
        from aotipre.runner import forkserver

        python = self.opts.python or sys.executable
        return forkserver.argv_for(python, env, (s.op for s in steps))

    def _store(self, rec: StepRecord) -> None:
        if rec.id.startswith("load#"):
            if rec.status == "ok":
                return  # a reload for a fresh worker: only its failure is news
            rec = replace(rec, id="load")
        self.records[rec.id] = rec

    def _prewarm_rerun(self, budget_s: float) -> None:
        """On CUDA, once: start the workers a crash's first triage steps will run in (the
        environment and argv triage's `sync-rerun` and `printer-3` give their workers),
        waiting while this worker may run."""
        if self.prewarmed or self.device_type != "cuda" or not self.opts.prewarm_rerun:
            return
        from aotipre.runner import prewarm

        self.prewarmed = prewarm.start(
            prewarm.RERUN_WORKERS,
            lambda path: launch.worker_argv(self.opts.python, self.opts.worker_command, path),
            {**self._job_env(), **launch.SYNC_ENV},
            wait_s=budget_s + launch.STARTUP_SLACK_S,
            budget_s=self.opts.compile_timeout_s + 2 * self.opts.timeout_s,
        )

    def load_cost_recorded(self) -> bool:
        """What aoti_load_package pays before it touches a package, the loader's imports and
        the CPU-ISA probe, for this session's workers, is in the host's record
        (runner/loadcost.py) or is being measured beside the first worker (started here when
        there is no record: runner/loadmeasure.py): a load that needs nothing else may skip
        paying them (the perf stage reports them from the record or the measurement). Without
        the perf stage nothing reports them, and nothing is measured: the probe only has to be
        known to answer on this host (a record of it, or an earlier load of this check), since
        where it fails load_pt2 fails and load_package falls back to the C++ loader (AOT531)."""
        self.probe.pin(self._job_env())
        if self.opts.perf is None:
            return self.probe.probed is not None
        recorded = self.probe.recorded
        if recorded is not None:
            return recorded.loader_import_s is not None
        return self.probe.measure(self._start_measurement)

    def _start_measurement(self) -> loadmeasure.Measurement | None:
        """The loader's imports and the CPU-ISA probe measured in a fresh worker of their own
        (not the fork server's: it must pay them), with the workers' environment; None where
        it would not spare the first worker anything (another device, a compile first, no
        perf stage to report it, a stand-in worker) or cannot start."""
        if (
            self.opts.worker_command
            or self.opts.perf is None
            or self.device != "cpu"
            or self.need_compile
        ):
            return None
        try:
            return loadmeasure.Measurement(
                lambda path: launch.worker_argv(self.opts.python, None, path),
                self._job_env(),
                budget_s=self.opts.timeout_s,
            )
        except (OSError, RuntimeError):  # no folder for it, or no thread to run it
            return None

    def _job_env(self) -> dict[str, str]:
        return launch.job_env(self.opts.extra_env, self.extra_env)

    def _shown_env(self, op: str) -> dict[str, str]:
        shown = {k: os.environ[k] for k in _ENV_SHOWN if k in os.environ}
        if op in _MODEL_CALLS:
            shown.update(launch.RUNTIME_CHECK_ENV)
        shown.update(self.opts.extra_env)
        shown.update(self.extra_env)
        return shown

    def _on_output(self, line: str) -> None:
        self.lines.on_output(line)
        if not line.startswith("@@aotipre start "):
            return
        sid = line.split(" ", 2)[2].strip()
        op, _, rest = sid.partition(":")
        for stage in self.stages:
            label = stage.progress(self, op, rest)
            if label:
                self.say(label)
                return
