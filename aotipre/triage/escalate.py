"""Runs the ladder after a crash: applicable steps in fresh worker processes, in parallel where
they are independent, with the compile cache; then turns their evidence into a Diagnosis."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from aotipre.errors import PackageError
from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.pt2.reader import read_package
from aotipre.runner import cache as cache_mod
from aotipre.runner.classify import classify_run_failure, kernel_names
from aotipre.runner.proc import ProcessOutcome, run_process
from aotipre.runner.stages import (
    RUNTIME_CHECK_ENV,
    STARTUP_SLACK_S,
    WORKER_PATH,
    RunCrash,
)
from aotipre.triage import parsers
from aotipre.triage.diagnosis import Diagnosis, TensorStats
from aotipre.triage.ladder import (
    BY_ID,
    KERNELS_PLACEHOLDER,
    LADDER,
    TRIGGERS,
    Facts,
    LadderStep,
    skip_reason,
    step_configs,
    step_env,
)

__all__ = ["Escalation", "TriageOptions", "escalate"]

_SHOWN_ENV = ("CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class TriageOptions:
    """What crash triage can be told (the CLI maps --no-escalate, --minify, ... onto this)."""

    escalate: bool = True
    """False (--no-escalate): report the crash as the run stage saw it, run no ladder step."""
    minify: bool = False
    """Run the AOTI minifier (slow: it recompiles many times)."""
    sanitizer: bool = False
    """Run compute-sanitizer memcheck when it is installed (CUDA only; slow)."""
    artifacts: str | None = None
    """Write a repro bundle here (one folder per crashed model)."""
    exported_program: str | None = None
    """A .pt2 holding the ExportedProgram of an AOTI-only package (for the recompiling steps)."""
    parallel: int | None = None
    """Most steps running at once; None: 3 (2 on a machine with fewer than 4 CPUs)."""
    minify_timeout_s: float = 1800.0


@dataclass
class Escalation:
    """What the ladder produced for one crash."""

    stages: list[StageResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds from the start of triage: `kernel_named`, `done`."""


@dataclass
class StepRun:
    """One ladder step's outcome (several worker runs for a re-run speculative step)."""

    step: LadderStep
    status: StageStatus
    detail: str
    duration_s: float = 0.0
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    run_status: str | None = None
    """The model call: ok, error, crash, timeout, worker_error, not_reached."""
    error_text: str = ""
    """The call's exception message and its log (stdout and stderr)."""
    run_log: str | None = None
    """Path of the model call's full log (printer output included)."""
    logs: dict[str, str] = field(default_factory=dict)
    """Every log of the step's worker, by worker step id."""
    job: dict[str, Any] = field(default_factory=dict)
    signal: str | None = None
    kernels: tuple[str, ...] = ()
    """The printer filter it was compiled with."""
    package: str | None = None
    """The package it compiled (COMPILE_TIME steps)."""
    compile_note: str = ""
    fault: parsers.LaunchFault | None = None
    stats: list[TensorStats] = field(default_factory=list)
    named: str | None = None
    """The kernel this step names as the faulting one."""
    evidence: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    speculative: bool = False
    finished_at: float = 0.0


def escalate(
    crash: RunCrash,
    options: TriageOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> Escalation:
    """Run the ladder for one crashed run; never raises because a step crashed or hung."""
    opts = options or TriageOptions()
    if not opts.escalate:
        return Escalation(
            stages=[_stage_skipped(crash, "triage", "escalation is off (--no-escalate)")]
        )
    if crash.failure.kind not in TRIGGERS:
        why = {
            "killed": "SIGKILL is usually the out-of-memory killer, not a kernel fault",
            "illegal_instruction": "SIGILL means this CPU lacks an instruction the code uses "
            "(see AOT403), not a kernel fault",
        }.get(crash.failure.kind, f"a {crash.failure.kind} failure is not a crash in a kernel")
        return Escalation(stages=[_stage_skipped(crash, "triage", why)])
    try:
        triage = _Triage(crash, opts, progress)
    except (OSError, PackageError) as exc:  # the crashed package or its inputs went away
        stage = _stage_skipped(crash, "triage", f"crash triage could not start: {exc}")
        return Escalation(stages=[replace(stage, status=StageStatus.ERROR)])
    try:
        return triage.run()
    finally:
        triage.cleanup()


def _stage_skipped(crash: RunCrash, name: str, why: str) -> StageResult:
    return StageResult(name, StageStatus.SKIPPED, detail=why, model=crash.model.name)


class _Triage:
    def __init__(
        self, crash: RunCrash, opts: TriageOptions, progress: Callable[[str], None] | None
    ) -> None:
        self.crash = crash
        self.opts = opts
        self.progress = progress
        self.workdir = tempfile.mkdtemp(prefix="aotipre-triage-")
        self.device_type = crash.device.split(":", 1)[0]
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.jobs = 0
        self.runs: dict[str, StepRun] = {}
        self.notes: list[str] = []
        self.kernel_codes: dict[str, Any] = {}
        """conclude.KernelCode per kernel, once its source was found."""
        self._guesses: list[str] | None = None
        self._original_code: dict[str, str] | None = None
        rec = crash.record
        err = rec.error
        self.first_text = "\n".join(t for t in (str(err.get("message") or ""), rec.log) if t)
        self.first_error = parsers.first_error(str(err.get("message") or ""), rec.log) or (
            crash.failure.summary
        )
        self.candidates = parsers.device_assert_kernels(self.first_text) + [
            k for k in kernel_names(self.first_text) if k.startswith(("cpp_", "triton_"))
        ]
        self.ep_source, self.ep_model, ep_note = self._exported_program()
        self.inputs = self._inputs()
        self.facts = Facts(
            device_type=self.device_type,
            has_exported_program=self.ep_source is not None,
            exported_program_source=ep_note,
            sanitizer_flag=opts.sanitizer,
            sanitizer_tool=_find_sanitizer() if self.device_type == "cuda" else None,
            minify_flag=opts.minify,
            signal=rec.signal,
            failure_kind=crash.failure.kind,
            eager=crash.eager,
            eager_error=crash.eager_error,
        )
        self.ep_note = ep_note

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.crash.model.name}: triage: {text}")

    # -- set-up

    def _exported_program(self) -> tuple[str | None, str | None, str]:
        """(archive holding the ExportedProgram, its model name, where it comes from)."""
        if self.opts.exported_program:
            path = self.opts.exported_program
            try:
                info = read_package(path)
            except PackageError as exc:
                return None, None, f"--exported-program {path} cannot be read ({exc})"
            eps = [m for m in info.models if m.has_exported_program]
            pick = next((m for m in eps if m.name == self.crash.model.name), None)
            if pick is None and len(eps) == 1:
                pick = eps[0]
            if pick is None:
                names = ", ".join(m.name for m in eps) or "none"
                return (
                    None,
                    None,
                    (
                        f"--exported-program {path} has no ExportedProgram for model "
                        f"'{self.crash.model.name}' (it holds: {names})"
                    ),
                )
            return os.path.abspath(path), pick.name, f"--exported-program {path}"
        if self.crash.model.has_exported_program:
            return os.path.abspath(self.crash.package.path), self.crash.model.name, "the archive"
        return None, None, "the archive holds AOTI code only (no ExportedProgram)"

    def _inputs(self) -> dict[str, Any]:
        """The crash's inputs spec, with archive-stored inputs written to a file (the
        recompiling steps may read another archive)."""
        spec = dict(self.crash.inputs)
        if spec.get("kind") == "member":
            from aotipre.pt2.archive import open_archive

            path = os.path.join(self.workdir, "inputs.pt")
            with open_archive(self.crash.package.path) as archive:
                data = archive.read(str(spec["member"]))
            with open(path, "wb") as f:
                f.write(data)
            return {"kind": "file", "path": path}
        return spec

    # -- the schedule

    def run(self) -> Escalation:
        result = Escalation()
        parallel = self.opts.parallel or (3 if (os.cpu_count() or 1) >= 4 else 2)
        pending = [s.id for s in LADDER]
        futures: dict[cf.Future[StepRun], tuple[str, bool]] = {}
        speculated: dict[str, tuple[str, ...]] = {}
        spec_done: dict[str, StepRun] = {}
        discarded: dict[str, float] = {}

        def submit(
            pool: cf.ThreadPoolExecutor, step: LadderStep, kernels: list[str], spec: bool
        ) -> None:
            futures[pool.submit(self._run_step, step, kernels, spec)] = (step.id, spec)

        with cf.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            while True:
                for sid in list(pending):
                    step = BY_ID[sid]
                    spec_running = any(v == (sid, True) for v in futures.values())
                    if all(a in self.runs for a in step.after):
                        facts = self._facts()
                        why = skip_reason(step, facts)
                        if why is not None:
                            self.runs[sid] = StepRun(step, StageStatus.SKIPPED, why)
                            pending.remove(sid)
                            continue
                        spec = spec_done.pop(sid, None)
                        if spec is not None:
                            if (
                                facts.kernel in spec.kernels
                                and spec.status is not StageStatus.ERROR
                            ):
                                self.runs[sid] = spec  # the speculation was right
                                pending.remove(sid)
                                continue
                            discarded[sid] = discarded.get(sid, 0.0) + spec.duration_s
                            self.notes.append(
                                f"{sid}: the run started early for {', '.join(spec.kernels)} "
                                f"was discarded: the faulting kernel is {facts.kernel}"
                            )
                        elif spec_running and facts.kernel in speculated.get(sid, ()):
                            continue  # the early run is for the right kernel: wait for it
                        elif spec_running:
                            self.notes.append(
                                f"{sid}: the run started early for "
                                f"{', '.join(speculated.get(sid, ()))} was discarded: the faulting "
                                f"kernel is {facts.kernel}"
                            )
                        pending.remove(sid)
                        submit(pool, step, self._filter_for(step), False)
                    elif (
                        step.speculative
                        and not spec_running
                        and sid not in speculated
                        and (guesses := self.guesses())
                        and skip_reason(step, self._facts(kernel=guesses[0])) is None
                    ):
                        kernels = self._filter_for(step, guesses[0])
                        kernels += [k for k in guesses[1:] if k not in kernels]
                        speculated[sid] = tuple(kernels)
                        submit(pool, step, kernels, True)
                if not futures:
                    for sid in pending:  # nothing runnable, nothing running
                        self.runs[sid] = StepRun(BY_ID[sid], StageStatus.SKIPPED, "not reached")
                    break
                done, _ = cf.wait(list(futures), return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    sid, early = futures.pop(fut)
                    try:
                        run = fut.result()
                    except Exception as exc:  # a bug in a step runner must not lose the report
                        run = StepRun(
                            BY_ID[sid], StageStatus.ERROR, f"internal error: {exc!r}"[:400]
                        )
                    run.speculative = early
                    run.finished_at = time.monotonic() - self.started
                    if early:
                        if sid in pending:
                            spec_done[sid] = run
                        else:
                            discarded[sid] = discarded.get(sid, 0.0) + run.duration_s
                        continue
                    run.duration_s += discarded.pop(sid, 0.0)
                    self.runs[sid] = run
                    if run.named and "kernel_named" not in result.timings:
                        result.timings["kernel_named"] = run.finished_at
                        self.say(f"faulting kernel {run.named} (named by {sid})")
        for sid, spent in discarded.items():
            if sid in self.runs:
                self.runs[sid].duration_s += spent
        from aotipre.triage.conclude import conclude

        concluded = conclude(self)
        result.stages = concluded.stages
        result.findings = concluded.findings
        result.diagnosis = concluded.diagnosis
        result.timings["done"] = time.monotonic() - self.started
        self.say(f"done in {result.timings['done']:.1f} s")
        if self.opts.artifacts:
            from aotipre.triage.artifacts import write_bundle

            try:
                where = write_bundle(self, concluded.diagnosis, self.opts.artifacts)
                self.say(f"repro bundle written to {where}")
            except OSError as exc:
                result.stages.append(
                    StageResult(
                        "triage:artifacts",
                        StageStatus.ERROR,
                        detail=f"the repro bundle could not be written: {exc}",
                        model=self.crash.model.name,
                    )
                )
        return result

    def _facts(self, kernel: str | None = None) -> Facts:
        named = kernel or self.kernel()
        return replace(self.facts, kernel=named, explained=self.explained())

    def kernel(self) -> str | None:
        """The faulting kernel as far as the finished steps tell (synchronous evidence first)."""
        for sid in ("printer-3", "sync-rerun", "sanitizer"):
            run = self.runs.get(sid)
            if run is not None and run.named and not run.speculative:
                return run.named
        if "printer-3" in self.runs or not self.facts.has_exported_program:
            return self.candidates[0] if self.candidates else None
        return None

    def guesses(self) -> list[str]:
        """Kernels to start speculative steps with: those the first error names, else those
        whose generated code holds the bounds-check message the error quotes (a Triton device
        assert often says `unknown` instead of the kernel's name)."""
        if self.candidates:
            return self.candidates[:1]
        if self._guesses is not None:
            return self._guesses
        found: list[str] = []
        messages = {b.line for b in parsers.index_bounds(self.first_text)}
        if messages:
            code = self.original_code()
            text = code.get("kernel", "") + "\n" + code.get("wrapper", "")
            for name in dict.fromkeys(parsers.kernel_call_order(code.get("wrapper", ""))):
                src = parsers.kernel_source(text, name) or ""
                if any(m.rstrip("L") in src for m in messages):
                    found.append(name)
        self._guesses = found[:4]
        return self._guesses

    def explained(self) -> bool:
        from aotipre.triage.conclude import explanation

        return explanation(self) is not None

    def _filter_for(self, step: LadderStep, kernel: str | None = None) -> list[str]:
        if KERNELS_PLACEHOLDER not in step.inductor_configs.values():
            return []
        named = kernel or self.kernel()
        out = [named] if named else []
        p3 = self.runs.get("printer-3")
        previous = p3.fault.previous if p3 is not None and p3.fault is not None else None
        if previous is None and named is not None:
            previous = self._static_previous(named)
        if previous and previous not in out:
            out.append(previous)
        return out

    def _static_previous(self, kernel: str) -> str | None:
        """The kernel called before `kernel` in the packaged wrapper.cpp (when it has one)."""
        text = self.original_code().get("wrapper", "")
        calls = parsers.kernel_call_order(text)
        if kernel in calls:
            at = calls.index(kernel)
            return calls[at - 1] if at > 0 else None
        return None

    def original_code(self) -> dict[str, str]:
        """wrapper.cpp and kernel.cpp (or cuda kernel) text of the crashing package."""
        if self._original_code is None:
            self._original_code = read_generated_code(
                self.crash.aoti_package, self.crash.aoti_model
            )
        return self._original_code

    # -- one step

    def _run_step(self, step: LadderStep, kernels: list[str], speculative: bool) -> StepRun:
        what = {
            "rerun": "re-running with synchronous launches",
            "printer": f"compiling with {step.title}"
            + (f" for {', '.join(kernels)}" if kernels else ""),
            "sanitizer": "running under compute-sanitizer",
            "minify": "minifying (slow)",
        }[step.tool]
        self.say(what + (" (speculative)" if speculative else ""))
        if step.tool == "rerun":
            return self._rerun(step)
        if step.tool == "printer":
            return self._printer(step, kernels)
        if step.tool == "sanitizer":
            return self._sanitizer(step)
        return self._minify(step)

    def _rerun(self, step: LadderStep) -> StepRun:
        job = self._run_job(
            step.id,
            [{"id": "load", "op": "load"}, {"id": "run", "op": "run"}],
            env=step_env(step, self.device_type),
        )
        run = self._from_job(step, job)
        self._name_from_error(run)
        return run

    def _sanitizer(self, step: LadderStep) -> StepRun:
        tool = self.facts.sanitizer_tool
        assert tool is not None
        log = os.path.join(self.workdir, f"{step.id}.sanitizer.log")
        job = self._run_job(
            step.id,
            [{"id": "load", "op": "load"}, {"id": "run", "op": "run"}],
            env=step_env(step, self.device_type),
            prefix=(tool, "--tool", "memcheck", "--print-limit", "20", "--log-file", log),
        )
        run = self._from_job(step, job)
        text = _read(log)
        hits = parsers.sanitizer_hits(text)
        run.logs["sanitizer"] = log
        run.extra["sanitizer"] = [{"what": h.what, "kernel": h.kernel} for h in hits]
        if hits:
            # memcheck's report is what the step is for; the crash it watched usually leaves the
            # worker without a result and the tool with a non-zero exit (seen on an H100)
            run.status = StageStatus.PASSED
            run.named = next((h.kernel for h in hits if h.kernel), None)
            run.evidence = hits[0].lines[:4]
            run.detail = f"{hits[0].what}" + (f" in {hits[0].kernel}" if hits[0].kernel else "")
        else:
            run.detail = (
                "no memory error reported" if run.status is StageStatus.PASSED else run.detail
            )
        return run

    def _minify(self, step: LadderStep) -> StepRun:
        out_dir = os.path.join(self.workdir, "minify")
        check = _check_str(self.crash)
        job = self._run_job(
            step.id,
            [
                {
                    "id": "minify",
                    "op": "minify",
                    "out_dir": out_dir,
                    "check_str": check,
                    "inductor_configs": dict(self.crash.compiled_with or {}),
                    "timeout_s": self.opts.minify_timeout_s,
                }
            ],
            env={},
            compile_source=True,
        )
        run = StepRun(step, StageStatus.PASSED, "", argv=job.argv, env=job.shown_env, job=job.job)
        run.duration_s = job.outcome.duration_s
        run.logs = job.logs
        entry = job.entries.get("minify") or {}
        repro = entry.get("repro")
        nodes = _checkpoint_nodes(out_dir)
        if job.status("minify") == "ok" and repro:
            run.extra.update(repro=repro, nodes=nodes, out_dir=out_dir)
            shrink = f" ({max(nodes)} -> {min(nodes)} nodes)" if len(nodes) >= 2 else ""
            run.detail = f"minimal repro written{shrink}; check_str {check!r}"
        else:
            run.status = StageStatus.ERROR
            err = entry.get("error") or {}
            tail = parsers.decisive(_read(job.logs.get("minify", "")), limit=2)
            run.detail = (
                f"the minifier did not finish ({job.status('minify')}): "
                f"{err.get('type', '')} {_first_line(err.get('message'))} {' | '.join(tail)}"
            ).strip()
        return run

    def _printer(self, step: LadderStep, kernels: list[str]) -> StepRun:
        configs = {**dict(self.crash.compiled_with or {}), **step_configs(step, kernels)}
        package, hit, pending, note = self._cache_lookup(configs)
        compile_step = {
            "id": "compile",
            "op": "compile",
            "out": package,
            "inductor_configs": configs,
        }
        steps: list[dict[str, Any]] = [] if hit else [compile_step]
        steps += [
            {"id": "load", "op": "load", "package": package, "model": "model"},
            {"id": "run", "op": "run"},
        ]
        if step.id == "printer-3" and self.opts.artifacts:
            steps.append({"id": "save_inputs", "op": "save_inputs", "out": self.inputs_file()})
        job = self._run_job(
            step.id, steps, env=step_env(step, self.device_type), compile_source=True
        )
        run = self._from_job(step, job)
        run.kernels = tuple(kernels)
        run.package = package
        run.extra["compile_step"] = compile_step
        if not hit:
            if job.status("compile") == "ok" and pending is not None:
                try:
                    entry = self._cache().commit(
                        pending, {"source": self.ep_source, "triage": step.id}
                    )
                    run.package = entry.package
                    note = f"{note} (cached)"
                except OSError:
                    pass
            elif pending is not None:
                self._cache().discard(pending)
        run.compile_note = note
        if not hit and job.status("compile") != "ok":
            comp = job.entries.get("compile") or {}
            err = comp.get("error") or {}
            text = f"{err.get('message') or ''}\n{_read(job.logs.get('compile', ''))}"
            run.status = StageStatus.ERROR
            run.run_status = "not_reached"
            run.error_text = text
            lines = parsers.decisive(text, limit=3)
            run.detail = f"the recompile failed ({job.status('compile')}): " + " | ".join(lines)
            names = parsers.device_assert_kernels(text) or [
                k for k in kernel_names(text) if k.startswith(("cpp_", "triton_"))
            ]
            if names:  # a kernel can fault already while autotuning (CUDA)
                run.named = names[0]
                run.evidence = tuple(lines)
            return run
        if run.run_log:
            lines = list(parsers.read_lines(run.run_log))
            events = parsers.launches(lines)
            run.fault = parsers.faulting_launch(events)
            if step.inductor_configs.get("aot_inductor.debug_intermediate_value_printer") == "2":
                run.stats = parsers.parse_tensor_blocks(lines, kernels or None)
            run.extra["launches"] = len(events)
        if run.run_status == "ok":
            run.detail = (
                f"the model ran without failing with the printer compiled in{_note(note)}: "
                "the crash did not reproduce"
            )
            if step.id == "nan-asserts":
                run.detail = f"no NaN/Inf assert fired{_note(note)}"
            return run
        if run.fault is not None and step.id == "printer-3":
            run.named = run.fault.kernel
            run.evidence = run.fault.evidence + tuple(parsers.decisive(run.error_text, limit=2))
            run.detail = (
                f"faulting kernel {run.fault.kernel} (last before_launch without after_launch; "
                f"{run.extra.get('launches', 0)} printer lines){_note(note)}"
            )
        elif step.id == "printer-2":
            shown = [s for s in run.stats if s.kernel and s.when == "before_launch"]
            run.detail = (
                f"{len(shown)} tensor(s) of {', '.join(kernels) or 'every kernel'} before launch"
                f"{_note(note)}"
            )
            if run.fault is not None:
                run.named = None
        elif step.id == "nan-asserts":
            nan_lines = [
                line for line in run.error_text.splitlines() if "NaN" in line or " INF " in line
            ]
            run.extra["nan_lines"] = nan_lines[:4]
            run.detail = (
                f"NaN assert: {nan_lines[0].strip()}" if nan_lines else "no NaN/Inf assert fired"
            ) + _note(note)
        else:
            run.detail = (
                f"the run failed ({run.run_status}) but printed no launch without its "
                f"after_launch{_note(note)}"
            )
        return run

    def _name_from_error(self, run: StepRun) -> None:
        text = run.error_text
        names = parsers.device_assert_kernels(text) or [
            k for k in kernel_names(text) if k.startswith(("cpp_", "triton_"))
        ]
        blamed = parsers.blamed_op(text)
        if names:
            run.named = names[0]
        run.extra["blamed"] = blamed.name if blamed else None
        run.evidence = tuple(parsers.decisive(text, limit=4))
        if run.run_status == "ok":
            run.detail = "the model ran without failing: the crash did not reproduce"
        else:
            first = parsers.first_error(text) or run.detail
            run.detail = f"{first}" + (f" (kernel {run.named})" if run.named else "")

    # -- worker jobs

    def inputs_file(self) -> str:
        return os.path.join(self.workdir, "bundle_inputs.pt")

    def _cache(self) -> cache_mod.CompileCache:
        return cache_mod.CompileCache(self.crash.options.cache_dir)

    def _cache_lookup(
        self, configs: dict[str, Any]
    ) -> tuple[str, bool, cache_mod.PendingEntry | None, str]:
        """(package path, cache hit, pending entry to commit, note)."""
        assert self.ep_source is not None and self.ep_model is not None
        if not self.crash.options.use_cache:
            with self.lock:
                self.jobs += 1
                n = self.jobs
            path = os.path.join(self.workdir, f"compiled{n}", cache_mod.PACKAGE_FILE)
            return path, False, None, "compiled without the cache"
        key = self.cache_key(configs)
        cache = self._cache()
        hit = cache.lookup(key)
        if hit is not None:
            return hit.package, True, None, "compile cache hit"
        try:
            pending = cache.begin(key)
        except cache_mod.CacheUnavailable as exc:  # hostile12 (issue #12): go on without it
            with self.lock:
                self.jobs += 1
                n = self.jobs
            path = os.path.join(self.workdir, f"compiled{n}", cache_mod.PACKAGE_FILE)
            return path, False, None, f"compiled without the cache ({exc.strerror})"
        return pending.package, False, pending, "compiled"

    def cache_key(self, configs: Mapping[str, Any]) -> str:
        assert self.ep_source is not None and self.ep_model is not None
        info = (
            read_package(self.ep_source)
            if self.ep_source != os.path.abspath(self.crash.package.path)
            else self.crash.package
        )
        names = [m.name for m in info.members]
        members = cache_mod.exported_program_members(names, info.root, self.ep_model)
        content = cache_mod.hash_members(self.ep_source, members)
        return cache_mod.compile_key(
            content_hash=content,
            torch_version=cache_mod.torch_version(),
            device=self.crash.device,
            configs=configs,
            host=self.crash.host,
            example_inputs=json.dumps(self.inputs, sort_keys=True, default=str),
        )

    def _run_job(
        self,
        name: str,
        steps: list[dict[str, Any]],
        *,
        env: Mapping[str, str],
        compile_source: bool = False,
        prefix: tuple[str, ...] = (),
    ) -> _Job:
        with self.lock:
            self.jobs += 1
            tag = f"{name}-{self.jobs}"
        opts = self.crash.options
        job = {
            "protocol": 1,
            "tag": tag,
            "package": self.crash.aoti_package,
            "source_package": self.ep_source
            if compile_source and self.ep_source
            else os.path.abspath(self.crash.package.path),
            "model": self.ep_model if compile_source and self.ep_model else self.crash.model.name,
            "aoti_model": self.crash.aoti_model,
            "device": self.crash.device,
            "workdir": self.workdir,
            "inputs": self.inputs,
            "seed": opts.seed,
            "rtol": opts.rtol,
            "atol": opts.atol,
            "step_timeout_s": opts.timeout_s,
            "compile_timeout_s": opts.compile_timeout_s,
            "capture_stdout": True,
            "steps": steps,
        }
        job_path = os.path.join(self.workdir, f"{tag}.json")
        result_path = os.path.join(self.workdir, f"{tag}.result.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        full_env = dict(os.environ)
        full_env.update(RUNTIME_CHECK_ENV)
        full_env.update(self.crash.env)
        full_env.update(env)
        shown = {k: os.environ[k] for k in _SHOWN_ENV if k in os.environ}
        shown.update(RUNTIME_CHECK_ENV)
        shown.update(self.crash.env)
        shown.update(env)
        shown.pop("AOTIPRE_FAKE_SCRIPT", None)
        base = opts.worker_command or (opts.python or _python(), WORKER_PATH)
        argv = (*prefix, *base, job_path)
        budget = 0.0
        for s in steps:
            budget += float(
                s.get("timeout_s")
                or (opts.compile_timeout_s if s["op"] == "compile" else opts.timeout_s)
            )
        outcome = run_process(
            argv,
            env=full_env,
            timeout_s=budget + STARTUP_SLACK_S,
            cwd=self.workdir,
            result_path=result_path,
        )
        return _Job(argv, shown, outcome, job, self.workdir, tag)

    def _from_job(self, step: LadderStep, job: _Job) -> StepRun:
        run = StepRun(step, StageStatus.PASSED, "", argv=job.argv, env=job.shown_env, job=job.job)
        run.duration_s = job.outcome.duration_s
        run.logs = job.logs
        load = job.status("load")
        call = job.status("run")
        run.run_status = call
        run.run_log = job.logs.get("run")
        entry = job.entries.get("run") or {}
        err = entry.get("error") or {}
        log_text = _read(run.run_log or "", tail=256 * 1024) or job.outcome.stderr_tail
        run.error_text = "\n".join(t for t in (str(err.get("message") or ""), log_text) if t)
        run.signal = job.died_signal if job.died_in == "run" else None
        if load not in ("ok",):
            run.status = StageStatus.ERROR
            lentry = job.entries.get("load") or {}
            lerr = lentry.get("error") or {}
            run.detail = (
                f"the package could not be loaded ({load}): {lerr.get('type', '')} "
                f"{_first_line(lerr.get('message'))}"
            ).strip()
            if load in ("crash", "timeout", "worker_error"):
                run.detail += f" [{job.outcome.summary}]"
            run.run_status = "not_reached"
            return run
        if call in ("worker_error",):
            run.status = StageStatus.ERROR
            run.detail = f"the worker failed: {job.outcome.summary}"
        elif call == "timeout":
            run.status = StageStatus.ERROR
            run.detail = f"the run did not finish in {self.crash.options.timeout_s:g} s"
        elif call not in ("ok", "error", "crash"):
            run.status = StageStatus.ERROR
            run.detail = f"the run was not reached ({call})"
        else:
            fail = (
                classify_run_failure(
                    exc_type=err.get("type"),
                    message=err.get("message"),
                    log=log_text,
                    signal=run.signal,
                )
                if call != "ok"
                else None
            )
            run.extra["failure"] = fail.kind if fail else None
            run.detail = fail.summary if fail else "ran"
        return run


@dataclass
class _Job:
    argv: tuple[str, ...]
    shown_env: dict[str, str]
    outcome: ProcessOutcome
    job: dict[str, Any]
    workdir: str
    tag: str

    def __post_init__(self) -> None:
        result = self.outcome.result or {}
        steps = result.get("steps")
        self.entries: dict[str, dict[str, Any]] = steps if isinstance(steps, dict) else {}
        current = result.get("current")
        self.current = current if isinstance(current, dict) else None
        self.died_in: str | None = None
        self.died_signal: str | None = None
        finished = bool(result.get("done") or result.get("stopped"))
        if not self.outcome.ok and not (finished and self.current is None):
            sid = self.current.get("id") if self.current else None
            if sid is None:
                sid = next(
                    (s["id"] for s in self.job["steps"] if s["id"] not in self.entries), None
                )
            self.died_in = sid
            self.died_signal = self.outcome.signal_name if self.outcome.crashed else None
        self.logs: dict[str, str] = {}
        for s in self.job["steps"]:
            path = os.path.join(self.workdir, f"{self.tag}.{s['id'].replace(':', '_')}.log")
            if os.path.isfile(path):
                self.logs[s["id"]] = path

    def status(self, sid: str) -> str:
        entry = self.entries.get(sid)
        if isinstance(entry, dict):
            status = entry.get("status")
            return status if status in ("ok", "skipped") else "error"
        if sid == self.died_in:
            if self.outcome.timed_out:
                return "timeout"
            if self.outcome.crashed:
                return "crash"
            return "worker_error"
        return "not_reached"


def read_generated_code(package: str, model: str) -> dict[str, str]:
    """The generated C++ of one model of a package: `wrapper` (wrapper.cpp, where CUDA builds
    also embed their Triton sources) and `kernel` (kernel.cpp on CPU); `member` names them."""
    from aotipre.pt2.archive import open_archive

    out: dict[str, str] = {}
    try:
        with open_archive(package) as archive:
            names = archive.names()
            prefix = f"/data/aotinductor/{model}/"
            for name in names:
                if prefix not in name:
                    continue
                if name.endswith(".wrapper.cpp"):
                    out["wrapper"] = archive.read_text(name)
                    out["wrapper_member"] = name
                elif name.endswith(".kernel.cpp"):
                    out["kernel"] = archive.read_text(name)
                    out["kernel_member"] = name
    except (PackageError, OSError, UnicodeDecodeError):
        return out
    return out


def _python() -> str:
    import sys

    return sys.executable


def _find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if base:
            path = os.path.join(base, "bin", "compute-sanitizer")
            if os.access(path, os.X_OK):
                return path
    return None


def _check_str(crash: RunCrash) -> str | None:
    """A substring every failure of the same bug shows (the minifier's check_str)."""
    err = crash.record.error
    message = str(err.get("message") or "")
    bounds = parsers.index_bounds(message)
    if bounds:
        return "index out of bounds"
    first = _first_line(message)
    if first:
        return first[:80]
    return None


def _checkpoint_nodes(out_dir: str) -> list[int]:
    nodes = []
    for root, _dirs, files in os.walk(os.path.join(out_dir, "debug")):
        if os.path.basename(root) != "checkpoints":
            continue
        for name in files:
            stem = name.removesuffix(".py")
            if name.endswith(".py") and stem.isdigit():
                nodes.append(int(stem))
    return sorted(nodes)


def _read(path: str, tail: int | None = None) -> str:
    if not path or not os.path.isfile(path):
        return ""
    with open(path, "rb") as f:
        if tail is not None:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - tail))
        return f.read().decode("utf-8", errors="replace")


def _first_line(text: Any) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _note(note: str) -> str:
    return f"; {note}" if note else ""


def stage_for(triage: Any, run: StepRun) -> StageResult:
    """A ladder step as a stage of the report."""
    step = run.step
    detail = run.detail
    if run.status is not StageStatus.SKIPPED:
        detail = f"{detail} [{step.phase.value}: {step.title}]"
    return StageResult(
        name=step.stage_name,
        status=run.status,
        duration_s=run.duration_s,
        detail=detail,
        model=triage.crash.model.name,
        env=dict(run.env),
        command=tuple(run.argv),
    )
