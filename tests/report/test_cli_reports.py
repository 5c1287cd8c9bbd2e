"""`--format` for every renderer, several `--report FORMAT:PATH` files, the step summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.cli.app import Format
from aotipre.report import BATCH_RENDERERS, CHECK_RENDERERS, parse_report_spec

Pkg = Callable[[str], Path]


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no aotipre.toml / pyproject.toml above tmp_path
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_every_format_is_registered_for_one_and_many_packages() -> None:
    assert list(CHECK_RENDERERS) == list(BATCH_RENDERERS) == [f.value for f in Format]


def test_report_spec() -> None:
    assert parse_report_spec("junit:out/report.xml") == ("junit", "out/report.xml")
    assert parse_report_spec("json:C:/x.json") == ("json", "C:/x.json")
    for bad in ("junit", "xml:out.xml", "json:"):
        with pytest.raises(Exception, match="FORMAT:PATH"):
            parse_report_spec(bad)


def test_several_reports_next_to_the_table(
    pkg: Pkg, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = {fmt: tmp_path / f"report.{fmt}" for fmt in ("json", "junit", "sarif", "markdown")}
    args = ["check", str(pkg("both")), "-i", str(pkg("aoti_inputs_out_of_range")), "--static-only"]
    for fmt, path in out.items():
        args += ["--report", f"{fmt}:{path}"]
    assert main(args) == 1
    stdout = capsys.readouterr().out
    assert stdout.startswith("aotipre check ") and "AOT304" in stdout
    data = json.loads(out["json"].read_text())
    assert data["verdict"] == "fail" and data["schema_version"] == 1
    assert ET.fromstring(out["junit"].read_bytes()).get("failures") == "1"
    results = json.loads(out["sarif"].read_text())["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"AOT304", "AOT013", "AOT051"}  # 051: info
    assert "`AOT304`" in out["markdown"].read_text()


def test_bad_report_spec_exit_2(pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(pkg("aoti")), "--static-only", "--report", "xml:out.xml"]) == 2
    err = capsys.readouterr().err
    assert "FORMAT:PATH" in err and "junit" in err


def test_github_format_appends_the_step_summary(
    pkg: Pkg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs_bad_dtype")), "--static-only"]
    assert main([*args, "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert "::error file=" in out and "title=AOT201 dtype-mismatch::" in out
    assert "## aotipre: ❌ FAIL" in summary.read_text()
    assert main(args) == 1  # the table format leaves the summary alone
    assert summary.read_text().count("## aotipre") == 1


def test_dynamic_stages_as_junit_testcases(pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    """The one run of the real stages here (about 3 s): a testcase per stage and model."""
    assert main(["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "junit"]) == 0
    root = ET.fromstring(capsys.readouterr().out.encode())
    names = [c.get("name") for c in root.iter("testcase")]
    assert names[:3] == ["inspect", "inputs", "static"]
    assert {"load [model]", "run [model]", "probe [model]"} <= set(names)
    assert root.get("failures") == "0" and root.get("errors") == "0"


def test_shell_completion_offers_the_formats() -> None:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "_AOTIPRE_COMPLETE": "complete_bash",
        "COMP_WORDS": "aotipre check --format ",
        "COMP_CWORD": "3",
    }
    r = subprocess.run(
        [sys.executable, "-m", "aotipre"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.split() == [f.value for f in Format]


def test_pre_commit_hooks_definition() -> None:
    import re

    yaml = pytest.importorskip("yaml")
    repo = Path(__file__).resolve().parents[2]
    hooks = yaml.safe_load((repo / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["aotipre", "aotipre-system"]
    for hook in hooks:
        assert hook["entry"] == "aotipre check --static-only" and hook["require_serial"]
        assert re.search(hook["files"], "models/a.pt2") and not re.search(hook["files"], "a.py")
        assert {"name", "language"} <= set(hook)
