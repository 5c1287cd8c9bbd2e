"""Markdown for pull-request comments and the GitHub step summary."""

from __future__ import annotations

import re
from collections.abc import Sequence

from aotipre.findings import Report, Verdict
from aotipre.report.common import (
    by_severity,
    combined_counts,
    combined_verdict,
    counts_text,
    finding_text,
    gpu_label,
    package_labels,
    worst_exit_code,
)

_BADGE = {Verdict.PASS: "✅ PASS", Verdict.FAIL: "❌ FAIL", Verdict.ERROR: "⚠️ ERROR"}
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#])")


def render_report(report: Report) -> str:
    return render_reports([report])


def render_reports(reports: Sequence[Report]) -> str:
    lines: list[str] = []
    if len(reports) == 1:
        report = reports[0]
        lines.append(f"## aotipre: {_BADGE[report.verdict]} {_code(report.package_path)}")
        lines.append("")
        lines.extend(_section(report))
    else:
        verdict = combined_verdict(reports)
        counts = combined_counts(reports)
        lines.append(f"## aotipre: {_BADGE[verdict]} ({len(reports)} packages)")
        lines.append("")
        lines.append(
            f"exit {int(worst_exit_code(reports))}; {counts_text(counts)}"
            " (the exit code is the worst of the packages')"
        )
        lines.append("")
        lines.append("| package | verdict | error | warning | info |")
        lines.append("| --- | --- | --- | --- | --- |")
        labels = package_labels(reports)
        for report, label in zip(reports, labels):
            c = report.counts()
            lines.append(
                f"| {_code(label)} | {_BADGE[report.verdict]} | "
                f"{c['error']} | {c['warning']} | {c['info']} |"
            )
        for report, label in zip(reports, labels):
            lines.append("")
            lines.append(f"### {_BADGE[report.verdict]} {_code(label)}")
            lines.append("")
            lines.extend(_section(report))
    return "\n".join(lines).rstrip("\n") + "\n"


def _section(report: Report) -> list[str]:
    lines: list[str] = []
    facts = []
    if report.package is not None:
        models = ", ".join(
            f"{_text(m['name'])} ({_text(m['device_type'] or '?')})"
            for m in report.package["models"]
        )
        facts.append(f"package: {_text(report.package['kind'])}; models: {models}")
    if report.inputs_source:
        facts.append(f"inputs: {_code(report.inputs_source)}")
    if report.config is not None:
        facts.append(f"config: {_text(report.config)}")
    if report.gpu is not None:
        facts.append(f"gpu: {_text(gpu_label(report.gpu))}")
    if facts:
        lines.append("  \n".join(facts))
        lines.append("")
    if report.error is not None:
        lines.append(f"**could not check:** {_text(report.error)}")
        lines.append("")
    if report.findings:
        lines.append("| code | severity | subject | message |")
        lines.append("| --- | --- | --- | --- |")
        for f in by_severity(report.findings):
            lines.append(
                f"| `{f.code}` | {f.severity.value} | {_text(f.subject)} | "
                f"{_text(finding_text(f))} |"
            )
        lines.append("")
    else:
        lines.append("No findings.")
        lines.append("")
    if report.targets:
        lines.append("| target | model | status |")
        lines.append("| --- | --- | --- |")
        for row in report.targets:
            lines.append(
                f"| {_text(row['target'])} | {_text(row['model'])} | {_text(row['status'])} |"
            )
        lines.append("")
    if report.stages:
        lines.append("<details><summary>stages</summary>")
        lines.append("")
        lines.append("| stage | model | status | time | detail |")
        lines.append("| --- | --- | --- | --- | --- |")
        for s in report.stages:
            lines.append(
                f"| {s.name} | {_text(s.model or '')} | {s.status.value} | "
                f"{s.duration_s:.2f}s | {_text(s.detail)} |"
            )
        lines.append("")
        lines.append("</details>")
        lines.append("")
    lines.append(
        f"verdict: **{report.verdict.value.upper()}** (exit {int(report.exit_code)}; "
        f"{counts_text(report.counts())}; fail-on {report.fail_on.value})"
    )
    return lines


def _text(text: str) -> str:
    """Escape Markdown and HTML specials; keep a table cell on one line."""
    escaped = _SPECIAL.sub(r"\\\1", text.replace("&", "&amp;"))
    return escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"
