"""A .pt2 package given as an already-extracted folder, read through the same Archive interface.

torch 2.13's C++ loader (`AOTIModelPackageLoader`, and so `load_package`'s fallback) accepts a
folder, and 2.15's Python `load_package` does too. Two layouts are accepted, as torch accepts
them: the root folder itself (it holds `archive_format`), or a folder holding that one root
folder. Member names are presented as in the zip (`<root>/data/...`), so everything downstream
reads a folder exactly like an archive.

Safety matches the zip reader's: nothing outside the folder is read (symbolic links are refused,
not followed), the walk stops at the member limit, reads stop at the size limit. A folder has no
CRCs: `crc_ok` is always true (nothing to compare).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from aotipre.pt2 import layout
from aotipre.pt2.archive import (
    _CHUNK,
    MAX_JSON_BYTES,
    MAX_MEMBERS,
    Archive,
    CodedPackageError,
    Member,
    unsafe_member_name,
)


class FolderArchive(Archive):
    """An extracted package: `members` maps `<root>/<relative path>` to its file's size."""

    def __init__(self, path: Path, base: Path, root: str, members: dict[str, Member]) -> None:
        self.path = path
        self.members = members
        self.base = base
        """The folder whose entries are `<root>/...`: the given folder's parent when the given
        folder is the root itself."""
        self.root = root

    def close(self) -> None:
        pass

    def file_of(self, name: str) -> Path:
        return self.base / name

    def read(self, name: str, limit: int = MAX_JSON_BYTES) -> bytes:
        self.readable(name, limit)
        try:
            with open(self.file_of(name), "rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            raise CodedPackageError(
                "AOT008", f"member {name} cannot be read: {exc.strerror}"
            ) from None
        if len(data) > limit:
            raise CodedPackageError("AOT007", f"member {name} grew past {limit} bytes")
        return data

    def crc_ok(self, name: str) -> bool:
        """A folder records no CRC; a member that cannot be read at all is reported as damaged."""
        try:
            with open(self.file_of(name), "rb") as fh:
                while fh.read(_CHUNK):
                    pass
        except OSError:
            return False
        return True


def open_folder(path: Path) -> FolderArchive:
    """Open an extracted package folder; CodedPackageError (AOT001/3/4/7) when it is not one."""
    if (path / layout.ARCHIVE_FORMAT).is_file():
        base, root = path.parent, path.name
    else:
        roots = [
            entry.name
            for entry in _scandir(path)
            if entry.is_dir(follow_symlinks=False)
            and (path / entry.name / layout.ARCHIVE_FORMAT).is_file()
        ]
        if len(roots) != 1:
            raise CodedPackageError(
                "AOT001",
                f"{path}: a folder, but not an extracted .pt2 package (no {layout.ARCHIVE_FORMAT} "
                "in it or in one folder below it)",
                "give the .pt2 file, or the folder a .pt2 was extracted into",
            )
        base, root = path, roots[0]
    members: dict[str, Member] = {}
    _walk(path, base / root, root, members, 0)
    return FolderArchive(path, base, root, members)


MAX_DEPTH = 32
"""Folder nesting beyond this is refused (a real package nests 5 deep)."""


def _walk(shown: Path, folder: Path, prefix: str, members: dict[str, Member], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CodedPackageError(
            "AOT007", f"{shown}: folders nested deeper than {MAX_DEPTH} ({prefix})"
        )
    for entry in _scandir(folder):
        name = f"{prefix}/{entry.name}"
        problem = unsafe_member_name(name)
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            raise CodedPackageError(
                "AOT001", f"{shown}: cannot read {name}: {exc.strerror}"
            ) from None
        if problem is None and stat.S_ISLNK(st.st_mode):
            problem = "is a symbolic link"
        if problem is not None:
            raise CodedPackageError(
                "AOT003",
                f"{shown}: unsafe entry {name!r}: {problem}",
                "a .pt2 never holds such members; do not deploy this folder",
            )
        if stat.S_ISDIR(st.st_mode):
            _walk(shown, folder / entry.name, name, members, depth + 1)
            continue
        if not stat.S_ISREG(st.st_mode):
            raise CodedPackageError("AOT003", f"{shown}: {name} is not a regular file")
        members[name] = Member(name, st.st_size, st.st_size, 0, 0)
        if len(members) > MAX_MEMBERS:
            raise CodedPackageError(
                "AOT007", f"{shown}: more than {MAX_MEMBERS} files, more than aotipre accepts"
            )


def _scandir(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise CodedPackageError("AOT001", f"{folder}: cannot list: {exc.strerror}") from None
