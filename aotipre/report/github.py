"""GitHub Actions workflow commands (`::error ...::`), and the Markdown step summary."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from aotipre.findings import Finding, Report, Severity, StageStatus
from aotipre.findings.codes import BY_CODE
from aotipre.foundation.errors import AotipreError
from aotipre.report.common import counts_text, finding_text, gpu_label, package_labels

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF are percent-encoded (as @actions/core does)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (`file=`, `title=`): also `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **properties: str) -> str:
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def render_report(report: Report) -> str:
    return render_reports([report])


def render_reports(reports: Sequence[Report]) -> str:
    """One annotation per finding (error, warning or notice) and per stage that could not run,
    then one plain verdict line per package."""
    lines: list[str] = []
    for report in reports:
        for finding in report.findings:
            lines.append(_annotation(report, finding))
        for stage in report.stages:
            if stage.status is StageStatus.ERROR and not report.findings:
                lines.append(
                    command(
                        "error",
                        f"{stage.name}: {stage.detail}",
                        file=report.package_path,
                        title=f"aotipre: {stage.name} could not run",
                    )
                )
    for report, label in zip(reports, package_labels(reports)):
        lines.append(
            f"aotipre: {report.verdict.value.upper()} {label} "
            f"(exit {int(report.exit_code)}; {counts_text(report.counts())}; "
            f"fail-on {report.fail_on.value}"
            + (f"; gpu {gpu_label(report.gpu)}" if report.gpu is not None else "")
            + ")"
        )
    return "\n".join(lines) + "\n"


def _annotation(report: Report, finding: Finding) -> str:
    return command(
        _COMMAND[finding.severity],
        f"{finding.subject}: {finding_text(finding)}",
        file=report.package_path,
        title=f"{finding.code} {_name(finding.code)}",
    )


def _name(code: str) -> str:
    entry = BY_CODE.get(code)
    return entry.name if entry is not None else ""


def append_step_summary(
    reports: Sequence[Report], environ: Mapping[str, str] | None = None
) -> str | None:
    """Append the Markdown summary to `$GITHUB_STEP_SUMMARY` when it is set; return its path."""
    env = os.environ if environ is None else environ
    path = env.get(STEP_SUMMARY_ENV)
    if not path:
        return None
    from aotipre.report import render_reports  # the sanitising dispatch (a cycle at import)

    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(render_reports(reports, "markdown") + "\n")
    except OSError as exc:
        raise AotipreError(
            f"cannot append to ${STEP_SUMMARY_ENV} ({path}): {exc.strerror}"
        ) from None
    return path
