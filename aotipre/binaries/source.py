"""Bounded random access to the bytes of an archive member (or a file), without extracting it.

A STORED zip member (torch writes every member STORED) is read in place from the package file
at its data offset, through the descriptor the open Archive holds (the file is never opened a
second time), so a 2 GB `.so` with embedded weights costs only the bytes a parser asks for.
A compressed member (torch never writes one; a hostile archive can) is read whole through the
archive's bounded reader, up to `MAX_INFLATED_BYTES`.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from aotipre.foundation.errors import PackageError
from aotipre.pt2.archive import Archive, FolderArchive

MAX_INFLATED_BYTES = 256 * 1024 * 1024
"""Largest compressed binary member that is inflated into memory to be parsed."""
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


class SourceError(Exception):
    """The bytes cannot be read (one line)."""


class Source(Protocol):
    size: int

    def read(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes at `offset`; SourceError past the end."""
        ...


class BytesSource:
    """Bytes already in memory."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.size = len(data)

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise SourceError(f"reads {length} bytes at {offset}, past the end ({self.size} bytes)")
        return self._data[offset : offset + length]


class FileRangeSource:
    """`size` bytes of an open file from `start` (a STORED member, or a whole file)."""

    def __init__(self, fd: int, start: int, size: int) -> None:
        self._fd = fd
        self._start = start
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise SourceError(f"reads {length} bytes at {offset}, past the end ({self.size} bytes)")
        data = os.pread(self._fd, length, self._start + offset)
        if len(data) != length:
            raise SourceError(f"the file ends before byte {offset + length} (truncated)")
        return data

    def sub(self, start: int, size: int) -> FileRangeSource:
        """The `size` bytes from `start` of this range."""
        return FileRangeSource(self._fd, self._start + start, size)


@contextmanager
def open_file(path: str | os.PathLike[str]) -> Iterator[FileRangeSource]:
    """A whole regular file as a Source (the descriptor is closed on exit)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SourceError(f"{path}: cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{path}: not a regular file")
        yield FileRangeSource(fd, 0, st.st_size)
    finally:
        os.close(fd)


@contextmanager
def open_member(archive: Archive, name: str) -> Iterator[Source]:
    """A Source over one member: in place when STORED, else inflated (bounded) into memory.

    A member of an extracted folder package is a plain file and is opened directly. Raises
    SourceError with one line (KeyError for a missing zip member) when it cannot be read.
    """
    if isinstance(archive, FolderArchive):
        if name not in archive.members:
            raise KeyError(f"member {name} is missing from the folder")
        with open_file(archive.file_of(name)) as whole:
            yield whole
        return
    info = archive.zipfile.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED:
        try:
            data = archive.read(name, limit=MAX_INFLATED_BYTES)
        except PackageError as exc:  # too large, damaged
            raise SourceError(str(exc)) from None
        yield BytesSource(data)
        return
    whole = _open_package_file(archive)
    header = whole.read(info.header_offset, _LOCAL_HEADER.size)
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != b"PK\x03\x04":
        raise SourceError(f"member {name}: no local header where the zip directory says")
    start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
    if start + info.file_size > whole.size:
        raise SourceError(f"member {name}: its data run past the end of the file (truncated)")
    yield whole.sub(start, info.file_size)


def _open_package_file(archive: Archive) -> FileRangeSource:
    """The whole package file as a Source, through the descriptor the archive holds open (the
    file is never opened a second time: one open per check, and no other file that took its
    name since is read)."""
    try:
        fd = archive.file_descriptor()
        size = os.fstat(fd).st_size
    except (PackageError, OSError) as exc:
        raise SourceError(f"{archive.path}: cannot read: {exc}") from None
    return FileRangeSource(fd, 0, size)
