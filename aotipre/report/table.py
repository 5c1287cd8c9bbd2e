"""Human-readable tables (tabulate) for `check` and `inspect`."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aotipre.findings import Finding, Report, Severity
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.report.common import (
    combined_counts,
    combined_verdict,
    counts_text,
    gpu_label,
    package_labels,
    worst_exit_code,
)
from aotipre.report.tabular import tabulate

if TYPE_CHECKING:
    from aotipre.checks.target import TargetRow
    from aotipre.triage.diagnosis import Diagnosis

_MSG_WIDTH = 70
_GAP = 2
"""Spaces between two columns of tabulate's "simple" format."""
_NARROWEST = 12
"""A wrapped column never gets narrower than this, whatever the terminal."""


_LONGEST_WORD = 300
"""A run of non-space characters longer than this is shortened in a table cell (a sample's
30 MB keyword name made tabulate's wrapping take minutes; the JSON report keeps it whole)."""
_LONGEST_CELL = 4000
_LONG_WORD = re.compile(r"\S{" + str(_LONGEST_WORD + 1) + ",}")


def clip(text: str) -> str:
    """`text` for a table cell: each word of more than _LONGEST_WORD characters and the cell
    beyond _LONGEST_CELL characters shortened, saying by how much."""

    def short(m: re.Match[str]) -> str:
        word = m.group(0)
        return f"{word[: _LONGEST_WORD // 2]}...(+{len(word) - _LONGEST_WORD // 2} chars)"

    text = _LONG_WORD.sub(short, text)
    if len(text) > _LONGEST_CELL:
        text = (
            f"{text[:_LONGEST_CELL]}...(+{len(text) - _LONGEST_CELL} chars; all of it in -f json)"
        )
    return text


def terminal_width() -> int | None:
    """Columns of the terminal the report is shown on ($COLUMNS, else stdout's terminal); None
    when there is none (a pipe, a file, CI): tables then keep their natural widths."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    size = shutil.get_terminal_size(fallback=(0, 0)).columns
    return size or None


def fit_widths(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    caps: Sequence[int | None],
    width: int | None = None,
) -> list[int | None]:
    """tabulate's maxcolwidths for `rows` under `width` columns: the columns with a cap wrap,
    each at most its cap, and shrink (the widest first, to no less than _NARROWEST) until the
    table fits; columns without a cap keep their natural width."""
    width = terminal_width() if width is None else width
    natural = [  # tabulate pads each header by 2 (its MIN_PADDING)
        max([len(str(h)) + 2, *(max(map(len, str(r[i]).splitlines() or [""])) for r in rows)])
        for i, h in enumerate(headers)
    ]
    out: list[int | None] = [
        None if cap is None else min(cap, natural[i]) for i, cap in enumerate(caps)
    ]
    if width is None:
        return [cap for cap in caps]
    fixed = sum(n for n, cap in zip(natural, out) if cap is None) + _GAP * (len(headers) - 1)
    while sum(c for c in out if c is not None) + fixed > width:
        widest = max((i for i, c in enumerate(out) if c is not None), key=lambda i: out[i] or 0)
        current = out[widest] or 0
        if current <= _NARROWEST:
            break
        out[widest] = current - 1
    return out


def findings_table(
    findings: Sequence[Finding],
    *,
    subject_width: int = 28,
    message_width: int = _MSG_WIDTH,
    width: int | None = None,
) -> str:
    """Findings, most severe first, each message followed by its hint (`check` and `doctor`);
    fitted to `width` (default: the terminal's)."""
    rows = [
        [
            f.code,
            f.severity.value,
            clip(f.subject),
            clip(f.message) + (f"\nhint: {clip(f.hint)}" if f.hint else ""),
        ]
        for f in sorted(findings, key=lambda f: -f.severity.rank)
    ]
    headers = ["code", "severity", "subject", "message"]
    return tabulate(
        rows,
        headers=headers,
        maxcolwidths=fit_widths(rows, headers, [None, None, subject_width, message_width], width),
    )


def render_report(report: Report, label: str | None = None) -> str:
    """One package's table; `label`: how a report of many names it (package_labels)."""
    lines: list[str] = []
    verdict = report.verdict.value.upper()
    lines.append(f"aotipre check {label or report.package_path}")
    pkg = report.package
    if pkg is not None:
        models = ", ".join(
            f"{m['name']} ({_parts(m)}, {m['device_type'] or '?'})" for m in pkg["models"]
        )
        lines.append(f"package: {pkg['kind']}; models: {models}")
    if report.inputs_source:
        lines.append(f"inputs: {report.inputs_source}")
    if report.config is not None:
        lines.append(f"config: {report.config}")
    for runtime in report.runtimes:
        lines.append(f"workers: torch {runtime['torch']} in {runtime['python']}")
    if report.gpu is not None:
        lines.append(f"gpu: {gpu_label(report.gpu)}")
    if report.stages:
        lines.append("")
        matrix = len(report.runtimes) > 1
        rows = [
            [
                s.name,
                (s.model or "") + (f" [{s.runtime}]" if matrix and s.runtime else ""),
                s.status.value,
                f"{s.duration_s:.2f}s",
                clip(s.detail),
            ]
            for s in report.stages
        ]
        headers = ["stage", "model", "status", "time", "detail"]
        lines.append(
            tabulate(
                rows,
                headers=headers,
                maxcolwidths=fit_widths(rows, headers, [None, None, None, None, 60]),
            )
        )
    lines.append("")
    if report.findings:
        lines.append(findings_table(report.findings))
        lines.append("")
    if report.targets and (len(report.targets) > 1 or report.targets[0]["status"] != "loads"):
        lines.append(targets_table(report.targets))
    for diagnosis in report.diagnosis:
        lines.extend(_diagnosis_lines(diagnosis))
        lines.append("")
    for accuracy in report.accuracy:  # the per-kernel series is in the JSON report
        lines.extend([f"accuracy ({accuracy.model}): {accuracy.summary}", ""])
    counts = report.counts()
    summary = ", ".join(f"{counts[s.value]} {s.value}" for s in reversed(list(Severity)))
    lines.append(
        f"verdict: {verdict} (exit {int(report.exit_code)}; {summary}; "
        f"fail-on {report.fail_on.value})"
    )
    if report.error:
        lines.append(f"could not check: {report.error}")
    return "\n".join(lines) + "\n"


def _diagnosis_lines(d: Diagnosis) -> list[str]:
    """Crash triage's conclusion: kernel, how it was found, what it computes, its inputs."""
    import textwrap

    by = f" (named by {d.identified_by})" if d.identified_by else ""
    lines = [f"diagnosis ({d.model}): {d.kernel or 'no kernel named'}{by}"]

    def field(label: str, values: Sequence[str]) -> None:
        first = True
        for value in values:
            wrapped = textwrap.wrap(value, 96, break_long_words=False, break_on_hyphens=False) or [
                ""
            ]
            for part in wrapped:
                lines.append(f"  {label if first else '':<13} {part}")
                first = False

    field("verdict", [d.verdict])
    if d.misattributed:
        field("first error", [f"{d.first_error} (misattributed: a later symptom)"])
    field("evidence", list(d.evidence))
    if d.fused_nodes or d.aten_ops:
        field(
            "fuses",
            [", ".join(d.fused_nodes) + (f" ({', '.join(d.aten_ops)})" if d.aten_ops else "")],
        )
    field("model code", list(d.source_lines))
    field("inputs", [t.describe() for t in d.inputs])
    if d.bound is not None:
        via = (
            f" (index read from {d.bound.pointer} = {d.bound.argument})" if d.bound.argument else ""
        )
        field("index check", [f"{d.bound.line}{via}"])
    if d.launches:
        field("launches", [" -> ".join(d.launches)])
    if d.repro:
        field("repro", [d.repro])
    field("note", list(d.notes))
    if d.kernel_source:
        # the source itself stays out of the terminal (a fused kernel is easily 45 lines): it
        # is in the JSON report's diagnosis and in the --artifacts bundle
        n = len(d.kernel_source.splitlines())
        where = f" from {d.kernel_source_from}" if d.kernel_source_from else ""
        field(
            "kernel source",
            [f"{n} line{'' if n == 1 else 's'}{where}: in --format json and --artifacts DIR"],
        )
    return lines


def render_reports(reports: Sequence[Report]) -> str:
    """Each package's table, then one line per package and the overall verdict (the worst)."""
    labels = package_labels(reports)
    parts = [render_report(r, label) for r, label in zip(reports, labels)]
    rows = [
        [label, r.verdict.value.upper(), int(r.exit_code), counts_text(r.counts())]
        for r, label in zip(reports, labels)
    ]
    parts.append(tabulate(rows, headers=["package", "verdict", "exit", "findings"]) + "\n")
    parts.append(
        f"overall: {combined_verdict(reports).value.upper()} (exit {int(worst_exit_code(reports))}; "
        f"{len(reports)} package(s); {counts_text(combined_counts(reports))})\n"
    )
    return "\n".join(parts)


def _parts(model: dict[str, Any]) -> str:
    parts = []
    if model["has_exported_program"]:
        parts.append("ExportedProgram")
    if model["has_aoti"]:
        parts.append("AOTI")
    return "+".join(parts) or "empty"


def targets_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per target: each model's verdict (loads / needs X / cannot load) and the reasons."""
    lines: list[str] = []
    for target in dict.fromkeys(r["target"] for r in rows):
        mine = [r for r in rows if r["target"] == target]
        lines.append(f"target: {target}")
        body = [[r["model"], r["status"], clip("\n".join(r["reasons"][:4]) or "-")] for r in mine]
        lines.append(
            tabulate(body, headers=["model", "status", "why"], maxcolwidths=[None, 24, 80])
        )
        lines.append("")
    return "\n".join(lines)


def render_package(
    package: PackageInfo, findings: Sequence[Finding] = (), rows: Sequence[TargetRow] = ()
) -> str:
    lines = [
        f"{package.path}: {package.kind} archive, version {package.archive_version}, "
        f"root '{package.root}', {len(package.members)} members, {package.total_size} bytes",
    ]
    if package.corrupt_members:
        lines.append(f"CORRUPT members (CRC mismatch): {', '.join(package.corrupt_members)}")
    else:
        lines.append("member integrity: all CRCs match")
    for model in package.models:
        lines.append("")
        lines.extend(_model_lines(model))
    about = [f for f in findings if f.code.startswith("AOT05")]
    if about:
        lines.append("")
        lines.append(findings_table(about))
    if rows:
        lines.append("")
        lines.append(targets_table([r.to_dict() for r in rows]))
    return "\n".join(lines).rstrip("\n") + "\n"


def constants_summary(model: ModelInfo) -> str:
    """`3 tensors, 15.8 KiB: 2 parameters, 1 buffer; a weight swap replaces 3 (by FQN, the JSON
    lists them)`."""
    consts = model.constants
    total = sum(c.data_size or 0 for c in consts)
    kinds: dict[str, int] = {}
    for c in consts:
        kind = "folded" if c.from_folded else (c.kind or "unknown").lower()
        kinds[kind] = kinds.get(kind, 0) + 1
    named = {"parameter": "parameter", "buffer": "buffer", "tensorconstant": "tensor constant"}
    parts = [f"{n} {named.get(k, k)}{'' if n == 1 else 's'}" for k, n in sorted(kinds.items())]
    swap = sum(1 for c in consts if c.swappable)
    return (
        f"{len(consts)} tensor{'' if len(consts) == 1 else 's'}, {_size(total)}: "
        f"{', '.join(parts)}; a weight swap replaces {swap} (by FQN; the JSON lists them)"
    )


def baked_summary(model: ModelInfo) -> str:
    """The state the compiled code keeps no constant for, which no weight update reaches:
    `fc2.bias (float32[4], inlined); a weight update cannot change it`, or a count read from
    wrapper.cpp when no ExportedProgram names them; "" when there is none."""
    baked = model.baked_state
    if baked:
        shown = ", ".join(
            f"{t.fqn} ({t.describe()}, {'inlined' if t.inlinable else 'unused or folded'})"
            for t in baked[:5]
        )
        more = f" and {len(baked) - 5} more" if len(baked) > 5 else ""
        it = "it" if len(baked) == 1 else "them"
        return f"{shown}{more}; a weight update cannot change {it}"
    n = model.lifted_without_constant
    if not model.state and n:
        return (
            f"{n} lifted tensor{'' if n == 1 else 's'} (inlined into the kernels or unused; "
            f"the ExportedProgram would name {'it' if n == 1 else 'them'}); a weight update "
            f"cannot change {'it' if n == 1 else 'them'}"
        )
    return ""


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


def _weights(model: ModelInfo) -> str:
    """Where the weights are; a binary_blob package names its blob member."""
    blob = model.aoti.weights_blob if model.aoti is not None else None
    if model.weights_location == "binary_blob" and blob:
        return f"binary_blob ({blob.rsplit('/', 1)[-1]})"
    return model.weights_location


def _model_lines(model: ModelInfo) -> list[str]:
    aoti = model.aoti
    facts = [
        ["model", model.name],
        [
            "contents",
            "+".join(
                p
                for p, on in (
                    ("ExportedProgram", model.has_exported_program),
                    ("AOTI", aoti is not None),
                )
                if on
            ),
        ],
        ["device", model.device_type or "unknown"],
        ["torch version", model.torch_version or "not recorded"],
        ["input contract from", model.contract_source],
        ["weights", _weights(model)],
    ]
    if aoti is not None:
        facts += [
            ["cpu isa", " ".join(aoti.cpu_isa) or "-"],
            ["compute capability", aoti.compute_capability or "-"],
            ["platform", f"{aoti.platform or '?'} / {aoti.machine or '?'}"],
            [
                "shared objects",
                "none: C++ sources, compiled at load (package_cpp_only)"
                if aoti.compiled_at_load
                else ", ".join(s.rsplit("/", 1)[-1] for s in aoti.shared_objects),
            ],
        ]
        for member, why in aoti.metadata_unreadable:
            facts.append(["unreadable", f"{member.rsplit('/', 1)[-1]}: {why}"])
        if model.constants:
            facts.append(["constants", constants_summary(model)])
        baked = baked_summary(model)
        if baked:
            facts.append(["no constant for", baked])
        user_keys = {k: v for k, v in aoti.metadata.items() if not k.startswith("AOTI_")}
        if user_keys:
            facts.append(["metadata", ", ".join(f"{k}={v}" for k, v in user_keys.items())])
    if model.sample_inputs_member:
        facts.append(["sample inputs", model.sample_inputs_member])
    if model.expected_outputs_member:
        facts.append(["expected outputs", model.expected_outputs_member])
    if model.signature is not None and model.signature.kwargs:
        facts.append(["kwargs", ", ".join(k for k, _ in model.signature.kwargs)])
    lines = [tabulate(facts, tablefmt="plain")]
    rows = []
    for inp in model.inputs:
        t = inp.tensor
        rows.append(
            [
                inp.position,
                inp.name,
                inp.kind if t is None else t.dtype,
                "" if t is None else "[" + ", ".join(str(d) for d in t.shape) + "]",
                ""
                if t is None or t.strides is None
                else "[" + ", ".join(str(d) for d in t.strides) + "]",
                "" if t is None else t.device,
                "" if inp.value is None else repr(inp.value),
            ]
        )
    if rows:
        lines.append("")
        lines.append(
            tabulate(rows, headers=["#", "input", "dtype", "shape", "strides", "device", "value"])
        )
    # an AOTI-only model's outputs come from its wrapper.cpp: one it returns in another form
    # than a fresh buffer (a view, an input, a constant) is counted, its dtype and shape unknown
    outs = [
        [i, "unknown", "unknown", model.device_type or "unknown"]
        if o is None
        else [i, o.dtype, "[" + ", ".join(str(d) for d in o.shape) + "]", o.device]
        for i, o in enumerate(model.outputs)
    ]
    if outs:
        lines.append("")
        lines.append(tabulate(outs, headers=["output", "dtype", "shape", "device"]))
    if model.symbols:
        lines.append("")
        lines.append(
            tabulate(
                [[s.symbol, s.min, "inf" if s.max is None else s.max] for s in model.symbols],
                headers=["dynamic dim", "min", "max"],
            )
        )
    for note in model.notes:
        lines.append(f"note: {note}")
    return lines
