"""What an option does, on the way from the command line (or a file) to the checks: the command
layer (commands.py: which report is written where, the exit code, progress, the step summary,
the configuration's targets for `inspect`, the doctor's matrix), the precedence of a plan
(batch.py), the configuration keys and their bounds (config.py, bounds.py) and the library's
DynamicOptions and device spelling (runner/stages/options.py).

The command layer is driven with `batch.check_packages` (and the doctor's `run_doctor`)
replaced by fakes returning fixed reports: what is tested is what commands.py does with them,
not the checks. Written for the mutation run (scripts/mutate.py, session 11)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from aotipre import config
from aotipre.cli import commands
from aotipre.doctor.report import DoctorReport
from aotipre.environment.runtimes import Runtime
from aotipre.findings import Report, Severity, StageResult, StageStatus, codes
from aotipre.fleet import batch
from aotipre.foundation import safeio
from aotipre.foundation.bounds import integer, number
from aotipre.foundation.errors import UsageError
from aotipre.runner.stages.options import DynamicOptions, parse_device


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()  # the configuration search stops here
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def ok_report(path: str = "a.pt2", inputs: str | None = None) -> Report:
    return Report(
        package_path=path,
        stages=[StageResult("static", StageStatus.PASSED, 0.0, "ok")],
        inputs_source=inputs,
    )


def warning_report(path: str = "w.pt2") -> Report:
    report = ok_report(path)
    report.findings = [codes.get("AOT013").finding("a narrower bound", stage="static")]
    return report


def error_report(path: str = "b.pt2", error: str = "the zip is damaged") -> Report:
    return Report(
        package_path=path,
        stages=[StageResult("inspect", StageStatus.ERROR, 0.0, error)],
        error=error,
    )


class FakeChecks:
    """Stands in for batch.check_packages: records its arguments, returns `reports` (or
    reports made with the fail-on the settings and flags give)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, reports: list[Report] | None) -> None:
        self.reports = reports
        self.calls: list[dict[str, Any]] = []
        monkeypatch.setattr(batch, "check_packages", self)

    def __call__(self, packages: list[str], settings: config.Settings, **kw: Any) -> list[Report]:
        self.calls.append({"packages": packages, "settings": settings, **kw})
        if self.reports is not None:
            return self.reports
        fail_on = kw["flags"].get("fail_on", settings.fail_on)
        out = [warning_report(p) for p in packages]
        for r in out:
            r.fail_on = fail_on
        return out


def touch(*names: str) -> None:
    for name in names:
        Path(name).write_bytes(b"x")


# ---------------------------------------------------------------------------------------------
# commands.check


def test_one_report_is_rendered_alone_several_with_the_overall_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeChecks(monkeypatch, [ok_report()])
    assert commands.check(["a.pt2"], flags={}) == 0
    out = capsys.readouterr().out
    assert out.startswith("aotipre check a.pt2\n") and "overall:" not in out
    FakeChecks(monkeypatch, [ok_report(), warning_report()])
    assert commands.check(["a.pt2", "w.pt2"], flags={}) == 0
    out = capsys.readouterr().out
    assert "overall: PASS (exit 0; 2 package(s)" in out
    # a manifest's single package is a run over many: the overall line too
    (Path("m.toml")).write_text('[[package]]\npath = "a.pt2"\n')
    FakeChecks(monkeypatch, [ok_report()])
    assert commands.check([], flags={}, manifest=Path("m.toml")) == 0
    assert "overall: PASS (exit 0; 1 package(s)" in capsys.readouterr().out


def test_the_exit_code_is_the_worst_of_the_reports(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = warning_report()
    failing.fail_on = Severity.WARNING
    FakeChecks(monkeypatch, [ok_report(), failing])
    assert commands.check(["a.pt2", "w.pt2"], flags={}, fmt="json") == 1
    assert json.loads(capsys.readouterr().out)["exit_code"] == 1
    FakeChecks(monkeypatch, [failing, error_report(), ok_report()])
    assert commands.check(["x", "y", "z"], flags={}, fmt="json") == 2
    assert json.loads(capsys.readouterr().out)["exit_code"] == 2


def test_a_single_unreadable_package_on_the_terminal_table_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    FakeChecks(monkeypatch, [error_report()])
    assert commands.check(["b.pt2"], flags={}) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "aotipre: error: the zip is damaged\n"
    # another format, or a file to write: the report is written all the same
    assert commands.check(["b.pt2"], flags={}, fmt="json") == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "the zip is damaged"
    assert err == "aotipre: error: the zip is damaged\n"
    assert commands.check(["b.pt2"], flags={}, output=project / "r.txt") == 2
    assert "could not check: the zip is damaged" in (project / "r.txt").read_text()
    assert capsys.readouterr() == ("", "aotipre: error: the zip is damaged\n")
    # a readable package's table is printed
    FakeChecks(monkeypatch, [ok_report()])
    assert commands.check(["a.pt2"], flags={}) == 0
    out, err = capsys.readouterr()
    assert "verdict: PASS" in out and err == ""


def test_error_lines_name_the_package_when_several_were_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeChecks(monkeypatch, [ok_report(), error_report("b.pt2", "the zip is damaged")])
    assert commands.check(["a.pt2", "b.pt2"], flags={}, fmt="json") == 2
    assert capsys.readouterr().err == "aotipre: error: b.pt2: the zip is damaged\n"
    # an error that names its package already is not prefixed twice
    FakeChecks(monkeypatch, [ok_report(), error_report("b.pt2", "b.pt2: not a zip")])
    commands.check(["a.pt2", "b.pt2"], flags={}, fmt="json")
    assert capsys.readouterr().err == "aotipre: error: b.pt2: not a zip\n"


def test_reports_go_to_their_files_and_github_appends_the_summary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    summary = project / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    FakeChecks(monkeypatch, [ok_report()])
    commands.check(["a.pt2"], flags={}, fmt="json", reports_to=["junit:out.xml"])
    assert Path("out.xml").read_text().startswith("<?xml")
    assert not summary.exists()  # neither github format
    commands.check(["a.pt2"], flags={}, reports_to=["junit:x.xml", "github:gh.txt"])
    assert Path("gh.txt").read_text().startswith("aotipre: PASS a.pt2")
    assert summary.read_text().startswith("## aotipre: ")
    summary.unlink()
    commands.check(["a.pt2"], flags={}, fmt="github")
    assert capsys.readouterr().out.endswith("aotipre: PASS a.pt2 (exit 0; 0 error, 0 warning, "
                                            "0 info; fail-on error)\n")  # fmt: skip
    assert summary.is_file()


def test_progress_is_shown_whatever_the_format_terminal_or_output_unless_static_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    monkeypatch.setattr(safeio, "is_terminal", lambda fd: fd == 2)
    fake = FakeChecks(monkeypatch, [ok_report()])
    commands.check(["a.pt2"], flags={})
    commands.check(["a.pt2"], flags={}, fmt="json")
    commands.check(["a.pt2"], flags={}, output=project / "out.txt")
    monkeypatch.setattr(safeio, "is_terminal", lambda fd: False)
    commands.check(["a.pt2"], flags={})
    assert [c["progress"] is not None for c in fake.calls] == [True] * 4
    commands.check(["a.pt2"], flags={"progress": False})
    commands.check(["a.pt2"], flags={"static-only": True})  # no worker: nothing to follow
    commands.check(["a.pt2"], flags={"static-only": True, "progress": True})
    assert [c["progress"] is not None for c in fake.calls[4:]] == [False, False, True]


def test_the_configuration_file_applies_unless_no_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "aotipre.toml").write_text('fail-on = "warning"\n')
    FakeChecks(monkeypatch, None)
    assert commands.check(["w.pt2"], flags={}, fmt="json") == 1
    assert json.loads(capsys.readouterr().out)["config"] == "aotipre.toml"
    assert commands.check(["w.pt2"], flags={}, fmt="json", no_config=True) == 0
    assert json.loads(capsys.readouterr().out)["config"] == "none (--no-config)"
    # a flag over the file
    assert commands.check(["w.pt2"], flags={"fail-on": Severity.ERROR}, fmt="json") == 0


def test_write_baseline_and_its_path_reach_the_checks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeChecks(monkeypatch, [ok_report()])
    commands.check(["a.pt2"], flags={}, fmt="json")
    commands.check(["a.pt2"], flags={}, fmt="json", write_baseline=Path("base.json"))
    assert [c["write_baseline_to"] for c in fake.calls] == [None, "base.json"]
    assert [c["manifest"] for c in fake.calls] == [None, None]


def test_an_output_onto_the_baseline_read_is_refused_unless_it_is_rewritten(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    touch("base.json")
    fake = FakeChecks(monkeypatch, [ok_report()])
    with pytest.raises(UsageError, match="--output base.json is the input base.json"):
        commands.check(["a.pt2"], flags={"baseline": "base.json"}, output=Path("base.json"))
    assert fake.calls == []
    # --write-baseline replaces the baseline: the one read is none, the output may be it
    commands.check(
        ["a.pt2"],
        flags={"baseline": "base.json"},
        fmt="json",
        reports_to=["json:base.json"],
        write_baseline=Path("new.json"),
    )
    assert len(fake.calls) == 1


@pytest.mark.parametrize("reports_to", [["json:in.pt"], ["junit:x.xml", "json:in.pt"]])
def test_a_report_onto_the_inputs_a_package_was_checked_with_is_refused(
    monkeypatch: pytest.MonkeyPatch, reports_to: list[str]
) -> None:
    # the inputs came from the configuration's glob: known only after the check
    touch("in.pt")
    FakeChecks(monkeypatch, [ok_report(inputs="in.pt")])
    with pytest.raises(UsageError, match="--report in.pt is the input in.pt"):
        commands.check(["a.pt2"], flags={}, fmt="json", reports_to=reports_to)
    # an archive's own inputs are no file
    touch("archive")
    FakeChecks(monkeypatch, [ok_report(inputs="archive")])
    commands.check(["a.pt2"], flags={}, fmt="json", reports_to=["json:archive"])


def test_a_model_folder_is_planned_through_the_serving_repository(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    from aotipre.serving import repository

    planned: list[tuple[list[str], str | None]] = []
    served = SimpleNamespace(source="repo/m/config.pbtxt")

    def plan(packages: list[str], serving_config: str | None) -> tuple[list[str], dict]:
        planned.append((packages, serving_config))
        return ["repo/m/1/model.pt2"], {"repo/m/1/model.pt2": served}

    monkeypatch.setattr(repository, "plan", plan)
    fake = FakeChecks(monkeypatch, [ok_report()])
    (project / "repo").mkdir()
    touch("a.pt2")
    commands.check(["a.pt2"], flags={}, fmt="json")
    assert planned == [] and fake.calls[-1]["packages"] == ["a.pt2"]
    commands.check(["a.pt2", "repo"], flags={}, fmt="json")
    assert planned == [(["a.pt2", "repo"], None)]
    assert fake.calls[-1]["packages"] == ["repo/m/1/model.pt2"]
    assert fake.calls[-1]["serving"] == {"repo/m/1/model.pt2": served}
    touch("config.pbtxt")
    commands.check(["a.pt2"], flags={}, fmt="json", serving_config=Path("config.pbtxt"))
    assert planned[-1] == (["a.pt2"], "config.pbtxt")


# ---------------------------------------------------------------------------------------------
# commands.inspect: the configuration's named targets


def test_inspect_checks_the_configured_targets_unless_given_a_spec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    from aotipre import api

    seen: list[tuple[str | None, tuple]] = []
    monkeypatch.setattr(api, "inspect", lambda package: "INFO")
    monkeypatch.setattr(commands, "render_package", lambda *a: "")

    def compatibility(info: Any, target: str | None, named: tuple) -> tuple[list, list]:
        seen.append((target, named))
        return [], []

    monkeypatch.setattr(api, "compatibility", compatibility)
    (project / "aotipre.toml").write_text('[targets]\nfleet = "cuda,cc=9.0"\n')
    named = (("fleet", "cuda,cc=9.0"),)
    for target in (None, "fleet", "fleet;cpu,isa=avx2"):
        assert commands.inspect(Path("a.pt2"), target=target) == 0
        assert seen[-1] == (target, named)
    # one spec: no name to resolve, the configuration is not read
    assert commands.inspect(Path("a.pt2"), target="cpu,isa=avx2") == 0
    assert seen[-1] == ("cpu,isa=avx2", ())
    assert commands.inspect(Path("a.pt2"), target="fleet", no_config=True) == 0
    assert seen[-1] == ("fleet", ())


# ---------------------------------------------------------------------------------------------
# commands.doctor: one report per interpreter, the worst exit code


def runtime(name: str, torch: str = "2.13.0+cpu") -> Runtime:
    return Runtime(f"/abs/{name}", "3.11.7", torch, "/t", name)


def doctor_report(exit_code: int) -> DoctorReport:
    if exit_code == 2:
        return DoctorReport(error="no torch worker could run")
    if exit_code == 1:
        finding = codes.get("AOT401").finding("no cuda device", stage="canary")
        return DoctorReport(findings=[finding])
    return DoctorReport()


class FakeDoctor:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, exits: list[int]) -> None:
        import aotipre.doctor
        import aotipre.environment.runtimes

        self.exits = list(exits)
        self.options: list[Any] = []
        monkeypatch.setattr(aotipre.doctor, "run_doctor", self)
        monkeypatch.setattr(aotipre.environment.runtimes, "probe", lambda p: runtime(p or "python"))

    def __call__(self, opts: Any) -> DoctorReport:
        self.options.append(opts)
        return doctor_report(self.exits.pop(0))


def test_doctor_exit_is_the_worst_interpreters(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeDoctor(monkeypatch, [0, 1])
    assert commands.doctor(python=["py1", "py2"], fmt="json", show_progress=False) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "doctor-matrix" and data["exit_code"] == 1
    assert [r["python"] for r in data["runtimes"]] == ["py1", "py2"]
    FakeDoctor(monkeypatch, [1, 0])
    assert commands.doctor(python=["py1", "py2"], fmt="json", show_progress=False) == 1
    assert json.loads(capsys.readouterr().out)["exit_code"] == 1
    FakeDoctor(monkeypatch, [0])
    assert commands.doctor(fmt="json", show_progress=False) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "doctor" and data["exit_code"] == 0


def test_doctor_errors_name_the_interpreter_when_several(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeDoctor(monkeypatch, [2, 0])
    assert commands.doctor(python=["py1", "py2"], show_progress=False) == 2
    out, err = capsys.readouterr()
    assert err == "aotipre: error: py1: no torch worker could run\n"
    assert out.startswith("=== --python py1 (torch 2.13.0+cpu)\n")
    assert "\n=== --python py2 (torch 2.13.0+cpu)\n" in out
    FakeDoctor(monkeypatch, [2])
    assert commands.doctor(show_progress=False) == 2
    out, err = capsys.readouterr()
    assert err == "aotipre: error: no torch worker could run\n" and "===" not in out
    FakeDoctor(monkeypatch, [0])
    assert commands.doctor(show_progress=False) == 0
    assert capsys.readouterr().err == ""


def test_doctor_options_reach_the_canary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    fake = FakeDoctor(monkeypatch, [0, 0, 0])
    monkeypatch.setattr(safeio, "is_terminal", lambda fd: fd == 2)
    commands.doctor(["cpu"], timeout=7.0, cache_dir=Path("cache"))
    commands.doctor(show_progress=False)
    commands.doctor(show_progress=True)
    first, second, third = fake.options
    assert first.devices == ("cpu",) and first.dynamic.timeout_s == 7.0
    assert first.dynamic.cache_dir == str(project / "cache")
    assert second.dynamic.cache_dir is None
    assert [o.progress is not None for o in fake.options] == [True, False, True]
    assert first.dynamic.python == "/abs/python"


@pytest.mark.parametrize("spec", ["json", "json:", ":x", "junit:x.xml"])
def test_doctor_report_spec_is_table_or_json_to_a_path(spec: str) -> None:
    from aotipre.foundation.errors import AotipreError

    with pytest.raises(AotipreError, match="FORMAT table or json"):
        commands.doctor(reports_to=[spec])


def test_doctor_reports_go_to_their_files(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeDoctor(monkeypatch, [0])
    commands.doctor(reports_to=["json:d.json", "table:d.txt"], show_progress=False)
    assert json.loads(Path("d.json").read_text())["kind"] == "doctor"
    assert Path("d.txt").read_text().startswith("aotipre doctor:")


# ---------------------------------------------------------------------------------------------
# config.py: the keys' validation, discovery's trust, Settings -> CheckOptions


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("cache-dir = 3", "cache-dir = 3: expected a non-empty string"),
        ("cache-dir = '  '", 'cache-dir = "  ": expected a non-empty string'),
        ("targets = 'a100'", 'targets = "a100": expected a table of name = "target spec"'),
        ("[targets]", "targets = {...}: expected a table of name"),
        ("[targets]\n'a b' = 'cpu'", "target name 'a b': use letters, digits"),
        ("select = 3", "select = 3: expected a list of code prefixes"),
        ("select = ['AOT2', 3]", 'select = ["AOT2", 3]: expected a list of code prefixes'),
        ("python = []", "python = []: expected an interpreter path or a list of them"),
        ("python = 3", "python = 3: expected an interpreter path or a list of them"),
        ("import = ['ops', '']", 'import = ["ops", ""]: expected a string or a list of strings'),
        ("import = [3]", "import = [3]: expected a string or a list of strings"),
        ("import = 3", "import = 3: expected a string or a list of strings"),
        ("import = ['my ops']", "'my ops' is not a Python module name"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(line: str, message: str) -> None:
    write(Path("aotipre.toml"), line + "\n")
    with pytest.raises(UsageError) as info:
        config.load_config()
    assert str(info.value).startswith("aotipre.toml: ") and message in str(info.value)


def test_values_the_keys_accept(project: Path) -> None:
    write(
        project / "ci" / "aotipre.toml",
        'target = "fleet; cpu,isa=avx2"\n'
        'python = ["venv/bin/python", "python3.11"]\n'
        'import = ["pkg.ops", "other"]\n'
        "timeout = 604800\nstate-calls = 100\nrtol = 0\nperf-tolerance = 0\n"
        '[targets]\nfleet = "cuda,cc=9.0"\n',
    )
    s = config.load_config("ci/aotipre.toml")
    assert s.target == "fleet; cpu,isa=avx2" and s.targets == (("fleet", "cuda,cc=9.0"),)
    # a path with a / is relative to the file; a bare name is looked up on PATH later
    assert s.python == ("ci/venv/bin/python", "python3.11")
    assert s.imports == ("pkg.ops", "other")
    assert (s.timeout, s.state_calls, s.rtol, s.perf_tolerance) == (604800.0, 100, 0.0, 0.0)


def test_root_owned_configuration_is_trusted_by_another_user(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as git's safe.directory: a file (and folder) of this user or of root
    write(project / "aotipre.toml", "jobs = 2\n")
    assert os.stat(project / "aotipre.toml").st_uid == os.stat(project).st_uid
    owner = os.stat(project).st_uid
    monkeypatch.setattr(os, "geteuid", lambda: 4242 if owner == 0 else owner)
    assert config.load_config().jobs == 2
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    if owner != 0:
        assert config.load_config().jobs == 1  # another user's file


@pytest.mark.parametrize(
    ("file_mode", "folder_mode", "used"),
    [
        (0o644, 0o755, True),
        (0o755, 0o755, True),  # executable, not writable: fine
        (0o645, 0o755, True),
        (0o664, 0o755, False),  # group-writable
        (0o646, 0o755, False),  # world-writable
        (0o644, 0o775, False),  # its folder group-writable
        (0o644, 0o757, False),
    ],
)
def test_configuration_others_can_write_is_ignored(
    tmp_path: Path, file_mode: int, folder_mode: int, used: bool
) -> None:
    folder = tmp_path / "shared"
    write(folder / "aotipre.toml", "jobs = 2\n").chmod(file_mode)
    (folder / ".git").mkdir()
    folder.chmod(folder_mode)
    try:
        found, ignored = config.discover_config(folder)
    finally:
        folder.chmod(0o755)
    assert (found is not None) is used
    if not used:
        (note,) = ignored
        assert note.startswith("ignored ") and "writable by other users" in note


def test_discovery_stops_at_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outer = tmp_path / "outer"
    write(outer / "aotipre.toml", "jobs = 3\n")
    start = outer / "home" / "project" / "sub"
    start.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(outer / "home"))
    assert config.find_config(start) is None
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    assert config.find_config(start) == outer / "aotipre.toml"
    monkeypatch.delenv("HOME")
    assert config.find_config(start) == outer / "aotipre.toml"


def test_settings_become_check_options(project: Path, pkg: Any) -> None:
    s = config.Settings(python=("/usr/bin/python3",))
    opts = s.check_options()
    assert opts.dynamic is not None and opts.dynamic.python == "/usr/bin/python3"
    assert opts.triage is not None and opts.triage.escalate
    two = config.Settings(python=("/a/python", "/b/python")).check_options()
    assert two.dynamic is not None and two.dynamic.python is None  # a matrix: per runtime
    assert config.Settings().check_options().dynamic.python is None  # type: ignore[union-attr]
    static = config.Settings(static_only=True).check_options()
    assert static.dynamic is None and static.triage is None
    with pytest.raises(UsageError, match="library .*nope.so: no such file"):
        config.Settings(libraries=(str(project / "nope.so"),)).check_options()
    touch("op.so")
    assert config.Settings(libraries=(str(project / "op.so"),)).check_options() is not None
    # either reference file alone is checked before anything runs
    with pytest.raises(UsageError, match="--expected"):
        config.Settings(expected=str(project / "absent.pt")).check_options()
    with pytest.raises(UsageError, match="--exported-program"):
        config.Settings(exported_program=str(project / "absent.pt2")).check_options()
    assert config.Settings(expected=str(pkg("aoti_inputs"))).check_options() is not None


# ---------------------------------------------------------------------------------------------
# bounds.py: each limit is inclusive where it says so


def test_bounds_accept_their_limits() -> None:
    assert number(0, inclusive=False, maximum=10)(10, Path()) == 10.0
    assert number(0, inclusive=True)(0, Path()) == 0.0
    with pytest.raises(ValueError, match="must be > 0"):
        number(0, inclusive=False)(0, Path())
    with pytest.raises(ValueError, match="must be <= 10"):
        number(0, inclusive=False, maximum=10)(10.5, Path())
    with pytest.raises(ValueError, match="must be a finite number"):
        number(0, inclusive=True)(math.inf, Path())
    assert integer(1, 5)(5, Path()) == 5 and integer(1, 5)(1, Path()) == 1
    with pytest.raises(ValueError, match="must be <= 5"):
        integer(1, 5)(6, Path())
    with pytest.raises(ValueError, match="must be >= 1"):
        integer(1, 5)(0, Path())
    assert config.check_number("state-calls", 100) == 100
    assert config.check_number("timeout", 604800) == 604800.0


# ---------------------------------------------------------------------------------------------
# runner/stages/options.py


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("cpu", ("cpu", -1)), ("CUDA", ("cuda", -1)), ("cuda:1", ("cuda", 1)),
     (" cuda:0 ", ("cuda", 0)), ("cuda:12", ("cuda", 12))],
)  # fmt: skip
def test_device_spellings(text: str, parsed: tuple[str, int]) -> None:
    assert parse_device(text) == parsed


@pytest.mark.parametrize("text", ["cpu:0", "cuda:", "cuda:x", "cuda:-1", "tpu", "tpu:1", ""])
def test_unsupported_devices(text: str) -> None:
    with pytest.raises(UsageError, match="use cpu, cuda or cuda:N"):
        parse_device(text)


def test_dynamic_options_check_only_the_numbers_given() -> None:
    assert DynamicOptions(rtol=None, atol=None).rtol is None
    with pytest.raises(UsageError, match=r"DynamicOptions.atol = -1: must be >= 0"):
        DynamicOptions(atol=-1)


# ---------------------------------------------------------------------------------------------
# batch.py: one job per package


def test_inputs_and_model_for_one_package(project: Path) -> None:
    settings = config.Settings(static_only=True)
    (job,) = batch.plan(["a.pt2"], settings, inputs="i.pt", model="m")
    assert (job.options.inputs, job.options.model) == ("i.pt", "m")
    with pytest.raises(UsageError, match="--inputs and --model apply to one package"):
        batch.plan(["a.pt2", "b.pt2"], settings, model="m")


def test_progress_is_prefixed_with_the_package_when_several(project: Path) -> None:
    said: list[str] = []
    settings = config.Settings(static_only=True)
    (job,) = batch.plan(["a.pt2"], settings, progress=said.append)
    assert job.options.progress is not None
    job.options.progress("reading")
    jobs = batch.plan(["b.pt2", "a.pt2"], settings, progress=said.append)
    for j in jobs:
        assert j.options.progress is not None
        j.options.progress("reading")
    assert said == ["reading", "a.pt2: reading", "b.pt2: reading"]
    (job,) = batch.plan(["a.pt2"], settings)
    assert job.options.progress is None


def test_a_served_package_gets_its_serving_config(project: Path) -> None:
    settings = config.Settings(static_only=True)
    served = SimpleNamespace(source="config.pbtxt")
    jobs = batch.plan(["a.pt2", "b.pt2"], settings, serving={"a.pt2": served})
    assert [j.options.serving_config for j in jobs] == [served, None]
