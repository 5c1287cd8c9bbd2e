"""Files and streams at aotipre's edges: settings files read bounded, reports written atomically
and never onto an input, and standard streams whose failures never change the exit code.

- `read_text`: the regular-file and size checks packages get, for configuration, manifest and
  baseline files (a FIFO must not block, /dev/zero must not eat memory), strict UTF-8, one line
  naming the file on any problem.
- `ReadPaths`: every path a run reads (files by identity, folders by what they contain); an
  output (-o, --report, --write-baseline, bundle -o, --cache-dir, --artifacts) that is one of
  them (also through a symbolic or hard link, or another spelling) or lies inside an input
  folder (a folder package, a model repository) is refused before anything is written.
- `write_text` / `write_file`: the one writer of outputs. See `write_file` for the rule on
  links and special files: a regular file is replaced atomically (a temporary file in its
  folder, then `os.replace`: a failed or interrupted write leaves the old file or none, never a
  partial one); a character device or FIFO (/dev/null, /dev/stdout) is written in place and
  never replaced, nor is a link to one; a missing folder of --output is an error.
- `write_stdout` / `write_stderr`: a closed, full or broken stream is reported (once, on stderr,
  when that still works) and then silenced; the exit code stays the check's.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, TextIO

from aotipre.foundation.errors import UsageError

MAX_SETTINGS_BYTES = 4 * 1024 * 1024
"""Largest configuration or manifest file aotipre reads."""
MAX_BASELINE_BYTES = 64 * 1024 * 1024
"""Largest baseline file aotipre reads."""


def require_file(
    path: str | os.PathLike[str], subject: str, *, folder_ok: bool = False
) -> os.stat_result:
    """The stat of `path` when it is a regular file (links followed; also a folder with
    `folder_ok`); else one UsageError line saying what it is: missing, a link to nothing, a
    link loop, a directory, a pipe or device, unreadable. Never "does not exist" for a path
    that does."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        if os.path.islink(name):
            raise UsageError(
                f"{subject} is a symbolic link to a file that does not exist"
            ) from None
        raise UsageError(f"{subject} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{subject} is a symbolic link loop") from None
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL
        raise UsageError(f"{subject} is not a valid path") from None
    if stat.S_ISDIR(st.st_mode):
        if folder_ok:
            return st
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


# --- path probes: what a user-given path is, never an exception ------------------------------


def probe(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The stat of `path`, links followed; None when it has none to give: missing, a link to
    nothing, a link loop, a name too long (ENAMETOOLONG), no permission, an embedded NUL.
    `Path.is_dir()` / `.exists()` / `.is_file()` raise on some of these (Python 3.11: any
    errno but ENOENT, ENOTDIR, EBADF and ELOOP) and `Path.resolve()` on a loop."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def is_dir(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a folder (links followed); False when it cannot be probed."""
    st = probe(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def is_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a regular file (links followed); False when it cannot be probed."""
    st = probe(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether `path` names something (links followed); False when it cannot be probed."""
    return probe(path) is not None


def resolved(path: str | os.PathLike[str]) -> str:
    """`path` absolute with its links resolved as far as they go (a loop or a missing part
    stays as written); the absolute path as given when it cannot be resolved (an embedded
    NUL)."""
    name = os.fspath(path)
    try:
        return os.path.realpath(name)
    except (OSError, ValueError):
        return os.path.abspath(name)


MAX_FOLDER_ENTRIES = 100_000
"""Most entries of one input folder whose identities are recorded (a hard link elsewhere to a
file in it is then caught too); beyond that, only what lies inside the folder is."""


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class ReadPaths:
    """Every path a run reads, so that no output lands on one.

    Files are known by identity (device, inode, links followed), so a symbolic link, a hard
    link or another spelling of an input is caught. A folder (a folder package, a model
    repository, an image) is known by its resolved path: an output anywhere inside it is
    refused; the files in it are recorded by identity too (a hard link to one, elsewhere).
    """

    def __init__(self) -> None:
        self._files: dict[tuple[int, int], str] = {}
        self._folders: list[tuple[str, str]] = []
        """(resolved path, as given)."""

    def add(
        self, *paths: str | os.PathLike[str] | None, contents: bool = True, members: bool = True
    ) -> ReadPaths:
        """Record `paths` (None and missing paths are skipped). `contents=False`: a folder is
        recorded as itself only (a cache folder: outputs may go inside it); `members=False`:
        the identities of the files in a folder are not recorded (only what lies inside it is
        refused: for a folder too large to walk)."""
        for path in paths:
            if path is None:
                continue
            name = os.fspath(path)
            try:
                st = os.stat(name)
            except (OSError, ValueError):
                continue
            self._files.setdefault((st.st_dev, st.st_ino), name)
            if stat.S_ISDIR(st.st_mode) and contents:
                self._folders.append((os.path.realpath(name), name))
                if members:
                    self._add_members(name)
        return self

    def _add_members(self, folder: str) -> None:
        seen = 0
        for dirpath, dirnames, filenames in os.walk(folder):
            for entry in (*dirnames, *filenames):
                seen += 1
                if seen > MAX_FOLDER_ENTRIES:
                    return
                ident = _identity(os.path.join(dirpath, entry))
                if ident is not None:
                    self._files.setdefault(ident, os.path.join(dirpath, entry))

    def clash(self, out: str | os.PathLike[str]) -> str | None:
        """What writing `out` would overwrite or write into (`the input X`, `inside the input
        folder X`), or None. A character device or FIFO is written in place, never replaced:
        no clash."""
        name = os.fspath(out)
        # `sub/../pkg.pt2` with no `sub` yet: a write that created `sub` would land on pkg.pt2
        spellings = (name, os.path.abspath(name))
        for spelling in spellings:
            try:
                st = os.stat(spelling)
            except (OSError, ValueError):
                continue
            if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
                return None
            known = self._files.get((st.st_dev, st.st_ino))
            if known is not None:
                return f"the input {known}"
        for spelling in spellings:
            try:
                real = os.path.realpath(spelling)  # a dangling link: where the write would go
            except (OSError, ValueError):
                continue
            for folder, shown in self._folders:
                if _inside(real, folder):
                    return f"inside the input folder {shown}"
        return None

    def refuse(self, outputs: Iterable[tuple[str, str | os.PathLike[str] | None]]) -> None:
        """UsageError (one line) for the first output (option name, path) that clashes."""
        for option, out in outputs:
            if out is None:
                continue
            found = self.clash(out)
            if found is None:
                continue
            if found.startswith("inside"):
                raise UsageError(
                    f"{option} {os.fspath(out)} is {found}: refusing to write there",
                    hint="write it somewhere else",
                )
            raise UsageError(
                f"{option} {os.fspath(out)} is {found}: refusing to overwrite it",
                hint="write the report somewhere else",
            )


def write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    subject: str | None = None,
    make_folders: bool = False,
) -> None:
    """Write `text` (UTF-8) to `path` as `write_file` does. UsageError on failure."""
    data = text.encode("utf-8", errors="backslashreplace")
    write_file(path, lambda fh: fh.write(data), subject=subject, make_folders=make_folders)


def write_file(
    path: str | os.PathLike[str],
    produce: Callable[[BinaryIO], object],
    *,
    subject: str | None = None,
    make_folders: bool = False,
) -> int:
    """Write what `produce(fh)` writes to `path`; the bytes written. UsageError (one line) on
    failure. The rule:

    - Links are followed to what they lead to. A regular file there (or nothing) is replaced
      in one step by a finished temporary file in the same folder (an existing file keeps its
      mode; a new one gets the umask's): nothing partial is ever left, and a symbolic link stays
      a link, now to the new file.
    - A character device or FIFO there (/dev/null, /dev/stdout, which is itself a link) is
      written in place: opened without creating or truncating anything, never unlinked or
      renamed over, and neither is a link to it. A FIFO nobody reads is an error at once, not a
      hang.
    - A directory, a block device or a socket is refused.
    - The folder must exist: a missing folder is an error (`--output`), unless `make_folders`
      (`--report` and `--write-baseline`, documented to create theirs). Either way the caller
      has refused outputs inside an input folder first (`ReadPaths`).
    """
    name = os.fspath(path)
    what = subject or name
    st, target, folder = _write_target(name, what, make_folders)
    if target is None:
        return _write_in_place(name, produce, what)
    tmp = None
    try:
        if make_folders:
            os.makedirs(folder, exist_ok=True)
        import tempfile  # imported here: only a report written to a file needs it (start-up time)

        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", dir=folder)
        with os.fdopen(fd, "wb") as fh:
            produce(fh)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), st.st_mode & 0o7777 if st is not None else _default_mode())
            size = os.fstat(fh.fileno()).st_size
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
    return size


class _Sink(io.RawIOBase):
    """A special file's descriptor as a write-only, unseekable stream that counts bytes."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        whole = memoryview(data).cast("B")
        view = whole
        while view:  # a pipe may take part of it
            view = view[os.write(self._fd, view) :]
        self.written += len(whole)
        return len(whole)


def check_writable(
    path: str | os.PathLike[str], *, subject: str | None = None, make_folders: bool = False
) -> None:
    """UsageError (one line) now when `write_file` would refuse `path` later (a directory, a
    missing folder, a link loop, ...): a report that cannot be written is said before a long
    run, not after it. Writes nothing."""
    name = os.fspath(path)
    _write_target(name, subject or name, make_folders)


def _write_target(
    name: str, what: str, make_folders: bool
) -> tuple[os.stat_result | None, str | None, str]:
    """(what is there, the file to replace, its folder) for `write_file`; target None: a
    character device or FIFO, written in place. UsageError where nothing may be written."""
    try:
        st: os.stat_result | None = os.stat(name)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"cannot write {what}: it is a symbolic link loop") from None
        raise UsageError(f"cannot write {what}: {exc.strerror or exc}") from None
    except ValueError:
        raise UsageError(f"cannot write {what}: not a valid path") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"cannot write {what}: it is a directory")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return st, None, ""
        raise UsageError(
            f"cannot write {what}: it is a block device or socket, not a file, character "
            "device or pipe"
        )
    try:
        target = os.path.realpath(name) if os.path.islink(name) else name
        folder = os.path.dirname(target) or "."  # as the kernel resolves it: `sub/..` needs `sub`
        exists, present = os.path.isdir(folder), os.path.lexists(folder)
    except (OSError, ValueError):
        raise UsageError(f"cannot write {what}: not a valid path") from None
    if not exists and not (make_folders and not present):
        why = "not a folder" if present else "no such folder"
        raise UsageError(f"cannot write {what}: {why} {folder}")
    return st, target, folder


def _write_in_place(name: str, produce: Callable[[BinaryIO], object], what: str) -> int:
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(name, flags)  # no O_CREAT, no O_TRUNC: never makes or empties a file
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UsageError(
                f"cannot write {what}: not a regular file, and nothing reads from it"
            ) from None
        raise UsageError(f"cannot write {what}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):  # swapped since the stat
            raise UsageError(f"cannot write {what}: it changed while being opened")
        os.set_blocking(fd, True)
        sink = _Sink(fd)
        produce(sink)  # type: ignore[arg-type]
        return sink.written
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
