"""`aotipre explain CODE`: one code's section of docs/codes.md on the terminal, any case; a prefix
lists its codes; an unknown code is one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aotipre.cli import main
from aotipre.findings import codes, codes_doc


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aotipre", "explain", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def flat(text: str) -> str:
    return " ".join(text.split())


def test_every_section_says_what_the_table_says() -> None:
    """Each code's terminal section carries every field of its ALL_CODES entry."""
    for c in codes.ALL_CODES:
        text = codes_doc.render_code(c)
        words = flat(text)
        assert text.startswith(f"{c.code} {c.name}\n"), c.code
        for part in (c.severity.value, c.category.value, c.summary, c.example, c.hint):
            assert flat(part) in words, (c.code, part)
        for sev, when in c.overrides:
            assert flat(f"{sev.value}: {when}") in words, c.code
        assert max(len(line) for line in text.splitlines()) <= codes_doc.WIDTH, c.code


def test_explain_prints_the_section_and_exits_0() -> None:
    r = run("AOT613")
    assert r.returncode == 0, r.stderr
    assert r.stdout == codes_doc.render_code(codes.get("AOT613")) and r.stderr == ""
    entry = codes.get("AOT613")
    assert entry.name in r.stdout and "Example:" in r.stdout and "What to do:" in r.stdout


def test_explain_is_case_insensitive_and_takes_names() -> None:
    r = run("aot613")
    assert r.returncode == 0 and r.stdout == codes_doc.render_code(codes.get("AOT613"))
    assert codes_doc.lookup(" Aot613 ") == (codes.get("AOT613"),)
    assert codes_doc.lookup("Run-Timeout") == (codes.get("AOT606"),)


@pytest.mark.parametrize("word", ["AOT999", "nonsense", "AOT6x", ""])
def test_an_unknown_code_is_one_line_and_exit_2(word: str) -> None:
    r = run(word)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("aotipre: error: ") and repr(word) in lines[0]
    assert "aotipre codes" in lines[0]


def test_a_prefix_lists_its_codes_one_line_each() -> None:
    r = run("aot6")
    assert r.returncode == 0, r.stderr
    wanted = [c for c in codes.ALL_CODES if c.code.startswith("AOT6")]
    lines = r.stdout.splitlines()
    assert len(lines) == len(wanted)
    for line, c in zip(lines, wanted, strict=True):
        assert line.startswith(f"{c.code}  {c.name} ") and line.endswith(c.summary), line
    assert [c.code for c in codes_doc.lookup("AOT")] == [c.code for c in codes.ALL_CODES]
    assert [c.code for c in codes_doc.lookup("AOT61")] == [f"AOT61{i}" for i in range(7)]


def test_json_is_the_codes_fields() -> None:
    r = run("AOT020", "--format", "json")
    assert r.returncode == 0, r.stderr
    entry, data = codes.get("AOT020"), json.loads(r.stdout)
    assert data == {
        "code": entry.code,
        "name": entry.name,
        "severity": entry.severity.value,
        "overrides": [{"severity": s.value, "when": w} for s, w in entry.overrides],
        "category": entry.category.value,
        "family": "AOT0",
        "summary": entry.summary,
        "example": entry.example,
        "hint": entry.hint,
    }
    listed = json.loads(run("AOT80", "-f", "json").stdout)
    assert [d["code"] for d in listed] == [f"AOT80{i}" for i in range(1, 10)]


@pytest.mark.parametrize("argv", [["AOT613"], ["aot4", "-f", "json"], ["AOT999"]])
def test_the_typer_app_answers_as_the_fast_lane(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    fast = main(["explain", *argv]), capsys.readouterr()
    full = main(["explain", *argv], fast_lane=False), capsys.readouterr()
    assert fast == full
