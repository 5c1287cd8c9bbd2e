"""aotipre's top-level temporary folders: made with an owner record, swept once the owner is gone.

aotipre removes its folders when it ends, even on Ctrl-C; a process that is SIGKILLed (a Ray
worker killed by its node, the OOM killer, `kill -9` of a CI job) cannot. Every folder aotipre
makes directly in the system temp dir is therefore made here (`make_dir`, `temporary_dir`) with
an owner record inside (`.aotipre-owner`: the creating process's pid, its start time from
/proc/PID/stat, the boot and the pid namespace), and each command that runs workers calls
`sweep` once, which removes the folders whose owner is gone.

`sweep` removes an entry of the temp dir only when all of these hold:
  - its name starts with `aotipre-`, it is a directory (`lstat`: a symlink is never followed
    nor removed) and it belongs to this user;
  - its mtime is at least `GRACE_S` (10 minutes) old: a folder being made now is never touched;
  - with an owner record of this boot and pid namespace: no process has that pid, or the one
    that has it started at another time (the pid was reused);
  - with no readable record (older aotipre versions, or a record of another boot, machine or
    pid namespace, whose processes cannot be looked up from here): its mtime is at least
    `UNOWNED_AGE_S` (a day) old, and, without a record, its name is one aotipre's mkdtemp made
    (`aotipre-` or `aotipre-<kind>-` and 8 random characters: `aotipre-results` is not).
Work is bounded: at most `MAX_ENTRIES` entries of the temp dir are looked at and `MAX_REMOVED`
folders removed per sweep. Another aotipre sweeping at the same time is harmless (whatever is
already gone is skipped). Without Linux's /proc (or with a /proc of another pid namespace) no
record is written and `sweep` does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

PREFIX = "aotipre-"
"""Every top-level folder aotipre makes starts with it (`aotipre-`, `aotipre-worker-`, ...)."""
RECORD = ".aotipre-owner"
"""The owner record's file name inside a folder."""
GRACE_S = 600.0
"""A folder whose mtime is younger than this is never removed, whatever its record says."""
UNOWNED_AGE_S = 86400.0
"""A folder without a usable owner record is removed only when its mtime is older than this."""
MAX_ENTRIES = 10_000
"""Entries of the temp dir looked at per sweep (a huge /tmp costs no more than this)."""
MAX_REMOVED = 32
"""Folders removed per sweep; the rest wait for the next command."""
_RECORD_MAX_BYTES = 4096
_LEGACY_NAME = re.compile(
    r"aotipre-(?:(?:worker|ray|hello|triage|doctor|canary|program)-)?[a-z0-9_]{8}\Z"
)
"""The names tempfile.mkdtemp gave aotipre's folders (8 characters of its alphabet)."""


@dataclass(frozen=True)
class Owner:
    """The process that made a folder, as its record names it."""

    pid: int
    start: int
    """Its start time (clock ticks after boot, field 22 of /proc/PID/stat)."""
    boot: str
    """/proc/sys/kernel/random/boot_id when it ran."""
    pidns: str
    """Its pid namespace (`pid:[N]`): its pid means nothing in another one."""


def make_dir(prefix: str = PREFIX, dir: str | None = None) -> str:
    """`tempfile.mkdtemp(prefix=prefix, dir=dir)` with this process's owner record inside (none
    where /proc cannot name this process; a record that cannot be written is left out: such a
    folder is then swept only after UNOWNED_AGE_S). UsageError when `dir` (default: the temp
    dir) is not safe to make it in (`require_safe`)."""
    import tempfile  # imported where used: a static check makes no folder (start-up time)

    folder = tempfile.mkdtemp(prefix=prefix, dir=require_safe(dir))
    _write_record(folder)
    return folder


@contextlib.contextmanager
def temporary_dir(prefix: str = PREFIX, dir: str | None = None) -> Iterator[str]:
    """`tempfile.TemporaryDirectory(prefix=prefix, dir=dir)` (removed as it removes it) with
    this process's owner record inside. UsageError as make_dir."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix, dir=require_safe(dir)) as folder:
        _write_record(folder)
        yield folder


def require_safe(directory: str | None = None) -> str:
    """`directory` (default: the temp dir, from TMPDIR), checked as a cache folder is
    (runner/cache.py root_problem): owned by this user or root, and not writable by group or
    others unless sticky. Anywhere else another user could rename aotipre's folder away and put
    one of their own in its place, whose job file a worker would run as this user: UsageError
    naming the folder, never a fall-back to a folder the user did not choose."""
    import tempfile

    from aotipre.foundation.errors import UsageError
    from aotipre.runner.cache import root_problem

    folder = directory if directory is not None else tempfile.gettempdir()
    why = root_problem(folder)
    if why is None:
        return folder
    raise UsageError(
        f"the temporary folder {folder} is not safe for aotipre's work files: {why}, so another "
        "user could replace them and run code as you",
        "set TMPDIR to a folder only you can write to, e.g. `mkdir -m 700 ~/tmp; "
        "export TMPDIR=~/tmp`",
    )


def sweep(
    directory: str | None = None,
    *,
    grace_s: float | None = None,
    unowned_age_s: float | None = None,
) -> list[str]:
    """Remove the stale aotipre folders of `directory` (default: the temp dir) by the rules of
    the module docstring; the paths removed. Never raises. `grace_s` and `unowned_age_s` (None:
    GRACE_S and UNOWNED_AGE_S, read at the call, so a test may patch them) are for tests."""
    grace_s = GRACE_S if grace_s is None else grace_s
    unowned_age_s = UNOWNED_AGE_S if unowned_age_s is None else unowned_age_s
    me = _this_process()
    if me is None:
        return []
    import tempfile

    root = directory if directory is not None else tempfile.gettempdir()
    removed: list[str] = []
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_ENTRIES or len(removed) >= MAX_REMOVED:
                break
            if not entry.name.startswith(PREFIX):
                continue
            with contextlib.suppress(OSError):
                if _is_stale(entry.path, me, now, grace_s, unowned_age_s):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    if not os.path.lexists(entry.path):
                        removed.append(entry.path)
    return removed


def _is_stale(path: str, me: Owner, now: float, grace_s: float, unowned_age_s: float) -> bool:
    """Whether the folder at `path` may be removed (OSError: it may not, or it is gone)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        age = now - st.st_mtime
        if age < grace_s:
            return False
        owner = _read_record(fd)
    finally:
        os.close(fd)
    if owner is None:
        return age >= unowned_age_s and _LEGACY_NAME.match(os.path.basename(path)) is not None
    if (owner.boot, owner.pidns) != (me.boot, me.pidns):
        return age >= unowned_age_s
    try:
        return _start_time(owner.pid) != owner.start
    except (OSError, ValueError, IndexError):
        return False  # /proc has the pid but cannot say when it started: keep the folder


def _read_record(folder_fd: int) -> Owner | None:
    """The owner record in the open folder: a regular file of this user, well formed; else
    None."""
    try:
        fd = os.open(
            RECORD,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=folder_fd,
        )
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        data = json.loads(os.read(fd, _RECORD_MAX_BYTES))
        owner = Owner(pid=data["pid"], start=data["start"], boot=data["boot"], pidns=data["pidns"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    finally:
        os.close(fd)
    ints = all(type(v) is int and v > 0 for v in (owner.pid, owner.start))
    texts = all(isinstance(v, str) for v in (owner.boot, owner.pidns))
    return owner if ints and texts else None


def _write_record(folder: str) -> None:
    """This process's owner record in `folder` (just made, this user's); never raises."""
    me = _this_process()
    if me is None:
        return
    text = json.dumps({"pid": me.pid, "start": me.start, "boot": me.boot, "pidns": me.pidns})
    with contextlib.suppress(OSError):
        path = os.path.join(folder, RECORD)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)


def _this_process() -> Owner | None:
    """This process as a record names it; None without a /proc that shows this process under
    its own pid (not Linux, or a /proc of another pid namespace)."""
    return _identity(os.getpid())  # per pid: a forked child is not its parent


@functools.lru_cache(maxsize=4)
def _identity(pid: int) -> Owner | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        if os.readlink("/proc/self") != str(pid):
            return None
        boot = _read_small("/proc/sys/kernel/random/boot_id").strip()
        pidns = os.readlink("/proc/self/ns/pid")
        start = _start_time(pid)
    except (OSError, ValueError, IndexError):
        return None
    return Owner(pid, start, boot, pidns) if start is not None else None


def _start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot); None when there is no such process.
    OSError, ValueError or IndexError when /proc shows it but cannot say."""
    try:
        line = _read_small(f"/proc/{pid}/stat")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(line[line.rindex(")") + 2 :].split()[19])


def _read_small(path: str) -> str:
    """A small kernel file (/proc) as text."""
    with open(path, "rb") as f:
        return f.read(_RECORD_MAX_BYTES).decode("ascii", "replace")
