"""--python names exactly the file given, and the interpreter probe runs contained like every
worker (issue #30): fake interpreters (shell scripts) that are another file than the one on PATH,
flood their output, leave a daemon behind or hold their stdout open."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aotipre import config
from aotipre.cli import main
from aotipre.environment import runtimes
from aotipre.foundation.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


def answer(torch: str) -> str:
    """The line the probe reads from the interpreter's stdout."""
    info = {
        "python": "3.12.0",
        "version_info": [3, 12],
        "executable": "/fake/python",
        "torch": torch,
        "torch_path": "/fake/torch",
    }
    return "@@aotipre-probe " + json.dumps(info)


def fake_python(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def answering(path: Path, torch: str) -> Path:
    return fake_python(path, f"echo '{answer(torch)}'")


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    """Each test probes anew (the module remembers interpreters it probed)."""
    saved = dict(runtimes._PROBED)
    runtimes._PROBED.clear()
    yield
    runtimes._PROBED.clear()
    runtimes._PROBED.update(saved)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def marker_pids(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Marker files in which a fake writes the pid of a process it started; any such process
    still alive at the end is killed (the test has failed then)."""
    made: list[Path] = []

    def marker(name: str) -> Path:
        path = tmp_path / f"{name}.pid"
        made.append(path)
        return path

    yield marker
    for path in made:
        if path.exists() and path.read_text().strip().isdigit():
            pid = int(path.read_text())
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


# --- which file is probed ------------------------------------------------------------------------


@pytest.fixture
def two_pythons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `python` in the working folder and another one on PATH, each with its own torch."""
    work = tmp_path / "work"
    answering(work / "python", "2.13.0+cwd")
    answering(tmp_path / "bin" / "python", "2.13.0+path")
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return work


@pytest.mark.parametrize("given", ["./python", "ABSOLUTE"])
def test_a_path_in_the_working_folder_is_that_file_not_the_one_on_path(
    two_pythons: Path, given: str
) -> None:
    value = str(two_pythons / "python") if given == "ABSOLUTE" else given
    (shown,) = config.parse_flags({"python": [value]})["python"]
    assert "/" in shown, "shown short, but still a path"
    runtime = runtimes.probe(shown)
    assert runtime.torch_version == "2.13.0+cwd"
    assert runtime.python == str(two_pythons / "python")
    assert os.path.samefile(shown, runtime.python)


def test_a_bare_name_is_looked_up_on_path(two_pythons: Path) -> None:
    (shown,) = config.parse_flags({"python": ["python"]})["python"]
    assert shown == "python"
    assert runtimes.probe(shown).torch_version == "2.13.0+path"


def test_a_config_file_s_path_is_relative_to_its_folder(two_pythons: Path) -> None:
    conf = two_pythons / "conf"
    answering(conf / "python", "2.13.0+conf")
    (conf / "aotipre.toml").write_text('python = "./python"\n')
    values = config.parse_values({"python": "./python"}, "aotipre.toml", conf)
    (shown,) = values["python"]
    assert shown == "conf/python"
    assert runtimes.probe(shown).torch_version == "2.13.0+conf"


def test_the_command_line_probes_the_file_given(
    two_pythons: Path, tmp_path: Path, pkg: Callable[[str], Path], capsys: pytest.CaptureFixture
) -> None:
    # unsupported torch versions: the probe's one line names the torch it read, so which file
    # was probed shows, and nothing else runs
    answering(two_pythons / "python", "2.9.0+cwd")
    answering(tmp_path / "bin" / "python", "2.9.0+path")
    for given in ("./python", str(two_pythons / "python")):
        assert main(["check", str(pkg("aoti")), "--python", given, "--no-config"]) == 2
        err = capsys.readouterr().err
        assert "torch 2.9.0+cwd" in err and err.count("\n") == 1, err
    (two_pythons / "aotipre.toml").write_text('python = "./python"\n')
    assert main(["check", str(pkg("aoti"))]) == 2
    assert "torch 2.9.0+cwd" in capsys.readouterr().err
    assert main(["doctor", "--python", "./python"]) == 2
    assert "torch 2.9.0+cwd" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given, words",
    [
        ("./missing", "no such file"),
        ("./folder", "a folder, not an interpreter"),
        ("./noexec", "not executable"),
    ],
)
def test_a_path_that_is_no_interpreter_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, words: str
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "noexec").write_text("#!/bin/sh\n")
    # a working `missing` on PATH must not be taken instead
    answering(tmp_path / "bin" / "missing", "2.13.0")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    (shown,) = config.parse_flags({"python": [given]})["python"]
    with pytest.raises(UsageError) as err:
        runtimes.probe(shown)
    assert words in str(err.value) and "\n" not in str(err.value)


# --- the probe is contained ----------------------------------------------------------------------

_MEASURE = """
import json, sys, time
from aotipre.environment import runtimes
from aotipre.foundation.errors import UsageError
start = time.monotonic()
try:
    message = "ok " + runtimes.probe(sys.argv[1]).torch_version
except UsageError as exc:
    message = str(exc)
# VmHWM, not ru_maxrss: the latter survives exec, so it would be the forking pytest's peak
with open("/proc/self/status") as f:
    hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(json.dumps({"message": message, "seconds": time.monotonic() - start, "maxrss_kb": hwm}))
"""


@pytest.mark.parametrize("answer_first", [False, True])
def test_a_flood_of_output_is_bounded(tmp_path: Path, answer_first: bool) -> None:
    # 2.5 GB of output: before, aotipre kept all of it (7.2 GB of RSS, 15 s); now only the end
    line = f"echo '{answer('2.13.0')}'"
    flood = "head -c 2500000000 /dev/zero; echo"
    body = f"{line}\n{flood}" if answer_first else f"{flood}\n{line}"
    python = fake_python(tmp_path / "flood", body)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(python)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["maxrss_kb"] < 200 * 1024, out
    if answer_first:  # the answer scrolled out of the kept end: one clear line
        assert "without answering the probe, after 2500000" in out["message"], out
        assert "\n" not in out["message"]
    else:
        assert out["message"] == "ok 2.13.0", out


@pytest.mark.parametrize("detach", ["setsid", "nohup"])
def test_a_daemon_the_interpreter_starts_is_reaped(
    tmp_path: Path, marker_pids: Callable[[str], Path], detach: str
) -> None:
    marker = marker_pids("daemon")
    python = fake_python(
        tmp_path / "python",
        f"{detach} sleep 1000 </dev/null >/dev/null 2>&1 &\n"
        f"echo $! > {marker}\n"
        f"echo '{answer('2.13.0')}'",
    )
    assert runtimes.probe(str(python)).torch_version == "2.13.0"
    pid = int(marker.read_text())
    assert gone_within(pid, 5.0), f"the daemon {pid} outlived the probe"


def test_a_child_holding_stdout_open_does_not_stall_the_probe(
    tmp_path: Path, marker_pids: Callable[[str], Path]
) -> None:
    marker = marker_pids("holder")
    python = fake_python(
        tmp_path / "python",
        f"echo '{answer('2.13.0')}'\nsleep 1000 &\necho $! > {marker}\nexit 0",
    )
    start = time.monotonic()
    assert runtimes.probe(str(python), timeout_s=30.0).torch_version == "2.13.0"
    assert time.monotonic() - start < 10.0, "waited for the stdout the child held"
    assert gone_within(int(marker.read_text()), 5.0)


def test_an_interpreter_that_never_answers_is_cut_at_the_timeout(
    tmp_path: Path, marker_pids: Callable[[str], Path]
) -> None:
    marker = marker_pids("hang")
    python = fake_python(tmp_path / "python", f"sleep 1000 &\necho $! > {marker}\nexec sleep 1000")
    start = time.monotonic()
    with pytest.raises(UsageError) as err:
        runtimes.probe(str(python), timeout_s=1.0)
    assert time.monotonic() - start < 10.0
    assert str(err.value) == f"--python {python}: did not answer within 1 s"
    assert gone_within(int(marker.read_text()), 5.0)
