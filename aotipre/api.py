"""The library entry points: inspect() and check(). Data flows one way:
inspect -> static checks -> staged runs -> escalation -> select/ignore, baseline -> Report.

Longer than the ~600 lines of the other modules on purpose: it is the path of one check read
top-down (check -> _check_package -> _check_opened -> the static checks -> _dynamic -> _settle), and
every helper here serves one step of that path; the steps' own logic lives in the packages it calls
(pt2, inputs, checks, runner, triage), so a split would only scatter the order of the steps.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aotipre import __version__
from aotipre.checks import run_static_checks
from aotipre.checks.contract import check_reference_program
from aotipre.checks.package import export_vs_compiled_bounds
from aotipre.environment.host import HostInfo, detect_local, parse_targets
from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus, codes
from aotipre.foundation import safeio, tempdirs
from aotipre.foundation.errors import InputsError, PackageError, UnsafeInputsError, UsageError
from aotipre.foundation.progress import stage_ended, stage_started
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.inputs.meta import SampleInputs
from aotipre.pt2.archive import Archive
from aotipre.pt2.reader import OpenPackage, open_package, read_package, with_reference_values
from aotipre.pt2.spec import ModelInfo, PackageInfo, package_to_dict

if TYPE_CHECKING:  # the runner is imported only when dynamic stages run; the baseline, custom
    # ops, weights and export modules only where used (`inspect` needs none of them)
    from aotipre.checks.custom_ops import Registration
    from aotipre.checks.target import TargetRow
    from aotipre.findings.baseline import Baseline
    from aotipre.inputs.weights import WeightsFile
    from aotipre.program import ExportFailed
    from aotipre.runner.stages import DynamicOptions, OutputMismatch, RunCrash
    from aotipre.serving.triton import ServingConfig
    from aotipre.triage.escalate import TriageOptions


@dataclass(frozen=True)
class CheckOptions:
    """Everything `aotipre check` can be told (the CLI maps its flags onto this)."""

    inputs: str | None = None
    model: str | None = None
    target: str | None = None
    """One or more deployment targets (`;` between them) or names from `targets`."""
    targets: tuple[tuple[str, str], ...] = ()
    """Named targets (`[tool.aotipre.targets]`): checked all when `target` is None."""
    static_only: bool = False
    fail_on: Severity = Severity.ERROR
    dynamic: DynamicOptions | None = None
    """Options of the compile/load/run/perf/compare/probe stages; None: their defaults."""
    progress: Callable[[str], None] | None = None
    """Called with one-line progress messages: each stage's start and end (`inspect started`,
    `model: load done (12.7 s)`: docs/ci.md#progress-in-ci-logs) and each step's own message."""
    select: tuple[str, ...] = ()
    """Report only codes starting with one of these prefixes (e.g. `AOT3`); empty: all."""
    ignore: tuple[str, ...] = ()
    """Drop codes starting with one of these prefixes (wins over `select`)."""
    baseline: Baseline | None = None
    """Accepted findings (baseline.load_baseline); only findings not in it remain."""
    triage: TriageOptions | None = None
    """Crash triage after a run that crashed inside the model (aotipre.triage); None: its
    defaults (escalate, no minifier, no sanitizer, no bundle)."""
    compile_at_deploy: bool = False
    """The deployment compiles an ExportedProgram-only archive at deploy time, so an archive
    without AOTI code (AOT015) is not an error there."""
    registration: Registration | None = None
    """Custom operators every worker registers (--import, --library); None: none."""
    cpp: bool = False
    """The package is deployed with the C++ loader: Python-only custom ops are errors."""
    exported_program: str | None = None
    """The ExportedProgram of an AOTI-only package (--exported-program): the static checks
    compare its dynamic ranges with the compiled bounds (AOT013), as for an archive holding
    both; the dynamic stages and triage get it through their own options."""
    weights: str | None = None
    """A weights file the deployment swaps in without recompiling (--weights: a torch.save
    state_dict or safetensors): read once, checked statically against each model's constants
    (AOT060-AOT066) and handed to the weights stage (DynamicOptions.weights)."""
    serving_config: ServingConfig | None = None
    """The model server's configuration the package is deployed with (a Triton config.pbtxt,
    read once with aotipre.serving.triton.load_serving_config or found in a model repository): the
    static lane checks the package against it (AOT040-AOT049)."""
    allow_pickle: bool = False
    """The user accepts members that loading the package unpickles without restriction
    (--allow-pickle): AOT081 is a warning, not an error, and the dynamic stages load it."""
    deployment_checks_inputs: bool = False
    """The serving process sets AOTI_RUNTIME_CHECK_INPUTS (--deployment-checks-inputs, also
    DynamicOptions.deployment_checks_inputs): a sample laid out otherwise than compiled is an
    AOT307 error, which the deployment's check refuses, even with --static-only."""
    against: str | None = None
    """The package in production (--against OLD.pt2): its release diff to this one runs in the
    `diff` stage (aotipre/diff/, docs/diff.md), even with --static-only; None: the perf stage's
    baseline (DynamicOptions.perf.against) when one is given, else no diff."""
    canary: bool = True
    """When a model's load or run crashes, run the host canary (aotipre doctor's trivial model,
    its result cached per host and torch version) and blame the host (AOT412) if it crashes too."""


def inspect(path: str | os.PathLike[str]) -> PackageInfo:
    """Read a .pt2 without loading any code; an AOTI-only model's outputs (which it records
    nowhere else) are read from its wrapper.cpp. Raises PackageError with one clear line."""
    from aotipre.serving.outputs import with_wrapper_outputs

    opened = open_package(path)
    with opened.archive:
        models = tuple(with_wrapper_outputs(m, opened.archive) for m in opened.info.models)
    return dataclasses.replace(opened.info, models=models)


def compatibility(
    package: PackageInfo, target: str | None = None, targets: tuple[tuple[str, str], ...] = ()
) -> tuple[list[Finding], list[TargetRow]]:
    """What the package's binaries are, and whether each target (default: this machine) can
    load every model: the findings and one row per model and target. Raises UsageError for a
    bad target."""
    from aotipre.checks import check_targets
    from aotipre.checks.package import check_package

    models = list(package.models)
    hosts = resolve_hosts(CheckOptions(target=target, targets=targets), models)
    found, rows = check_targets(package, models, hosts, soft=False)
    return [*check_package(package, models), *found], rows


def check(
    subject: str | os.PathLike[str] | Any,
    options: CheckOptions | None = None,
    *,
    example_inputs: tuple[Any, ...] | None = None,
    example_kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    name: str | None = None,
    strict: bool = False,
) -> Report:
    """Run the preflight and return the Report (never raises for a bad package or inputs).

    `subject` is a .pt2 path, a `torch.export.ExportedProgram`, or an `nn.Module` together
    with `example_inputs` (and `example_kwargs`, `dynamic_shapes`), exported here with
    `torch.export.export`. An in-memory program is saved to a temporary .pt2 (ExportedProgram
    only, so the dynamic stages compile it in a worker) and checked like a file; the example
    inputs, when given, are its sample inputs; reports name it `name` or `<ClassName>`.
    `strict` is torch.export.export's; a module that does not export gives a Report with the
    failure's class, model line and fix (AOT555-AOT557) and a failed `export` stage.
    Passing a torch object means torch is loaded in this process already: only then does this
    function import torch (aotipre imports it nowhere else but in its worker processes).
    """
    opts = options or CheckOptions()
    if isinstance(subject, (str, os.PathLike)):  # a path (program.is_path): nothing to export
        if example_inputs is not None or example_kwargs is not None or dynamic_shapes is not None:
            raise TypeError(
                "example_inputs/example_kwargs/dynamic_shapes are for in-memory programs; "
                "for a .pt2 file pass CheckOptions(inputs=FILE)"
            )
        return _finish(_check_package(subject, opts), opts)
    from aotipre.program import ExportFailed, write_program

    with tempdirs.temporary_dir("aotipre-program-") as tmp:
        started = time.monotonic()
        try:
            written = write_program(
                subject,
                tmp,
                example_inputs=example_inputs,
                example_kwargs=example_kwargs,
                dynamic_shapes=dynamic_shapes,
                name=name,
                strict=strict,
                draft_budget_s=_draft_budget(opts),
            )
        except ExportFailed as failed:
            return _finish(_export_failed(failed, opts, started), opts)
        if written.inputs is not None and opts.inputs is None:
            opts = dataclasses.replace(opts, inputs=written.inputs)
        # an in-memory program is checked by compiling it: no AOTI code is expected in it
        opts = dataclasses.replace(opts, compile_at_deploy=True)
        report = _check_package(written.package, opts)
    report.package_path = written.label
    if report.package is not None:
        report.package["path"] = written.label
    if written.inputs is not None and report.inputs_source == written.inputs:
        report.inputs_source = "example_inputs"
    return _finish(report, opts)


def _draft_budget(opts: CheckOptions) -> float | None:
    """Seconds for draft_export after a failed export (the escalation budget, --accuracy-budget);
    None under --no-escalate."""
    if opts.triage is None:
        from aotipre.triage.state import TriageOptions

        return TriageOptions().accuracy_budget_s
    return opts.triage.accuracy_budget_s if opts.triage.escalate else None


def _export_failed(failed: ExportFailed, opts: CheckOptions, started: float) -> Report:
    """The Report of a module torch.export could not export: its finding and a failed
    `export` stage (nothing else ran)."""
    report = Report(package_path=failed.label, fail_on=opts.fail_on, tool_version=__version__)
    report.findings.append(failed.finding)
    detail = failed.finding.message
    _add_stage(report, opts, _stage("export", StageStatus.FAILED, started, detail))
    return report


def _finish(report: Report, opts: CheckOptions) -> Report:
    """Apply --select/--ignore, then the baseline (never to a report that could not check)."""
    if report.error is not None:
        return report
    if opts.select or opts.ignore:
        from aotipre.findings.baseline import replace_findings

        report = replace_findings(report, [f for f in report.findings if _selected(f.code, opts)])
    if opts.baseline is not None:
        from aotipre.findings.baseline import apply_baseline

        report = apply_baseline(report, opts.baseline)
    return report


def _selected(code: str, opts: CheckOptions) -> bool:
    if any(code.startswith(prefix) for prefix in opts.ignore):
        return False
    return not opts.select or any(code.startswith(prefix) for prefix in opts.select)


def _check_package(path: str | os.PathLike[str], opts: CheckOptions) -> Report:
    report = Report(package_path=str(path), fail_on=opts.fail_on, tool_version=__version__)

    started = time.monotonic()
    _say(opts, stage_started("inspect"))
    serving = opts.serving_config
    if serving is not None and serving.model_dir is not None and serving.package is None:
        # the model folder holds no package where the backend looks: the layout says why
        report.findings.extend(serving.layout)
        report.error = serving.layout[-1].message if serving.layout else f"{path}: no package"
        _add_stage(report, opts, _stage("inspect", StageStatus.ERROR, started, report.error))
        return report
    try:
        opened = open_package(path)
    except PackageError as exc:
        _cannot_check(report, exc, getattr(exc, "code", "AOT001"))
        _add_stage(report, opts, _stage("inspect", StageStatus.ERROR, started, str(exc)))
        return report
    # the one open of each archive (the package's, --against's): every later reader gets it
    with opened.archive, ExitStack() as held:
        _check_opened(report, opened, opts, started, held)
    return report


def _check_opened(
    report: Report, opened: OpenPackage, opts: CheckOptions, started: float, held: ExitStack
) -> None:
    """The check of the open package; what else it opens (--against's package) is closed with
    `held`."""
    package, archive = opened.info, opened.archive
    report.package = package_to_dict(package)
    _add_stage(
        report,
        opts,
        _stage(
            "inspect",
            StageStatus.PASSED,
            started,
            f"{package.kind}, {len(package.models)} model(s)",
        ),
    )

    try:
        models = _select_models(package, opts)
        references = _reference_models(package, models, _exported_program(opts))
        models = [
            with_reference_values(m, references[m.name][0]) if m.name in references else m
            for m in models
        ]
        hosts = resolve_hosts(opts, models)
    except _SelectionError as exc:
        _cannot_check(report, exc, exc.code)
        return
    except UsageError as exc:  # a bad --target: no finding to report, only why it cannot check
        report.error = str(exc)
        return
    report.host = hosts[0].to_dict()

    started = time.monotonic()
    _say(opts, stage_started("inputs"))
    samples: dict[str, SampleInputs | None] = {}
    try:
        for model in models:
            samples[model.name] = _sample_inputs(package, archive, model, opts, report)
    except InputsError as exc:
        code = "AOT021" if isinstance(exc, UnsafeInputsError) else "AOT020"
        _cannot_check(report, exc, code)
        _add_stage(report, opts, _stage("inputs", StageStatus.ERROR, started, str(exc)))
        return
    _add_stage(
        report, opts, _stage("inputs", StageStatus.PASSED, started, report.inputs_source or "none")
    )

    weights = None
    if opts.weights:
        from aotipre.inputs.weights import read_weights

        try:
            weights = read_weights(opts.weights)
        except UsageError as exc:  # one line, like a bad --target
            report.error = str(exc)
            return

    started = time.monotonic()
    _say(opts, stage_started("static"))
    soft = opts.static_only and not hosts[0].is_target
    findings, rows = run_static_checks(
        package,
        models,
        samples,
        hosts,
        soft_host=soft,
        compile_at_deploy=opts.compile_at_deploy,
        allow_pickle=opts.allow_pickle,
        archive=archive,
        deployment_checks_inputs=_deployment_checks_inputs(opts, hosts),
    )
    from aotipre.checks.custom_ops import Registration, check_custom_ops

    findings += check_custom_ops(
        package, models, opts.registration or Registration(), cpp=opts.cpp, archive=archive
    )
    findings += _reference_bounds(models, references)
    if weights is not None:
        from aotipre.checks.weights import check_weights

        for model in models:
            findings += check_weights(model, weights)
    if opts.serving_config is not None:  # torch-free, imported only for a serving check
        from aotipre.serving.triton import check_config

        findings += check_config(opts.serving_config, package, models, archive)
    report.findings.extend(findings)
    report.targets = [r.to_dict() for r in rows]
    failed = any(f.severity.rank >= opts.fail_on.rank for f in findings)
    _add_stage(
        report,
        opts,
        _stage(
            "static",
            StageStatus.FAILED if failed else StageStatus.PASSED,
            started,
            f"{len(findings)} finding(s)",
        ),
    )
    against = _against(opts)
    baseline = None
    if against is not None:  # torch-free, imported only for a release diff
        from aotipre.diff.gate import diff_against

        _say(opts, stage_started("diff"))
        baseline = _open_baseline(against, opened, held)
        names = tuple(m.name for m in models)
        stage, changes = diff_against(against, opened, names, old_opened=baseline)
        report.findings.extend(changes)
        if any(f.severity.rank >= opts.fail_on.rank for f in changes):
            stage = dataclasses.replace(stage, status=StageStatus.FAILED)
        _add_stage(report, opts, stage)
    if opts.static_only:
        return
    if models and not _runtime_ready(report, opts, models):
        return
    opts = _with_target_checks(opts, hosts)
    for model in models:
        blocked = _static_blockers(findings, model)
        sample = samples.get(model.name)
        _dynamic(report, opened, model, sample, opts, blocked, weights, baseline)


def _open_baseline(path: str, new: OpenPackage, held: ExitStack) -> OpenPackage | None:
    """The --against package, opened once for the diff and perf stages (closed with `held`),
    or NEW's own open when it is NEW's file; None when it cannot be read (each stage then says
    why as it reads it)."""
    old_stat, new_stat = safeio.probe(path), safeio.probe(new.info.path)
    if old_stat is not None and new_stat is not None:
        if (old_stat.st_dev, old_stat.st_ino) == (new_stat.st_dev, new_stat.st_ino):
            return new
    try:
        baseline = open_package(path, verify_crc=False)  # as the diff reads it (weight_digests)
    except PackageError:
        return None
    held.enter_context(baseline.archive)
    return baseline


def _against(opts: CheckOptions) -> str | None:
    """--against, wherever the caller put it."""
    if opts.against is not None:
        return opts.against
    perf = opts.dynamic.perf if opts.dynamic is not None else None
    return perf.against if perf is not None else None


def _exported_program(opts: CheckOptions) -> str | None:
    """--exported-program, wherever the caller put it."""
    for where in (opts, opts.dynamic, opts.triage):
        path = getattr(where, "exported_program", None) if where is not None else None
        if path:
            return str(path)
    return None


def _reference_models(
    package: PackageInfo, models: list[ModelInfo], ep_path: str | None
) -> dict[str, tuple[ModelInfo, str]]:
    """The ExportedProgram of `--exported-program` for each AOTI-only model it matches, with
    how findings name it."""
    if ep_path is None:  # (without importing the runner: the static lane's start-up time)
        return {}
    from aotipre.runner.reference import exported_program_for

    out: dict[str, tuple[ModelInfo, str]] = {}
    for model in models:
        if ep_path is None or model.has_exported_program or model.aoti is None:
            continue
        ref = exported_program_for(ep_path, package, model)
        if ref.path is None or ref.model is None:
            continue
        ep_model = read_package(ref.path).model(ref.model)
        if ep_model is not None:
            out[model.name] = (ep_model, ref.label)
    return out


def _reference_bounds(
    models: list[ModelInfo], references: dict[str, tuple[ModelInfo, str]]
) -> list[Finding]:
    """AOT013 for AOTI-only models against their --exported-program: its dynamic ranges where
    the compiled code checks narrower bounds (what a "both" archive gets); AOT070 instead when
    it is not the program the code was compiled from."""
    out: list[Finding] = []
    for model in models:
        if model.name in references:
            ep_model, label = references[model.name]
            other = check_reference_program(model, ep_model, label)
            out += other or export_vs_compiled_bounds(model, ep_model, label)
    return out


def _runtime_ready(report: Report, opts: CheckOptions, models: list[ModelInfo]) -> bool:
    """The interpreter the workers will run in has a supported torch (runtimes.probe: no torch
    import, cached per interpreter); else the report could not check, with the probe's one line
    (how to get a torch) as its error and each model's dynamic stages skipped for it, instead of
    a worker dying on `import torch`. A test's fake worker (`worker_command`) stands for its own
    runtime."""
    from aotipre.environment.runtimes import probe

    dynamic = opts.dynamic
    if dynamic is not None and dynamic.worker_command is not None:
        return True
    try:
        probe(dynamic.python if dynamic is not None else None)
    except UsageError as exc:
        report.error = str(exc)
        why = "not run: no interpreter with a supported torch to run the workers (see the error)"
        _skip_dynamic(report, opts, models, why)
        return False
    return True


def resolve_hosts(opts: CheckOptions, models: list[ModelInfo]) -> list[HostInfo]:
    """The targets to check against: --target / named targets, else this machine."""
    if opts.target or opts.targets:
        return parse_targets(opts.target, dict(opts.targets))
    return [detect_local(probe_cuda=any((m.device_type or "").startswith("cuda") for m in models))]


_NOT_BLOCKING = ("AOT015", "AOT308", *(f"AOT06{i}" for i in range(10)))
"""Errors that do not stop the dynamic stages: an archive without AOTI code (AOT015) is still
checked by compiling its ExportedProgram, which is what the compile stage does; an index past
a table found in the sample values (AOT308) is run anyway, so that the run shows what the
deployment does with it (an index assert, a device fault, or a silent out-of-bounds read) and
crash triage names the kernel. A bad weight swap (AOT060-AOT069) is about the weights file,
not the model: the weights stage runs it to show what the deployment computes with it."""


_SERVING_CODES = "AOT04"
"""The server config's findings (AOT040-AOT049): the config is wrong, not the package, so the
package's own dynamic stages still run."""


def _deployment_checks_inputs(opts: CheckOptions, hosts: list[HostInfo]) -> bool:
    """The deployment sets AOTI_RUNTIME_CHECK_INPUTS: --deployment-checks-inputs, or every
    --target says `checks-inputs=yes`."""
    if opts.deployment_checks_inputs or (
        opts.dynamic is not None and opts.dynamic.deployment_checks_inputs
    ):
        return True
    targets = [h for h in hosts if h.is_target]
    return bool(targets) and all(h.checks_inputs for h in targets)


def _with_target_checks(opts: CheckOptions, hosts: list[HostInfo]) -> CheckOptions:
    """--target deployments that say `checks-inputs=yes`: when every target does, the probe
    judges as for --deployment-checks-inputs; when only some do, AOT613 names the others."""
    from aotipre.runner.stages import DynamicOptions

    targets = [h for h in hosts if h.is_target]
    dynamic = opts.dynamic or DynamicOptions()
    if not targets or dynamic.deployment_checks_inputs:
        return opts
    unchecked = tuple(h.label for h in targets if not h.checks_inputs)
    if not unchecked:
        dynamic = dataclasses.replace(dynamic, deployment_checks_inputs=True)
    elif len(unchecked) < len(targets):
        dynamic = dataclasses.replace(dynamic, unchecked_targets=unchecked)
    else:
        return opts
    return dataclasses.replace(opts, dynamic=dynamic)


def _dynamic_options(opts: CheckOptions) -> DynamicOptions:
    """The stages' options, with CheckOptions' custom-op registration, --cpp, --allow-pickle,
    the triage options that apply to a compile fault (--no-escalate, --sanitizer) and the
    triage's --exported-program (the reference of compare and probe too) folded in."""
    from dataclasses import replace

    from aotipre.runner.stages import DynamicOptions

    dynamic = opts.dynamic or DynamicOptions()
    env = opts.registration.env() if opts.registration is not None else {}
    if opts.cpp and not dynamic.cpp:
        dynamic = replace(dynamic, cpp=True)
    if env and any(dynamic.extra_env.get(k) != v for k, v in env.items()):
        dynamic = replace(dynamic, extra_env={**dynamic.extra_env, **env})
    if opts.triage is not None:  # the compile step's rungs of the triage ladder
        dynamic = replace(
            dynamic,
            compile_fault_rerun=dynamic.compile_fault_rerun and opts.triage.escalate,
            prewarm_rerun=dynamic.prewarm_rerun and opts.triage.escalate,
            sanitizer=dynamic.sanitizer or opts.triage.sanitizer,
            exported_program=dynamic.exported_program or opts.triage.exported_program,
            compile_minify=dynamic.compile_minify or (opts.triage.minify and opts.triage.escalate),
            minify_timeout_s=opts.triage.minify_timeout_s,
            compile_workaround=dynamic.compile_workaround and opts.triage.escalate,
            workaround_budget_s=opts.triage.accuracy_budget_s,
            artifacts=dynamic.artifacts or opts.triage.artifacts,
        )
    if opts.weights and not dynamic.weights:
        dynamic = replace(dynamic, weights=str(opts.weights))
    if opts.allow_pickle and not dynamic.allow_pickle:
        dynamic = replace(dynamic, allow_pickle=True)
    return dynamic


def _static_blockers(findings: list[Finding], model: ModelInfo) -> list[str]:
    """Error findings that make running `model` pointless or unsafe (bad inputs, wrong host)."""
    return sorted(
        {
            f.code
            for f in findings
            if f.severity is Severity.ERROR
            and f.model in (None, model.name)
            and f.code not in _NOT_BLOCKING
            and not f.code.startswith(_SERVING_CODES)
        }
    )


def _dynamic(
    report: Report,
    opened: OpenPackage,
    model: ModelInfo,
    sample: SampleInputs | None,
    opts: CheckOptions,
    blocked: list[str],
    weights: WeightsFile | None = None,
    baseline: OpenPackage | None = None,
) -> None:
    from aotipre.runner.stages import run_dynamic_stages

    if blocked:
        reason = f"static checks found errors ({', '.join(blocked)}); fix them first"
        _skip_dynamic(report, opts, [model], reason)
        return
    inputs_path = opts.inputs
    # stored sample inputs the static checks could not read (or an empty member) are not handed
    # to the run either: the dynamic stages synthesize inputs instead (AOT020/AOT022 say why)
    member = model.sample_inputs_member if inputs_path is None and sample is not None else None
    escalations: list[Any] = []
    accuracy: list[Any] = []

    def triage(crash: RunCrash) -> None:  # runs while the crashed session's files exist
        from aotipre.triage.escalate import escalate

        escalations.append(escalate(crash, opts.triage, opts.progress))

    def triage_accuracy(case: OutputMismatch) -> None:  # while the session's files exist
        from aotipre.triage.accuracy import AccuracyOptions
        from aotipre.triage.accuracy import triage_accuracy as run_triage
        from aotipre.triage.state import TriageOptions

        triage_opts = opts.triage or TriageOptions()
        accuracy_opts = AccuracyOptions(
            triage_opts.escalate,
            triage_opts.accuracy_budget_s,
            artifacts=triage_opts.artifacts,
            speculate=triage_opts.accuracy_speculate,
            python_wrapper=triage_opts.accuracy_python_wrapper,
        )
        accuracy.append(run_triage(case, accuracy_opts, opts.progress))

    stages, findings = run_dynamic_stages(
        opened.info,
        model,
        inputs_path,
        member,
        _dynamic_options(opts),
        opts.progress,
        on_run_crash=triage,
        on_mismatch=triage_accuracy,
        on_perf=lambda rec, base: report.performance.append((rec, base)),
        archive=opened.archive,
        sample=sample,
        weights=weights,
        baseline=baseline,
    )
    report.stages.extend(stages)
    _settle(report, findings)
    report.findings.extend(findings)
    for escalation in escalations:
        report.stages.extend(escalation.stages)
        report.findings.extend(escalation.findings)
        if escalation.diagnosis is not None:
            report.diagnosis.append(escalation.diagnosis)
    for checked in accuracy:
        report.stages.extend(checked.stages)
        report.findings.extend(checked.findings)
        if checked.diagnosis is not None:
            report.accuracy.append(checked.diagnosis)
    if opts.canary:
        _host_canary(report, model, opts)


_SETTLED_BY_RUNS = {"AOT307": "probe"}
"""Static codes that only say what may happen, and the dynamic stage whose finding of the same
code, model and input settles them: a sample laid out otherwise than compiled may compute wrong
results; the probe runs it as a default deployment does and says whether it does."""


def _settle(report: Report, dynamic: list[Finding]) -> None:
    """Drop the static findings that `dynamic` settles (_SETTLED_BY_RUNS)."""
    settled = {
        (f.code, f.model, f.input) for f in dynamic if _SETTLED_BY_RUNS.get(f.code) == f.stage
    }
    if settled:
        report.findings[:] = [
            f
            for f in report.findings
            if f.stage != "static" or (f.code, f.model, f.input) not in settled
        ]


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
    package: PackageInfo, archive: Archive, model: ModelInfo, opts: CheckOptions, report: Report
) -> SampleInputs | None:
    if opts.inputs is not None:
        sample = load_sample_inputs(opts.inputs)
        report.inputs_source = str(opts.inputs)
        return sample
    if model.sample_inputs_member is not None:
        source = f"{package.path}:{model.sample_inputs_member}"
        try:
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


def _say(opts: CheckOptions, message: str) -> None:
    if opts.progress is not None:
        opts.progress(message)


def _add_stage(report: Report, opts: CheckOptions, stage: StageResult) -> None:
    """Add a static stage that has ended to the report, and say so (progress)."""
    report.stages.append(stage)
    _say(opts, stage_ended(stage.name, stage.status.value, stage.duration_s))


def _skip_dynamic(report: Report, opts: CheckOptions, models: list[ModelInfo], why: str) -> None:
    """Every dynamic stage of `models` skipped for one reason: one progress line per model."""
    from aotipre.runner.stages import STAGES

    report.stages.extend(
        StageResult(name=n, status=StageStatus.SKIPPED, detail=why, model=m.name)
        for m in models
        for n in STAGES
    )
    for m in models:
        _say(opts, f"{m.name}: {stage_ended('dynamic stages', 'skipped')}")


def _stage(name: str, status: StageStatus, started: float, detail: str) -> StageResult:
    return StageResult(
        name=name, status=status, duration_s=time.monotonic() - started, detail=detail
    )
