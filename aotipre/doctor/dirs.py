"""The directories AOTI writes and maps code from: free space, writable, executable (noexec)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from typing import Any

from aotipre.runner.proc import run_process

MOUNTINFO = "/proc/self/mountinfo"
LOW_SPACE_BYTES = 1 << 30
"""Below this much free space a directory gets a warning (a CUDA package can be hundreds of MB,
extracted once per load; a compile writes several times the package size)."""
_EXEC_TIMEOUT_S = 10.0
_SCRIPT = b"#!/bin/sh\nexit 0\n"


def extraction_dir() -> str:
    """Where torch's C++ package loader extracts a .pt2 before dlopen-ing its .so.

    AOTIModelPackageLoader uses std::filesystem::temp_directory_path(), which in libstdc++ is the
    first of $TMPDIR, $TMP, $TEMP, $TEMPDIR that is set, else /tmp.
    """
    for var in ("TMPDIR", "TMP", "TEMP", "TEMPDIR"):
        value = os.environ.get(var)
        if value:
            return value
    return "/tmp"


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo (the fields aotipre needs)."""

    mount_point: str
    options: tuple[str, ...]
    """Per-mount options (`rw`, `noexec`, ...)."""
    fstype: str
    source: str


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse /proc/self/mountinfo (proc(5)); octal escapes like `\\040` are decoded."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 6:
            continue
        rest = right.split()
        mounts.append(
            Mount(
                mount_point=_unescape(fields[4]),
                options=tuple(fields[5].split(",")),
                fstype=rest[0] if rest else "",
                source=_unescape(rest[1]) if len(rest) > 1 else "",
            )
        )
    return mounts


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        chunk = text[i + 1 : i + 4]
        if text[i] == "\\" and len(chunk) == 3 and all(c in "01234567" for c in chunk):
            out.append(chr(int(chunk, 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding `path`: the longest mount point that is a prefix (the last one wins
    when a mount point is mounted over)."""
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        inside = path == mp or path.startswith(mp + "/") or mp == "/"
        if inside and (best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/")):
            best = m
    return best


@dataclass(frozen=True)
class DirectoryProbe:
    """What one directory allows."""

    role: str
    """What AOTI uses it for, e.g. `package extraction (TMPDIR)`."""
    path: str
    needs_exec: bool
    """Code is mapped from files in it (dlopen), so a noexec mount breaks AOTI."""
    probed: str
    """The directory actually probed: `path`, or its nearest existing parent."""
    exists: bool
    writable: bool
    free_bytes: int | None
    executable: bool | None
    """A file written there can be executed; None when it could not be tried (not writable)."""
    mount_point: str | None = None
    mount_options: tuple[str, ...] = ()
    error: str | None = None

    @property
    def noexec(self) -> bool:
        return "noexec" in self.mount_options

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "path": self.path,
            "needs_exec": self.needs_exec,
            "probed": self.probed,
            "exists": self.exists,
            "writable": self.writable,
            "free_bytes": self.free_bytes,
            "executable": self.executable,
            "mount_point": self.mount_point,
            "mount_options": list(self.mount_options),
            "error": self.error,
        }


def probe_directory(
    path: str, role: str, *, needs_exec: bool, mountinfo: str | None = MOUNTINFO
) -> DirectoryProbe:
    """Probe `path` (or its nearest existing parent, which is what a later mkdir would use).

    Writable: a file can be created. Executable: a small `#!/bin/sh` script written there runs,
    and the mount is not `noexec` (either one failing means dlopen of a .so there fails too).
    `mountinfo` names the mount table to read (a test hook); None skips it.
    """
    full = os.path.abspath(os.path.expanduser(path))
    probed = full
    while not os.path.isdir(probed) and os.path.dirname(probed) != probed:
        probed = os.path.dirname(probed)
    exists = os.path.isdir(full)
    real = os.path.realpath(probed)
    mount = None
    if mountinfo:
        with contextlib.suppress(OSError):
            with open(mountinfo, encoding="utf-8", errors="replace") as f:
                mount = mount_of(real, parse_mountinfo(f.read()))
    free: int | None = None
    with contextlib.suppress(OSError):
        st = os.statvfs(probed)
        free = st.f_bavail * st.f_frsize
    writable, executable, error = _try_exec(probed)
    if mount is not None and "noexec" in mount.options:
        executable = False if writable else executable
    return DirectoryProbe(
        role=role,
        path=full,
        needs_exec=needs_exec,
        probed=probed,
        exists=exists,
        writable=writable,
        free_bytes=free,
        executable=executable,
        mount_point=mount.mount_point if mount else None,
        mount_options=mount.options if mount else (),
        error=error,
    )


def _try_exec(directory: str) -> tuple[bool, bool | None, str | None]:
    try:
        fd, script = tempfile.mkstemp(prefix=".aotipre-exec-", suffix=".sh", dir=directory)
    except OSError as exc:
        return False, None, f"cannot create a file: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_SCRIPT)
        os.chmod(script, stat.S_IRWXU)
        outcome = run_process([script], timeout_s=_EXEC_TIMEOUT_S, cwd=directory)
        if outcome.ok:
            return True, True, None
        return True, False, f"a script written there does not run ({outcome.summary})"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(script)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
