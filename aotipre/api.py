"""The library entry points: inspect() and check(). Data flows one way:
inspect -> static checks -> staged runs -> escalation -> Report."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from aotipre import __version__, codes
from aotipre.checks import run_static_checks
from aotipre.errors import InputsError, PackageError, UnsafeInputsError, UsageError
from aotipre.findings import Report, Severity, StageResult, StageStatus
from aotipre.host import detect_local, parse_target
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.inputs.meta import SampleInputs
from aotipre.pt2.archive import open_archive
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo, PackageInfo, package_to_dict


@dataclass(frozen=True)
class CheckOptions:
    """Everything `aotipre check` can be told (the CLI maps its flags onto this)."""

    inputs: str | None = None
    model: str | None = None
    target: str | None = None
    static_only: bool = False
    fail_on: Severity = Severity.ERROR


def inspect(path: str | os.PathLike[str]) -> PackageInfo:
    """Read a .pt2 without loading any code. Raises PackageError with one clear line."""
    return read_package(path)


def check(path: str | os.PathLike[str], options: CheckOptions | None = None) -> Report:
    """Run the preflight on one package and return the Report (never raises for bad input)."""
    opts = options or CheckOptions()
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
    except UsageError as exc:
        _cannot_check(report, exc, "AOT009" if "model" in str(exc) else "AOT001")
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
    return report


def _select_models(package: PackageInfo, opts: CheckOptions) -> list[ModelInfo]:
    if not package.models:
        raise UsageError(f"{package.path}: the archive holds no model")
    if opts.model is not None:
        found = package.model(opts.model)
        if found is None:
            present = ", ".join(m.name for m in package.models)
            raise UsageError(f"model '{opts.model}' is not in the package (models: {present})")
        return [found]
    if opts.inputs is not None and len(package.models) > 1:
        present = ", ".join(m.name for m in package.models)
        raise UsageError(
            f"the package holds several models ({present}); say which one --inputs is for "
            "with --model"
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
        with open_archive(package.path) as archive:
            data = archive.read(model.sample_inputs_member)
        source = f"{package.path}:{model.sample_inputs_member}"
        try:
            sample = load_sample_inputs_bytes(data, source)
        except InputsError as exc:
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
