"""Accuracy triage: a compiled model whose outputs differ from eager (AOT701) or hold NaN/Inf the
reference does not (AOT702) on the sample inputs. One diagnostic rebuild of the ExportedProgram
with the intermediate value printer's save mode and provenance tracking localizes the first
kernel whose outputs differ while its inputs agree (worker step `accuracy_trace`); then a ladder
of single-knob rebuilds, ordered by what that kernel's FX nodes hold, proves a cause only when a
rebuild matches eager. Every rebuild runs in a fresh worker within the triage's own budget."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre import codes, tempdirs
from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.runner import launch
from aotipre.runner.proc import ProcessOutcome
from aotipre.runner.stages.mismatch import OutputMismatch
from aotipre.triage.accuracy_diagnosis import (
    AccuracyDiagnosis,
    KernelError,
    KnobTrial,
    opt_float,
)

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


KNOBS: tuple[Knob, ...] = (
    Knob(
        "precision-casts",
        {"emulate_precision_casts": True},
        "low_precision",
        "precision-cast elision: the fused bf16/fp16 chain keeps fp32 intermediates that eager "
        "rounds (expected Inductor behaviour)",
    ),
    Knob(
        "fallback-random",
        {"fallback_random": True},
        "rng",
        "random numbers: Inductor's RNG draws other values than ATen's (expected)",
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
FACT_WORDS = {"low_precision": "bf16/fp16 values", "rng": "an RNG op", "reduction": "a reduction"}


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
    """(knobs to try, in ladder order; knobs whose fact does not hold)."""
    tried = [k for k in KNOBS if facts.get(k.fact)]
    return tried, [k for k in KNOBS if not facts.get(k.fact)]


# -- running it


@dataclass(frozen=True)
class AccuracyOptions:
    """What accuracy triage can be told (TriageOptions carries it)."""

    escalate: bool = True
    budget_s: float = 900.0
    """Seconds for the diagnostic rebuild and the cause ladder together."""


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
    if not case.device.startswith("cpu"):
        why = (
            f"accuracy triage localizes CPU packages only (this one runs on {case.device}: "
            "Triton kernels' outputs and the CUDA knobs are not covered yet)"
        )
        return AccuracyResult(stages=[_stage(model, "accuracy", StageStatus.SKIPPED, why)])
    workdir = tempdirs.make_dir("aotipre-accuracy-")
    try:
        return _Triage(case, options, progress, workdir).run()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _stage(model: str, name: str, status: StageStatus, detail: str) -> StageResult:
    return StageResult(name, status, detail=detail, model=model)


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
        self.jobs = 0
        self.inputs = self._inputs()
        self.nonfinite = "AOT702" in case.codes  # NaN/Inf: localize where they start

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.case.model.name}: accuracy: {text}")

    def _inputs(self) -> dict[str, Any]:
        """The inputs spec, with archive-stored inputs written to a file (the rebuilds read the
        ExportedProgram's archive, which may be another)."""
        spec = dict(self.case.inputs)
        if spec.get("kind") != "member":
            return spec
        from aotipre.pt2.archive import open_archive

        path = os.path.join(self.workdir, "inputs.pt")
        if self.case.archive is not None:
            data = self.case.archive.read(str(spec["member"]))
        else:
            with open_archive(self.case.package.path) as archive:
                data = archive.read(str(spec["member"]))
        with open(path, "wb") as f:
            f.write(data)
        return {"kind": "file", "path": path}

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def job(self, name: str, steps: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        """Run `steps` in a fresh worker within what is left of the budget: (the entries by
        step id, '' or why the worker did not finish)."""
        self.jobs += 1
        opts = self.case.options
        left = max(1.0, self.left_s())
        job = {
            "protocol": 1,
            "tag": f"accuracy-{name}-{self.jobs}",
            "package": self.case.reference,
            "source_package": self.case.reference,
            "model": self.case.reference_model,
            "aoti_model": "model",
            "device": self.case.device,
            "workdir": self.workdir,
            "inputs": self.inputs,
            "seed": opts.seed,
            "rtol": opts.rtol,
            "atol": opts.atol,
            "step_timeout_s": min(opts.timeout_s, left),
            "compile_timeout_s": min(opts.compile_timeout_s, left),
            "capture_stdout": True,
            "steps": steps,
        }
        budget = min(launch.job_budget_s(steps, opts.timeout_s, opts.compile_timeout_s), left)
        _, outcome = launch.run_job_file(
            job,
            lambda path: launch.worker_argv(opts.python, opts.worker_command, path),
            env=launch.job_env(self.case.env),
            budget_s=budget,
        )
        return _entries(outcome), _died(outcome)

    def run(self) -> AccuracyResult:
        model = self.case.model.name
        result = AccuracyResult()
        started = time.monotonic()
        self.say("compiling the ExportedProgram with the intermediate value printer")
        package = os.path.join(self.workdir, "diagnostic", "package.pt2")
        configs = {**dict(self.case.compiled_with), **DIAGNOSTIC_CONFIGS}
        entries, died = self.job(
            "localize",
            [
                {"id": "compile", "op": "compile", "out": package, "inductor_configs": configs},
                {
                    "id": "trace",
                    "op": "accuracy_trace",
                    "package": package,
                    "model": "model",
                    "scratch": os.path.join(self.workdir, "scratch"),
                },
            ],
        )
        trace = entries.get("trace") or {}
        if trace.get("status") != "ok":
            why = _why(entries, ("compile", "trace"), died)
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
        facts = first.get("facts") or trace.get("graph_facts") or {}
        self.say(f"first divergent kernel {kernel} ({time.monotonic() - started:.1f} s)")
        result.stages.append(
            _stage(
                model,
                "accuracy:localize",
                StageStatus.PASSED,
                f"{kernel} of {len(launches)} launch(es)",
            )
        )
        trials = self._ladder(facts)
        cause = next((t.knob for t in trials if t.verdict == "cause"), None)
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
        )
        diagnosis = _with_summary(diagnosis, err, self.nonfinite)
        result.diagnosis = diagnosis
        status = StageStatus.PASSED if cause else StageStatus.FAILED
        result.stages.append(
            _stage(model, "accuracy:cause", status, _trials_text(trials) or "no knob applies")
        )
        result.findings.extend(_findings(diagnosis, err, self.nonfinite))
        return result

    def _ladder(self, facts: Mapping[str, bool]) -> list[KnobTrial]:
        tried, _ = ladder_for(facts)
        trials: list[KnobTrial] = []
        for knob in tried:
            if self.left_s() < 5:
                trials.append(KnobTrial(knob.id, knob.configs, "not run", "the budget ran out"))
                continue
            self.say(f"rebuilding with {_configs_text(knob.configs)}")
            trial = self._trial(knob)
            trials.append(trial)
            if trial.verdict == "cause":
                break
        return trials

    def _trial(self, knob: Knob) -> KnobTrial:
        started = time.monotonic()
        package = os.path.join(self.workdir, knob.id, "package.pt2")
        configs = {**dict(self.case.compiled_with), **dict(knob.configs)}
        entries, died = self.job(
            knob.id,
            [
                {"id": "compile", "op": "compile", "out": package, "inductor_configs": configs},
                {"id": "compare", "op": "accuracy_compare", "package": package, "model": "model"},
            ],
        )
        took = time.monotonic() - started
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


def _died(outcome: ProcessOutcome) -> str:
    if outcome.timed_out:
        return "the worker ran out of the accuracy triage's budget"
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
    return replace(d, summary=f"{what}; {proof}; {_closer(d)}")


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
                f"the difference in {d.kernel} is {knob.cause}: rebuilding the ExportedProgram "
                f"with {_configs_text(cause.configs)} matches eager "
                f"(max abs error {_num(cause.max_abs)}); {_closer(d)}",
                hint=f"compile with inductor_configs={{{_configs_text_py(cause.configs)}}} if "
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
                + f"; no cause is proven: a compiler bug candidate; {_closer(d)}",
                model=model,
                stage="accuracy",
            )
        )
    return out


def _configs_text_py(configs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k!r}: {v!r}" for k, v in configs.items())
