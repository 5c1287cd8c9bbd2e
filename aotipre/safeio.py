"""Files and streams at aotipre's edges: settings files read bounded, reports written atomically
and never onto an input, and standard streams whose failures never change the exit code.

- `read_text`: the regular-file and size checks packages get, for configuration, manifest and
  baseline files (a FIFO must not block, /dev/zero must not eat memory), strict UTF-8, one line
  naming the file on any problem.
- `refuse_overwriting_inputs`: an output (-o, --report, --write-baseline) that is one of the
  inputs (the same file, also through a symbolic or hard link) is refused before anything runs.
- `write_text`: a temporary file in the destination's folder, then `os.replace`: a failed or
  interrupted write leaves the old file (or none), never a partial one. Special files
  (/dev/null, /dev/stdout, a FIFO) are written in place.
- `write_stdout` / `write_stderr`: a closed, full or broken stream is reported (once, on stderr,
  when that still works) and then silenced; the exit code stays the check's.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from typing import TextIO

from aotipre.errors import UsageError

MAX_SETTINGS_BYTES = 4 * 1024 * 1024
"""Largest configuration or manifest file aotipre reads."""
MAX_BASELINE_BYTES = 64 * 1024 * 1024
"""Largest baseline file aotipre reads."""


def require_file(path: str | os.PathLike[str], subject: str) -> os.stat_result:
    """The stat of `path` when it is a regular file (links followed); else one UsageError line
    saying what it is: missing, a directory, a pipe or device, a link loop, unreadable."""
    try:
        st = os.stat(os.fspath(path))
    except FileNotFoundError:
        raise UsageError(f"{subject} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{subject} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{subject} is not a regular file (a pipe or device?)")
    return st


def read_text(path: str | os.PathLike[str], subject: str, limit: int) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; UsageError otherwise.

    `subject` names the file in messages (e.g. `baseline ci/base.json`).
    """
    name = os.fspath(path)
    st = require_file(name, subject)
    if st.st_size > limit:
        raise UsageError(f"{subject} is {st.st_size} bytes, more than aotipre reads ({limit})")
    try:
        # O_NONBLOCK: a FIFO put in the file's place after the stat must not block the open
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UsageError(f"{subject} is not a regular file (a pipe or device?)")
            data = fh.read(limit + 1)
        except OSError as exc:
            raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UsageError(f"{subject} is larger than aotipre reads ({limit} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise UsageError(
            f"{subject} is not UTF-8 text (byte 0x{bad} at offset {exc.start})"
        ) from None


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def refuse_overwriting_inputs(
    outputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
    inputs: Iterable[str | os.PathLike[str] | None],
) -> None:
    """UsageError when an output (option name, path) is the same file as an input.

    Files are compared by (device, inode) after following links, so a symbolic link, a hard
    link or another spelling of an input is caught too.
    """
    known: dict[tuple[int, int], str] = {}
    for path in inputs:
        if path is None:
            continue
        ident = _identity(os.fspath(path))
        if ident is not None:
            known.setdefault(ident, os.fspath(path))
    for option, out in outputs:
        if out is None:
            continue
        # `sub/../pkg.pt2` with no `sub` yet: the write would create `sub` and land on pkg.pt2
        spellings = (os.fspath(out), os.path.abspath(os.fspath(out)))
        idents = {i for i in map(_identity, spellings) if i is not None}
        ident = next((i for i in idents if i in known), None)
        if ident is not None:
            raise UsageError(
                f"{option} {os.fspath(out)} is the input {known[ident]}: refusing to overwrite it",
                hint="write the report somewhere else",
            )


def write_text(path: str | os.PathLike[str], text: str, *, subject: str | None = None) -> None:
    """Write `text` (UTF-8) to `path` atomically; parents are created. UsageError on failure.

    A regular file (or a link to one) is replaced in one step by a finished temporary file in
    the same folder; nothing partial is ever left, and an existing file keeps its mode.
    """
    name = os.fspath(path)
    what = subject or name
    data = text.encode("utf-8", errors="backslashreplace")
    try:
        st = os.stat(name)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"cannot write {what}: it is a directory")
        _write_in_place(name, data, what)  # /dev/null, /dev/stdout, a FIFO: not replaceable
        return
    target = os.path.realpath(name) if os.path.islink(name) else name
    folder = os.path.dirname(os.path.abspath(target))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", dir=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), st.st_mode & 0o7777 if st is not None else _default_mode())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise UsageError(f"cannot write {what}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _write_in_place(name: str, data: bytes, what: str) -> None:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot write {what}: {exc.strerror or exc}") from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise UsageError(f"cannot write {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _default_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


# --- standard streams ---------------------------------------------------------------------------

_silenced: set[int] = set()


def ensure_std_fds() -> None:
    """Open /dev/null on stdin, stdout or stderr when the process started with it closed.

    Otherwise the first file aotipre opens would get descriptor 1 or 2, and the report (or a
    worker's output) would be written into it. Python leaves `sys.stdout` None in that case;
    it gets a stream on /dev/null too.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            _silenced.add(fd)
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115


def _silence(fd: int) -> None:
    """Point `fd` at /dev/null (the interpreter's final flush must not fail again)."""
    _silenced.add(fd)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def write_stdout(text: str) -> bool:
    """Write to stdout; False (with one note on stderr, unless the reader went away) when it
    cannot be written: closed, full (/dev/full), a broken pipe, an I/O error."""
    failure = _write(1, sys.stdout, text)
    if failure is not None and not isinstance(failure, BrokenPipeError):
        why = failure.strerror if isinstance(failure, OSError) and failure.strerror else failure
        write_stderr(f"aotipre: note: the output could not be written to stdout ({why})\n")
    return failure is None and 1 not in _silenced


def write_stderr(text: str) -> None:
    """Write to stderr; a closed or broken stderr is silenced, never an error."""
    _write(2, sys.stderr, text)


def _write(fd: int, stream: TextIO | None, text: str) -> Exception | None:
    """Write and flush; on failure silence `fd` and return the error (None: written, or the
    stream was silenced before)."""
    if fd in _silenced:
        return None
    try:
        if stream is None:
            raise OSError(errno.EBADF, "closed")
        stream.write(text)
        stream.flush()
    except (OSError, ValueError) as exc:
        _silence(fd)
        return exc
    return None


def is_terminal(stream_fd: int) -> bool:
    """Whether the descriptor is a terminal (False when closed or silenced)."""
    if stream_fd in _silenced:
        return False
    try:
        return os.isatty(stream_fd)
    except OSError:
        return False
