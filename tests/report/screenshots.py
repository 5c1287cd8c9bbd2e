"""The screenshots of the HTML report that docs/ci.md shows (docs/images/), as data: the page
each one shows, drawn from recorded reports (tests/data/reports) so that taking them again on
any host draws the same page (no timing, host name or path of this run on it), how the browser
frames it, and the record (docs/images/html-screenshots.json) that ties each image to the page
it shows.

The browser tests take the screenshots and write the record in the same run
(tests/report/test_html_browser.py, with AOTIPRE_DOC_SCREENSHOTS=1);
tests/report/test_html_screenshots.py draws the pages again, without a browser, and fails when
one is no longer the page its screenshot shows. The record holds a digest of the page's bytes
and of its framing, not of the renderer's source: whatever changes a page (the renderer, its CSS
and script, the code table it links, the reading of a JSON report, a recorded report, the
framing) changes the digest, and an edit that changes no page changes nothing. Pixels are not
compared: fonts differ between hosts."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aotipre.cli import main

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "data" / "reports"
IMAGES = REPO / "docs" / "images"
RECORD = IMAGES / "html-screenshots.json"
"""Which page each screenshot in docs/images/ shows: written with the screenshots, never by hand."""
VIEWPORT = {"width": 1100, "height": 900}
"""The browser window every page of the browser tests is opened in (CSS pixels)."""
REGENERATE = "AOTIPRE_DOC_SCREENSHOTS=1 pytest tests/report/test_html_browser.py"
"""The command that takes the screenshots again and rewrites the record."""


@dataclass(frozen=True)
class Shot:
    """One screenshot in docs/images/: the page it shows and how the browser frames it."""

    image: str
    """Its file name in docs/images/."""
    reports: tuple[str, ...]
    """The recorded JSON reports (tests/data/reports/) the page is drawn from, with `aotipre
    merge REPORT... -f html` as a CI job draws its shards' reports."""
    clicks: tuple[str, ...] = ()
    """Selectors clicked one after another before the shot (a column header sorts its table)."""
    scroll_to: str | None = None
    """The selector scrolled into view before the shot; None: the top of the page."""

    def framing(self) -> dict[str, Any]:
        """What decides the picture besides the page: the window, the clicks, the scroll."""
        return {"viewport": VIEWPORT, "clicks": list(self.clicks), "scroll_to": self.scroll_to}


SHOTS = {
    "check": Shot("html-check.png", ("check_perf.json",), scroll_to=".performance"),
    "merge": Shot(
        "html-merge.png",
        ("zoo_shard1.json", "zoo_shard2.json"),
        clicks=('#packages th:has-text("exit")',) * 2,
    ),
    "crash": Shot("html-crash.png", ("crash_embedding_oob.json",), scroll_to="section.diagnosis"),
    "accuracy": Shot("html-accuracy.png", ("accuracy_nan.json",), scroll_to="section.accuracy"),
}
"""Each screenshot docs/ci.md shows: a check with --against and budgets (its performance), a zoo
merged from two shards (sorted by exit code, worst first), a crash triage, an accuracy triage."""


def draw(shot: Shot, folder: Path) -> Path:
    """The page `shot` shows, written to `folder` by `aotipre merge` from its recorded reports."""
    page = folder / f"{Path(shot.image).stem}.html"
    reports = [str(RECORDED / name) for name in shot.reports]
    main(["merge", *reports, "-f", "html", "-o", str(page)])
    if not page.is_file():
        raise RuntimeError(f"aotipre merge drew no page for {shot.image}")
    return page


def page_digest(shot: Shot, page: bytes) -> str:
    """sha256 of the shot's framing and the page's bytes: equal digests, the same picture (on
    one browser with one set of fonts)."""
    framing = json.dumps(shot.framing(), sort_keys=True).encode()
    return hashlib.sha256(framing + b"\0" + page).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_record() -> dict[str, dict[str, Any]]:
    """The record's entry per shot (kind -> page, image, commit, browser); empty when missing."""
    if not RECORD.is_file():
        return {}
    entries = json.loads(RECORD.read_text())["screenshots"]
    return dict(entries) if isinstance(entries, dict) else {}


def commit() -> str | None:
    """The commit the working tree is at (HEAD; the tree may hold uncommitted edits), or None
    outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def write_record(kind: str, page: bytes, browser: str) -> None:
    """Record that the screenshot of `kind`, just written to docs/images/, shows `page`."""
    shot = SHOTS[kind]
    entries = {k: v for k, v in read_record().items() if k in SHOTS}
    entries[kind] = {
        "image": shot.image,
        "image_sha256": file_digest(IMAGES / shot.image),
        "page_sha256": page_digest(shot, page),
        "reports": list(shot.reports),
        "framing": shot.framing(),
        "commit": commit(),
        "browser": browser,
    }
    record = {
        "about": f"written by `{REGENERATE}` with the screenshots; never edit by hand "
        "(tests/report/screenshots.py)",
        "screenshots": {k: entries[k] for k in sorted(entries)},
    }
    RECORD.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
