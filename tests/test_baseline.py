"""Baselines: write, then only new findings fail; counts, paths, bad files; never accept errors."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.findings import Report, StageResult, StageStatus, codes
from aotipre.findings.baseline import apply_baseline, load_baseline, write_baseline
from aotipre.foundation.errors import UsageError

Pkg = Callable[[str], Path]


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pkg: Pkg) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "models").mkdir()
    shutil.copy(pkg("both"), tmp_path / "models" / "both.pt2")
    for name in ("aoti_inputs_out_of_range", "aoti_inputs_bad_dtype"):
        shutil.copy(pkg(name), tmp_path / f"{name}.pt")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(capsys: pytest.CaptureFixture[str], inputs: str, *args: str) -> tuple[int, dict]:
    rc = main(
        ["check", "models/both.pt2", "-i", f"{inputs}.pt", "--static-only", "-f", "json", *args]
    )
    out, _ = capsys.readouterr()
    return rc, json.loads(out)


def test_round_trip_only_new_findings_fail(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, data = check(capsys, "aoti_inputs_out_of_range")
    assert rc == 1 and {f["code"] for f in data["findings"]} == {"AOT304", "AOT013", "AOT051"}

    rc, data = check(capsys, "aoti_inputs_out_of_range", "--write-baseline", "ci/baseline.json")
    assert rc == 0 and data["findings"] == []  # reported as the new baseline sees it
    # the error it accepted (AOT304) is said, not accepted silently
    (stage,) = [s for s in data["stages"] if s["name"] == "baseline"]
    assert stage["detail"] == (
        "3 known finding(s) accepted (baseline.json); 1 of them an error, which no longer fails "
        "the gate"
    )
    written = json.loads((project / "ci" / "baseline.json").read_text())
    assert written["schema_version"] == 1
    assert [(e["package"], e["code"]) for e in written["findings"]] == [
        ("../models/both.pt2", "AOT013"),  # relative to the baseline's folder, sorted
        ("../models/both.pt2", "AOT051"),
        ("../models/both.pt2", "AOT304"),
    ]

    rc, data = check(capsys, "aoti_inputs_out_of_range", "--baseline", "ci/baseline.json")
    assert rc == 0 and data["findings"] == []
    stages = {s["name"]: s for s in data["stages"]}
    assert stages["static"]["status"] == "passed"  # it failed only on accepted findings
    assert stages["baseline"]["detail"].startswith(
        "3 known finding(s) accepted (baseline.json); 1 of them an error"
    )

    rc, data = check(capsys, "aoti_inputs_bad_dtype", "--baseline", "ci/baseline.json")
    assert rc == 1 and [f["code"] for f in data["findings"]] == ["AOT201"]  # only the new one


def test_baseline_from_the_config_file(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    check(capsys, "aoti_inputs_out_of_range", "--write-baseline", "ci/baseline.json")
    (project / "ci" / "aotipre.toml").write_text('baseline = "baseline.json"\n')
    rc, _ = check(capsys, "aoti_inputs_out_of_range", "--config", "ci/aotipre.toml")
    assert rc == 0
    monkeypatch.chdir(project / "models")  # another working directory, the same package
    rc = main(
        [
            "check",
            "both.pt2",
            "-i",
            "../aoti_inputs_out_of_range.pt",
            "--static-only",
            "--baseline",
            "../ci/baseline.json",
        ]
    )
    assert rc == 0


def test_counts_matter() -> None:
    finding = codes.get("AOT013").finding("w", model="m", input="x", dim=0, stage="static")
    report = Report(package_path="<M>", findings=[finding])
    report.stages = [StageResult("static", StageStatus.PASSED)]
    baseline = write_baseline("unused-dir-does-not-matter.json", [report])
    twice = Report(package_path="<M>", findings=[finding, finding])
    assert [f.code for f in apply_baseline(twice, baseline).findings] == ["AOT013"]
    other = Report(package_path="<N>", findings=[finding])
    assert len(apply_baseline(other, baseline).findings) == 1  # another package


def test_could_not_check_is_never_accepted(pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", str(pkg("broken_truncated")), "--static-only"]
    assert main([*args, "--write-baseline", "b.json"]) == 2
    assert json.loads(Path("b.json").read_text())["findings"] == []
    assert main([*args, "--baseline", "b.json"]) == 2
    capsys.readouterr()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "baseline missing.json does not exist (create it with --write-baseline"),
        ("{", "is not valid JSON"),
        ('{"schema_version": 2, "findings": []}', "schema_version is not 1"),
        ('{"schema_version": 1, "findings": {}}', "'findings' is not a list"),
        (
            '{"schema_version": 1, "findings": [{"package": "a"}]}',
            "findings[0]: 'code' must be a string",
        ),
    ],
)
def test_bad_baseline_files(project: Path, content: str | None, message: str) -> None:
    path = project / "missing.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError) as info:
        load_baseline("missing.json")
    assert message in str(info.value)


def test_bad_baseline_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "models/both.pt2", "--static-only", "--baseline", "nope.json"]) == 2
    assert "baseline nope.json does not exist" in capsys.readouterr().err
