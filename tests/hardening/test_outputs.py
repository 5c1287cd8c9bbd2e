"""Issue #30 (P1.3): an output never replaces an input, a device or a link target.

Every writing option (-o, --report, --write-baseline, `doctor --report`, `bundle -o`) is aimed
at each kind of input the run reads (--against, --expected, --exported-program, --library,
--python, a member of a folder package) through a symbolic and a hard link: one line, exit 2,
and the input byte for byte as it was. Outputs inside a folder package are refused; special
files are written in place and never replaced (nor a link to one); a missing folder is an
error, never created. Static-only checks of the prebuilt fixtures: no compile, no torch."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.cli import main

Pkg = Callable[[str], Path]
STATIC = ["--static-only", "--no-config", "--compile-at-deploy"]
"""The ExportedProgram-only fixture passes statically when the deployment compiles it."""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error_line(err: str) -> None:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aotipre: error: "), err


def cli(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aotipre", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def work(pkg: Pkg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with pkg.pt2 (passes statically), the inputs each option reads, and a folder
    package (pkg.pt2 extracted)."""
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(pkg("ep_only"), tmp_path / "pkg.pt2")
    shutil.copyfile(pkg("both"), tmp_path / "against.pt2")
    shutil.copyfile(pkg("both"), tmp_path / "ep.pt2")
    shutil.copyfile(pkg("aoti_inputs"), tmp_path / "expected.pt")
    (tmp_path / "libop.so").write_bytes(b"\x7fELF not really a library")
    (tmp_path / "fakepy").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "fakepy").chmod(0o755)
    with zipfile.ZipFile(tmp_path / "pkg.pt2") as zf:
        zf.extractall(tmp_path / "folder")
    return tmp_path


def folder_package(work: Path) -> Path:
    (root,) = (work / "folder").iterdir()
    return root


# (the input's option and file, relative to the work folder)
INPUTS = {
    "against": (["--against", "against.pt2"], "against.pt2"),
    "expected": (["--expected", "expected.pt"], "expected.pt"),
    "exported-program": (["--exported-program", "ep.pt2"], "ep.pt2"),
    "library": (["--library", "libop.so"], "libop.so"),
    "python": (["--python", "./fakepy"], "fakepy"),
    "folder-member": ([], "FOLDER/archive_format"),
}
OUTPUTS = {
    "-o": lambda p: ["-o", p],
    "--report": lambda p: ["--report", f"json:{p}"],
    "--write-baseline": lambda p: ["--write-baseline", p],
}


def _link(work: Path, target: Path, how: str) -> str:
    name = f"out-{how}.json"
    if how == "symlink":
        (work / name).symlink_to(target)
    else:
        os.link(target, work / name)
    return name


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
@pytest.mark.parametrize("option", list(OUTPUTS))
@pytest.mark.parametrize("kind", list(INPUTS))
def test_check_outputs_never_replace_an_input(
    work: Path, capsys: pytest.CaptureFixture[str], kind: str, option: str, how: str
) -> None:
    flags, name = INPUTS[kind]
    folder = folder_package(work)
    target = work / name.replace("FOLDER", str(folder.relative_to(work)))
    before = digest(target)
    package = str(folder) if kind == "folder-member" else "pkg.pt2"
    out = _link(work, target, how)
    code = main(["check", package, *STATIC, *flags, *OUTPUTS[option](out)])
    err = capsys.readouterr().err
    assert code == 2, err
    one_error_line(err)
    assert "refusing to overwrite" in err and option in err
    assert digest(target) == before
    assert os.path.islink(work / out) == (how == "symlink")


@pytest.mark.parametrize("option", list(OUTPUTS))
def test_check_outputs_inside_a_folder_package_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    folder = folder_package(work)
    (work / "into").symlink_to(folder / "data")
    for out in (f"{folder}/report.json", "into/report.json", f"{folder}/new/../report.json"):
        code = main(["check", str(folder), *STATIC, *OUTPUTS[option](out)])
        err = capsys.readouterr().err
        assert code == 2, (out, err)
        one_error_line(err)
        assert "inside the input folder" in err
        assert not (folder / "report.json").exists() and not (folder / "data/report.json").exists()


def test_cache_and_artifacts_folders_inside_a_folder_package_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_package(work)
    for option in ("--cache-dir", "--artifacts"):
        code = main(["check", str(folder), *STATIC, option, f"{folder}/cache"])
        err = capsys.readouterr().err
        assert code == 2 and "inside the input folder" in err and option in err, err
        one_error_line(err)
    assert not (folder / "cache").exists()


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_doctor_report_never_replaces_an_interpreter(
    work: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    before = digest(work / "fakepy")
    out = _link(work, work / "fakepy", how)
    code = main(["doctor", "--python", "./fakepy", "--report", f"json:{out}"])
    err = capsys.readouterr().err
    assert code == 2, err
    one_error_line(err)
    assert "refusing to overwrite" in err  # refused before the interpreter is even probed
    assert digest(work / "fakepy") == before


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
@pytest.mark.parametrize("source", ["package", "--exported-program", "--inputs", "--expected"])
def test_bundle_never_replaces_one_of_its_sources(
    work: Path, capsys: pytest.CaptureFixture[str], source: str, how: str
) -> None:
    files = {"package": "pkg.pt2", "--exported-program": "ep.pt2", "--inputs": "expected.pt"}
    files["--expected"] = "expected.pt"
    target = work / files[source]
    before = digest(target)
    out = _link(work, target, how)
    extra = [] if source == "package" else [source, files[source]]
    if source != "--exported-program":
        extra += ["--exported-program", "ep.pt2"]
    code = main(["bundle", "pkg.pt2", "-o", out, *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    one_error_line(err)
    assert "would overwrite one of the bundle's own sources" in err
    assert digest(target) == before
    assert os.path.islink(work / out) == (how == "symlink")


def test_bundle_output_inside_a_folder_package_is_refused(
    work: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    with zipfile.ZipFile(pkg("both")) as zf:
        zf.extractall(work / "both")
    (root,) = (work / "both").iterdir()
    code = main(["bundle", str(root), "-o", f"{root}/bundle.pt2"])
    err = capsys.readouterr().err
    assert code == 2, err
    one_error_line(err)
    assert "inside the input folder" in err and not (root / "bundle.pt2").exists()


def test_bundle_through_a_link_to_a_fifo_keeps_the_link_and_never_hangs(
    work: Path, pkg: Pkg
) -> None:
    os.mkfifo(work / "pipe")
    (work / "out.pt2").symlink_to("pipe")
    r = cli(["bundle", str(pkg("both")), "-o", "out.pt2"], work, timeout=30)
    assert r.returncode == 2, r.stderr
    one_error_line(r.stderr)
    assert "nothing reads from it" in r.stderr
    assert os.path.islink(work / "out.pt2") and os.readlink(work / "out.pt2") == "pipe"
    assert stat.S_ISFIFO(os.lstat(work / "pipe").st_mode)
    assert sorted(p.name for p in work.iterdir() if p.name.startswith(".")) == []  # no temp file


def test_a_link_to_a_fifo_with_a_reader_is_written_in_place(work: Path, pkg: Pkg) -> None:
    os.mkfifo(work / "pipe")
    (work / "out.pt2").symlink_to("pipe")
    got: list[bytes] = []
    opening = threading.Event()

    def read() -> None:
        opening.set()
        with open(work / "pipe", "rb") as fh:  # blocks until the writer comes
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    opening.wait(10)
    time.sleep(0.2)  # the reader is in open() long before aotipre has started
    r = cli(["bundle", str(pkg("both")), "-o", "out.pt2"], work, timeout=60)
    reader.join(30)
    assert r.returncode == 0, r.stderr
    (data,) = got
    assert os.path.islink(work / "out.pt2") and stat.S_ISFIFO(os.lstat(work / "pipe").st_mode)
    assert data[:4] == b"PK\x03\x04" and len(data) > 1_000_000


def test_dev_null_still_works(work: Path, pkg: Pkg) -> None:
    for args in (
        ["check", "pkg.pt2", *STATIC, "-o", "/dev/null"],
        ["check", "pkg.pt2", *STATIC, "--report", "json:/dev/null"],
        ["check", "pkg.pt2", *STATIC, "--write-baseline", "/dev/null"],
        ["bundle", str(pkg("both")), "-o", "/dev/null"],
    ):
        r = cli(args, work)
        assert r.returncode == 0, (args, r.stderr)
        assert r.stderr == "", (args, r.stderr)
    assert Path("/dev/null").is_char_device()


def test_a_missing_output_folder_is_one_line_and_never_created(work: Path, pkg: Pkg) -> None:
    for args in (
        ["check", "pkg.pt2", *STATIC, "-o", "nodir/r.json"],
        ["check", "pkg.pt2", *STATIC, "-o", "nodir/sub/../r.json"],
        ["bundle", str(pkg("both")), "-o", "nodir/b.pt2"],
    ):
        r = cli(args, work)
        assert r.returncode == 2, (args, r.stderr)
        one_error_line(r.stderr)
        assert "no such folder" in r.stderr or "No such file" in r.stderr, r.stderr
        assert not (work / "nodir").exists()
    (work / "afile").write_text("x")
    r = cli(["check", "pkg.pt2", *STATIC, "-o", "afile/r.json"], work)
    assert r.returncode == 2 and "not a folder" in r.stderr, r.stderr


def test_report_and_baseline_folders_are_created_as_documented(work: Path) -> None:
    """docs/ci.md: --report creates its folder; a baseline goes to ci/baseline.json."""
    r = cli(["check", "pkg.pt2", *STATIC, "--report", "json:reports/r.json",
             "--write-baseline", "ci/base.json"], work)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (work / "reports/r.json").is_file() and (work / "ci/base.json").is_file()


def test_a_bundle_gets_the_umask_like_every_output(work: Path, pkg: Pkg) -> None:
    r = subprocess.run(
        ["sh", "-c", f'umask 027 && exec "{sys.executable}" -m aotipre bundle "$0" -o b.pt2',
         str(pkg("both"))],
        cwd=work, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(work / "b.pt2").st_mode) == 0o640


def test_the_bundle_line_escapes_control_and_bidi_characters(
    work: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "b\x1b[2J\u202eevil.pt2"
    assert main(["bundle", str(pkg("both")), "-o", name]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "wrote b\\x1b[2J\\u202eevil.pt2" in out
    assert "aotipre check b\\x1b[2J\\u202eevil.pt2" in out
    assert (work / name).is_file()


def test_the_doctor_headers_escape_control_and_bidi_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json
    from types import SimpleNamespace

    from aotipre.cli import commands
    from aotipre.doctor import render as doctor_render

    monkeypatch.setattr(doctor_render, "render", lambda r, fmt: "{}" if fmt == "json" else "x\n")
    rt = SimpleNamespace(shown="/opt/\x1b[31mpy\u202e", torch_version="2.13\x07")
    results = [(rt, SimpleNamespace(exit_code=0)), (rt, SimpleNamespace(exit_code=0))]
    table = commands._render_doctors(results, "table")
    assert "\x1b" not in table and "\u202e" not in table and "\x07" not in table
    assert "=== --python /opt/\\x1b[31mpy\\u202e (torch 2.13\\x07)" in table
    data = json.loads(commands._render_doctors(results, "json"))
    assert data["runtimes"][0]["python"] == rt.shown  # JSON escapes for itself


def test_an_output_that_cannot_be_written_is_refused_before_the_run(work: Path) -> None:
    """A dynamic check with `-o` into a missing folder (or `--report` onto a folder) stops
    before any worker starts: the fake worker, which would record its job, never runs."""
    fake = Path(__file__).resolve().parents[1] / "fakes"
    ran = work / "ran"
    (work / "marker_worker.py").write_text(
        f"import pathlib, runpy, sys\npathlib.Path({str(ran)!r}).write_text('ran')\n"
        f"runpy.run_path({str(fake / 'fake_torch_worker.py')!r}, run_name='__main__')\n"
    )
    (work / "adir").mkdir()
    for outputs in (["-o", "nodir/r.json"], ["--report", "json:adir"]):
        r = subprocess.run(
            [sys.executable, str(fake / "cli_with_fake_worker.py"), str(work / "marker_worker.py"),
             "check", "against.pt2", "--no-config", *outputs],
            cwd=work, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
            env={**os.environ, "AOTIPRE_PREWARM_FIRST": "0", "AOTIPRE_FAKE_SCRIPT": "{}"},
        )  # fmt: skip
        assert r.returncode == 2, (outputs, r.stderr)
        one_error_line(r.stderr)
        assert not ran.exists(), outputs
    # the same check with a writable report runs its worker (the marker is not blind)
    r = subprocess.run(
        [sys.executable, str(fake / "cli_with_fake_worker.py"), str(work / "marker_worker.py"),
         "check", "against.pt2", "--no-config", "-o", "r.json", "--format", "json"],
        cwd=work, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "AOTIPRE_PREWARM_FIRST": "0", "AOTIPRE_FAKE_SCRIPT": "{}"},
    )  # fmt: skip
    assert ran.exists(), r.stderr
