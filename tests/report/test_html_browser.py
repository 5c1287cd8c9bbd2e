"""The HTML report in a real browser (headless Chromium driven by playwright): the page of a real
check (with --against and budgets), of a zoo's shards merged, of a crash triage and of an
accuracy triage renders with no console error and loads nothing; its charts have one bar or
point per value of the JSON report written in the same run; the filters and the sorting work;
a hostile package name shows as text. The pages the screenshots of docs/ci.md show, drawn
from recorded reports (tests/report/screenshots.py), render cleanly too; with
AOTIPRE_DOC_SCREENSHOTS=1 the run takes those screenshots (docs/images/) and records which page
each shows (docs/images/html-screenshots.json, which tests/report/test_html_screenshots.py holds
to the renderer without a browser).

The accuracy triage's report is one recorded from a real run (tests/data/reports/README.md
says how): a triage compiles the program several times, minutes of CPU; its page is drawn
from that JSON through `aotipre merge`, as a CI job draws the JSON of its shards."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aotipre.cli import main
from tests.report import screenshots
from tests.report.screenshots import RECORDED, SHOTS, VIEWPORT

pytestmark = pytest.mark.slow

HOSTILE = '"><svg onload=alert(1)>&amp;<b>x\x1b[2J\u202eevil'
"""A package name that would be markup, a character reference, an escape sequence and a bidi
override if any of it reached the page unescaped."""
Pkg = Callable[[str], Path]


def chromium() -> str | None:
    """A Chromium to drive: $AOTIPRE_CHROMIUM, else one on PATH (scripts/bootstrap.sh installs
    the Debian package), else playwright's own download."""
    for name in (os.environ.get("AOTIPRE_CHROMIUM"), "chromium", "chromium-browser"):
        found = shutil.which(name) if name else None
        if found:
            return found
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:
        return None
    return path if os.path.isfile(path) else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')"
    )
    path = chromium()
    if path is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set $AOTIPRE_CHROMIUM)")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()


class Opened:
    """A page open in the browser, with what it said on the console and what it asked for."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport=VIEWPORT)
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on(
            "dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss())
        )
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri())
        self.url = path.as_uri()

    def clean(self) -> None:
        """No console error or warning, no script error, no dialog, nothing fetched."""
        assert self.problems == []
        assert self.requests == [self.url]

    def count(self, selector: str) -> int:
        return int(self.page.locator(selector).count())

    def visible_rows(self, table: str) -> list[str]:
        return list(self.page.locator(f"#{table} tbody tr:visible").all_inner_texts())


def check(tmp: Path, name: str, *args: str) -> tuple[int, dict[str, Any], Path]:
    """`aotipre check ARGS` writing its JSON and its HTML report in one run."""
    out_json, out_html = tmp / f"{name}.json", tmp / f"{name}.html"
    rc = main(
        [
            "check", *args, "--no-config", "--no-progress", "--cache-dir", str(tmp / "cache"),
            "--report", f"json:{out_json}", "--report", f"html:{out_html}", "-f", "json",
            "-o", str(tmp / f"{name}.stdout.json"),
        ]
    )  # fmt: skip
    return rc, json.loads(out_json.read_text()), out_html


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html")
    (out / ".git").mkdir()  # no configuration file above it is read
    return out


@pytest.fixture
def folder(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The module's project folder as the working directory: the packages are copied there and
    named relative to it, as a CI job names its own (the pages show no host path)."""
    monkeypatch.chdir(project)
    return project


def copy(pkg: Pkg, *names: str, to: Path = Path(".")) -> list[str]:
    """The fixture files `names` copied into `to` (relative to the working directory)."""
    to.mkdir(exist_ok=True)
    out = []
    for name in names:
        source = pkg(name)
        shutil.copy(source, to / source.name)
        out.append(str(to / source.name))
    return out


def cold_segments(cold: dict[str, Any]) -> int:
    """The parts of a cold start the JSON report measured (above zero), and the rest of the
    load call when it spent more than its measured parts."""
    parts = ["before_load_s", "loader_import_s", "cuda_init_s", "probe_s"]
    parts += ["exported_program_s", "extraction_s", "dlopen_constants_s", "first_call_s"]
    inside = sum(cold[p] or 0 for p in parts[3:7])
    return sum(1 for p in parts if (cold[p] or 0) > 0) + (cold["load_s"] > inside)


def test_a_real_check_with_against_and_budgets(browser: Any, folder: Path, pkg: Pkg) -> None:
    both, inputs, aoti = copy(pkg, "both", "aoti_inputs", "aoti")
    rc, data, page_path = check(
        folder,
        "check",
        *(both, "-i", inputs, "--perf", "--no-probe"),
        *("--against", aoti, "--max-latency-ms", "0.001", "--max-rss-mb", "200"),
    )
    assert rc == data["exit_code"]
    opened = Opened(browser, page_path)
    opened.clean()
    page = opened.page
    assert page.locator("header h1 .badge").inner_text() == data["verdict"].upper()
    assert f"exit {data['exit_code']}" in page.locator("header .summary").inner_text()
    (perf,) = data["performance"]
    sides = [s for s in (perf, perf["against"]) if s]
    assert len(sides) == 2
    assert opened.count(".cold-chart rect.seg") == sum(cold_segments(s["cold"]) for s in sides)
    assert opened.count(".latency rect.bar") == 2 * sum(1 for s in sides if s["latency"])
    memory = sum(1 for s in sides for k in ("host_peak", "gpu_peak") if s["memory"][k])
    assert opened.count(".peak-memory rect.bar") == memory
    budgets = {f["code"] for f in data["findings"]} & {"AOT646", "AOT647"}
    assert opened.count("line.budget") == len(budgets)
    # the findings: filtered by severity and by text, sorted by a column
    table = "findings-0"
    assert len(opened.visible_rows(table)) == len(data["findings"])
    page.select_option(f".filter-status[data-for={table}]", "info")
    infos = [f for f in data["findings"] if f["severity"] == "info"]
    assert len(opened.visible_rows(table)) == len(infos)
    page.select_option(f".filter-status[data-for={table}]", "")
    code = data["findings"][-1]["code"]
    page.fill(f".filter-text[data-for={table}]", code.lower())
    rows = opened.visible_rows(table)
    assert rows and all(code in r for r in rows)
    page.fill(f".filter-text[data-for={table}]", "")
    page.locator(f"#{table} th", has_text="code").click()
    first = opened.visible_rows(table)[0].split()[0]
    assert first == min(f["code"] for f in data["findings"])
    opened.clean()


def test_a_zoo_merged_from_its_shards(browser: Any, folder: Path, pkg: Pkg) -> None:
    zoo = Path("zoo")
    copy(pkg, "aoti", "both", "multi", "broken_crc", "dtypes", "strides", "kwargs", to=zoo)
    shutil.copy(pkg("aoti"), zoo / f"{HOSTILE}.pt2")
    packages = sorted(str(p) for p in zoo.glob("*.pt2"))
    shards = []
    for shard in ("1/2", "2/2"):
        out = folder / f"shard-{shard[0]}.json"
        main(["check", *packages, "--static-only", "--no-config", "--shard", shard, "-f", "json",
              "-o", str(out)])  # fmt: skip
        shards.append(str(out))
    merged_json, merged_html = folder / "merged.json", folder / "merged.html"
    rc = main(["merge", *shards, "-f", "json", "-o", str(merged_json),
               "--report", f"html:{merged_html}"])  # fmt: skip
    data = json.loads(merged_json.read_text())
    assert rc == data["exit_code"] and len(data["reports"]) == len(packages)
    opened = Opened(browser, merged_html)
    opened.clean()
    page = opened.page
    assert len(opened.visible_rows("packages")) == len(packages)
    # the hostile name: text in its row and its heading, no element made of it
    hostile = next(r for r in data["reports"] if "evil" in r["package_path"])
    shown = hostile["package_path"].replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")
    link = page.locator("#packages a", has_text="evil")
    assert link.inner_text() == shown
    assert opened.count("svg[onload], b, img") == 0
    # the verdict filter shows the failing packages only, the text filter one package
    page.select_option(".filter-status[data-for=packages]", "fail")
    failing = [r for r in data["reports"] if r["verdict"] == "fail"]
    assert len(opened.visible_rows("packages")) == len(failing) > 0
    assert page.locator(".shown[data-for=packages]").inner_text().startswith(f"{len(failing)} of")
    page.select_option(".filter-status[data-for=packages]", "")
    page.fill(".filter-text[data-for=packages]", "broken_crc")
    (row,) = opened.visible_rows("packages")
    assert row.split()[0] == str(zoo / "broken_crc.pt2")
    page.fill(".filter-text[data-for=packages]", "")
    # sorting by the exit code puts the worst last, then first
    exits = sorted(r["exit_code"] for r in data["reports"])
    header = page.locator("#packages th", has_text="exit")
    header.click()
    column = page.locator("#packages tbody tr td:nth-child(3)")
    assert [int(t) for t in column.all_inner_texts()] == exits
    header.click()
    assert [int(t) for t in column.all_inner_texts()] == exits[::-1]
    opened.clean()


def test_a_crash_triage(browser: Any, folder: Path, pkg: Pkg) -> None:
    package, inputs = copy(pkg, "embedding_oob", "embedding_oob_inputs")
    rc, data, page_path = check(folder, "crash", package, "-i", inputs, "--no-probe")
    (diagnosis,) = data["diagnosis"]
    assert rc == data["exit_code"] == 1
    opened = Opened(browser, page_path)
    opened.clean()
    section = opened.page.locator("section.diagnosis")
    text = section.inner_text()
    assert diagnosis["kernel"] in text and diagnosis["verdict"] in text
    rows = section.locator("table tbody tr")
    assert rows.count() == len(diagnosis["inputs"])
    for stats, row in zip(diagnosis["inputs"], rows.all_inner_texts()):
        assert stats["name"] in row and str(int(stats["max"])) in row


def test_an_accuracy_triage(browser: Any, folder: Path) -> None:
    recorded = RECORDED / "accuracy_nan.json"
    out = folder / "accuracy.html"
    data = json.loads(recorded.read_text())
    assert main(["merge", str(recorded), "-f", "html", "-o", str(out)]) == data["exit_code"]
    opened = Opened(browser, out)
    opened.clean()
    (accuracy,) = data["accuracy"]
    points = opened.page.locator(".series-chart circle.pt")
    assert points.count() == len(accuracy["series"])
    kernels = [points.nth(i).get_attribute("data-kernel") for i in range(points.count())]
    assert kernels == [k["kernel"] for k in accuracy["series"]]
    chart = opened.page.locator(".series-chart")
    marked = chart.locator("circle.first")
    assert marked.count() == 1 and marked.get_attribute("data-kernel") == accuracy["kernel"]
    assert f"first divergent: {accuracy['kernel']}" in (chart.text_content() or "")


@pytest.mark.parametrize("kind", sorted(SHOTS))
def test_the_pages_of_the_doc_screenshots(browser: Any, tmp_path: Path, kind: str) -> None:
    """Each page a screenshot of docs/ci.md shows renders cleanly and its framing (clicks,
    scroll) applies; with AOTIPRE_DOC_SCREENSHOTS=1 the screenshot is taken and recorded."""
    shot = SHOTS[kind]
    page_path = screenshots.draw(shot, tmp_path)
    opened = Opened(browser, page_path)
    opened.clean()
    for selector in shot.clicks:
        opened.page.locator(selector).first.click(timeout=5000)
    if shot.scroll_to is not None:
        opened.page.locator(shot.scroll_to).first.scroll_into_view_if_needed(timeout=5000)
    opened.clean()
    if os.environ.get("AOTIPRE_DOC_SCREENSHOTS") != "1":
        return
    screenshots.IMAGES.mkdir(exist_ok=True)
    opened.page.screenshot(path=str(screenshots.IMAGES / shot.image))
    screenshots.write_record(kind, page_path.read_bytes(), f"chromium {browser.version}")
