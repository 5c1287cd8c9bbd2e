"""GitHub workflow commands: escaping as @actions/core does it, and the step summary."""

from __future__ import annotations

import re
from pathlib import Path

from aotipre.findings import Report
from aotipre.report import github

COMMAND = re.compile(r"^::(error|warning|notice)( [^:]*)?::(.*)$")


def unescape(text: str) -> str:
    for enc, dec in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(enc, dec)
    return text


def test_escaping_rules() -> None:
    assert github.escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    # `%` first: an already encoded-looking text survives a round trip
    assert unescape(github.escape_property("%0A:,")) == "%0A:,"


def test_one_annotation_per_finding_that_github_can_parse(reports: list[Report]) -> None:
    text = github.render_reports(reports)
    lines = text.splitlines()
    commands = [COMMAND.match(line) for line in lines if line.startswith("::")]
    assert all(commands) and len(commands) == sum(len(r.findings) for r in reports)
    for match in commands:
        assert match is not None
        props = dict(p.split("=", 1) for p in match.group(2).strip().split(","))
        assert set(props) == {"file", "title"}
        assert not re.search(r"[\r\n]", match.group(3))
        assert not re.search(r"[:,\r\n]", "".join(props.values()))
    levels = [m.group(1) for m in commands if m is not None]
    assert levels.count("notice") == 1 and levels.count("warning") == 2
    tricky = next(m for m in commands if m is not None and "50%25" in m.group(3))
    assert unescape(tricky.group(3)).startswith("decoder / hidden#0 / dim 0: 50% of 'x': a,b\r\n")
    title = next(m for m in commands if m is not None and "AOT201" in (m.group(2) or ""))
    assert "title=AOT201 dtype-mismatch" in (title.group(2) or "")
    assert (
        lines[-3:] == [line for line in lines if line.startswith("aotipre: ")]
        and "aotipre: ERROR models/broken.pt2" in lines[-1]
    )


def test_colons_and_commas_in_file_names_are_escaped(reports: list[Report]) -> None:
    reports[1].package_path = "C:/models/a,b.pt2"
    line = github.render_report(reports[1]).splitlines()[0]
    assert "file=C%3A/models/a%2Cb.pt2," in line


def test_step_summary_appended_only_when_set(reports: list[Report], tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert github.append_step_summary(reports, {}) is None
    assert github.append_step_summary(reports, {"GITHUB_STEP_SUMMARY": str(summary)}) == str(
        summary
    )
    text = summary.read_text()
    assert text.startswith("earlier step\n## aotipre: ⚠️ ERROR (3 packages)")
    assert "| `models/fail.pt2` | ❌ FAIL |" in text
