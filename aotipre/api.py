"""The library entry points: inspect() and check(). Data flows one way:
inspect -> static checks -> staged runs -> escalation -> select/ignore, baseline -> Report."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aotipre import __version__, codes
from aotipre.baseline import Baseline, apply_baseline, replace_findings
from aotipre.checks import run_static_checks
from aotipre.errors import InputsError, PackageError, UnsafeInputsError, UsageError
from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus
from aotipre.host import detect_local, parse_target
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.inputs.meta import SampleInputs
from aotipre.program import is_path, write_program
from aotipre.pt2.archive import open_archive
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo, PackageInfo, package_to_dict

if TYPE_CHECKING:  # the runner is imported only when dynamic stages run
    from aotipre.runner.stages import DynamicOptions, RunCrash
    from aotipre.triage.escalate import TriageOptions


@dataclass(frozen=True)
class CheckOptions:
    """Everything `aotipre check` can be told (the CLI maps its flags onto this)."""

    inputs: str | None = None
    model: str | None = None
    target: str | None = None
    static_only: bool = False
    fail_on: Severity = Severity.ERROR
    dynamic: DynamicOptions | None = None
    """Options of the compile/load/run/compare/probe stages; None: their defaults."""
    progress: Callable[[str], None] | None = None
    """Called with one-line progress messages during long work (compiles, runs)."""
    select: tuple[str, ...] = ()
    """Report only codes starting with one of these prefixes (e.g. `AOT3`); empty: all."""
    ignore: tuple[str, ...] = ()
    """Drop codes starting with one of these prefixes (wins over `select`)."""
    baseline: Baseline | None = None
    """Accepted findings (baseline.load_baseline); only findings not in it remain."""
    triage: TriageOptions | None = None
    """Crash triage after a run that crashed inside the model (aotipre.triage); None: its
    defaults (escalate, no minifier, no sanitizer, no bundle)."""
    canary: bool = True
    """When a model's load or run crashes, run the host canary (aotipre doctor's trivial model,
    its result cached per host and torch version) and blame the host (AOT412) if it crashes too."""


def inspect(path: str | os.PathLike[str]) -> PackageInfo:
    """Read a .pt2 without loading any code. Raises PackageError with one clear line."""
    return read_package(path)


def check(
    subject: str | os.PathLike[str] | Any,
    options: CheckOptions | None = None,
    *,
    example_inputs: tuple[Any, ...] | None = None,
    example_kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    name: str | None = None,
) -> Report:
    """Run the preflight and return the Report (never raises for a bad package or inputs).

    `subject` is a .pt2 path, a `torch.export.ExportedProgram`, or an `nn.Module` together
    with `example_inputs` (and `example_kwargs`, `dynamic_shapes`), exported here with
    `torch.export.export`. An in-memory program is saved to a temporary .pt2 (ExportedProgram
    only, so the dynamic stages compile it in a worker) and checked like a file; the example
    inputs, when given, are its sample inputs; reports name it `name` or `<ClassName>`.
    Passing a torch object means torch is loaded in this process already: only then does this
    function import torch (aotipre imports it nowhere else but in its worker processes).
    """
    opts = options or CheckOptions()
    if is_path(subject):
        if example_inputs is not None or example_kwargs is not None or dynamic_shapes is not None:
            raise TypeError(
                "example_inputs/example_kwargs/dynamic_shapes are for in-memory programs; "
                "for a .pt2 file pass CheckOptions(inputs=FILE)"
            )
        return _finish(_check_package(subject, opts), opts)
    with tempfile.TemporaryDirectory(prefix="aotipre-program-") as tmp:
        written = write_program(
            subject,
            tmp,
            example_inputs=example_inputs,
            example_kwargs=example_kwargs,
            dynamic_shapes=dynamic_shapes,
            name=name,
        )
        if written.inputs is not None and opts.inputs is None:
            opts = dataclasses.replace(opts, inputs=written.inputs)
        report = _check_package(written.package, opts)
    report.package_path = written.label
    if report.package is not None:
        report.package["path"] = written.label
    if written.inputs is not None and report.inputs_source == written.inputs:
        report.inputs_source = "example_inputs"
    return _finish(report, opts)


def _finish(report: Report, opts: CheckOptions) -> Report:
    """Apply --select/--ignore, then the baseline (never to a report that could not check)."""
    if report.error is not None:
        return report
    if opts.select or opts.ignore:
        report = replace_findings(report, [f for f in report.findings if _selected(f.code, opts)])
    if opts.baseline is not None:
        report = apply_baseline(report, opts.baseline)
    return report


def _selected(code: str, opts: CheckOptions) -> bool:
    if any(code.startswith(prefix) for prefix in opts.ignore):
        return False
    return not opts.select or any(code.startswith(prefix) for prefix in opts.select)


def _check_package(path: str | os.PathLike[str], opts: CheckOptions) -> Report:
    report = Report(package_path=str(path), fail_on=opts.fail_on, tool_version=__version__)

    started = time.monotonic()
    try:
        package = read_package(path)
    except PackageError as exc:
        _cannot_check(report, exc, getattr(exc, "code", "AOT001"))
        report.stages.append(_stage("inspect", StageStatus.ERROR, started, str(exc)))
        return report
    report.package = package_to_dict(package)
    report.stages.append(
        _stage(
            "inspect",
            StageStatus.PASSED,
            started,
            f"{package.kind}, {len(package.models)} model(s)",
        )
    )

    try:
        models = _select_models(package, opts)
        host = (
            parse_target(opts.target)
            if opts.target
            else detect_local(
                probe_cuda=any((m.device_type or "").startswith("cuda") for m in models)
            )
        )
    except _SelectionError as exc:
        _cannot_check(report, exc, exc.code)
        return report
    except UsageError as exc:  # a bad --target: no finding to report, only why it cannot check
        report.error = str(exc)
        return report
    report.host = host.to_dict()

    started = time.monotonic()
    samples: dict[str, SampleInputs | None] = {}
    try:
        for model in models:
            samples[model.name] = _sample_inputs(package, model, opts, report)
    except InputsError as exc:
        code = "AOT021" if isinstance(exc, UnsafeInputsError) else "AOT020"
        _cannot_check(report, exc, code)
        report.stages.append(_stage("inputs", StageStatus.ERROR, started, str(exc)))
        return report
    report.stages.append(
        _stage("inputs", StageStatus.PASSED, started, report.inputs_source or "none")
    )

    started = time.monotonic()
    soft = opts.static_only and opts.target is None
    findings = run_static_checks(package, models, samples, host, soft_host=soft)
    report.findings.extend(findings)
    failed = any(f.severity.rank >= opts.fail_on.rank for f in findings)
    report.stages.append(
        _stage(
            "static",
            StageStatus.FAILED if failed else StageStatus.PASSED,
            started,
            f"{len(findings)} finding(s)",
        )
    )
    if opts.static_only:
        return report
    for model in models:
        # stored sample inputs the static checks could not read are not handed to the run
        # either: the dynamic stages synthesize inputs instead (the AOT020 warning says why)
        stored = samples.get(model.name) is not None and opts.inputs is None
        _dynamic(
            report,
            package,
            model,
            opts,
            blocked=_static_blockers(findings, model),
            member=model.sample_inputs_member if stored else None,
        )
    return report


def _static_blockers(findings: list[Finding], model: ModelInfo) -> list[str]:
    """Error findings that make running `model` pointless or unsafe (bad inputs, wrong host)."""
    return sorted(
        {
            f.code
            for f in findings
            if f.severity is Severity.ERROR and (f.model in (None, model.name))
        }
    )


def _dynamic(
    report: Report,
    package: PackageInfo,
    model: ModelInfo,
    opts: CheckOptions,
    blocked: list[str],
    member: str | None,
) -> None:
    from aotipre.runner.stages import STAGES, DynamicOptions, run_dynamic_stages

    if blocked:
        reason = f"static checks found errors ({', '.join(blocked)}); fix them first"
        report.stages.extend(
            StageResult(name=n, status=StageStatus.SKIPPED, detail=reason, model=model.name)
            for n in STAGES
        )
        return
    inputs_path = opts.inputs
    escalations: list[Any] = []

    def triage(crash: RunCrash) -> None:  # runs while the crashed session's files exist
        from aotipre.triage.escalate import escalate

        escalations.append(escalate(crash, opts.triage, opts.progress))

    stages, findings = run_dynamic_stages(
        package,
        model,
        inputs_path,
        member,
        opts.dynamic or DynamicOptions(),
        opts.progress,
        on_run_crash=triage,
    )
    report.stages.extend(stages)
    report.findings.extend(findings)
    for escalation in escalations:
        report.stages.extend(escalation.stages)
        report.findings.extend(escalation.findings)
        if escalation.diagnosis is not None:
            report.diagnosis.append(escalation.diagnosis)
    if opts.canary:
        _host_canary(report, model, opts)


def _host_canary(report: Report, model: ModelInfo, opts: CheckOptions) -> None:
    """A crash that the host alone could cause is checked against the canary (aotipre.doctor)."""
    from aotipre.doctor.canary import attribute_crashes
    from aotipre.runner.stages import DynamicOptions

    dynamic = opts.dynamic or DynamicOptions()
    device = dynamic.device or model.device_type or "cpu"
    extra, report.findings = attribute_crashes(
        model.name, device, report.findings, dynamic, opts.progress
    )
    report.stages.extend(extra)


class _SelectionError(UsageError):
    """--model does not select a model of this package (a finding code says which way)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _select_models(package: PackageInfo, opts: CheckOptions) -> list[ModelInfo]:
    if not package.models:
        raise _SelectionError("AOT010", f"{package.path}: the archive holds no model")
    if opts.model is not None:
        found = package.model(opts.model)
        if found is None:
            present = ", ".join(m.name for m in package.models)
            raise _SelectionError(
                "AOT009", f"model '{opts.model}' is not in the package (models: {present})"
            )
        return [found]
    if opts.inputs is not None and len(package.models) > 1:
        present = ", ".join(m.name for m in package.models)
        raise _SelectionError(
            "AOT009",
            f"the package holds several models ({present}); say which one --inputs is for "
            "with --model",
        )
    return list(package.models)


def _sample_inputs(
    package: PackageInfo, model: ModelInfo, opts: CheckOptions, report: Report
) -> SampleInputs | None:
    if opts.inputs is not None:
        sample = load_sample_inputs(opts.inputs)
        report.inputs_source = str(opts.inputs)
        return sample
    if model.sample_inputs_member is not None:
        source = f"{package.path}:{model.sample_inputs_member}"
        try:
            with open_archive(package.path) as archive:
                data = archive.read(model.sample_inputs_member)  # may be too large to read
            if not data:  # torch.export.save of a program without example inputs
                report.findings.append(
                    codes.get("AOT022").finding(
                        f"no sample inputs for model '{model.name}' (the archive's "
                        f"{model.sample_inputs_member} is empty): pass --inputs FILE to check "
                        "inputs; the dynamic stages synthesize them",
                        model=model.name,
                        stage="inputs",
                    )
                )
                return None
            sample = load_sample_inputs_bytes(data, source)
        except (InputsError, PackageError) as exc:
            report.findings.append(
                codes.get("AOT020").finding(
                    f"the sample inputs stored for model '{model.name}' cannot be read: {exc}",
                    model=model.name,
                    stage="inputs",
                    severity=Severity.WARNING,
                )
            )
            return None
        report.inputs_source = "archive"
        return sample
    report.findings.append(
        codes.get("AOT022").finding(
            f"no sample inputs for model '{model.name}': pass --inputs FILE to check inputs "
            "(dynamic stages need them)",
            model=model.name,
            stage="inputs",
        )
    )
    return None


def _cannot_check(report: Report, exc: Exception, code: str) -> None:
    message = getattr(exc, "message", str(exc))
    hint = getattr(exc, "hint", "") or None
    report.error = f"{message}; {hint}" if hint else message
    report.findings.append(codes.get(code).finding(message, hint=hint, stage="inspect"))


def _stage(name: str, status: StageStatus, started: float, detail: str) -> StageResult:
    return StageResult(
        name=name, status=status, duration_s=time.monotonic() - started, detail=detail
    )
