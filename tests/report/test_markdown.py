"""Markdown for PR comments: tables that stay tables whatever the messages hold."""

from __future__ import annotations

from aotipre.findings import Report
from aotipre.report import markdown


def table_rows(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def cells(row: str) -> int:
    """Columns of a GFM table row: `|` not escaped with a backslash."""
    return len([c for c in row.replace("\\|", "").split("|")]) - 2


def test_single_report(reports: list[Report]) -> None:
    text = markdown.render_report(reports[0])
    assert text.startswith("## aotipre: ❌ FAIL `models/fail.pt2`\n")
    rows = table_rows(text, "| code | severity | subject | message |")
    assert len(rows) == len(reports[0].findings)
    assert all(cells(r) == 4 for r in rows)
    assert rows[0].startswith("| `AOT201` | error |")  # most severe first
    tricky = next(r for r in rows if "AOT013" in r)
    assert "\\<tag\\> &amp; \\| pipe" in tricky and "<br>" in tricky and "\r" not in tricky
    assert "verdict: **FAIL** (exit 1;" in text


def test_many_reports_summary(reports: list[Report]) -> None:
    text = markdown.render_reports(reports)
    assert text.startswith("## aotipre: ⚠️ ERROR (3 packages)\n")
    rows = table_rows(text, "| package | verdict | error | warning | info |")
    assert [r.split("|")[1].strip() for r in rows] == [f"`{r.package_path}`" for r in reports]
    assert "**could not check:** models/broken.pt2: truncated" in text
    assert text.count("### ") == 3
