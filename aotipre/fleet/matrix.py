"""A version matrix: one package checked with its workers in each of several interpreters
(`--python` given more than once), merged into one Report whose dynamic stages and findings say
which torch ran them. The interpreters themselves are probed by aotipre.environment.runtimes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aotipre.api import CheckOptions
    from aotipre.environment.runtimes import Runtime
    from aotipre.findings import Report


def check(package: str, options: CheckOptions, runtimes: Sequence[Runtime]) -> Report:
    """`api.check` with the workers in each of `runtimes` (none, or static-only: as is).

    One runtime: one run, its dynamic stages labelled. Several: the static part once, then each
    runtime's dynamic stages and findings in turn, each labelled with its torch; the baseline
    is applied once, to the merged report.
    """
    from aotipre import api

    if options.static_only or not runtimes:
        return api.check(package, options)
    # imported here: a static-only check probes no interpreter (its start-up time)
    from aotipre.environment.runtimes import remember
    from aotipre.findings.baseline import apply_baseline
    from aotipre.runner.stages import DynamicOptions

    dynamic = options.dynamic or DynamicOptions()
    matrix = len(runtimes) > 1
    reports = []
    for runtime in runtimes:
        remember(runtime)  # probed by the caller (runtimes.resolve)
        opts = dataclasses.replace(
            options,
            dynamic=dataclasses.replace(dynamic, python=runtime.python),
            baseline=None if matrix else options.baseline,
            progress=_tagged(options.progress, runtime) if matrix else options.progress,
        )
        reports.append(api.check(package, opts))
        if reports[0].error is not None:  # the package or inputs cannot be read: same for all
            break
    merged = merge(reports, runtimes[: len(reports)])
    if matrix and options.baseline is not None and merged.error is None:
        merged = apply_baseline(merged, options.baseline)
    return merged


def merge(reports: Sequence[Report], runtimes: Sequence[Runtime]) -> Report:
    """The first report with every report's dynamic stages, findings and diagnoses labelled
    with the torch that ran them (findings only in a matrix, where the subject must say it)."""
    from aotipre.environment.runtimes import STATIC_STAGES

    first = reports[0]
    matrix = len(runtimes) > 1
    stages = [s for s in first.stages if s.name in STATIC_STAGES]
    findings = [f for f in first.findings if _is_static(f.stage)]
    diagnosis = []
    for report, runtime in zip(reports, runtimes):
        stages += [
            dataclasses.replace(s, runtime=runtime.label)
            for s in report.stages
            if s.name not in STATIC_STAGES
        ]
        findings += [
            dataclasses.replace(f, runtime=runtime.label) if matrix else f
            for f in report.findings
            if not _is_static(f.stage)
        ]
        diagnosis += list(report.diagnosis)
    first.stages = stages
    first.findings = findings
    first.diagnosis = diagnosis
    first.runtimes = [r.to_dict() for r in runtimes]
    return first


def _is_static(stage: str | None) -> bool:
    from aotipre.environment.runtimes import STATIC_STAGES

    return stage is None or stage in STATIC_STAGES


def _tagged(
    progress: Callable[[str], None] | None, runtime: Runtime
) -> Callable[[str], None] | None:
    if progress is None:
        return None

    def say(message: str) -> None:
        progress(f"[{runtime.label}] {message}")

    return say
