"""Issue 30, "found by a new user": a report in every format on the light install, `--target isa=`
words and repeated keys, an `--exported-program` of another model, an AOTI-only package's outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check, inspect
from aotipre.checks.contract import check_reference_program
from aotipre.environment.host import ISA_LEVELS, isa_flags, parse_target, parse_targets
from aotipre.foundation.errors import UsageError
from aotipre.pt2.exported import program_difference
from aotipre.pt2.reader import read_package
from aotipre.report.table import render_package
from tests.progress_lines import without_progress
from tests.test_cli_light import no_torch_python, run_without_torch  # noqa: F401 (a fixture)

Pkg = Callable[[str], Path]
ISA_PACKAGE = Path(__file__).resolve().parent / "data" / "isa" / "avx512.pt2"
"""Compiled for -march=skylake-avx512 on any host (tests/data/isa/build.py)."""
NO_TORCH = "the dynamic stages need torch"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aotipre", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "100"},
    )


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    """The one error line; progress lines (on by default) are the only others."""
    (line,) = without_progress(r.stderr).splitlines()
    assert line.startswith("aotipre: error: ") and "Traceback" not in r.stderr
    return line


# ------------------------------------------------------------------ a. the light install


def test_without_torch_json_is_the_complete_report(no_torch_python: str, pkg: Pkg) -> None:  # noqa: F811
    r = run_without_torch(no_torch_python, "check", str(pkg("aoti")), "--no-config", "-f", "json")
    assert r.returncode == 2  # could not check (README, exit codes)
    report = json.loads(r.stdout)
    assert (report["verdict"], report["exit_code"]) == ("error", 2)
    assert report["error"].startswith(NO_TORCH) and "aotipre[torch]" in report["error"]
    status = {(s["name"], s["model"]): s["status"] for s in report["stages"]}
    assert status[("static", None)] == "passed"  # the static part ran
    assert status[("compile", "model")] == status[("run", "model")] == "skipped"
    skipped = [s for s in report["stages"] if s["status"] == "skipped"]
    assert all("no interpreter with a supported torch" in s["detail"] for s in skipped)
    assert {f["code"] for f in report["findings"]} >= {"AOT051"}
    assert one_error_line(r).startswith(f"aotipre: error: {NO_TORCH}")


def test_without_torch_junit_and_reports_are_written(
    no_torch_python: str,  # noqa: F811
    pkg: Pkg,
    tmp_path: Path,
) -> None:
    out = tmp_path / "report.json"
    r = run_without_torch(
        no_torch_python, "check", str(pkg("aoti")), "--no-config", "--format", "junit",
        "--report", f"json:{out}",
    )  # fmt: skip
    assert r.returncode == 2
    assert "<testsuite" in r.stdout and "<skipped" in r.stdout
    assert 'type="could-not-check"' in r.stdout and NO_TORCH in r.stdout
    assert json.loads(out.read_text())["verdict"] == "error"
    one_error_line(r)
    table = run_without_torch(no_torch_python, "check", str(pkg("aoti")), "--no-config")
    assert (table.returncode, table.stdout) == (2, "")  # the table: the one line only, as before


# ------------------------------------------------------------------ b. --target isa=


@pytest.mark.parametrize(
    ("word", "level"),
    [("avx512f", "x86-64-v4"), ("AVX512F", "x86-64-v4"), ("avx2", "x86-64-v3"),
     ("avx", "avx"), ("sse4_2", "x86-64-v2"), ("fma", "avx"), ("avx512_bf16", "avx512_vnni"),
     ("amx_tile", "amx_tile"), ("avx512vbmi", "x86-64-v4")],
)  # fmt: skip
def test_a_cpuinfo_flag_means_the_level_it_implies(word: str, level: str) -> None:
    flags = isa_flags(word)
    assert flags >= set(ISA_LEVELS[level]) and word.lower() in flags


def test_isa_avx512f_does_not_lack_avx(pkg: Pkg) -> None:
    host = parse_target("cpu,isa=avx512f")
    assert host.cpu_flags is not None and {"avx", "avx2", "fma", "avx512bw"} <= host.cpu_flags
    assert host.cpu_isa == {"AVX2", "AVX512"}
    # the fixed-ISA package's code uses AVX-512 (F/BW/VL/DQ) and nothing beyond, whatever the
    # host (tests/data/isa/build.py: -march=skylake-avx512; the fixtures follow the host)
    report = check(ISA_PACKAGE, CheckOptions(target="cpu,isa=avx512f", static_only=True))
    assert int(report.exit_code) == 0, [f.message for f in report.findings]
    assert not [f for f in report.findings if f.code in ("AOT436", "AOT403")]


@pytest.mark.parametrize("word", ["pentium", "avx9000", "avx2+", "sse9"])
def test_an_unknown_isa_word_is_refused(word: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_target(f"cpu,isa={word}")
    message = str(info.value)
    assert "\n" not in message and message.startswith("--target isa")
    if word != "avx2+":
        assert f"{word!r} is unknown" in message
        for accepted in ("x86-64-v3", "avx2", "avx512", "amx", "avx512f", "sse4_2"):
            assert accepted in message


def test_an_isa_typo_gets_a_suggestion() -> None:
    with pytest.raises(UsageError, match=r"did you mean 'avx512_vnni'\?"):
        isa_flags("avx512_vnii")


@pytest.mark.parametrize(
    "spec",
    ["cpu,isa=avx2,isa=avx512", "cuda,cc=8.0,cc=9.0", "cpu,torch=2.12,glibc=2.31,TORCH=2.13"],
)
def test_a_repeated_key_is_refused(spec: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_targets(spec)
    key = spec.rsplit(",", 1)[-1].split("=")[0].lower()
    assert str(info.value).startswith(f"--target {spec!r} gives {key}= twice; give each key once")
    assert parse_target("cuda,cc=8.0,8.6,9.0").compute_capabilities == ("8.0", "8.6", "9.0")


@pytest.mark.parametrize("target", ["cpu,isa=pentium", "cpu,isa=avx2,isa=avx512"])
def test_a_bad_isa_target_on_the_command_line_is_one_line_exit_2(pkg: Pkg, target: str) -> None:
    for command in ("check", "inspect"):
        args = [command, str(pkg("aoti")), "--no-config", "--target", target]
        r = run(*args, *(["--static-only"] if command == "check" else []))
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert "--target" in one_error_line(r)


# ------------------------------------------------------------------ c. --exported-program


def test_an_exported_program_of_another_model_is_an_error(pkg: Pkg) -> None:
    opts = CheckOptions(exported_program=str(pkg("ep_only")), static_only=True)
    report = check(pkg("aoti"), opts)
    (f,) = [f for f in report.findings if f.code == "AOT070"]
    assert f.severity.value == "error" and f.model == "model" and int(report.exit_code) == 1
    assert "--exported-program" in f.message and "ep_only.pt2" in f.message
    assert "1 tensor input(s), the AOTI code takes 2" in f.message
    # a program of the same model: no AOT070, its ranges are compared (AOT013) as before
    same = check(pkg("aoti"), replace(opts, exported_program=str(pkg("both"))))
    codes = {f.code for f in same.findings}
    assert "AOT070" not in codes and "AOT013" in codes


def test_the_cli_reports_the_mismatch(pkg: Pkg) -> None:
    r = run(
        "check", str(pkg("strides")), "--exported-program", str(pkg("derived")), "--static-only",
        "--no-config", "-f", "json",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "AOT070"]
    assert (
        len(found) == 1
        and "is not the program model 'model' was compiled from" in found[0]["message"]
    )


def test_bundle_and_check_judge_a_program_alike(pkg: Pkg) -> None:
    aoti = read_package(pkg("aoti")).model("model")
    same = read_package(pkg("both")).model("model")
    other = read_package(pkg("ep_only")).model("model")
    assert aoti is not None and same is not None and other is not None
    assert program_difference(aoti, same) is None
    assert program_difference(aoti, other) == "1 tensor input(s), the AOTI code takes 2"
    assert check_reference_program(aoti, same, "it") == []
    # the output count, from the AOTI code's out_spec_
    twice = replace(same, outputs=same.outputs * 2)
    assert program_difference(aoti, twice) == "2 output(s), the AOTI code returns 1"
    (f,) = check_reference_program(aoti, twice, "the ExportedProgram of x.pt2")
    assert f.code == "AOT070" and f.message.startswith("the ExportedProgram of x.pt2 is not")


# ------------------------------------------------------------------ d. AOTI-only outputs


def test_inspect_shows_an_aoti_only_packages_outputs(pkg: Pkg) -> None:
    model = inspect(pkg("aoti")).model("model")
    assert model is not None and not model.has_exported_program
    (out,) = model.outputs
    assert out is not None and (out.dtype, out.device) == ("float32", "cpu")
    assert [str(d) for d in out.shape] == ["s43", "4"]
    r = run("inspect", str(pkg("aoti")), "--no-config")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["output", "dtype"])
    assert lines[header + 2].split() == ["0", "float32", "[s43,", "4]", "cpu"]
    r = run("inspect", str(pkg("strides")), "--no-config", "-f", "json")
    (outputs,) = [m["outputs"] for m in json.loads(r.stdout)["package"]["models"]]
    assert outputs == [{"dtype": "float32", "shape": [4, 3], "strides": None, "device": "cpu"}]


def test_an_output_of_unknown_form_is_still_counted(pkg: Pkg) -> None:
    info = inspect(pkg("aoti"))
    model = info.model("model")
    assert model is not None
    unknown = replace(info, models=(replace(model, outputs=(*model.outputs, None)),))
    text = render_package(unknown)
    assert any(line.split() == ["1", "unknown", "unknown", "cpu"] for line in text.splitlines())
