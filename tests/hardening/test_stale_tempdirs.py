"""The folders a SIGKILLed aotipre leaves in the temp dir are swept (aotipre/foundation/tempdirs.py): only
aotipre's, only this user's, never through a link, only once their owner process is gone (a
reused pid is not the owner) and the grace period is over; folders of older versions (no owner
record) only after a day. Ends with a real `aotipre check` killed by SIGKILL mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aotipre.foundation import tempdirs
from aotipre.foundation.errors import UsageError

ME = tempdirs._this_process()
pytestmark = pytest.mark.skipif(ME is None, reason="needs Linux's /proc")
FAKES = Path(__file__).resolve().parents[1] / "fakes"
FAKE_WORKER = str(FAKES / "fake_torch_worker.py")
FAKE_CLI = str(FAKES / "cli_with_fake_worker.py")
HOUR = 3600.0
Pkg = Callable[[str], Path]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temp dir: tempfile.gettempdir() (and TMPDIR) for the test."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture(scope="module")
def dead() -> tuple[int, int]:
    """(pid, start time) of a process that ran and is gone."""
    proc = subprocess.Popen(["sleep", "60"])
    start = tempdirs._start_time(proc.pid)
    proc.kill()
    proc.wait()
    assert start is not None and tempdirs._start_time(proc.pid) is None
    return proc.pid, start


def record(pid: int, start: int, **other: Any) -> dict[str, Any]:
    assert ME is not None
    return {"pid": pid, "start": start, "boot": ME.boot, "pidns": ME.pidns, **other}


def age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when), follow_symlinks=False)


def folder(parent: Path, name: str, owner: dict[str, Any] | str | None, age_s: float) -> Path:
    """A folder as aotipre leaves it (a job file, a tmp/ folder), with `owner` as its record
    (a dict: JSON; a str: the record's raw text; None: no record), last changed `age_s` ago."""
    path = parent / name
    path.mkdir(mode=0o700)
    (path / "job0.json").write_text("{}")
    (path / "tmp").mkdir()
    if owner is not None:
        text = owner if isinstance(owner, str) else json.dumps(owner)
        (path / tempdirs.RECORD).write_text(text)
    age(path, age_s)
    return path


def test_a_dead_owners_old_folder_is_removed(root: Path, dead: tuple[int, int]) -> None:
    gone = folder(root, "aotipre-dead0001", record(*dead), 2 * tempdirs.GRACE_S)
    assert tempdirs.sweep() == [str(gone)]
    assert not gone.exists()


def test_a_live_owners_old_folder_is_kept(root: Path) -> None:
    assert ME is not None
    kept = folder(
        root, "aotipre-live0001", record(os.getpid(), ME.start), 2 * tempdirs.UNOWNED_AGE_S
    )
    assert tempdirs.sweep() == []
    assert (kept / "job0.json").is_file()


def test_a_dead_owners_fresh_folder_is_kept_for_the_grace_period(
    root: Path, dead: tuple[int, int]
) -> None:
    fresh = folder(root, "aotipre-dead0002", record(*dead), tempdirs.GRACE_S - 60)
    assert tempdirs.sweep() == []
    assert fresh.is_dir()
    assert tempdirs.sweep(grace_s=0) == [str(fresh)]  # the test hook: no grace at all


def test_a_reused_pid_is_not_the_owner(root: Path) -> None:
    assert ME is not None  # this pid is alive, but it is not the process that made the folder
    reused = folder(root, "aotipre-reused01", record(os.getpid(), ME.start - 1), HOUR)
    assert tempdirs.sweep() == [str(reused)]


def test_a_symlink_is_never_followed_nor_removed(
    root: Path, tmp_path: Path, dead: tuple[int, int]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = folder(elsewhere, "aotipre-target01", record(*dead), 2 * tempdirs.UNOWNED_AGE_S)
    bare = folder(elsewhere, "aotipre-target02", None, 2 * tempdirs.UNOWNED_AGE_S)
    links = [root / "aotipre-x", root / "aotipre-link0001"]
    for link, to in zip(links, (target, bare)):
        link.symlink_to(to, target_is_directory=True)
        age(link, 2 * tempdirs.UNOWNED_AGE_S)
    assert tempdirs.sweep() == []
    assert all(link.is_symlink() for link in links)
    assert (target / "job0.json").is_file() and (bare / "job0.json").is_file()


def test_what_is_not_an_aotipre_folder_is_untouched(root: Path, dead: tuple[int, int]) -> None:
    long_ago = 2 * tempdirs.UNOWNED_AGE_S
    others = [
        folder(root, "other-dead0001", record(*dead), long_ago),
        folder(root, "aotipre_dead0001", record(*dead), long_ago),
        folder(root, "Aotipre-dead0001", None, long_ago),
    ]
    plain = root / "aotipre-file0001"
    plain.write_text(json.dumps(record(*dead)))
    age(plain, long_ago)
    assert tempdirs.sweep() == []
    assert all(p.is_dir() for p in others) and plain.is_file()


def test_a_folder_without_a_record_waits_a_day(root: Path) -> None:
    day = tempdirs.UNOWNED_AGE_S
    young = folder(root, "aotipre-young001", None, day - HOUR)
    old = [
        folder(root, "aotipre-olderr01", None, day + HOUR),
        folder(root, "aotipre-worker-old00002", None, day + HOUR),
        folder(root, "aotipre-ray-old00003", None, day + HOUR),
        folder(root, "aotipre-garbled1", '{"pid": ', day + HOUR),  # a garbled record: none
        folder(root, "aotipre-badpid01", json.dumps(record(0, 1)), day + HOUR),
    ]
    # not a name aotipre's mkdtemp gave: someone's own folder, whatever its age
    own = [folder(root, name, None, 30 * day) for name in ("aotipre-results", "aotipre-x")]
    assert sorted(tempdirs.sweep()) == sorted(str(p) for p in old)
    assert young.is_dir() and all(p.is_dir() for p in own)


def test_a_record_of_another_boot_or_pid_namespace_waits_a_day(
    root: Path, dead: tuple[int, int]
) -> None:
    day = tempdirs.UNOWNED_AGE_S
    pid, start = dead
    foreign = [
        folder(root, "aotipre-boot0001", record(pid, start, boot="another"), day - HOUR),
        folder(root, "aotipre-pidns001", record(pid, start, pidns="pid:[1]"), day - HOUR),
    ]
    assert tempdirs.sweep() == []  # its pid may be alive there: this /proc cannot tell
    for path in foreign:
        age(path, day + HOUR)
    assert sorted(tempdirs.sweep()) == sorted(str(p) for p in foreign)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_folder_is_untouched(root: Path, dead: tuple[int, int]) -> None:
    theirs = folder(root, "aotipre-theirs01", record(*dead), 2 * tempdirs.UNOWNED_AGE_S)
    os.chown(theirs, 65534, 65534)
    age(theirs, 2 * tempdirs.UNOWNED_AGE_S)
    mine = folder(root, "aotipre-mine0001", record(*dead), HOUR)
    os.chown(mine / tempdirs.RECORD, 65534, 65534)  # another user's record: as none (a day)
    assert tempdirs.sweep() == []
    assert theirs.is_dir() and mine.is_dir()


def test_the_work_of_one_sweep_is_bounded(
    root: Path, dead: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = [folder(root, f"aotipre-stale{i:03d}", record(*dead), HOUR) for i in range(5)]
    monkeypatch.setattr(tempdirs, "MAX_ENTRIES", 0)
    assert tempdirs.sweep() == []
    monkeypatch.setattr(tempdirs, "MAX_ENTRIES", 10_000)
    monkeypatch.setattr(tempdirs, "MAX_REMOVED", 2)
    assert len(tempdirs.sweep()) == 2
    assert len(tempdirs.sweep()) == 2
    assert len(tempdirs.sweep()) == 1
    assert not any(p.exists() for p in stale)


def test_sweeps_racing_each_other_and_folders_vanishing_are_fine(
    root: Path, dead: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = [folder(root, f"aotipre-race{i:04d}", record(*dead), HOUR) for i in range(40)]
    errors: list[BaseException] = []

    def one() -> None:
        try:
            tempdirs.sweep()
        except Exception as exc:  # any escape is the failure
            errors.append(exc)

    monkeypatch.setattr(tempdirs, "MAX_REMOVED", 100)
    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and not any(p.exists() for p in stale)
    # a folder removed by someone else between the listing and the look at it
    vanishing = folder(root, "aotipre-vanish01", record(*dead), HOUR)
    judge = tempdirs._is_stale

    def vanish_first(path: str, *args: Any) -> bool:
        if path == str(vanishing):
            (vanishing / tempdirs.RECORD).unlink()
            for sub in ("job0.json", "tmp"):
                p = vanishing / sub
                p.rmdir() if p.is_dir() else p.unlink()
            vanishing.rmdir()
        return judge(path, *args)

    monkeypatch.setattr(tempdirs, "_is_stale", vanish_first)
    assert tempdirs.sweep() == []


def test_made_folders_name_their_owner(root: Path) -> None:
    made = Path(tempdirs.make_dir("aotipre-worker-"))
    assert made.parent == root and made.name.startswith("aotipre-worker-")
    assert oct(made.stat().st_mode & 0o777) == "0o700"
    owner = json.loads((made / tempdirs.RECORD).read_text())
    assert ME is not None and owner == record(os.getpid(), ME.start)
    assert tempdirs.sweep(grace_s=0) == [] and made.is_dir()  # alive: kept, however old
    with tempdirs.temporary_dir("aotipre-doctor-") as work:
        assert (Path(work) / tempdirs.RECORD).is_file()
    assert not Path(work).exists()


def test_without_proc_nothing_is_recorded_nor_swept(
    root: Path, dead: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = folder(root, "aotipre-stale001", record(*dead), 2 * tempdirs.UNOWNED_AGE_S)
    monkeypatch.setattr(tempdirs, "_this_process", lambda: None)
    made = Path(tempdirs.make_dir())
    assert list(made.iterdir()) == []
    assert tempdirs.sweep() == [] and stale.is_dir()


# --------------------------------------------------------------------------------------------
# End to end: `aotipre check` killed by SIGKILL while its worker runs


def _cli(grace_s: float | None = None) -> list[str]:
    """`aotipre` with the fake worker (tests/fakes/cli_with_fake_worker.py); `grace_s`:
    tempdirs.GRACE_S in that process (the test hook)."""
    patch = "" if grace_s is None else f"tempdirs.GRACE_S = {grace_s!r}; "
    code = (
        "import runpy, sys; from aotipre.foundation import tempdirs; "
        f"{patch}sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return [sys.executable, "-c", code, FAKE_CLI, FAKE_WORKER]


def _env(tmp: Path, cwd: Path, fake: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TMPDIR=str(tmp),
        XDG_CACHE_HOME=str(cwd / "xdg-cache"),
        AOTIPRE_FAKE_SCRIPT=json.dumps(fake),
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def _glob(folder: Path, pattern: str) -> list[Path]:
    """`folder.glob(pattern)` while aotipre runs: a folder it removes between the listing and
    the scan (a prewarm worker's, once claimed) is no match, not an error."""
    try:
        return list(folder.glob(pattern))
    except FileNotFoundError:
        return []


@pytest.fixture
def killed_run(pkg: Pkg, tmp_path: Path) -> Iterator[tuple[Path, Path, list[str]]]:
    """(TMPDIR, cwd, check args) after an `aotipre check` there was SIGKILLed mid-run."""
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    for d in (tmp, cwd / ".git"):  # .git: the configuration search stops here
        d.mkdir(parents=True)
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "json"]
    args.append("--no-progress")
    fake = {"run": {"hang_hard": True}}
    proc = subprocess.Popen(
        [*_cli(), *args],
        cwd=cwd,
        env=_env(tmp, cwd, fake),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (_glob(tmp, "aotipre-*/job*.json") and _glob(tmp, "aotipre-worker-*")):
            assert proc.poll() is None, "aotipre ended before its worker ran"
            assert time.monotonic() < deadline, "no worker started within 60 s"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the aotipre process only: as the OOM killer does
        proc.wait()
        yield tmp, cwd, args
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_killed_checks_folders_are_swept_by_the_next_command(
    killed_run: tuple[Path, Path, list[str]],
) -> None:
    tmp, cwd, args = killed_run
    left = sorted(p for p in tmp.iterdir() if p.name.startswith("aotipre-"))
    assert any(p.name.startswith("aotipre-worker-") for p in left), left
    assert any(list(p.glob("job*.json")) for p in left), left  # the session's work folder
    assert all((p / tempdirs.RECORD).is_file() for p in left)  # the bug: they stay
    assert ME is not None  # a folder of a live aotipre (this process) in the same TMPDIR
    live = folder(tmp, "aotipre-live0001", record(os.getpid(), ME.start), HOUR)
    done = subprocess.run(
        [*_cli(grace_s=0.0), *args],
        cwd=cwd,
        env=_env(tmp, cwd, {}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p for p in left if os.path.lexists(p)] == []
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("aotipre-")) == [live.name]


# --- a temp dir other users can write to (issue #46, item 6) ----------------------------------


def test_a_temp_dir_others_can_write_to_is_refused_unless_sticky(root: Path) -> None:
    # another user could rename aotipre's folder away and put their own, with a job file that a
    # worker runs as this user, in its place: refused, as a cache folder would be
    root.chmod(0o777)
    with pytest.raises(UsageError, match="writable by group or others") as refused:
        tempdirs.make_dir("aotipre-")
    assert str(root) in refused.value.message and "TMPDIR" in refused.value.hint
    with pytest.raises(UsageError), tempdirs.temporary_dir("aotipre-"):
        pass
    assert list(root.iterdir()) == []
    root.chmod(0o1777)  # sticky, as /tmp: nobody may rename another user's entries
    assert Path(tempdirs.make_dir("aotipre-")).parent == root


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_temp_dir_of_another_user_is_refused(root: Path) -> None:
    import pwd

    root.chmod(0o1777)
    os.chown(root, pwd.getpwnam("nobody").pw_uid, -1)  # its owner may rename anything in it
    with pytest.raises(UsageError, match="owned by uid"):
        tempdirs.make_dir("aotipre-")
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("first_worker", ["1", "0"])
def test_a_check_in_an_unsafe_temp_dir_says_so_in_one_line(
    tmp_path: Path, pkg: Pkg, first_worker: str
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o777)
    done = subprocess.run(
        [sys.executable, "-m", "aotipre", "check", str(pkg("aoti")), "--inputs",
         str(pkg("aoti_inputs")), "--no-config", "--no-progress"],
        env={**os.environ, "TMPDIR": str(tmp), "AOTIPRE_PREWARM_FIRST": first_worker},
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith(f"aotipre: error: the temporary folder {tmp} is not safe")
    assert done.stderr.count("\n") == 1, done.stderr
    assert list(tmp.iterdir()) == []
