"""The ladder's step runners (re-run, printer recompiles, compute-sanitizer, minifier) and the
worker jobs they run: each step in a fresh worker process, its compiles through the cache."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aotipre.findings import StageStatus
from aotipre.foundation.progress import stage_ended, stage_started
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import InputSpec
from aotipre.runner import cache as cache_mod
from aotipre.runner import launch
from aotipre.runner.classify import classify_run_failure, kernel_names
from aotipre.runner.proc import ProcessOutcome
from aotipre.runner.sanitizer import memcheck_prefix
from aotipre.runner.stages.base import RunCrash
from aotipre.runner.stages.jobs import process_label
from aotipre.triage import parsers
from aotipre.triage.conclude import sample_inputs_of, sample_values
from aotipre.triage.diagnosis import TensorStats
from aotipre.triage.ladder import LadderStep, step_configs, step_env
from aotipre.triage.state import StepRun, TriageState, first_line, read_log

_SHOWN_ENV = ("CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "OMP_NUM_THREADS")

DIRECT_LOAD: dict[str, Any] = {"id": "load", "op": "load", "direct": True}
"""Triage's workers load with the C++ loader alone (worker.load_direct): load_package's CPU-ISA
probe only feeds a warning for a package that is already compiled, and costs seconds to tens
of seconds per fresh process (the whole of a GPU host's cold start)."""


class TriageSteps(TriageState):
    """Runs one ladder step for the scheduler (on its threads)."""

    def _run_step(self, step: LadderStep, kernels: list[str], speculative: bool) -> StepRun:
        what = {
            "rerun": "re-running with synchronous launches",
            "printer": f"compiling with {step.title}"
            + (f" for {', '.join(kernels)}" if kernels else ""),
            "sanitizer": "running under compute-sanitizer",
            "minify": "minifying (slow)",
            "stats": f"reading the model inputs {self.kernel()} reads from the sample",
        }[step.tool]
        self.stages_started.add(step.stage_name)
        self.say_stage(stage_started(step.stage_name))
        self.say(what + (" (speculative)" if speculative else ""))
        started = time.monotonic()
        outcome = "error"  # a bug in a runner: the scheduler reports it
        try:
            run = self._run_tool(step, kernels)
            outcome = run.status.value
            return run
        finally:
            self.say_stage(stage_ended(step.stage_name, outcome, time.monotonic() - started))

    def _run_tool(self, step: LadderStep, kernels: list[str]) -> StepRun:
        if step.tool == "rerun":
            return self._rerun(step)
        if step.tool == "stats":
            return self._sample_stats(step)
        if step.tool == "printer":
            return self._printer(step, kernels)
        if step.tool == "sanitizer":
            return self._sanitizer(step)
        return self._minify(step)

    def _rerun(self, step: LadderStep) -> StepRun:
        job = self._run_job(
            step.id, [DIRECT_LOAD, {"id": "run", "op": "run"}], env=step_env(step, self.device_type)
        )
        run = self._from_job(step, job)
        self._name_from_error(run)
        return run

    def _sample_stats(self, step: LadderStep) -> StepRun:
        """The faulting kernel's model inputs, read from the sample (conclude.sample_inputs_of
        says which; nothing wrote them before the launch, so they are what the kernel read):
        integer ones (token ids, indices) without torch, as the static checks read them (no
        NaN or Inf to count), else in a worker that loads no model and compiles nothing."""
        kernel = self.kernel()
        assert kernel is not None
        wanted = sample_inputs_of(self, kernel)
        started = time.monotonic()
        records = _integer_records(self, wanted)
        if records is not None:
            run = StepRun(step, StageStatus.PASSED, "", duration_s=time.monotonic() - started)
            how = "integer model input(s) of {kernel} read from the sample without torch"
        else:
            tensors = [{"name": graph, "path": spec.path} for graph, spec in wanted]
            job = self._run_job(
                step.id, [{"id": "stats", "op": "input_stats", "tensors": tensors}], env={}
            )
            run = job.step_run(step)
            how = "model input(s) of {kernel} read from the sample by a worker"
            entry = job.entries.get("stats") or {}
            given = entry.get("stats")
            records = given if isinstance(given, list) else []
            if job.status("stats") != "ok" or len(records) != len(wanted):
                err = entry.get("error") or {}
                why = first_line(err.get("message")) or (
                    f"{len(records)} of {len(wanted)} tensors read"
                    if job.status("stats") == "ok"
                    else job.outcome.summary
                )
                run.status = StageStatus.ERROR
                run.detail = (
                    f"the sample could not be read ({job.status('stats')}): "
                    f"{err.get('type', '')} {why}"
                ).replace("  ", " ")
                return run
        run.kernels = (kernel,)
        names = {graph: spec.name for graph, spec in wanted}
        for rec in records:
            nan, inf = int(rec.get("nan") or 0), int(rec.get("inf") or 0)
            run.stats.append(
                TensorStats(
                    name=str(rec["name"]),
                    kernel=kernel,
                    input=names.get(str(rec["name"])),
                    dtype=rec.get("dtype"),
                    shape=tuple(rec.get("shape") or ()),
                    stride=tuple(rec.get("stride") or ()),
                    device=self.crash.device,
                    numel=rec.get("numel"),
                    min=rec.get("min"),
                    max=rec.get("max"),
                    mean=rec.get("mean"),
                    nan=nan,
                    inf=inf,
                    has_nonfinite=bool(nan or inf),
                )
            )
        shown = ", ".join(f"{names[g]} ({g})" for g, _ in wanted)
        run.detail = f"{len(run.stats)} {how.format(kernel=kernel)}, no recompile: {shown}"
        return run

    def _sanitizer(self, step: LadderStep) -> StepRun:
        tool = self.facts.sanitizer_tool
        assert tool is not None
        log = os.path.join(self.workdir, f"{step.id}.sanitizer.log")
        job = self._run_job(
            step.id,
            [DIRECT_LOAD, {"id": "run", "op": "run"}],
            env=step_env(step, self.device_type),
            prefix=memcheck_prefix(tool, log),
        )
        run = self._from_job(step, job)
        text = read_log(log)
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
        run = job.step_run(step)
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
            tail = parsers.decisive(read_log(job.logs.get("minify", "")), limit=2)
            run.detail = (
                f"the minifier did not finish ({job.status('minify')}): "
                f"{err.get('type', '')} {first_line(err.get('message'))} {' | '.join(tail)}"
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
            {**DIRECT_LOAD, "package": package, "model": "model"},
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
            text = f"{err.get('message') or ''}\n{read_log(job.logs.get('compile', ''))}"
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
        except cache_mod.CacheUnavailable as exc:  # issue #12: go on without the cache
            with self.lock:
                self.jobs += 1
                n = self.jobs
            path = os.path.join(self.workdir, f"compiled{n}", cache_mod.PACKAGE_FILE)
            return path, False, None, f"compiled without the cache ({exc.strerror})"
        return pending.package, False, pending, "compiled"

    def cache_key(self, configs: Mapping[str, Any]) -> str:
        assert self.ep_source is not None and self.ep_model is not None
        own = self.ep_source == os.path.abspath(self.crash.package.path)
        info = self.crash.package if own else read_package(self.ep_source)
        names = [m.name for m in info.members]
        members = cache_mod.exported_program_members(names, info.root, self.ep_model)
        content = cache_mod.hash_members(
            self.ep_source, members, self.crash.archive if own else None
        )
        return cache_mod.compile_key(
            content_hash=content,
            torch_version=cache_mod.torch_version(),
            device=self.crash.device,
            configs=configs,
            host=self.crash.host,
            # the spec as the check got it: archive-stored inputs are copied to this triage's
            # own folder (self.inputs), a path no later triage shares
            example_inputs=json.dumps(self.crash.inputs, sort_keys=True, default=str),
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
        """One worker over `steps`: one the session started before the crash with the same
        argv and environment (torch imported already: runner/prewarm.py), else a fresh one."""
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
        if self.crash.vec_isa is not None:
            job["vec_isa"] = list(self.crash.vec_isa)  # the session's load probed; skip it here
        full_env = launch.job_env(self.crash.env, env)
        shown = {k: os.environ[k] for k in _SHOWN_ENV if k in os.environ}
        shown.update(launch.RUNTIME_CHECK_ENV)
        shown.update(self.crash.env)
        shown.update(env)
        shown.pop("AOTIPRE_FAKE_SCRIPT", None)

        def argv_for(path: str) -> tuple[str, ...]:
            return (*prefix, *launch.worker_argv(opts.python, opts.worker_command, path))

        budget = launch.job_budget_s(steps, opts.timeout_s, opts.compile_timeout_s)
        warm = next((w for w in self.crash.prewarmed if w.claim(argv_for, full_env, budget)), None)
        if warm is not None:
            argv, outcome = warm.hand(job)
        else:
            argv, outcome = launch.run_job_file(job, argv_for, env=full_env, budget_s=budget)
        return _Job(argv, shown, outcome, job, self.workdir, tag, prewarmed=warm is not None)

    def _from_job(self, step: LadderStep, job: _Job) -> StepRun:
        run = job.step_run(step)
        load = job.status("load")
        call = job.status("run")
        run.run_status = call
        run.run_log = job.logs.get("run")
        entry = job.entries.get("run") or {}
        err = entry.get("error") or {}
        log_text = read_log(run.run_log or "", tail=256 * 1024) or job.outcome.stderr_tail
        run.error_text = "\n".join(t for t in (str(err.get("message") or ""), log_text) if t)
        run.signal = job.died_signal if job.died_in == "run" else None
        if load not in ("ok",):
            run.status = StageStatus.ERROR
            lentry = job.entries.get("load") or {}
            lerr = lentry.get("error") or {}
            run.detail = (
                f"the package could not be loaded ({load}): {lerr.get('type', '')} "
                f"{first_line(lerr.get('message'))}"
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
    prewarmed: bool = False
    """It ran in the worker the session started before the crash (runner/prewarm.py)."""

    @property
    def process(self) -> str:
        return process_label(self.tag, self.outcome.pid, prewarmed=self.prewarmed)

    def step_run(self, step: LadderStep) -> StepRun:
        """A passed StepRun of `step` from this worker (its command, env, time and logs)."""
        return StepRun(
            step,
            StageStatus.PASSED,
            "",
            duration_s=self.outcome.duration_s,
            argv=self.argv,
            env=self.shown_env,
            job=self.job,
            logs=self.logs,
            processes=(self.process,),
        )

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


def _check_str(crash: RunCrash) -> str | None:
    """A substring every failure of the same bug shows (the minifier's check_str)."""
    err = crash.record.error
    message = str(err.get("message") or "")
    bounds = parsers.index_bounds(message)
    if bounds:
        return "index out of bounds"
    first = first_line(message)
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


def _note(note: str) -> str:
    return f"; {note}" if note else ""


def _integer_records(
    triage: TriageState, wanted: list[tuple[str, InputSpec]]
) -> list[dict[str, Any]] | None:
    """What the input_stats worker would return for `wanted`, when every one is an integer
    tensor whose values the sample holds (conclude.sample_values reads them without torch);
    None otherwise (a float input, synthesized inputs, a value that cannot be read)."""
    read = [sample_values(triage, spec.name) for _, spec in wanted]
    if not wanted or any(r is None for r in read):
        return None
    records = []
    for (graph, _), values in zip(wanted, read):
        assert values is not None
        _, meta, ext = values
        records.append(
            {
                "name": graph,
                "dtype": meta.dtype,
                "shape": list(meta.shape),
                "stride": list(meta.strides),
                "numel": ext.count,
                "min": float(ext.min),
                "max": float(ext.max),
                "mean": ext.total / ext.count,
            }
        )
    return records
