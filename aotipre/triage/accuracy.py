"""Accuracy triage: a compiled model whose outputs differ from eager (AOT701) or hold NaN/Inf the
reference does not (AOT702) on the sample inputs. One diagnostic rebuild of the ExportedProgram
with the intermediate value printer's save mode and provenance tracking localizes the first
kernel whose outputs differ while its inputs agree (worker step `accuracy_trace`); then a ladder
of single-knob rebuilds, ordered by what that kernel's FX nodes hold, proves a cause only when a
rebuild matches eager. Every rebuild runs in a fresh worker within the triage's own budget.

Longer than the ~600 lines of the other modules on purpose: the localization, the cause ladder and
the findings share one triage's state (_Triage: its budget, its workers, the rebuilds so far); its
record (accuracy_diagnosis.py), its repro (accuracy_repro.py) and its CUDA knobs (accuracy_cuda.py)
are already their own modules.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from aotipre.findings import Finding, StageResult, StageStatus, codes
from aotipre.foundation import tempdirs
from aotipre.runner import launch
from aotipre.runner.proc import ProcessOutcome
from aotipre.runner.stages.mismatch import OutputMismatch
from aotipre.triage.accuracy_cuda import (
    inductor_only,
    knob_tf32,
    package_used_tf32,
    rebuild_steps,
    tf32_fact,
    untestable,
)
from aotipre.triage.accuracy_diagnosis import (
    AccuracyDiagnosis,
    KernelError,
    KnobTrial,
    Latency,
    Repro,
    opt_float,
)
from aotipre.triage.accuracy_repro import keep, latency_of, latency_step, repro_and_trials
from aotipre.triage.accuracy_spec import Speculation

DIAGNOSTIC_CONFIGS: Mapping[str, Any] = {
    "aot_inductor.debug_intermediate_value_printer": "1",
    "trace.provenance_tracking_level": 1,
}
"""The diagnostic rebuild's configs (torch 2.11-2.15): save every kernel's tensor arguments
before and after its launch, and write kernel_information.json (kernel -> FX nodes). Neither
changes the compiled graph."""


@dataclass(frozen=True)
class Knob:
    """One rung of the cause ladder: an inductor config whose rebuild can explain a difference."""

    id: str
    configs: Mapping[str, Any]
    fact: str
    """The graph fact (worker.accuracy.node_facts) that makes it a candidate for a kernel."""
    cause: str
    """What a matching rebuild proves."""
    device: str = "any"
    """Where it applies: "cpu", "cuda" or "any" (the triaged package's device chooses)."""
    min_torch: str = ""
    """The torch release its configs need ("" any 2.11+); older: not testable on this torch."""
    hint: str = ""
    """How to get eager's numbers when the knob is not an inductor config ("" compile with it)."""


KNOBS: tuple[Knob, ...] = (
    Knob(
        "precision-casts",
        {"emulate_precision_casts": True},
        "low_precision",
        "precision-cast elision: the fused bf16/fp16 chain keeps fp32 intermediates that eager "
        "rounds (expected Inductor behaviour)",
    ),
    Knob(
        "strict-pointwise",
        {"numerics": "strict_pointwise"},
        "low_precision",
        "eager pointwise numerics on CUDA: the rebuild with Inductor's strict pointwise "
        "numerics (precision casts, no flush-to-zero, eager's division rounding) matches eager",
        device="cuda",
        min_torch="2.15",
    ),
    Knob(
        "fallback-random",
        {"fallback_random": True},
        "rng",
        "random numbers: Inductor's RNG draws other values than ATen's (expected)",
    ),
    Knob(
        "tf32-off",
        {"torch.float32_matmul_precision": "highest", "torch.backends.cudnn.allow_tf32": False},
        "tf32",
        "TF32: the fp32 matmul/convolution ran with TF32 on one side (Inductor decides it for its "
        "Triton templates at compile time, eager and cuBLAS/cuDNN when they run); with TF32 off "
        "for the rebuild's compile and both sides of the comparison they match",
        device="cuda",
        hint="compile and serve with torch.set_float32_matmul_precision('highest') and "
        "torch.backends.cudnn.allow_tf32 = False if the deployment needs eager's fp32 numbers "
        "(TF32 is faster); else compare against a TF32 eager run or loosen --rtol/--atol",
    ),
    Knob(
        "strict-reduction",
        {"numerics": "strict"},
        "reduction",
        "reduction order on CUDA: the rebuild with Inductor's strict numerics (eager's "
        "reduction order) matches eager",
        device="cuda",
        min_torch="2.14",
    ),
    Knob(
        "all-fallback",
        {"fallback_by_default": True, "selective_decompose": True},
        "reduction",
        "Inductor's lowering of these ops (reduction order or decomposition): the all-fallback "
        "rebuild, which runs them as ATen, matches eager",
    ),
)
"""The ladder, in the order it is tried (a knob is tried only when its fact holds)."""
FACT_WORDS = {
    "low_precision": "bf16/fp16 values",
    "rng": "an RNG op",
    "reduction": "a reduction",
    "tf32": "an fp32 matmul or convolution run with TF32",
}


# -- localization (plain data: the worker's launch records)


@dataclass(frozen=True)
class Localized:
    """Where divergence starts among the launches of the diagnostic rebuild."""

    index: int | None
    """The first divergent launch (None: no launch's compared outputs differ)."""
    inputs_agree: bool | None
    series: tuple[KernelError, ...]


def kernel_error(launch: Mapping[str, Any]) -> KernelError:
    """One launch record's error summary."""
    outs = [o for o in launch.get("outputs") or [] if isinstance(o, Mapping)]
    compared = [o for o in outs if o.get("node")]
    abs_errs = [float(o["max_abs"]) for o in compared if o.get("max_abs") is not None]
    rel_errs = [float(o["max_rel"]) for o in compared if o.get("max_rel") is not None]
    new_nonfinite = sum(
        max(0, int(o.get("nonfinite") or 0) - int(o.get("eager_nonfinite") or 0)) for o in compared
    ) + sum(int(o.get("nonfinite") or 0) for o in outs if not o.get("node"))
    return KernelError(
        kernel=str(launch.get("kernel")),
        nodes=tuple(str(n) for n in launch.get("nodes") or ()),
        max_abs=max(abs_errs) if abs_errs else None,
        max_rel=max(rel_errs) if rel_errs else None,
        mismatches=sum(int(o.get("mismatches") or 0) for o in compared),
        compared=len(compared),
        internal=len(outs) - len(compared),
        nonfinite=new_nonfinite,
    )


def localize(launches: list[Mapping[str, Any]], nonfinite: bool) -> Localized:
    """The first launch, in execution order, whose compared outputs differ from their eager FX
    nodes beyond tolerance (`nonfinite`: that produces NaN/Inf the eager nodes do not), and
    whether its inputs agree: graph inputs and outputs of earlier launches that were compared
    (and agreed: they come first) do; a buffer no earlier launch's compared output holds is
    unknown. For NaN/Inf, `inputs_agree` is False when its inputs already held NaN/Inf."""
    series = tuple(kernel_error(launch) for launch in launches)
    compared_before: set[str] = set()
    internal_before: set[str] = set()
    for i, (rec, err) in enumerate(zip(launches, series)):
        differs = err.nonfinite > 0 if nonfinite else err.mismatches > 0
        if differs:
            inputs = [str(a) for a in rec.get("inputs") or []]
            if nonfinite and int(rec.get("input_nonfinite") or 0) > 0:
                return Localized(i, False, series)
            unknown = [
                a
                for a in inputs
                if a in internal_before or (a.startswith("buf") and a not in compared_before)
            ]
            return Localized(i, None if unknown else True, series)
        for o in rec.get("outputs") or []:
            arg = str(o.get("arg"))
            if o.get("node"):
                compared_before.add(arg)
                internal_before.discard(arg)
            else:
                internal_before.add(arg)
                compared_before.discard(arg)
    return Localized(None, None, series)


def ladder_for(facts: Mapping[str, bool]) -> tuple[list[Knob], list[Knob]]:
    """(knobs to try, in ladder order; knobs whose fact does not hold), among the knobs of the
    device: CUDA's when `facts["cuda"]` holds, else the CPU's."""
    device = "cuda" if facts.get("cuda") else "cpu"
    mine = [k for k in KNOBS if k.device in ("any", device)]
    return [k for k in mine if facts.get(k.fact)], [k for k in mine if not facts.get(k.fact)]


# -- running it


@dataclass(frozen=True)
class AccuracyOptions:
    """What accuracy triage can be told (TriageOptions carries it)."""

    escalate: bool = True
    budget_s: float = 900.0
    """Seconds for the diagnostic rebuild and the cause ladder together."""
    artifacts: str | None = None
    """Where the verified repro is kept (DIR/<model>/accuracy-repro; --artifacts)."""
    speculate: bool | None = None
    """Start the program's likeliest knob's rebuild beside the localizing one
    (accuracy_spec.py); False: one worker at a time; None: when this process may use 2+ CPUs
    (on one, the two compiles would share it)."""
    python_wrapper: bool = True
    """Localize a CPU package on Inductor's Python-wrapper compile of the program when it is the
    deployed package bit for bit (runner/worker/jit_trace.py); else on the printer build."""


@dataclass
class AccuracyResult:
    """What accuracy triage produced for one model."""

    stages: list[StageResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    diagnosis: AccuracyDiagnosis | None = None


NEEDS_EXPORTED_PROGRAM = (
    "pass --exported-program FILE (the ExportedProgram this package was compiled from, saved "
    "with torch.export.save), or put it in the package with `aotipre bundle PACKAGE -o OUT "
    "--exported-program FILE`"
)


def triage_accuracy(
    case: OutputMismatch,
    options: AccuracyOptions,
    progress: Callable[[str], None] | None = None,
) -> AccuracyResult:
    """Localize and prove the cause of one model's wrong outputs; never raises because a
    worker crashed or hung."""
    model = case.model.name
    if not options.escalate:
        return AccuracyResult(
            stages=[_stage(model, "accuracy", StageStatus.SKIPPED, "escalation is off")]
        )
    if not set(case.codes) & REBUILT_TRIGGERS:  # AOT525 alone: the C++ loader's difference
        return AccuracyResult(stages=[_cpp_only(case)])
    if case.reference is None:
        result = AccuracyResult(
            stages=[_stage(model, "accuracy", StageStatus.SKIPPED, "no ExportedProgram to rebuild")]
        )
        result.findings.append(
            codes.get("AOT711").finding(
                f"accuracy triage cannot localize the difference ({', '.join(case.codes)}): "
                f"{case.reference_label}; it rebuilds the ExportedProgram to capture each "
                f"kernel's outputs: {NEEDS_EXPORTED_PROGRAM}",
                model=model,
                stage="accuracy",
            )
        )
        return result
    if not case.device.startswith(("cpu", "cuda")):
        where = f"this one runs on {case.device}"
        why = f"accuracy triage localizes CPU and CUDA packages only ({where})"
        return AccuracyResult(stages=[_stage(model, "accuracy", StageStatus.SKIPPED, why)])
    workdir = tempdirs.make_dir("aotipre-accuracy-")
    try:
        return _Triage(case, options, progress, workdir).run()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _stage(model: str, name: str, status: StageStatus, detail: str) -> StageResult:
    return StageResult(name, status, detail=detail, model=model)


REBUILT_TRIGGERS = frozenset({"AOT701", "AOT702", "AOT068"})
"""The triggers a rebuild of the program can localize: outputs against eager (with the swapped
weights for AOT068). AOT525 compares two loaders of the same compiled kernels."""


def _cpp_only(case: OutputMismatch) -> StageResult:
    """What triage can say of AOT525 alone (the C++ loader's outputs differ from the Python
    loader's): both run the same compiled kernels, so a kernel of the program is at fault only
    if the Python side differs from eager too."""
    model = case.model.name
    if case.python_agrees:
        detail = (
            "not a kernel difference: the Python loader's outputs match the ExportedProgram run "
            "eagerly, the C++ loader's differ (AOT525); both run the same compiled kernels, so "
            "no rebuild can localize it: look at what the C++ deployment does otherwise (the "
            "inputs it passes, threads, environment; see the C++ harness, docs/cpp.md)"
        )
        return _stage(model, "accuracy", StageStatus.PASSED, detail)
    detail = (
        "the C++ loader's outputs differ from the Python loader's (AOT525) and the Python "
        f"loader's were not compared with eager ({case.reference_label}): whether a kernel is at "
        f"fault cannot be told; {NEEDS_EXPORTED_PROGRAM}"
    )
    return _stage(model, "accuracy", StageStatus.SKIPPED, detail)


class _Triage:
    """One model's accuracy triage: its scratch folder, budget and worker jobs."""

    def __init__(
        self,
        case: OutputMismatch,
        options: AccuracyOptions,
        progress: Callable[[str], None] | None,
        workdir: str,
    ) -> None:
        self.case = case
        self.opts = options
        self.progress = progress
        self.workdir = workdir
        self.deadline = time.monotonic() + options.budget_s
        self.jobs = itertools.count(1)
        self.inputs = self._inputs()
        self.nonfinite = "AOT702" in case.codes  # NaN/Inf: localize where they start
        self.weights = None if {"AOT701", "AOT702"} & set(case.codes) else case.weights
        """The swapped weights (AOT068 alone): the program's rebuilds and eager runs carry them."""
        self.cuda = case.device.startswith("cuda")
        self.package_tf32 = self.cuda and package_used_tf32(case.package.path, case.archive)
        """The deployed package's Triton kernels were compiled with TF32: rebuilds are too."""
        self.torch_version = ""
        """The worker's torch (the diagnostic rebuild's trace says it)."""
        self.latencies: dict[str, Latency] = {}
        """The latency cost measured by each whole-program rebuild that matched eager."""
        self.spec: Speculation | None = None
        """The likeliest knob's whole-program rebuild, run beside localization."""
        self.started = time.monotonic()
        self.announced = False
        """Whether the proven cause was said already (before the repro)."""

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.case.model.name}: accuracy: {text}")

    def _inputs(self) -> dict[str, Any]:
        """The inputs spec, with archive-stored inputs written to a file (the rebuilds read the
        ExportedProgram's archive, which may be another)."""
        spec = dict(self.case.inputs)
        if spec.get("kind") != "member":
            return spec
        from aotipre.pt2.archive import archive_at

        path = os.path.join(self.workdir, "inputs.pt")
        with archive_at(self.case.package.path, self.case.archive) as archive:
            data = archive.read(str(spec["member"]))
        with open(path, "wb") as f:
            f.write(data)
        return {"kind": "file", "path": path}

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def job(
        self,
        name: str,
        steps: list[dict[str, Any]],
        on_start: Callable[[int], None] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Run `steps` in a fresh worker within what is left of the budget: (the entries by
        step id, '' or why the worker did not finish). Thread-safe (the speculative rebuild
        runs one beside the others)."""
        opts = self.case.options
        left = max(1.0, self.left_s())
        job = {
            "protocol": 1,
            "tag": f"accuracy-{name}-{next(self.jobs)}",
            "package": self.case.reference,
            "source_package": self.case.reference,
            "model": self.case.reference_model,
            "aoti_model": "model",
            "device": self.case.device,
            "workdir": self.workdir,
            "inputs": self.inputs,
            "ep_weights": self.weights,
            "seed": opts.seed,
            "rtol": opts.rtol,
            "atol": opts.atol,
            "step_timeout_s": min(opts.timeout_s, left),
            "compile_timeout_s": min(opts.compile_timeout_s, left),
            "capture_stdout": True,
            "steps": steps,
        }
        if self.case.vec_isa is not None:
            job["vec_isa"] = list(self.case.vec_isa)  # the session's load probed; skip it here
        budget = min(launch.job_budget_s(steps, opts.timeout_s, opts.compile_timeout_s), left)
        _, outcome = launch.run_job_file(
            job,
            lambda path: launch.worker_argv(opts.python, opts.worker_command, path),
            env=launch.job_env(self.case.env),
            budget_s=budget,
            on_start=on_start,
        )
        return _entries(outcome), _died(outcome, self.left_s() <= 0)

    def run(self) -> AccuracyResult:
        """Localize, then prove; the speculative rebuild (accuracy_spec.py) runs beside the
        localizing one and is stopped, whatever happens, before this returns."""
        device = "cuda" if self.cuda else "cpu"
        guesses = tuple(
            k
            for k in KNOBS
            if k.device in ("any", device)
            and not k.min_torch
            and inductor_only(k.configs) == dict(k.configs)
        )
        speculate = self.opts.speculate
        if speculate is None:
            cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else ()
            speculate = (len(cpus) or os.cpu_count() or 1) >= 2
        if guesses and speculate:
            self.spec = Speculation(guesses, self._trial)
        try:
            return self._run()
        finally:
            if self.spec is not None:
                self.spec.stop()

    def _run(self) -> AccuracyResult:
        model = self.case.model.name
        result = AccuracyResult()
        started = time.monotonic()
        trace, why, localized_on = self._localize()
        self.torch_version = str(trace.get("torch") or "")
        if why:
            result.stages.append(
                _stage(model, "accuracy:localize", StageStatus.ERROR, f"inconclusive: {why}")
            )
            return result
        reproduced = _max_abs(trace.get("reproduced") or {})
        mism = _mismatches(trace.get("reproduced") or {})
        launches = [x for x in trace.get("launches") or [] if isinstance(x, Mapping)]
        found = localize(launches, self.nonfinite)
        rmse = trace.get("rmse") or {}
        if not mism and not self.nonfinite:
            detail = (
                "the diagnostic rebuild of the ExportedProgram matches eager: the package's "
                "difference does not reproduce when rebuilt (was it compiled from this program, "
                "or with other configs?)"
            )
            if self.weights is not None:
                detail = (
                    "the diagnostic rebuild of the ExportedProgram with the swapped weights "
                    "compiled in matches eager given them: the difference after the swap does "
                    "not reproduce when the weights are compiled in (it comes with the swap "
                    "itself, not a kernel's arithmetic)"
                )
            result.stages.append(_stage(model, "accuracy:localize", StageStatus.PASSED, detail))
            return result
        if found.index is None:
            detail = (
                f"no kernel's compared outputs differ from their FX nodes ({len(launches)} "
                "launch(es)); the difference is in outputs with no eager counterpart"
            )
            result.stages.append(_stage(model, "accuracy:localize", StageStatus.PASSED, detail))
            return result
        first = launches[found.index]
        err = found.series[found.index]
        kernel = str(first.get("kernel"))
        facts = dict(first.get("facts") or trace.get("graph_facts") or {})
        facts["cuda"] = self.cuda
        eager_tf32 = trace.get("eager_tf32") or {}
        facts["tf32"] = self.cuda and tf32_fact(facts, self.package_tf32, eager_tf32)
        self.say(f"first divergent kernel {kernel} ({time.monotonic() - started:.1f} s)")
        result.stages.append(
            _stage(
                model,
                "accuracy:localize",
                StageStatus.PASSED,
                f"{kernel} of {len(launches)} launch(es)",
            )
        )
        repro, trials, trials_on, confirm = self._prove(
            [str(n) for n in first.get("nodes") or ()], facts, trace.get("graph_facts") or {}
        )
        cause = next((t.knob for t in trials if t.verdict == "cause"), None)
        if cause and not self.announced:
            self.say(f"cause proven: {cause} ({time.monotonic() - self.started:.1f} s)")
        diagnosis = AccuracyDiagnosis(
            model=model,
            trigger=self.case.codes,
            kernel=kernel,
            nodes=tuple(str(n) for n in first.get("nodes") or ()),
            source=tuple(str(s) for s in first.get("source") or ()),
            inputs_agree=found.inputs_agree,
            series=found.series,
            output_max_abs=reproduced,
            cause=cause,
            trials=tuple(trials),
            rmse_compiled=opt_float(rmse.get("compiled")),
            rmse_eager=opt_float(rmse.get("eager")),
            repro=repro,
            trials_on=trials_on,
            confirm=confirm,
            latency=self.latencies.get(cause) if cause else None,
            localized_on=localized_on,
        )
        diagnosis = _with_summary(diagnosis, err, self.nonfinite)
        result.diagnosis = diagnosis
        status = StageStatus.PASSED if cause else StageStatus.FAILED
        result.stages.append(
            _stage(model, "accuracy:cause", status, _trials_text(trials) or "no knob applies")
        )
        result.findings.extend(_findings(diagnosis, err, self.nonfinite))
        return result

    def _localize(self) -> tuple[dict[str, Any], str, str]:
        """Each launch's outputs against eager: (the trace step's entry, why there is none or
        '', which compile it ran: LOCALIZED_ON's values). On CPU, first from the program's
        Python-wrapper compile, taken only when it is the deployed package bit for bit; else,
        and on CUDA, from the printer build."""
        if (
            self.opts.python_wrapper
            and not self.cuda
            and self.weights is None
            and self.case.deployed
        ):
            self.say("compiling the ExportedProgram with Inductor's Python wrapper")
            step = {
                "id": "trace",
                "op": "accuracy_trace_jit",
                "deployed": self.case.deployed,
                "deployed_model": self.case.deployed_model,
                "inductor_configs": dict(self.case.compiled_with),
                "scratch": os.path.join(self.workdir, "python-wrapper"),
            }
            entries, died = self.job("localize", [step])
            trace = entries.get("trace") or {}
            if trace.get("status") == "ok":
                return trace, "", "python wrapper"
            why = _why(entries, ("trace",), died)
            if self.left_s() <= 0:  # no budget for the printer build either
                return trace, why, "python wrapper"
            self.say(f"the Python-wrapper compile cannot stand in for the package: {why}")
        self.say("compiling the ExportedProgram with the intermediate value printer")
        package = os.path.join(self.workdir, "diagnostic", "package.pt2")
        configs = {**dict(self.case.compiled_with), **DIAGNOSTIC_CONFIGS}
        entries, died = self.job(
            "localize",
            rebuild_steps(
                {"id": "compile", "op": "compile", "out": package, "inductor_configs": configs},
                [
                    {
                        "id": "trace",
                        "op": "accuracy_trace",
                        "package": package,
                        "model": "model",
                        "scratch": os.path.join(self.workdir, "scratch"),
                    }
                ],
                self.package_tf32,
            ),
        )
        trace = entries.get("trace") or {}
        if trace.get("status") != "ok":
            return trace, _why(entries, ("compile", "trace"), died), "printer build"
        return trace, "", "printer build"

    def _prove(
        self, nodes: list[str], facts: Mapping[str, bool], program_facts: Mapping[str, bool]
    ) -> tuple[Repro, list[KnobTrial], str, KnobTrial | None]:
        """Cut the kernel's verified repro and run the ladder on it (cheap compiles), then
        confirm its cause with one full rebuild of the program (timed against the deployed
        package); without a verified repro, the ladder on the whole program. When the
        speculative rebuild used the kernel's first knob and matches eager, the cause is proven
        on the whole program and the repro is only cut and verified. (the repro, the trials,
        what they rebuilt, the confirming rebuild)."""
        tried, _ = ladder_for(facts)
        early = self._speculated(tried[0] if tried else None, program_facts)
        if early is not None and early.verdict == "cause":
            self.say(
                f"cause proven: {early.knob}, by the whole-program rebuild started beside "
                f"localization ({time.monotonic() - self.started:.1f} s); the repro follows"
            )
            self.announced = True
            repro, _ = self._cut(nodes, [])
            return repro, [early], "program", None
        # the repro is compiled with inductor configs alone: a knob with process settings
        # (TF32), one this torch may lack, or a package compiled with TF32 rebuild the program
        on_repro = not self.package_tf32 and all(
            inductor_only(k.configs) == dict(k.configs)
            and not untestable(k.min_torch, self.torch_version)
            for k in tried
        )
        repro, trials = self._cut(nodes, tried if on_repro else [])
        if repro.verified and on_repro:
            cause = next((t for t in trials if t.verdict == "cause"), None)
            if cause is None:
                return repro, trials, "repro", None
            knob = next(k for k in KNOBS if k.id == cause.knob)
            if early is not None and early.knob == knob.id:  # the same rebuild, done already
                return repro, trials, "repro", early
            self.say(f"confirming with one full rebuild with {_configs_text(knob.configs)}")
            return repro, trials, "repro", self._trial(knob, timed="always")
        return repro, self._ladder(facts), "program", None

    def _cut(self, nodes: list[str], knobs: list[Knob]) -> tuple[Repro, list[KnobTrial]]:
        """The kernel's repro, cut, verified and kept (accuracy_repro.py), with `knobs` tried
        on it."""
        if not nodes:
            return Repro(False, "", detail="the kernel has no FX nodes to cut (provenance)"), []
        self.say("cutting the divergent kernel's FX nodes out and compiling them alone")
        repro, trials, folder = repro_and_trials(self, nodes, knobs)
        if folder is not None:
            try:
                kept = keep(folder, self.opts.artifacts, self.case.model.name)
            except OSError as exc:
                why = f"; it could not be kept in {self.opts.artifacts}: {exc}"
                repro = replace(repro, detail=repro.detail + why)
            else:
                repro = replace(repro, path=kept)
        return repro, trials

    def _speculated(self, first: Knob | None, program_facts: Mapping[str, bool]) -> Any:
        """The speculative rebuild's KnobTrial when it rebuilt with `first` (the kernel's first
        knob; waits for it), else None, after stopping it (its CPU is the next steps')."""
        spec = self.spec
        if spec is None:
            return None
        guess = spec.predicted(program_facts)
        if first is None or guess is None or guess.id != first.id:
            spec.stop()
            return None
        trial = spec.result()
        return trial if trial is not None and trial.knob == first.id else None

    def _ladder(self, facts: Mapping[str, bool]) -> list[KnobTrial]:
        tried, _ = ladder_for(facts)
        trials: list[KnobTrial] = []
        for knob in tried:
            if self.left_s() < 5:
                trials.append(KnobTrial(knob.id, knob.configs, "not run", "the budget ran out"))
                continue
            self.say(f"rebuilding with {_configs_text(knob.configs)}")
            trial = self._trial(knob, timed="if it matches")
            trials.append(trial)
            if trial.verdict == "cause":
                break
        return trials

    def _trial(
        self,
        knob: Knob | None = None,
        timed: str = "",
        *,
        among: tuple[Knob, ...] = (),
        on_start: Callable[[int], None] | None = None,
    ) -> KnobTrial:
        """Rebuild the whole program with `knob` and compare it with eager; then time it
        against the deployed package (self.latencies): `timed` "always", or "if it matches".
        Without `knob`, the speculative rebuild: the worker takes the first of `among` whose
        fact holds on the program, timed if it matches."""
        started = time.monotonic()
        if knob is not None:
            why_not = untestable(knob.min_torch, self.torch_version)
            if why_not:
                return KnobTrial(knob.id, knob.configs, "not testable on this torch", why_not)
        name = knob.id if knob is not None else "speculative"
        package = os.path.join(self.workdir, name, "package.pt2")
        configs = dict(self.case.compiled_with)
        compile_step: dict[str, Any] = {"id": "compile", "op": "compile", "out": package}
        if knob is not None:
            configs.update(inductor_only(knob.configs))
        else:
            compile_step["configs_by_fact"] = [[k.fact, inductor_only(k.configs)] for k in among]
            timed = "if it matches"
        steps = rebuild_steps(
            {**compile_step, "inductor_configs": configs},
            [{"id": "compare", "op": "accuracy_compare", "package": package, "model": "model"}],
            self.package_tf32,
            knob_tf32(knob.configs) if knob is not None else None,
        )
        timing = latency_step(self.case, package, timed != "always") if timed else None
        entries, died = self.job(name, steps + ([timing] if timing else []), on_start)
        took = time.monotonic() - started
        if knob is None:
            fact = (entries.get("compile") or {}).get("fact")
            knob = next((k for k in among if k.fact == fact), None)
            if knob is None:
                return KnobTrial(name, {}, "inconclusive", _why(entries, ("compile",), died))
        latency = latency_of(entries)
        if latency is not None:
            self.latencies[knob.id] = latency
        cmp = entries.get("compare") or {}
        if cmp.get("status") != "ok":
            comp = entries.get("compile") or {}
            message = str((comp.get("error") or {}).get("message") or "")
            if "is not available in torch" in message:
                return KnobTrial(
                    knob.id, knob.configs, "not testable on this torch", message, seconds=took
                )
            why = _why(entries, ("compile", "compare"), died)
            return KnobTrial(
                knob.id, knob.configs, "inconclusive", f"the rebuild failed: {why}", seconds=took
            )
        mism = _mismatches(cmp)
        worst = _max_abs(cmp)
        if cmp.get("structure") or mism:
            what = f"the rebuild still differs from eager (max abs error {_num(worst)})"
            return KnobTrial(knob.id, knob.configs, "not the cause", what, worst, took)
        return KnobTrial(
            knob.id,
            knob.configs,
            "cause",
            f"the rebuild matches eager (max abs error {_num(worst)}): {knob.cause}",
            worst,
            took,
        )


def _entries(outcome: ProcessOutcome) -> dict[str, dict[str, Any]]:
    steps = (outcome.result or {}).get("steps")
    return (
        {k: v for k, v in steps.items() if isinstance(v, dict)} if isinstance(steps, dict) else {}
    )


def _died(outcome: ProcessOutcome, budget_spent: bool = False) -> str:
    """Why a worker did not finish; `budget_spent`: the triage's budget is gone (the worker's
    step limits were what was left of it, so a step that ran past its limit ran out of it)."""
    if outcome.timed_out or (budget_spent and not (outcome.result or {}).get("done")):
        return "the accuracy triage's budget ran out (--accuracy-budget)"
    if outcome.crashed:
        return f"the worker crashed ({outcome.signal_name})"
    if not outcome.ok and not (outcome.result or {}).get("done"):
        return f"the worker failed (exit {outcome.returncode})"
    return ""


def _why(entries: Mapping[str, Mapping[str, Any]], order: tuple[str, ...], died: str) -> str:
    """The first step of `order` that did not succeed, and its error's first line."""
    for sid in order:
        entry = entries.get(sid)
        if entry is None:
            return f"{sid}: {died or 'not reached'}"
        if entry.get("status") != "ok":
            err = entry.get("error") or {}
            text = str(err.get("message") or "").strip().splitlines()
            return f"{sid}: {err.get('type', 'error')}: {text[0][:300] if text else ''}".strip()
    return died or "unknown"


def _mismatches(cmp: Mapping[str, Any]) -> int:
    return sum(int(o.get("mismatches") or 0) for o in cmp.get("outputs") or [])


def _max_abs(cmp: Mapping[str, Any]) -> float | None:
    vals = [float(o["max_abs"]) for o in cmp.get("outputs") or [] if o.get("max_abs") is not None]
    return max(vals) if vals else None


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _configs_text(configs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in configs.items())


def _trials_text(trials: list[KnobTrial] | tuple[KnobTrial, ...]) -> str:
    return "; ".join(f"{t.knob}: {t.verdict}" for t in trials)


def _closer(d: AccuracyDiagnosis) -> str:
    c, e = d.rmse_compiled, d.rmse_eager
    if c is None or e is None:
        return "fp64 comparison not available"
    side = "compiled" if c < e else "eager" if e < c else "neither"
    return f"RMSE vs fp64: compiled {c:.3g}, eager {e:.3g} ({side} closer)"


def _where(d: AccuracyDiagnosis) -> str:
    where = [f"FX nodes {', '.join(d.nodes)}"] if d.nodes else []
    where += [f"model code {d.source[0]}"] if d.source else []
    return f"kernel {d.kernel}" + (f" ({'; '.join(where)})" if where else "")


def _head(d: AccuracyDiagnosis, err: KernelError, nonfinite: bool) -> str:
    """Where the difference starts, and how large it is there and at the outputs."""
    if nonfinite:
        came = "came in through its inputs" if d.inputs_agree is False else "its inputs are finite"
        return f"first NaN/Inf in {_where(d)}: {err.nonfinite} new there, {came}"
    return (
        f"divergence starts in {_where(d)}: max abs error {_num(err.max_abs)} there, "
        f"{_num(d.output_max_abs)} at the outputs"
    )


def _with_summary(d: AccuracyDiagnosis, err: KernelError, nonfinite: bool) -> AccuracyDiagnosis:
    from dataclasses import replace

    what = _head(d, err, nonfinite)
    if d.cause:
        proof = f"cause: {d.cause} (proven by rebuild)"
    elif d.trials:
        proof = f"no cause proven ({_trials_text(d.trials)})"
    else:
        proof = "no knob applies: no cause proven"
    if d.latency is not None:
        proof += f", {d.latency.text}"
    return replace(d, summary=f"{what}; {proof}; {_repro_text(d)}; {_closer(d)}")


def _repro_text(d: AccuracyDiagnosis) -> str:
    """What the repro is and where it is kept, in a few words."""
    r = d.repro
    if r is None:
        return "no repro"
    if not r.verified:
        return f"no repro verified ({r.detail})"
    where = f"kept in {r.path}" if r.path else "pass --artifacts DIR to keep it"
    return (
        f"repro verified ({r.route} route: {len(r.nodes)} of {r.program_nodes} operator "
        f"nodes, max abs error {_num(r.max_abs)} compiled alone; {where})"
    )


def _proof_text(d: AccuracyDiagnosis, cause: KnobTrial) -> str:
    """How the cause was proven: on the repro and by one full rebuild, or by a full rebuild."""
    configs = _configs_text(cause.configs)
    if d.trials_on != "repro":
        return (
            f"rebuilding the ExportedProgram with {configs} matches eager "
            f"(max abs error {_num(cause.max_abs)})"
        )
    text = (
        f"rebuilding its repro ({len(d.repro.nodes) if d.repro else 0} operator nodes) with "
        f"{configs} matches eager (max abs error {_num(cause.max_abs)})"
    )
    full = d.confirm
    if full is None:
        return text + "; the program was not rebuilt with it"
    if full.verdict == "cause":
        return text + (
            f"; one full rebuild of the program with it matches eager too "
            f"(max abs error {_num(full.max_abs)})"
        )
    if full.verdict == "not the cause":
        return text + (
            f"; one full rebuild of the program with it still differs from eager (max abs "
            f"error {_num(full.max_abs)}): the kernel's cause is proven, another kernel "
            "differs too, the outputs still differ"
        )
    return text + f"; the full rebuild of the program is {full.verdict}: {full.detail}"


def _findings(d: AccuracyDiagnosis, err: KernelError, nonfinite: bool) -> list[Finding]:
    model = d.model
    agree = {
        True: "its inputs agree with eager",
        None: "some of its inputs are internal buffers with no eager value",
        False: "NaN/Inf came in through its inputs",
    }[d.inputs_agree]
    series = ", ".join(f"{k.kernel} {_num(k.max_abs)}" for k in d.series if k.compared)
    head = _head(d, err, nonfinite)
    out = [
        codes.get("AOT708").finding(
            f"accuracy triage ({', '.join(d.trigger)}): {head}; {agree}; error per kernel: "
            f"{series or 'none compared'}",
            model=model,
            stage="accuracy",
            evidence=list(d.source),
        )
    ]
    cause = next((t for t in d.trials if t.verdict == "cause"), None)
    if cause is not None:
        knob = next(k for k in KNOBS if k.id == cause.knob)
        out.append(
            codes.get("AOT709").finding(
                f"the difference in {d.kernel} is {knob.cause}: {_proof_text(d, cause)}; "
                + (
                    f"{d.latency.text} with it against the deployed package"
                    if d.latency is not None
                    else "latency cost not measured"
                )
                + f"; {_repro_text(d)}; {_closer(d)}",
                hint=knob.hint
                or f"compile with inductor_configs={{{_configs_text_py(cause.configs)}}} if "
                "the deployment needs eager's numbers; else accept the difference (the fp64 "
                "comparison says which side is more accurate) and loosen --rtol/--atol",
                model=model,
                stage="accuracy",
                expected=_configs_text(cause.configs),
            )
        )
    else:
        tried = "; ".join(f"{t.knob} ({t.verdict}: {t.detail})" for t in d.trials)
        _, skipped = ladder_for({})
        facts = ", ".join(FACT_WORDS[k.fact] for k in skipped)
        out.append(
            codes.get("AOT710").finding(
                f"no rebuild explains the difference in {d.kernel}: "
                + (
                    f"tried {tried}"
                    if tried
                    else f"no knob applies (its nodes hold none of: {facts})"
                )
                + f"; no cause is proven: a compiler bug candidate; {_repro_text(d)}; "
                f"{_closer(d)}",
                model=model,
                stage="accuracy",
            )
        )
    return out


def _configs_text_py(configs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k!r}: {v!r}" for k, v in configs.items())
