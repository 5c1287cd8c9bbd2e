"""--python: probing interpreters (every failure is one line and exit 2), the version matrix merged
into one report, and (slow) a real second torch: the 2.14.1 venv CI builds in .venv-2.14."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions
from aotipre.cli import main
from aotipre.environment import runtimes
from aotipre.findings import StageStatus, Verdict
from aotipre.fleet import matrix
from aotipre.foundation.errors import UsageError
from aotipre.report import render_report
from aotipre.runner.stages import DynamicOptions
from tests.progress_lines import without_progress

REPO = Path(__file__).resolve().parents[1]
FAKE_WORKER = REPO / "tests" / "fakes" / "fake_torch_worker.py"
SECOND_TORCH = REPO / ".venv-2.14" / "bin" / "python"
"""The second environment .ci/run builds (torch 2.14.1); the slow tests skip without it."""


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_torch(tmp_path: Path, version: str) -> Path:
    """A folder holding a fake `torch` package and its installed metadata (never imported)."""
    site = tmp_path / f"site-{version}"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise ImportError('a fake torch')\n")
    info = site / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return site


def interpreter(tmp_path: Path, name: str, *, site: Path | None = None) -> Path:
    """This Python without its site-packages (-S, so no real torch), plus `site` on its path."""
    env = f"PYTHONPATH={site} " if site is not None else "PYTHONPATH= "
    return script(tmp_path / name, f'{env}exec {sys.executable} -S "$@"')


# --- probe ---------------------------------------------------------------------------------------


def test_the_running_python_is_probed_without_importing_torch() -> None:
    runtime = runtimes.probe(None)
    import importlib.metadata

    assert runtime.torch_version == importlib.metadata.version("torch")
    assert runtime.python == sys.executable and runtime.label.startswith("torch 2.")


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda t: str(t / "missing" / "python"), "no such file"),
        (lambda t: str(t), "a folder, not an interpreter"),
        (lambda t: "no-such-python-anywhere", "not found on PATH"),
        (lambda t: str(script(t / "false", "exit 3")), "not a Python interpreter"),
        (
            lambda t: str(script(t / "noexec", "exit 0").chmod(0o644) or t / "noexec"),
            "not executable",
        ),
        (lambda t: str(interpreter(t, "py-no-torch")), "no torch installed"),
        (
            lambda t: str(interpreter(t, "py-old-torch", site=fake_torch(t, "2.9.1"))),
            "torch 2.9.1; aotipre's workers support torch 2.11-2.15",
        ),
        (
            lambda t: str(interpreter(t, "py-new-torch", site=fake_torch(t, "2.16.0"))),
            "torch 2.16.0",
        ),
    ],
)
def test_a_bad_interpreter_is_one_usage_error(
    tmp_path: Path, make: Callable[[Path], str], words: str
) -> None:
    with pytest.raises(UsageError) as err:
        runtimes.probe(make(tmp_path))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_supported_fake_torch_is_accepted_without_being_imported(tmp_path: Path) -> None:
    python = interpreter(tmp_path, "py-215", site=fake_torch(tmp_path, "2.15.0"))
    runtime = runtimes.probe(str(python))
    assert runtime.torch_version == "2.15.0" and runtime.label == "torch 2.15.0"
    assert runtime.python == str(python), "the path given, not the resolved base interpreter"


def test_no_torch_here_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pkg: Callable[[str], Path], capsys
) -> None:
    monkeypatch.setattr(sys, "executable", str(interpreter(tmp_path, "py-no-torch")))
    code = main(["check", str(pkg("aoti")), "--no-config"])
    err = capsys.readouterr().err
    assert code == 2
    err = without_progress(err)  # the progress lines (on by default) before it aside
    assert err.count("\n") == 1 and "aotipre[torch]" in err and "--python PATH" in err
    # the static gate needs no torch at all
    assert main(["check", str(pkg("aoti")), "--static-only", "--no-config"]) == 0


def test_the_library_without_torch_could_not_check_in_one_line(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    # api.check (no CLI in between) with workers in an interpreter that has no torch: the
    # report could not check, with the probe's line, instead of a worker dying on `import torch`
    from aotipre import api
    from aotipre.runner.stages import DynamicOptions

    python = str(interpreter(tmp_path, "py-no-torch"))
    report = api.check(pkg("aoti"), api.CheckOptions(dynamic=DynamicOptions(python=python)))
    assert report.exit_code == 2 and report.error is not None
    assert "no torch installed in that interpreter" in report.error and "\n" not in report.error
    from aotipre.runner.stages import STAGES

    assert [s.name for s in report.stages][:3] == ["inspect", "inputs", "static"]
    skipped = report.stages[3:]  # every dynamic stage, said not run (issue 30: json/junit show it)
    assert [s.name for s in skipped] == list(STAGES)
    assert all(s.status.value == "skipped" and "no interpreter" in s.detail for s in skipped)
    static = api.check(pkg("aoti"), api.CheckOptions(static_only=True))
    assert static.error is None and static.exit_code == 0


def test_bad_python_on_the_command_line_exits_2(
    tmp_path: Path, pkg: Callable[[str], Path], capsys
) -> None:
    assert main(["check", str(pkg("aoti")), "--python", str(tmp_path / "nope"), "--no-config"]) == 2
    assert (
        capsys.readouterr().err == f"aotipre: error: --python {tmp_path / 'nope'}: no such file\n"
    )
    assert main(["doctor", "--python", str(tmp_path / "nope")]) == 2


def test_python_is_a_config_key(tmp_path: Path, pkg: Callable[[str], Path], capsys) -> None:
    (tmp_path / "aotipre.toml").write_text('python = ["envs/missing/bin/python"]\n')
    assert main(["check", str(pkg("aoti")), "--config", str(tmp_path / "aotipre.toml")]) == 2
    assert "envs/missing/bin/python: no such file" in capsys.readouterr().err


# --- the matrix, with fake workers in two "interpreters" ----------------------------------------


def fake_interpreter(tmp_path: Path, name: str, fake_script: dict) -> runtimes.Runtime:
    """An interpreter whose worker is the fake one, misbehaving as `fake_script` says; it is
    started as `<it> worker.py JOB`, like the real one."""
    body = (
        f"AOTIPRE_FAKE_SCRIPT='{json.dumps(fake_script)}' "
        f'exec {sys.executable} {FAKE_WORKER} "$2"'
    )
    path = script(tmp_path / name, body)
    return runtimes.Runtime(str(path), "3.11", name, "", str(path))


def test_a_matrix_reports_each_runtime_s_stages_and_findings(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    old = fake_interpreter(tmp_path, "2.13.0", {})
    new = fake_interpreter(
        tmp_path,
        "2.14.1",
        {"run": {"error": {"type": "RuntimeError", "message": "boom from the newer torch"}}},
    )
    options = CheckOptions(
        inputs=str(pkg("aoti_inputs")),
        dynamic=DynamicOptions(cache_dir=str(tmp_path / "cache"), timeout_s=30.0),
        canary=False,
    )
    report = matrix.check(str(pkg("aoti")), options, [old, new])
    static = [s.name for s in report.stages if s.runtime is None]
    assert static == ["inspect", "inputs", "static"]
    by_runtime = {
        label: {s.name: s for s in report.stages if s.runtime == label}
        for label in ("torch 2.13.0", "torch 2.14.1")
    }
    assert by_runtime["torch 2.13.0"]["run"].status is StageStatus.PASSED
    assert by_runtime["torch 2.14.1"]["run"].status is StageStatus.FAILED
    (finding,) = [f for f in report.findings if f.code == "AOT602"]
    assert finding.runtime == "torch 2.14.1" and finding.subject.endswith("[torch 2.14.1]")
    assert [r["torch"] for r in report.runtimes] == ["2.13.0", "2.14.1"]
    assert report.verdict is Verdict.FAIL
    # each runtime ran its own worker
    assert by_runtime["torch 2.13.0"]["load"].command[0] == old.python
    assert by_runtime["torch 2.14.1"]["load"].command[0] == new.python
    doc = report.to_dict()
    assert {s["runtime"] for s in doc["stages"]} == {None, "torch 2.13.0", "torch 2.14.1"}
    junit = render_report(report, "junit")
    assert 'name="run [model] [torch 2.13.0]"' in junit
    assert 'name="run [model] [torch 2.14.1]"' in junit
    failed_case = junit.split('name="run [model] [torch 2.14.1]"')[1].split("</testcase>")[0]
    assert "AOT602" in failed_case


def test_a_single_runtime_labels_its_stages_not_its_findings(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    only = fake_interpreter(
        tmp_path, "2.14.1", {"run": {"error": {"type": "RuntimeError", "message": "boom"}}}
    )
    options = CheckOptions(
        inputs=str(pkg("aoti_inputs")),
        dynamic=DynamicOptions(cache_dir=str(tmp_path / "c")),
        canary=False,
    )
    report = matrix.check(str(pkg("aoti")), options, [only])
    assert {s.runtime for s in report.stages if s.name == "run"} == {"torch 2.14.1"}
    assert all(f.runtime is None for f in report.findings)


# --- a real second torch (CI's .venv-2.14) -------------------------------------------------------


needs_second_torch = pytest.mark.skipif(
    not SECOND_TORCH.is_file() or Path(sys.prefix).resolve() == SECOND_TORCH.parents[1].resolve(),
    reason="no .venv-2.14 (bash .ci/run builds it), or running in it already",
)


@pytest.mark.slow
@needs_second_torch
def test_real_matrix_this_torch_and_2_14(pkg: Callable[[str], Path], tmp_path: Path) -> None:
    """A package built by this torch, loaded, run and probed under both torches: each probe's
    max+1 must be rejected by that torch's own AOTI runtime check (its message parsed), and
    every dynamic stage says which torch ran it."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "aotipre", "check", str(pkg("aoti")),
            "--inputs", str(pkg("aoti_inputs")), "--no-config",
            "--python", sys.executable, "--python", str(SECOND_TORCH),
            "--format", "json", "--output", str(out), "--cache-dir", str(tmp_path / "cache"),
        ],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [r["torch"].split("+")[0] for r in doc["runtimes"]][1] == "2.14.1"
    probes = {s["runtime"]: s for s in doc["stages"] if s["name"] == "probe"}
    assert len(probes) == 2
    for label, stage in probes.items():
        assert stage["status"] == "passed", (label, stage["detail"])
        # batch and seq at max+1, and input_ids and attention_mask laid out non-contiguously
        assert stage["detail"].count("rejected by the runtime check") == 4, stage["detail"]
    assert any(label.startswith("torch 2.14.1") for label in probes)


@pytest.mark.slow
@needs_second_torch
def test_real_doctor_in_the_2_14_venv(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "aotipre", "doctor", "--python", str(SECOND_TORCH),
            "--format", "json", "--cache-dir", str(tmp_path / "cache"), "--no-progress",
        ],
        capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    doc = json.loads(proc.stdout)
    assert doc["host"]["torch"]["version"].startswith("2.14.1"), proc.stderr[-2000:]
    assert doc["host"]["worker"]["executable"]
    assert proc.returncode == 0, (doc["findings"], proc.stderr[-2000:])


def test_doctor_with_several_interpreters_fake(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fake doctors (run_doctor and the interpreter probe replaced): one report per --python,
    every interpreter probed before any doctor runs, the worst exit code, one JSON object. The
    real doctor of two interpreters ran by hand (this torch and the 2.14.1 venv: both passed)."""
    from aotipre.cli import commands
    from aotipre.doctor import report as doctor_report
    from aotipre.environment import runtimes
    from aotipre.environment.runtimes import Runtime

    order: list[str] = []

    def fake_probe(python: str | None = None, **_: object) -> Runtime:
        order.append(f"probe {python}")
        version = "2.14.1" if python and "2.14" in python else "2.13.0"
        return Runtime(python or "py", "3.11", version, "/x", python or "py")

    def fake_doctor(opts: object) -> doctor_report.DoctorReport:
        python = opts.dynamic.python  # type: ignore[attr-defined]
        order.append(f"doctor {python}")
        error = "no canary" if "2.14" in python else None
        return doctor_report.DoctorReport(facts={"python": {"executable": python}}, error=error)

    monkeypatch.setattr(runtimes, "probe", fake_probe)
    monkeypatch.setattr("aotipre.doctor.run_doctor", fake_doctor)
    code = commands.doctor(fmt="json", python=["/a/py", "/b-2.14/py"], show_progress=False)
    out = json.loads(capsys.readouterr().out)
    assert order == ["probe /a/py", "probe /b-2.14/py", "doctor /a/py", "doctor /b-2.14/py"]
    assert out["kind"] == "doctor-matrix"
    assert [(r["python"], r["torch"]) for r in out["runtimes"]] == [
        ("/a/py", "2.13.0"),
        ("/b-2.14/py", "2.14.1"),
    ]
    assert [r["report"]["verdict"] for r in out["runtimes"]] == ["pass", "error"]
    assert code == out["exit_code"] == 2  # the worst: the second could not check
    commands.doctor(fmt="table", python=["/a/py", "/b-2.14/py"], show_progress=False)
    table = capsys.readouterr()
    assert "=== --python /a/py (torch 2.13.0)" in table.out
    assert "=== --python /b-2.14/py (torch 2.14.1)" in table.out
    assert "/b-2.14/py: no canary" in table.err
