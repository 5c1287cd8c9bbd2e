"""One self-contained HTML page for people: a check (one package or many), a merge or a diff.

Long because the page is one document, and its CSS, script, SVG charts and section
renderers share one escaping helper and one set of class names; split, every part would import the
others' names and the escaping rule would be spread over files.

The page is drawn from each report's `to_dict()`, the very data the JSON report holds (nothing
is measured or judged here): the verdict and exit code on top, a filterable, sortable table of
the packages, then per package its findings (each code linked to its reference at the foot of
the page), the crash diagnosis, the accuracy triage's error per kernel, the cold start, latency
and memory against `--against` and the budgets, the targets and the stages.

Self-contained: inline CSS, inline JavaScript and inline SVG, no network (a Content Security
Policy of `default-src 'none'` with hashes of the one style and the one script lets nothing
else load or run), so it opens from a CI artifact or a local disk. Everything is in the HTML:
with JavaScript off the verdicts, findings and charts read the same; the script only sorts and
filters tables.

Charts are small hand-written SVG rather than a charting library: three kinds are needed (a
stacked bar, a point series, grouped bars), about a hundred lines here; a library (Chart.js,
Vega, Plotly: 0.2 to 3 MB of JavaScript) would be a dependency inlined into every report, or a
CDN the page could not reach offline, and would draw nothing with JavaScript off.

Every string from a package, a model, a path, a worker log or an exception is text, never
markup: it reaches the page only through `esc` (via `tag`), after the sanitiser every human
format shares (aotipre/report/sanitize.py) made control and bidi characters visible.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aotipre.findings import Report, Severity, codes
from aotipre.report.common import (
    by_severity,
    combined_counts,
    combined_verdict,
    counts_text,
    gpu_label,
    package_labels,
    worst_exit_code,
)

MB = 1024 * 1024


class Markup(str):
    """Markup built in this module (trusted); any other string is escaped where it is used."""


def esc(value: object) -> Markup:
    """`value` as HTML text (`<`, `>`, `&`, quotes escaped), or itself when it is Markup."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def cat(*parts: object) -> Markup:
    """The parts one after another, each escaped unless it is Markup; None and False: nothing."""
    return Markup("".join(esc(p) for p in parts if p is not None and p is not False))


def tag(name: str, /, *children: object, **attrs: object) -> Markup:
    """`<name attrs>children</name>`; attribute names: `class_` -> class, `data_x` -> data-x;
    a value of None or False leaves the attribute out, True writes it bare."""
    out = [f"<{name}"]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        out.append(f" {attr}" if value is True else f' {attr}="{esc(value)}"')
    out.append(">")
    if name in _VOID:
        return Markup("".join(out))
    return Markup("".join(out) + cat(*children) + f"</{name}>")


_VOID = frozenset({"meta", "input", "br", "hr"})
"""HTML elements with no end tag (SVG shapes get one: the HTML parser takes it in SVG)."""


def render_report(report: Report) -> str:
    return render_reports([report])


def render_reports(reports: Sequence[Report]) -> str:
    """The page of one report or many (a batch, a merge); a diff is one report."""
    data = [r.to_dict() for r in reports]
    labels = package_labels(reports)
    verdict = combined_verdict(reports).value
    exit_code = int(worst_exit_code(reports))
    single = len(reports) == 1
    title = f"aotipre: {verdict.upper()} " + (labels[0] if single else f"({len(reports)} packages)")
    body = [
        _header(reports, labels, verdict, exit_code),
        *([] if single else [_packages_table(reports, data, labels)]),
        *(
            _package_section(i, report, d, label, single)
            for i, (report, d, label) in enumerate(zip(reports, data, labels))
        ),
        _code_reference(reports),
    ]
    return (
        "<!DOCTYPE html>\n"
        + tag(
            "html",
            tag(
                "head",
                tag("meta", charset="utf-8"),
                tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
                tag(
                    "meta", http_equiv="Content-Security-Policy", content=content_security_policy()
                ),
                tag("title", title),
                tag("style", Markup(CSS)),
            ),
            tag("body", *body, tag("script", Markup(SCRIPT))),
            lang="en",
        )
        + "\n"
    )


# --- the top: verdict, exit code, counts ------------------------------------------------------


def _header(
    reports: Sequence[Report], labels: Sequence[str], verdict: str, exit_code: int
) -> Markup:
    """The verdict, the exit code and the counts; for one report, why it could not check."""
    single = len(reports) == 1
    what = labels[0] if single else f"{len(reports)} packages"
    verdicts = [r.verdict.value for r in reports]
    tally = ", ".join(f"{verdicts.count(v)} {v}" for v in ("pass", "fail", "error"))
    fail_on = {r.fail_on.value for r in reports}
    line = [
        f"exit {exit_code}",
        counts_text(combined_counts(reports)),
        f"fail-on {', '.join(sorted(fail_on))}",
    ]
    if not single:
        line.insert(1, tally)
    version = reports[0].tool_version or "?"
    return tag(
        "header",
        tag(
            "h1",
            _badge(verdict),
            " ",
            tag("span", what, class_="what"),
        ),
        tag("p", "; ".join(line), class_="summary"),
        tag("p", f"aotipre {version}", class_="tool"),
        *(
            tag("p", tag("strong", "could not check: "), report.error, class_="error")
            for report in (reports if single else [])
            if report.error is not None
        ),
        class_=f"top {verdict}",
        id="verdict",
    )


def _badge(verdict: str) -> Markup:
    return tag("span", verdict.upper(), class_=f"badge {verdict}")


# --- many packages: one row each --------------------------------------------------------------


def _packages_table(
    reports: Sequence[Report], data: Sequence[Mapping[str, Any]], labels: Sequence[str]
) -> Markup:
    """One row per package: verdict, exit code, worst finding, GPU, time, counts."""
    rows = []
    for i, (report, d, label) in enumerate(zip(reports, data, labels)):
        worst = by_severity(report.findings)[0] if report.findings else None
        seconds = sum(s["duration_s"] for s in d["stages"])
        counts = d["summary"]
        worst_cell = (
            tag("div", _code_link(worst.code), " ", worst.message, class_="clamp")
            if worst is not None
            else (report.error or "none")
        )
        rows.append(
            tag(
                "tr",
                tag("td", tag("a", label, href=f"#pkg-{i}")),
                tag("td", _badge(d["verdict"]), data_value=d["verdict"]),
                tag("td", d["exit_code"], data_value=d["exit_code"]),
                tag(
                    "td",
                    worst_cell,
                    data_value=worst.severity.rank if worst else -1,
                    class_="worst",
                ),
                tag("td", gpu_label(d["gpu"]) if d["gpu"] else ""),
                tag("td", f"{seconds:.2f} s", data_value=f"{seconds:.3f}"),
                *(tag("td", counts[s], data_value=counts[s]) for s in ("error", "warning", "info")),
                data_status=d["verdict"],
            )
        )
    headers = ["package", "verdict", "exit", "worst finding", "GPU", "time", "error", "warning"]
    return tag(
        "section",
        tag("h2", "Packages"),
        _controls("packages", ("pass", "fail", "error"), "verdict"),
        _table("packages", [*headers, "info"], rows),
        class_="packages",
    )


def _controls(table_id: str, statuses: Sequence[str], what: str) -> Markup:
    """The filter bar of a table: a text box and a status menu (hidden until the script runs:
    without JavaScript every row shows)."""
    options = [tag("option", f"any {what}", value="")]
    options += [tag("option", s, value=s) for s in statuses]
    return tag(
        "div",
        tag(
            "label",
            "filter ",
            tag(
                "input", type="search", class_="filter-text", placeholder="text", data_for=table_id
            ),
        ),
        " ",
        tag(
            "label", f"{what} ", tag("select", *options, class_="filter-status", data_for=table_id)
        ),
        tag("span", "", class_="shown", data_for=table_id),
        class_="controls",
        hidden=True,
    )


def _table(table_id: str | None, headers: Sequence[str], rows: Iterable[str]) -> Markup:
    head = tag("thead", tag("tr", *(tag("th", h, scope="col") for h in headers)))
    return tag(
        "table",
        head,
        tag("tbody", *rows),
        id=table_id,
        class_="sortable" if table_id else None,
    )


# --- one package ------------------------------------------------------------------------------


def _package_section(
    i: int, report: Report, d: Mapping[str, Any], label: str, single: bool
) -> Markup:
    parts: list[object] = [
        None if single else tag("h2", _badge(d["verdict"]), " ", tag("span", label, class_="what")),
        _facts(d),
    ]
    if d["error"] is not None and not single:
        parts.append(tag("p", tag("strong", "could not check: "), d["error"], class_="error"))
    parts.extend(_diagnosis(x) for x in d["diagnosis"])  # the conclusions first
    parts.extend(_accuracy(x) for x in d["accuracy"])
    parts.append(_findings(i, report, d))
    if d["performance"]:
        parts.append(_performance(d["performance"], report))
    if d["targets"]:
        rows = [
            tag(
                "tr",
                tag("td", t.get("target", "")),
                tag("td", t.get("model", "")),
                tag("td", t.get("status", "")),
            )
            for t in d["targets"]
        ]
        parts.append(tag("h3", "Targets"))
        parts.append(_table(None, ["target", "model", "status"], rows))
    if d["stages"]:
        parts.append(_stages(d["stages"]))
    parts.append(
        tag(
            "p",
            f"verdict: {d['verdict'].upper()} (exit {d['exit_code']}; "
            f"{counts_text(d['summary'])}; fail-on {d['fail_on']})",
            class_="verdict-line",
        )
    )
    return tag("section", *parts, class_="package", id=f"pkg-{i}", data_verdict=d["verdict"])


def _facts(d: Mapping[str, Any]) -> Markup:
    items: list[tuple[str, object]] = []
    package = d["package"]
    if package is not None:
        models = ", ".join(
            f"{m.get('name', '?')} ({m.get('device_type') or '?'})"
            for m in package.get("models", [])
        )
        items.append(("package", f"{package.get('kind', '?')}; models: {models}"))
    if d["inputs_source"]:
        items.append(("inputs", d["inputs_source"]))
    if d["config"] is not None:
        items.append(("config", d["config"]))
    for runtime in d["runtimes"]:
        items.append(
            ("workers", f"torch {runtime.get('torch', '?')} in {runtime.get('python', '?')}")
        )
    if d["gpu"] is not None:
        items.append(("gpu", gpu_label(d["gpu"])))
    if not items:
        return Markup("")
    return tag("dl", *(cat(tag("dt", k), tag("dd", v)) for k, v in items), class_="facts")


def _findings(i: int, report: Report, d: Mapping[str, Any]) -> Markup:
    findings = by_severity(report.findings)
    if not findings:
        return tag("p", "No findings.", class_="none")
    diff = [s.name for s in report.stages] == ["diff"]
    rows = []
    for f in findings:
        detail: list[object] = [tag("div", f.message, class_="message")]
        if f.hint:
            detail.append(tag("div", "hint: ", f.hint, class_="hint"))
        if f.evidence:
            detail.append(tag("pre", "\n".join(f.evidence), class_="evidence"))
        severity = f.severity.value
        if diff:
            severity = "breaking" if f.severity is Severity.ERROR else "compatible"
        rows.append(
            tag(
                "tr",
                tag("td", _code_link(f.code), class_="nowrap"),
                tag("td", severity, data_value=f.severity.rank, class_="nowrap"),
                tag("td", f.subject),
                tag("td", *detail),
                data_status=severity,
                class_=f"sev-{f.severity.value}",
            )
        )
    statuses = ("breaking", "compatible") if diff else tuple(s.value for s in reversed(Severity))
    title = "Changes (breaking first)" if diff else "Findings"
    return cat(
        tag("h3", f"{title} ({len(findings)})"),
        _controls(f"findings-{i}", statuses, "severity"),
        _table(
            f"findings-{i}", ["code", "change" if diff else "severity", "subject", "message"], rows
        ),
    )


def _code_link(code: str) -> Markup:
    if code in _KNOWN_CODES:
        return tag("a", code, href=f"#{code.lower()}", class_="code")
    return tag("span", code, class_="code")


_KNOWN_CODES = {c.code: c for c in codes.ALL_CODES}


def _stages(stages: Sequence[Mapping[str, Any]]) -> Markup:
    rows = [
        tag(
            "tr",
            tag("td", s["name"]),
            tag("td", s.get("model") or ""),
            tag("td", s["status"], class_=f"st-{s['status']}"),
            tag("td", f"{s['duration_s']:.2f} s", data_value=s["duration_s"]),
            tag("td", s.get("detail", "")),
        )
        for s in stages
    ]
    return tag(
        "details",
        tag("summary", f"Stages ({len(stages)})"),
        _table(None, ["stage", "model", "status", "time", "detail"], rows),
        class_="stages",
    )


# --- crash triage -----------------------------------------------------------------------------


def _diagnosis(d: Mapping[str, Any]) -> Markup:
    items: list[tuple[str, object]] = [
        ("kernel", d["kernel"] or "not named"),
        ("named by", d["identified_by"] or "-"),
        ("kind", d["kind"]),
        ("verdict", d["verdict"]),
    ]
    if d["misattributed"]:
        items.append(("misattributed", f"the first error blamed {d['misattributed']}"))
    if d["first_error"]:
        items.append(("first error", d["first_error"]))
    if d["evidence"]:
        items.append(("evidence", tag("pre", "\n".join(d["evidence"]))))
    if d["fused_nodes"] or d["aten_ops"]:
        ops = f" ({', '.join(d['aten_ops'])})" if d["aten_ops"] else ""
        items.append(("FX nodes", ", ".join(d["fused_nodes"]) + ops))
    if d["source_lines"]:
        items.append(("model code", tag("pre", "\n".join(d["source_lines"]))))
    bound = d["bound"]
    if bound:
        via = (
            f" (index read from {bound['pointer']} = {bound['argument']})"
            if bound["argument"]
            else ""
        )
        items.append(("index check", f"{bound['line']}{via}"))
    if d["previous_kernel"]:
        items.append(("previous kernel", d["previous_kernel"]))
    if d["launches"]:
        items.append(("launches", " -> ".join(d["launches"])))
    if d["repro"]:
        items.append(("repro", d["repro"]))
    for note in d["notes"]:
        items.append(("note", note))
    parts: list[object] = [
        tag("h3", f"Crash diagnosis ({d['model']})"),
        tag("dl", *(cat(tag("dt", k), tag("dd", v)) for k, v in items), class_="facts"),
    ]
    if d["inputs"]:
        headers = [
            "tensor",
            "input",
            "dtype",
            "shape",
            "device",
            "min",
            "max",
            "mean",
            "NaN",
            "Inf",
        ]
        rows = [
            tag(
                "tr",
                tag("td", t["name"]),
                tag("td", t["input"] or ""),
                tag("td", t["dtype"] or ""),
                tag("td", _shape(t["shape"])),
                tag("td", t["device"] or ""),
                *(tag("td", _num(t[k])) for k in ("min", "max", "mean", "nan", "inf")),
            )
            for t in d["inputs"]
        ]
        parts += [tag("h4", "Kernel inputs before its launch"), _table(None, headers, rows)]
    if d["kernel_source"]:
        where = f" ({d['kernel_source_from']})" if d["kernel_source_from"] else ""
        parts.append(
            tag(
                "details",
                tag("summary", f"Kernel source{where}"),
                tag("pre", d["kernel_source"], class_="source"),
            )
        )
    return tag("section", *parts, class_="diagnosis")


def _shape(shape: Sequence[int] | None) -> str:
    return "" if shape is None else "[" + ", ".join(str(n) for n in shape) + "]"


def _num(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or (
        math.isfinite(value) and value == int(value) and abs(value) < 1e15
    ):
        return str(int(value))
    return f"{value:.6g}"


# --- accuracy triage --------------------------------------------------------------------------


def _accuracy(a: Mapping[str, Any]) -> Markup:
    items: list[tuple[str, object]] = [("summary", a["summary"] or "-")]
    items.append(("first divergent kernel", a["kernel"] or "not localized"))
    if a["nodes"]:
        items.append(("FX nodes", ", ".join(a["nodes"])))
    if a["source"]:
        items.append(("model code", tag("pre", "\n".join(a["source"]))))
    if a["inputs_agree"] is not None:
        items.append(("its inputs agree with eager", "yes" if a["inputs_agree"] else "no"))
    items.append(("triggered by", ", ".join(a["trigger"]) or "-"))
    if a["cause"]:
        items.append(("cause", a["cause"]))
    for key, label in (
        ("output_max_abs", "output max abs error"),
        ("rmse_compiled", "RMSE compiled vs fp64"),
        ("rmse_eager", "RMSE eager vs fp64"),
    ):
        if a[key] is not None:
            items.append((label, _num(a[key])))
    if a["latency"]:
        lat = a["latency"]
        items.append(
            (
                "the cause's latency cost",
                f"{lat['cost_pct']:+.1f}% (median of {lat['runs']}, "
                f"{_num(lat['deployed_ms'])} vs {_num(lat['rebuilt_ms'])} ms)",
            )
        )
    repro = a["repro"]
    if repro:
        count = repro["node_count"]
        state = "verified" if repro["verified"] else "not verified"
        text = f"{state}; {count['repro']} of {count['program']} nodes"
        text += f"; {repro['path']}" if repro["path"] else ""
        text += f"; {repro['detail']}" if repro["detail"] else ""
        items.append(("repro", text))
    parts: list[object] = [
        tag("h3", f"Accuracy triage ({a['model']})"),
        tag("dl", *(cat(tag("dt", k), tag("dd", v)) for k, v in items), class_="facts"),
    ]
    series = a["series"]
    if series:
        parts.append(tag("h4", "Error per kernel, in execution order"))
        parts.append(_series_chart(series, a["kernel"]))
        rows = [
            tag(
                "tr",
                tag("td", n, data_value=n),
                tag("td", k["kernel"]),
                tag("td", ", ".join(k["nodes"])),
                tag("td", _num(k["max_abs"]), data_value=_sort_num(k["max_abs"])),
                tag("td", _num(k["max_rel"]), data_value=_sort_num(k["max_rel"])),
                tag("td", k["mismatches"], data_value=k["mismatches"]),
                tag("td", k["nonfinite"], data_value=k["nonfinite"]),
                class_="first" if k["kernel"] == a["kernel"] else None,
            )
            for n, k in enumerate(series, 1)
        ]
        headers = ["#", "kernel", "FX nodes", "max abs", "max rel", "mismatches", "NaN/Inf"]
        parts.append(
            tag(
                "details",
                tag("summary", f"Every launch ({len(series)})"),
                _table(None, headers, rows),
            )
        )
    trials = [(t, t["knob"]) for t in a["trials"]]
    if a["confirm"]:
        trials.append((a["confirm"], f"{a['confirm']['knob']} (the program rebuilt)"))
    if trials:
        rows = [
            tag(
                "tr",
                tag("td", knob),
                tag("td", t["verdict"]),
                tag("td", _num(t["max_abs"])),
                tag("td", f"{t['seconds']:.1f} s", class_="nowrap"),
                tag("td", t["detail"]),
            )
            for t, knob in trials
        ]
        parts.append(tag("h4", f"Cause ladder (rebuilt: {a['trials_on']})"))
        parts.append(_table(None, ["knob", "verdict", "max abs", "time", "detail"], rows))
    return tag("section", *parts, class_="accuracy")


def _sort_num(value: float | None) -> str:
    return "-1" if value is None else repr(float(value))


def _series_chart(series: Sequence[Mapping[str, Any]], first: str | None) -> Markup:
    """One point per kernel launch (x: execution order, y: its largest absolute error on a log
    scale); a launch with NaN/Inf sits on a row of its own above the decades, one whose error
    is exactly 0 on the bottom row and one with no compared output there too, hollow; the first
    divergent kernel is ringed and named."""
    width, height, left, right, top, bottom = 720, 220, 64, 16, 24, 30
    errors = [k["max_abs"] for k in series]
    logs = [math.log10(v) for v in errors if isinstance(v, (int, float)) and v > 0]
    high = math.ceil(max(logs)) if logs else 0
    low = min(math.floor(min(logs)), high - 1) if logs else -1
    zero_row = low - 1  # exact zero: one decade below the smallest error
    nonfinite_row = high + 1 if any(k["nonfinite"] for k in series) else None
    top_row = high if nonfinite_row is None else nonfinite_row
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(series)

    def x_of(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n)

    def y_of(decade: float) -> float:
        return top + plot_h * (top_row - decade) / (top_row - zero_row)

    grid: list[Markup] = []
    for decade in range(zero_row, top_row + 1):
        y = y_of(decade)
        text = {zero_row: "0", nonfinite_row: "NaN/Inf"}.get(decade, f"1e{decade}")
        grid.append(
            tag("line", x1=left, x2=width - right, y1=f"{y:.1f}", y2=f"{y:.1f}", class_="grid")
        )
        grid.append(
            tag("text", text, x=left - 6, y=f"{y + 4:.1f}", class_="axis", text_anchor="end")
        )
    points: list[Markup] = []
    path: list[str] = []
    marker: list[Markup] = []
    for i, k in enumerate(series):
        value = k["max_abs"]
        kind = "pt"
        if k["nonfinite"]:
            y, kind = y_of(top_row), "pt nonfinite"
        elif isinstance(value, (int, float)) and value > 0:
            y = y_of(math.log10(value))
        elif value is None:
            y, kind = y_of(zero_row), "pt none"
        else:
            y = y_of(zero_row)
        x = x_of(i)
        path.append(f"{x:.1f},{y:.1f}")
        is_first = first is not None and k["kernel"] == first and not marker
        label = f"#{i + 1} {k['kernel']}: max abs {_num(value) or 'not compared'}"
        label += f", {k['nonfinite']} NaN/Inf" if k["nonfinite"] else ""
        points.append(
            tag(
                "circle",
                tag("title", label),
                cx=f"{x:.1f}",
                cy=f"{y:.1f}",
                r=5 if is_first else 3.5,
                class_=kind + (" first" if is_first else ""),
                data_kernel=k["kernel"],
            )
        )
        if is_first:
            anchor = "end" if x > left + plot_w / 2 else "start"
            marker.append(
                tag(
                    "line",
                    x1=f"{x:.1f}",
                    x2=f"{x:.1f}",
                    y1=top,
                    y2=height - bottom,
                    class_="divergent",
                )
            )
            marker.append(
                tag(
                    "text",
                    f"first divergent: {first}",
                    x=f"{x + (-6 if anchor == 'end' else 6):.1f}",
                    y=top - 8,
                    class_="label",
                    text_anchor=anchor,
                )
            )
    axis = tag(
        "text",
        f"kernel launches in execution order (1..{n})",
        x=left + plot_w / 2,
        y=height - 8,
        class_="axis",
        text_anchor="middle",
    )
    return _svg(
        width,
        height,
        "the largest absolute error of each kernel launch against eager",
        *grid,
        *marker,
        tag("polyline", points=" ".join(path), class_="series"),
        *points,
        axis,
        class_="chart series-chart",
    )


# --- performance ------------------------------------------------------------------------------

_COLD_PARTS = (
    ("before_load_s", "process start and import torch"),
    ("loader_import_s", "loader imports"),
    ("cuda_init_s", "CUDA start"),
    ("probe_s", "CPU-ISA probe"),
    ("exported_program_s", "ExportedProgram"),
    ("extraction_s", "extraction"),
    ("dlopen_constants_s", "dlopen and constants"),
    ("rest_of_load", "rest of the load call"),
    ("first_call_s", "first call"),
)
"""The cold start's parts in the order a deployment pays them; each a field of the report's
`cold` (the load call `load_s` holds the probe, the ExportedProgram, the extraction and the
dlopen; its remainder is drawn as the rest of the load call)."""

_BUDGET_CODES = {"AOT645": "load", "AOT646": "latency", "AOT647": "host", "AOT648": "gpu"}
"""The budget findings: each carries its budget as `expected` (max-load-s, max-latency-ms,
max-rss-mb, max-gpu-mb)."""


def cold_parts(cold: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The cold start's segments, (label, seconds), those measured and above zero."""
    inside = sum(
        cold.get(k) or 0.0
        for k in ("probe_s", "exported_program_s", "extraction_s", "dlopen_constants_s")
    )
    out = []
    for key, label in _COLD_PARTS:
        if key == "rest_of_load":
            value: Any = (cold.get("load_s") or 0.0) - inside
        else:
            value = cold.get(key)
        if isinstance(value, (int, float)) and value > 0:
            out.append((label, float(value)))
    return out


def _performance(records: Sequence[Mapping[str, Any]], report: Report) -> Markup:
    budgets: dict[tuple[str, str | None], float] = {}
    for f in report.findings:
        if f.code in _BUDGET_CODES and isinstance(f.expected, (int, float)):
            budgets[(_BUDGET_CODES[f.code], f.model)] = float(f.expected)
    parts: list[object] = [tag("h3", "Performance")]
    for rec in records:
        against = rec.get("against")
        model = rec["model"]
        parts.append(tag("h4", f"{model} on {rec['device']}"))
        sides = [("this package", rec), *([("--against", against)] if against else [])]
        colds = [(name, side["cold"]) for name, side in sides if side.get("cold")]
        if colds:
            parts.append(_cold_chart(colds, budgets.get(("load", model))))
        lat = [(name, side["latency"]) for name, side in sides if side.get("latency")]
        if lat:
            bars = [(f"{name} {p}", side[f"{p}_ms"]) for name, side in lat for p in ("p50", "p99")]
            parts.append(
                _bar_chart("latency", "ms", bars, budgets.get(("latency", model)), "max-latency-ms")
            )
        mem: list[tuple[str, float]] = []
        for name, side in sides:
            memory = side.get("memory") or {}
            for key, what in (("host_peak", "host RSS"), ("gpu_peak", "GPU")):
                if isinstance(memory.get(key), (int, float)):
                    mem.append((f"{name} {what}", memory[key] / MB))
        if mem:
            host, gpu = budgets.get(("host", model)), budgets.get(("gpu", model))
            name = "max-rss-mb" if host is not None else "max-gpu-mb"
            parts.append(
                _bar_chart("peak memory", "MB", mem, host if host is not None else gpu, name)
            )
        for note in rec.get("notes") or ():
            parts.append(tag("p", "note: ", note, class_="note"))
    return tag("section", *parts, class_="performance")


_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#76b7b2",
    "#e15759",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#9c755f",
    "#bab0ac",
)


def _cold_chart(sides: Sequence[tuple[str, Mapping[str, Any]]], budget: float | None) -> Markup:
    """One stacked bar per side (this package, --against): what its cold start was made of."""
    width, left, right, bar_h, gap = 720, 110, 60, 26, 12
    segments = [(name, cold_parts(cold)) for name, cold in sides]
    longest = max([sum(s for _, s in parts) for _, parts in segments] + [budget or 0.0, 1e-9])
    scale = (width - left - right) / longest
    height = len(sides) * (bar_h + gap) + 34
    shapes: list[Markup] = []
    for row, (name, parts) in enumerate(segments):
        y = 8 + row * (bar_h + gap)
        shapes.append(
            tag("text", name, x=left - 6, y=y + bar_h / 2 + 4, class_="axis", text_anchor="end")
        )
        x = float(left)
        for label, seconds in parts:
            w = seconds * scale
            color = _PALETTE[[lbl for _, lbl in _COLD_PARTS].index(label)]
            shapes.append(
                tag(
                    "rect",
                    tag("title", f"{label}: {seconds:.3f} s"),
                    x=f"{x:.1f}",
                    y=y,
                    width=f"{max(w, 0.5):.1f}",
                    height=bar_h,
                    fill=color,
                    class_="seg",
                    data_part=label,
                )
            )
            x += w
        total = sum(s for _, s in parts)
        shapes.append(
            tag(
                "text",
                f"{total:.2f} s",
                x=min(x + 4, width - right),
                y=y + bar_h / 2 + 4,
                class_="axis",
            )
        )
    if budget is not None:
        bx = left + budget * scale
        shapes.append(
            tag("line", x1=f"{bx:.1f}", x2=f"{bx:.1f}", y1=2, y2=height - 28, class_="budget")
        )
        shapes.append(
            tag(
                "text",
                f"max-load-s {budget:g} s",
                x=f"{bx:.1f}",
                y=height - 16,
                class_="axis",
                text_anchor="middle",
            )
        )
    used = {label for _, parts in segments for label, _ in parts}
    legend = tag(
        "ul",
        *(
            tag("li", _swatch(_PALETTE[i]), label)
            for i, (_, label) in enumerate(_COLD_PARTS)
            if label in used
        ),
        class_="legend",
    )
    chart = _svg(
        width,
        height,
        "what the cold start was made of, in seconds",
        *shapes,
        class_="chart cold-chart",
    )
    return cat(tag("p", "Cold start", class_="chart-title"), chart, legend)


def _swatch(color: str) -> Markup:
    return _svg(12, 12, "", tag("rect", x=0, y=0, width=12, height=12, fill=color), class_="swatch")


def _bar_chart(
    title: str, unit: str, bars: Sequence[tuple[str, float]], budget: float | None, budget_name: str
) -> Markup:
    """Horizontal bars on one scale, with the budget as a dashed line when one was exceeded
    (the report carries a budget in the finding that exceeded it)."""
    width, left, right, bar_h, gap = 720, 150, 70, 18, 6
    values = [v for _, v in bars if isinstance(v, (int, float)) and math.isfinite(v)]
    longest = max([*values, budget or 0.0, 1e-12])
    scale = (width - left - right) / longest
    height = len(bars) * (bar_h + gap) + (30 if budget is not None else 8)
    shapes: list[Markup] = []
    for row, (label, value) in enumerate(bars):
        y = 4 + row * (bar_h + gap)
        ok = isinstance(value, (int, float)) and math.isfinite(value)
        w = value * scale if ok else 0.0
        shapes.append(
            tag("text", label, x=left - 6, y=y + bar_h / 2 + 4, class_="axis", text_anchor="end")
        )
        shapes.append(
            tag(
                "rect",
                tag("title", f"{label}: {_num(value) if ok else 'not measured'} {unit}"),
                x=left,
                y=y,
                width=f"{max(w, 0.5):.1f}",
                height=bar_h,
                class_="bar" + (" against" if label.startswith("--against") else ""),
            )
        )
        shapes.append(
            tag(
                "text",
                f"{value:.3g} {unit}" if ok else "-",
                x=left + w + 4,
                y=y + bar_h / 2 + 4,
                class_="axis",
            )
        )
    if budget is not None:
        bx = left + budget * scale
        shapes.append(
            tag("line", x1=f"{bx:.1f}", x2=f"{bx:.1f}", y1=0, y2=height - 24, class_="budget")
        )
        shapes.append(
            tag(
                "text",
                f"{budget_name} {budget:g} {unit}",
                x=f"{bx:.1f}",
                y=height - 10,
                class_="axis",
                text_anchor="middle",
            )
        )
    chart = _svg(
        width,
        height,
        f"{title} in {unit}",
        *shapes,
        class_=f"chart bars-chart {title.replace(' ', '-')}",
    )
    return cat(tag("p", title.capitalize(), class_="chart-title"), chart)


def _svg(width: int, height: int, label: str, *shapes: object, class_: str) -> Markup:
    return tag(
        "svg",
        *((tag("title", label),) if label else ()),
        *shapes,
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        role="img" if label else None,
        aria_hidden=None if label else "true",
        class_=class_,
    )


# --- the codes' reference ---------------------------------------------------------------------


def _code_reference(reports: Sequence[Report]) -> Markup:
    used = sorted({f.code for r in reports for f in r.findings if f.code in _KNOWN_CODES})
    if not used:
        return Markup("")
    entries = []
    for name in used:
        code = _KNOWN_CODES[name]
        entries.append(
            cat(
                tag("dt", f"{code.code} {code.name}", id=code.code.lower()),
                tag(
                    "dd",
                    tag("p", code.summary),
                    tag("p", "What to do: ", code.hint),
                    tag(
                        "p",
                        f"default severity {code.severity.value}; aotipre explain {code.code}",
                        class_="tool",
                    ),
                ),
            )
        )
    return tag(
        "section", tag("h2", "Codes on this page"), tag("dl", *entries, class_="codes"), id="codes"
    )


# --- the style and the script -----------------------------------------------------------------

CSS = """
:root{--pass:#1a7f37;--fail:#cf222e;--error:#bc4c00;--line:#d0d7de;--muted:#57606a}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;
padding:0 16px 48px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}h3{font-size:15px;margin:20px 0 6px}
h4{font-size:14px;margin:14px 0 4px}
.top{border-left:6px solid var(--line);padding:12px 16px;margin:16px 0;background:#f6f8fa}
.top.pass{border-color:var(--pass)}.top.fail{border-color:var(--fail)}.top.error{border-color:var(--error)}
.summary{margin:0;font-weight:600}.tool{margin:2px 0 0;color:var(--muted);font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:700}
.badge.pass{background:var(--pass)}.badge.fail{background:var(--fail)}.badge.error{background:var(--error)}
.what{overflow-wrap:anywhere}
.error{color:var(--fail);overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{background:#f6f8fa;font-weight:600;white-space:nowrap;overflow-wrap:normal}
td.nowrap{white-space:nowrap;overflow-wrap:normal}
td.worst{max-width:420px}td.worst>*{vertical-align:top}
.clamp{display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden}
.js table.sortable th{cursor:pointer;user-select:none}
.js table.sortable th:after{content:" \\2195";color:var(--muted)}
th[aria-sort=ascending]:after{content:" \\2191"!important}th[aria-sort=descending]:after{content:" \\2193"!important}
tr.sev-error td:nth-child(2){color:var(--fail);font-weight:600}
tr.sev-warning td:nth-child(2){color:var(--error)}
tr.first td{background:#fff8c5}
.hint{color:var(--muted)}
pre{background:#f6f8fa;padding:6px;overflow:auto;max-height:420px;margin:4px 0;white-space:pre-wrap;
overflow-wrap:anywhere}
.code{font-family:ui-monospace,monospace}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}
.controls{margin:6px 0;display:flex;gap:12px;align-items:center}
.controls[hidden]{display:none}.shown{color:var(--muted)}
.chart{max-width:100%;height:auto;display:block;margin:4px 0}
.chart .axis{font-size:11px;fill:var(--muted)}.chart .label{font-size:12px;fill:var(--fail)}
.chart .grid{stroke:#eaeef2}.chart .series{fill:none;stroke:#4e79a7;stroke-width:1.5}
.chart .pt{fill:#4e79a7}.chart .pt.none{fill:#fff;stroke:#4e79a7}
.chart .pt.nonfinite{fill:var(--fail)}.chart .pt.first{stroke:var(--fail);stroke-width:2.5}
.chart .divergent{stroke:var(--fail);stroke-dasharray:4 3}
.chart .budget{stroke:var(--fail);stroke-width:2;stroke-dasharray:6 4}
.chart .bar{fill:#4e79a7}.chart .bar.against{fill:#bab0ac}
.chart-title{margin:10px 0 0;font-weight:600}
.legend{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px}
.legend li{display:flex;align-items:center;gap:4px}.swatch{display:inline}
section.package{border-top:1px solid var(--line);margin-top:24px}
dl.codes dt{font-weight:600;margin-top:8px;font-family:ui-monospace,monospace}dl.codes dd{margin:0 0 0 16px}
dl.codes p{margin:2px 0}
@media print{.controls{display:none!important}}
"""

SCRIPT = """
(function(){
"use strict";
document.documentElement.classList.add("js");
function key(cell){
  var v=cell.getAttribute("data-value");
  var text=v===null?cell.textContent.trim():v;
  var n=Number(text);
  return text!==""&&!isNaN(n)?{n:n}:{s:text.toLowerCase()};
}
function compare(a,b){
  if(a.n!==undefined&&b.n!==undefined){return a.n-b.n;}
  var x=a.s!==undefined?a.s:String(a.n),y=b.s!==undefined?b.s:String(b.n);
  return x<y?-1:x>y?1:0;
}
document.querySelectorAll("table.sortable").forEach(function(table){
  var heads=table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads,function(th,col){
    th.tabIndex=0;
    function sort(){
      var down=th.getAttribute("aria-sort")==="ascending";
      Array.prototype.forEach.call(heads,function(h){h.removeAttribute("aria-sort");});
      th.setAttribute("aria-sort",down?"descending":"ascending");
      var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){var c=compare(key(a.cells[col]),key(b.cells[col]));return down?-c:c;});
      rows.forEach(function(r){body.appendChild(r);});
    }
    th.addEventListener("click",sort);
    th.addEventListener("keydown",function(e){if(e.key==="Enter"){sort();}});
  });
});
document.querySelectorAll(".controls").forEach(function(bar){
  var text=bar.querySelector(".filter-text"),status=bar.querySelector(".filter-status");
  var table=document.getElementById(text.getAttribute("data-for"));
  var shown=bar.querySelector(".shown");
  function apply(){
    var want=text.value.trim().toLowerCase(),st=status.value,n=0,rows=table.tBodies[0].rows;
    Array.prototype.forEach.call(rows,function(r){
      var ok=(!st||r.getAttribute("data-status")===st)&&
        (!want||r.textContent.toLowerCase().indexOf(want)>=0);
      r.hidden=!ok;if(ok){n++;}
    });
    shown.textContent=n+" of "+rows.length+" shown";
  }
  text.addEventListener("input",apply);
  status.addEventListener("change",apply);
  bar.hidden=false;
  apply();
});
})();
"""


def content_security_policy() -> str:
    """Nothing loads from anywhere and only this module's own style and script apply: a string
    that slipped past `esc` could neither run nor fetch."""
    import base64
    import hashlib

    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    return (
        f"default-src 'none'; style-src '{digest(CSS)}'; script-src '{digest(SCRIPT)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
