"""Many packages: worst exit code, manifest, ordering, and -j giving the serial report byte for byte."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import config
from aotipre.cli import main
from aotipre.findings import Severity
from aotipre.fleet import batch
from aotipre.foundation.errors import UsageError

Pkg = Callable[[str], Path]


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["check", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_exit_code_is_the_worst(pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    good, warn, bad = pkg("aoti"), pkg("both"), pkg("broken_truncated")
    rc, out, _ = run(capsys, str(good), str(warn), "--static-only")
    assert rc == 0 and "overall: PASS (exit 0; 2 package(s)" in out
    rc, out, _ = run(capsys, str(good), str(warn), "--static-only", "--fail-on", "warning")
    assert rc == 1 and "overall: FAIL" in out
    rc, out, err = run(capsys, str(bad), str(warn), str(good), "--static-only", "-f", "json")
    data = json.loads(out)
    assert rc == 2 and data["exit_code"] == 2 and data["verdict"] == "error"
    assert [r["package_path"] for r in data["reports"]] == sorted(map(str, (good, warn, bad)))
    assert data["summary"]["packages"] == 3 and data["summary"]["error"] == 1
    assert err.startswith("aotipre: error: ") and "broken_truncated.pt2" in err


def test_inputs_flag_is_for_one_package(pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, str(pkg("aoti")), str(pkg("both")), "-i", str(pkg("aoti_inputs")))
    assert rc == 2 and "--inputs and --model apply to one package" in err
    rc, _, err = run(capsys, "--static-only")
    assert rc == 2 and "no package to check" in err


def write_manifest(project: Path, pkg: Pkg) -> Path:
    models = project / "models"
    models.mkdir()
    for name in ("aoti", "multi"):
        shutil.copy(pkg(name), models / f"{name}.pt2")
    for name in ("aoti_inputs", "aoti_inputs_bad_dtype", "multi_decoder_inputs"):
        shutil.copy(pkg(name), models / f"{name}.pt")
    manifest = project / "ci" / "packages.toml"
    manifest.parent.mkdir()
    manifest.write_text(
        """
[defaults]
static-only = true
fail-on = "warning"

[[package]]
path = "../models/multi.pt2"
model = "decoder"
inputs = "../models/multi_decoder_inputs.pt"

[[package]]
path = "../models/aoti.pt2"
inputs = "../models/aoti_inputs_bad_dtype.pt"
ignore = ["AOT201"]

[[package]]
path = "../models/aoti.pt2"
inputs = "../models/aoti_inputs.pt"
"""
    )
    return manifest


def test_manifest(project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(project, pkg)
    rc, out, _ = run(capsys, "--manifest", str(manifest), "-f", "json")
    data = json.loads(out)
    reports = data["reports"]
    assert [(r["package_path"], r["inputs_source"]) for r in reports] == [
        ("models/aoti.pt2", "models/aoti_inputs_bad_dtype.pt"),  # sorted; repeats keep order
        ("models/aoti.pt2", "models/aoti_inputs.pt"),
        ("models/multi.pt2", "models/multi_decoder_inputs.pt"),
    ]
    assert all(r["fail_on"] == "warning" for r in reports)  # [defaults]
    # the entry's ignore leaves the infos about the binaries (compiled-for ISA, producing torch)
    assert [f["code"] for f in reports[0]["findings"]] == ["AOT051", "AOT052"]
    assert all([s["name"] for s in r["stages"]] == ["inspect", "inputs", "static"] for r in reports)
    assert [r["verdict"] for r in reports] == ["pass", "pass", "fail"]  # AOT013, a warning
    assert rc == 1
    rc, out, _ = run(capsys, "--manifest", str(manifest), "-f", "json", "--fail-on", "error")
    assert rc == 0 and {r["fail_on"] for r in json.loads(out)["reports"]} == {"error"}  # flag wins


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[[package]]\nmodel = 'x'\n",
            "packages.toml [[package]] #1: 'path' (the .pt2 file) is required",
        ),
        ("[[package]]\npath = 'a.pt2'\njobs = 2\n", "[[package]] #1: unknown key 'jobs'"),
        (
            "[[package]]\npath = 'a.pt2'\n[[package]]\npath = 'b.pt2'\ntimeout = 0\n",
            "#2: timeout = 0: must be > 0",
        ),
        (
            "[defaults]\nfail-on = 'never'\n[[package]]\npath = 'a.pt2'\n",
            '[defaults]: fail-on = "never"',
        ),
        ("[package]\npath = 'a.pt2'\n", "package must be an array of tables"),
        ("packages = []\n", "unknown key 'packages'"),
        ("[defaults]\n", "no [[package]] entries"),
    ],
)
def test_manifest_errors(project: Path, text: str, message: str) -> None:
    (project / "packages.toml").write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        batch.load_manifest(project / "packages.toml")


def test_precedence_in_a_plan(project: Path) -> None:
    (project / "packages.toml").write_text(
        "[defaults]\ntimeout = 10\nfail-on = 'warning'\n"
        "[[package]]\npath = 'a.pt2'\ntimeout = 20\n[[package]]\npath = 'b.pt2'\n"
    )
    manifest = batch.load_manifest(project / "packages.toml")
    settings = config.Settings(timeout=5.0, seed=3, static_only=False)
    jobs = batch.plan(["c.pt2"], settings, manifest=manifest, flags={"seed": 9})
    by_name = {j.package: j.options for j in jobs}
    assert list(by_name) == ["a.pt2", "b.pt2", "c.pt2"]
    timeouts = {k: o.dynamic.timeout_s for k, o in by_name.items() if o.dynamic}
    assert timeouts == {"a.pt2": 20.0, "b.pt2": 10.0, "c.pt2": 5.0}  # entry > defaults > file
    assert {o.dynamic.seed for o in by_name.values() if o.dynamic} == {9}  # flag > all
    assert by_name["c.pt2"].fail_on is Severity.ERROR  # [defaults] only for manifest entries


def test_parallel_report_is_byte_identical_to_serial(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["aoti", "both", "multi", "derived", "kwargs", "strides", "ep_only", "broken_crc"]
    names += ["broken_truncated", "broken_json", "dtypes", "mismatch"]
    packages = [str(pkg(n)) for n in names]
    outputs: dict[tuple[str, str], str] = {}
    for jobs in ("1", "6"):
        for fmt in ("json", "sarif", "github", "junit"):
            rc, out, _ = run(capsys, *packages, "--static-only", "-j", jobs, "-f", fmt)
            assert rc == 2
            outputs[(jobs, fmt)] = out
    for fmt in ("sarif", "github"):
        assert outputs[("1", fmt)] == outputs[("6", fmt)]
    timing = re.compile(r'("duration_s": |time=")[0-9.]+')
    for fmt in ("json", "junit"):  # durations are measured, so they differ from run to run
        serial, parallel = (timing.sub(r"\g<1>0", outputs[(j, fmt)]) for j in ("1", "6"))
        assert serial == parallel
    order = [r["package_path"] for r in json.loads(outputs[("6", "json")])["reports"]]
    assert order == sorted(packages)


def test_a_path_given_twice_is_named_with_its_key_everywhere(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two manifest entries of one package (other models/inputs) are `a.pt2` and `a.pt2#2` in
    the summary, each package's heading, JUnit's suites, GitHub's verdict lines, Markdown's
    rows and the progress lines: the keys shards and merge give them."""
    shutil.copy(pkg("multi"), project / "a.pt2")
    (project / "m.toml").write_text(
        '[[package]]\npath = "a.pt2"\nmodel = "first"\n'
        '[[package]]\npath = "a.pt2"\nmodel = "second"\n'
    )
    base = ("--manifest", "m.toml", "--static-only", "--no-config")
    _, out, _ = run(capsys, *base)
    assert re.search(r"(?m)^aotipre check a\.pt2$", out)
    assert re.search(r"(?m)^aotipre check a\.pt2#2$", out)
    assert re.search(r"(?m)^a\.pt2#2 +\w+", out) and re.search(r"(?m)^a\.pt2 +\w+", out)
    _, xml, _ = run(capsys, *base, "-f", "junit")
    assert re.findall(r'<testsuite name="([^"]+)"', xml) == ["a.pt2", "a.pt2#2"]
    _, gh, _ = run(capsys, *base, "-f", "github")
    assert len(re.findall(r"(?m)^aotipre: \w+ a\.pt2#2 \(", gh)) == 1
    _, md, _ = run(capsys, *base, "-f", "markdown")
    assert "| `a.pt2#2` |" in md
    said: list[str] = []
    manifest = batch.load_manifest(project / "m.toml")
    jobs = batch.plan([], config.Settings(), manifest=manifest, progress=said.append)
    for job in jobs:
        assert job.options.progress is not None
        job.options.progress("starting")
    assert said == ["a.pt2: starting", "a.pt2#2: starting"]
