"""The HTML report without a browser: whatever a package, a model, a path or an exception holds
is text, never markup; the charts are drawn from the report's data; the page is the JSON
report's data drawn; `--format html` and `--report html:PATH` on check, merge and diff; the
renderer is imported only when asked for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.findings import Report, StageResult, StageStatus, codes
from aotipre.report import render_report, render_reports
from aotipre.report.sanitize import clean
from aotipre.runner.perf import ColdStart, Latency, Memory, PerfRecord
from aotipre.triage.accuracy_diagnosis import AccuracyDiagnosis, KernelError, KnobTrial, Repro
from aotipre.triage.diagnosis import Diagnosis, IndexBound, TensorStats
from tests.report.conftest import TRICKY, failing_report, passing_report

REPO = Path(__file__).resolve().parents[2]
HOSTILE_NAME = os.fsdecode(b"bad\xff\x1b[2J\xe2\x80\xae\n::error::forged.pt2")
"""The package name of the other formats' hostile-path test (tests/hardening/test_hostile_cli.py):
a non-UTF-8 byte, ESC, a bidi override and a newline."""
PAYLOADS = [
    HOSTILE_NAME,
    TRICKY,
    "</script><script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg/onload=alert(2)>",
    "</style><style>body{display:none}</style>",
    "<!-- ]]> <![CDATA[ x",
    "javascript:alert(3)",
    "&lt;already escaped&gt; &amp;",
    "</title></head><body><a href='https://evil.example/'>x</a>",
]
ALLOWED_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "script", "header", "section", "h1"),
    *("h2", "h3", "h4", "p", "span", "strong", "div", "label", "input", "select", "option"),
    *("table", "thead", "tbody", "tr", "th", "td", "a", "dl", "dt", "dd", "pre", "details"),
    *("summary", "ul", "li", "svg", "rect", "line", "text", "circle", "polyline"),
}
"""Every element the renderer writes; a payload that became markup would add another one (or
another script, style or link)."""
ALLOWED_ATTRIBUTES = {
    *("lang", "charset", "name", "content", "http-equiv", "id", "class", "href", "scope"),
    *("hidden", "type", "placeholder", "value", "data-for", "data-status", "data-value"),
    *("data-verdict", "data-kernel", "data-part", "xmlns", "viewbox", "width", "height", "role"),
    *("aria-hidden", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "fill", "points"),
    "text-anchor",
}
"""Every attribute it writes: none loads anything (no src) or styles anything inline."""


class Page(HTMLParser):
    """A parsed page: its start tags with their attributes, and its text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str, cls: str | None = None) -> list[dict[str, str | None]]:
        """The attributes of every `tag` element (with `cls` among its classes)."""
        return [
            a
            for t, a in self.tags
            if t == tag and (cls is None or cls in (a.get("class") or "").split())
        ]


def full_report(name: str) -> Report:
    """A report that has every part the page draws, `name` in every string a package, a model,
    a worker log or an exception could put there."""
    report = failing_report()
    report.package_path = f"models/{name}.pt2"
    report.package = {"kind": "both", "models": [{"name": name, "device_type": "cpu"}]}
    report.inputs_source = f"inputs/{name}.pt"
    report.config = f"{name}/pyproject.toml"
    report.gpu = {"index": 0, "name": name, "uuid": f"GPU-{name}"}
    report.runtimes = [{"python": f"/venv/{name}/python", "torch": name}]
    report.error = None
    report.stages.append(StageResult("perf", StageStatus.FAILED, 1.0, name, model=name))
    report.findings.append(
        codes.get("AOT646").finding(
            f"the median call of {name} took too long",
            model=name,
            input=name,
            stage="perf",
            expected=0.5,
            actual=2.0,
            evidence=(name, f"at {name}"),
        )
    )
    report.targets = [{"target": name, "model": name, "status": name}]
    report.diagnosis = [
        Diagnosis(
            model=name,
            kernel=name,
            identified_by=name,
            evidence=(name,),
            verdict=f"kernel {name} reads out of bounds",
            kind="index_out_of_range",
            kernel_source=f"void {name}()\n{{\n  return;\n}}",
            kernel_source_from=f"pkg:{name}.cpp",
            fused_nodes=(name,),
            aten_ops=(name,),
            source_lines=(f"models.py:1 {name}",),
            inputs=(TensorStats(name=name, input=name, dtype="int64", shape=(2, 5), min=0, max=9),),
            bound=IndexBound(variable="tmp2", upper=5, line=name, pointer=name, argument=name),
            previous_kernel=name,
            launches=(name, name),
            first_error=name,
            misattributed=name,
            repro=f"/artifacts/{name}/repro.py",
            notes=(name,),
        )
    ]
    report.accuracy = [
        AccuracyDiagnosis(
            model=name,
            trigger=("AOT701",),
            kernel=f"k1_{name}",
            nodes=(name,),
            source=(name,),
            inputs_agree=True,
            series=(
                KernelError(f"k0_{name}", (name,), 0.0, 0.0, 0, 1, 0),
                KernelError(f"k1_{name}", (name,), 0.25, 0.5, 3, 1, 0),
                KernelError(f"k2_{name}", (name,), None, None, 0, 0, 2),
                KernelError(f"k3_{name}", (name,), float("nan"), None, 0, 1, 4),
            ),
            output_max_abs=0.5,
            cause=name,
            trials=(KnobTrial(name, {name: True}, "cause", name, 0.0, 1.5),),
            summary=name,
            repro=Repro(True, "subgraph", (name,), 9, 0.25, f"/a/{name}", name),
        )
    ]
    report.performance = [(perf_record(name, 0.8), perf_record(name, 0.4))]
    return report


def perf_record(name: str, p50_ms: float) -> PerfRecord:
    cold = ColdStart(
        before_load_s=1.5,
        loader_import_s=0.7,
        cuda_init_s=None,
        load_s=2.0,
        probe_s=1.2,
        probe_programs=6,
        probe_compiles=0,
        probe_compiles_failed=0,
        probe_base_checks_s=1.0,
        exported_program_s=None,
        loader_s=0.3,
        extraction_s=0.1,
        extraction_bytes=1000,
        extraction_files=3,
        extraction_folder=f"/tmp/{name}",
        dlopen_constants_s=0.05,
        first_call_s=0.002,
        fresh_process=True,
    )
    memory = Memory(host_peak_after_load=300 * 2**20, host_peak_after_run=320 * 2**20)
    latency = Latency(20, 3, p50_ms, p50_ms * 3, p50_ms / 2, p50_ms, p50_ms * 3, 0.0)
    return PerfRecord(name, "cpu", cold, memory, latency, notes=(name,), package=name)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_what_a_package_holds_is_text_never_markup(payload: str) -> None:
    text = render_reports([full_report(payload), passing_report()], "html")
    text.encode("utf-8")  # valid UTF-8 whatever the path held (no lone surrogate)
    assert "\x1b" not in text and "\u202e" not in text
    page = Page(text)
    assert {t for t, _ in page.tags} <= ALLOWED_TAGS, {t for t, _ in page.tags} - ALLOWED_TAGS
    assert len(page.all("script")) == len(page.all("style")) == 1
    ids = {a["id"] for _, a in page.tags if a.get("id")}
    for tag, attrs in page.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        href = attrs.get("href")
        if href is not None:  # links go within the page only, to an element it has
            assert href.startswith("#") and href[1:] in ids, href
    # and the payload is there, as text, as every human format shows it
    shown = clean(payload)
    assert sum(shown in chunk for chunk in page.text) >= 20
    # nothing the page could load from elsewhere: one Content Security Policy of none
    (policy,) = [a for a in page.all("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert (policy["content"] or "").startswith("default-src 'none'")
    names = {k for _, attrs in page.tags for k in attrs}
    assert names <= ALLOWED_ATTRIBUTES, names - ALLOWED_ATTRIBUTES  # no src, no style
    assert {a["xmlns"] for a in page.all("svg")} == {"http://www.w3.org/2000/svg"}


def test_the_charts_are_drawn_from_the_report_data() -> None:
    report = full_report("m")
    data = report.to_dict()
    page = Page(render_report(report, "html"))
    # the cold start: one segment per measured part, for the package and its --against
    (perf,) = data["performance"]
    expected = 0
    for cold in (perf["cold"], perf["against"]["cold"]):
        parts = ["before_load_s", "loader_import_s", "cuda_init_s", "probe_s"]
        parts += ["exported_program_s", "extraction_s", "dlopen_constants_s", "first_call_s"]
        expected += sum(1 for p in parts if (cold[p] or 0) > 0)
        inside = sum(cold[p] or 0 for p in parts[3:7])
        expected += cold["load_s"] > inside  # what else the load call spent
    assert len(page.all("rect", "seg")) == expected
    # latency: p50 and p99 of each side; memory: each side's host peak; the budget exceeded
    sides = [perf, perf["against"]]
    bars = 2 * sum(1 for s in sides if s["latency"])
    bars += sum(1 for s in sides for k in ("host_peak", "gpu_peak") if s["memory"][k] is not None)
    assert len(page.all("rect", "bar")) == bars
    assert len(page.all("line", "budget")) == sum(f["code"] == "AOT646" for f in data["findings"])
    assert "max-latency-ms 0.5 ms" in page.text
    # the accuracy series: one point per launch, the first divergent kernel marked
    (accuracy,) = data["accuracy"]
    points = page.all("circle", "pt")
    assert [p["data-kernel"] for p in points] == [k["kernel"] for k in accuracy["series"]]
    (first,) = page.all("circle", "first")
    assert first["data-kernel"] == accuracy["kernel"]
    assert len(page.all("circle", "nonfinite")) == sum(
        k["nonfinite"] > 0 for k in accuracy["series"]
    )
    assert f"first divergent: {accuracy['kernel']}" in page.text


def test_a_diff_lists_its_breaking_changes_first() -> None:
    report = Report(package_path="old.pt2 -> new.pt2", tool_version="0.1.0")
    report.stages = [StageResult("diff", StageStatus.PASSED, 0.01, "1 breaking, 1 compatible")]
    report.findings = [
        codes.get("AOT013").finding("widened", severity=codes.Severity.INFO, stage="diff"),
        codes.get("AOT201").finding("input x: float32 -> int64", stage="diff"),
    ]
    text = render_report(report, "html")
    assert "Changes (breaking first) (2)" in text
    rows = re.findall(r'<tr data-status="(\w+)"', text)
    assert rows == ["breaking", "compatible"]
    assert text.index("input x: float32 -&gt; int64") < text.index("widened")


def test_the_page_is_the_json_report_drawn(reports: list[Report]) -> None:
    """What `merge` reads back from JSON draws the same page: the page shows nothing the JSON
    report does not hold."""
    many = [full_report("m"), *reports]  # durations in whole milliseconds, as JSON keeps them
    again = [Report.from_dict(json.loads(render_report(r, "json"))) for r in many]
    assert render_reports(again, "html") == render_reports(many, "html")
    assert render_report(again[0], "html") == render_report(many[0], "html")


def test_a_report_that_could_not_check_says_why_on_top(reports: list[Report]) -> None:
    page = Page(render_report(reports[2], "html"))
    header = "".join(page.text)
    assert "ERROR" in header and "could not check: " in header
    assert "truncated or damaged zip archive" in header
    many = Page(render_reports(reports, "html"))
    verdicts = [a.get("data-status") for t, a in many.tags if t == "tr" and a.get("data-status")]
    assert verdicts[:3] == ["fail", "pass", "error"]


def run(*args: str) -> int:
    return main(list(args))


def test_check_merge_and_diff_write_html(
    pkg: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    both, kwargs, crc = str(pkg("both")), str(pkg("kwargs")), str(pkg("broken_crc"))
    assert run("check", both, "--static-only", "--no-config", "-f", "html", "-o", "one.html") == 0
    args = ["--static-only", "--no-config", "--report", "html:out/many.html"]
    assert run("check", both, crc, *args, "-f", "json", "-o", "many.json") == 1
    assert run("merge", "many.json", "-f", "html", "-o", "merged.html") == 1
    assert run("diff", both, kwargs, "-f", "json", "--report", "html:diff.html") == 1
    pages = {n: (tmp_path / n).read_text() for n in ("one.html", "out/many.html", "merged.html")}
    pages["diff.html"] = (tmp_path / "diff.html").read_text()
    for text in pages.values():
        assert text.startswith('<!DOCTYPE html>\n<html lang="en">')
    assert pages["out/many.html"] == pages["merged.html"].replace("\r", "")
    assert "PASS" in pages["one.html"] and "2 packages" in pages["merged.html"]
    assert "Changes (breaking first)" in pages["diff.html"]


def test_the_renderer_is_imported_only_when_asked_for(pkg: Callable[[str], Path]) -> None:
    code = (
        "import sys\n"
        "from aotipre.cli import main\n"
        f"main(['check', {str(pkg('both'))!r}, '--static-only', '--no-config'])\n"
        f"main(['inspect', {str(pkg('both'))!r}])\n"
        f"main(['check', {str(pkg('both'))!r}, '--static-only', '--no-config', '-f', 'json'])\n"
        "before = 'aotipre.report.html' in sys.modules\n"
        f"main(['check', {str(pkg('both'))!r}, '--static-only', '--no-config', '-f', 'html'])\n"
        "print('html imported:', before, 'aotipre.report.html' in sys.modules, file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "html imported: False True" in r.stderr, r.stderr[-2000:]


def test_the_docs_show_the_screenshots_the_browser_test_takes() -> None:
    from tests.report.screenshots import SHOTS

    docs = "\n".join(p.read_text() for p in (REPO / "docs").glob("*.md"))
    for name in (shot.image for shot in SHOTS.values()):
        assert f"images/{name}" in docs, name
        assert (REPO / "docs" / "images" / name).is_file(), name
