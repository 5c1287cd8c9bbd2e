"""The screenshots of the HTML report in docs/images/ still show the pages the renderer draws
today: each page is drawn again from its recorded reports, without a browser, and its digest
compared with the one recorded when the screenshot was taken (tests/report/screenshots.py says
what the digest covers); the images are the ones recorded with it; every screenshot docs/ci.md
shows is one the browser tests take."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.report import screenshots
from tests.report.screenshots import IMAGES, REGENERATE, REPO, SHOTS


def regenerate(problem: str) -> None:
    """Fail with one line: the problem, and the command that takes the screenshots again."""
    pytest.fail(f"{problem}: run {REGENERATE}", pytrace=False)


def test_each_screenshot_shows_the_page_drawn_today(tmp_path: Path) -> None:
    record = screenshots.read_record()
    changed = []
    for kind, shot in SHOTS.items():
        page = screenshots.draw(shot, tmp_path).read_bytes()
        if record.get(kind, {}).get("page_sha256") != screenshots.page_digest(shot, page):
            changed.append(shot.image)
    if changed:
        names = ", ".join(changed)
        regenerate(f"the HTML renderer changed since the screenshots were taken ({names})")


def test_the_images_are_the_ones_taken_with_the_record() -> None:
    record = screenshots.read_record()
    for kind, shot in SHOTS.items():
        entry = record.get(kind, {})
        image = IMAGES / shot.image
        if entry.get("image") != shot.image or not image.is_file():
            regenerate(f"docs/images/{shot.image} is missing or not recorded")
        if screenshots.file_digest(image) != entry.get("image_sha256"):
            regenerate(f"docs/images/{shot.image} is not the image taken with its record")
    gone = sorted(set(record) - set(SHOTS))
    if gone:
        regenerate(f"docs/images/html-screenshots.json records shots no longer taken ({gone})")


def test_every_screenshot_the_docs_show_is_taken_by_the_browser_tests() -> None:
    shown = set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        shown |= set(re.findall(r"\]\((?:docs/)?images/(html-[^)\s]+\.png)\)", page.read_text()))
    untaken = sorted(shown - {shot.image for shot in SHOTS.values()})
    assert shown, "the docs show no screenshot of the HTML report"
    if untaken:
        pytest.fail(
            f"the docs show {untaken}, which no browser test takes: add them to SHOTS in "
            "tests/report/screenshots.py",
            pytrace=False,
        )
