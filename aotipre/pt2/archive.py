"""Safe, bounded access to a .pt2 package: a zip (member-name validation, size limits, CRC
checks) or an already-extracted folder (FolderArchive, at the end), read through one interface.

Long because the zip and the extracted-folder readers are two implementations of one
interface with one set of limits and error codes; together they are the only code that opens a
package, which is what keeps every read bounded.

Nothing is extracted and no member is read whole unless it is small: a member that inflates to
gigabytes is refused from its declared size, and reads stop at a fixed limit whatever the header
claims. Every failure is a PackageError with a stable code and one clear line.
"""

from __future__ import annotations

import os
import stat
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from aotipre.foundation import safeio
from aotipre.foundation.errors import PackageError
from aotipre.pt2 import layout

MAX_MEMBERS = 100_000
MAX_JSON_BYTES = 64 * 1024 * 1024
"""Largest metadata member (models/*.json, wrapper.cpp, ...) aotipre reads into memory."""
MAX_RATIO = 200
"""A compressed member inflating more than this many times is treated as a zip bomb."""
BOMB_MIN_BYTES = 256 * 1024 * 1024
"""Only members at least this large (declared) can be refused as bombs."""
MAX_MEMBER_BYTES = 1 << 40
"""No real member is a terabyte; a header that says so is forged."""
MAX_CENTRAL_DIRECTORY_BYTES = 32 * 1024 * 1024
"""A central directory larger than this is refused before zipfile parses it (it builds one
ZipInfo, ~0.5 KB, per record before any other limit can apply)."""
_CHUNK = 1 << 20
_CENTRAL_RECORD = b"PK\x01\x02"
_LOCAL_HEADER_BYTES = 30


class CodedPackageError(PackageError):
    """A PackageError carrying a finding code for the report."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message, hint)
        self.code = code


@dataclass(frozen=True)
class Member:
    """One validated zip member."""

    name: str
    size: int
    compressed_size: int
    crc: int
    compress_type: int


class Archive:
    """An open .pt2 zip whose member names have been validated: the package file, opened once,
    and everything aotipre reads of it (members, and STORED members' bytes in place)."""

    def __init__(
        self,
        path: Path,
        zf: zipfile.ZipFile,
        members: dict[str, Member],
        file: IO[bytes] | None = None,
    ) -> None:
        self.path = path
        self._zf = zf
        self.members = members
        self._file = file
        """The package file `zf` reads, when the caller opened it (open_archive): closed with
        the archive (zipfile leaves a file it was handed open)."""

    @property
    def zipfile(self) -> zipfile.ZipFile:
        """The open ZipFile (for readers that need a member's header offset)."""
        return self._zf

    def file_descriptor(self) -> int:
        """The descriptor of the open package file, for readers that read a STORED member in
        place (os.pread, which leaves the zip reader's position alone) instead of opening the
        file again (binaries.source.open_member). CodedPackageError (AOT008) once closed."""
        file = self._file if self._file is not None else self._zf.fp
        if file is None or file.closed:
            raise CodedPackageError("AOT008", f"{self.path}: the archive is closed")
        return file.fileno()

    def close(self) -> None:
        self._zf.close()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> list[str]:
        return list(self.members)

    def readable(self, name: str, limit: int) -> Member:
        """The member, if it exists and declares at most `limit` bytes (else AOT006/AOT007)."""
        member = self.members.get(name)
        if member is None:
            raise CodedPackageError("AOT006", f"member {name} is missing from the archive")
        if member.size > limit:
            raise CodedPackageError(
                "AOT007",
                f"member {name} declares {member.size} bytes, more than aotipre reads ({limit})",
            )
        return member

    def read(self, name: str, limit: int = MAX_JSON_BYTES) -> bytes:
        """Read one member, refusing it if it declares or turns out to exceed `limit` bytes."""
        self.readable(name, limit)
        out = bytearray()
        try:
            with self._zf.open(name) as fh:
                while True:
                    chunk = fh.read(_CHUNK)
                    if not chunk:
                        break
                    out += chunk
                    if len(out) > limit:
                        raise CodedPackageError(
                            "AOT007", f"member {name} inflates past {limit} bytes (zip bomb?)"
                        )
        except CodedPackageError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
            raise CodedPackageError(
                "AOT008", f"member {name} cannot be read: {_one_line(exc)}"
            ) from exc
        return bytes(out)

    def read_text(self, name: str, limit: int = MAX_JSON_BYTES) -> str:
        return self.read(name, limit).decode("utf-8", errors="replace")

    def chunks(self, name: str) -> Iterator[bytes]:
        """Stream one member of any size in 1 MiB chunks (bounded memory; e.g. to hash it)."""
        if name not in self.members:
            raise CodedPackageError("AOT006", f"member {name} is missing from the archive")
        try:
            with self._zf.open(name) as fh:
                while chunk := fh.read(_CHUNK):
                    yield chunk
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
            raise CodedPackageError(
                "AOT008", f"member {name} cannot be read: {_one_line(exc)}"
            ) from exc

    def crc_ok(self, name: str) -> bool:
        """Stream one member and compare its CRC-32 (bounded memory; False on any read error)."""
        member = self.members[name]
        crc = 0
        try:
            with self._zf.open(name) as fh:
                while True:
                    chunk = fh.read(_CHUNK)
                    if not chunk:
                        break
                    crc = zlib.crc32(chunk, crc)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError):
            return False
        return crc == member.crc


def open_archive(path: str | os.PathLike[str]) -> Archive:
    """Open and validate a .pt2 file; raises CodedPackageError with one clear line."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise CodedPackageError("AOT001", f"{p}: no such file") from None
    except OSError as exc:
        raise CodedPackageError("AOT001", f"{p}: cannot access: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):  # an extracted package (torch 2.13's C++ loader takes one)
        return open_folder(p)
    if not stat.S_ISREG(st.st_mode):
        raise CodedPackageError("AOT001", f"{p}: not a regular file")
    if st.st_size == 0:
        raise CodedPackageError("AOT002", f"{p}: empty file, not a .pt2 archive")
    fh = _open_regular(p)
    try:
        head = fh.read(4)
        zf = open_zip(fh, os.fstat(fh.fileno()).st_size, lambda infos: _validate_names(p, infos))
    except CodedPackageError:
        fh.close()
        raise
    except ZipRefused as exc:
        fh.close()
        raise CodedPackageError(exc.code, f"{p}: {exc.reason}", exc.hint) from None
    except (
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,  # e.g. "zip file version 6.4" from a damaged directory record
    ) as exc:
        fh.close()
        if head == b"PK\x03\x04":
            raise CodedPackageError(
                "AOT002",
                f"{p}: truncated or damaged zip archive ({_one_line(exc)})",
                "the file was probably cut off during copy or upload; fetch it again",
            ) from None
        raise CodedPackageError(
            "AOT002", f"{p}: not a zip archive, so not a .pt2 package"
        ) from None
    members = {
        info.filename: Member(
            name=info.filename,
            size=info.file_size,
            compressed_size=info.compress_size,
            crc=info.CRC,
            compress_type=info.compress_type,
        )
        for info in zf.infolist()
        if not info.is_dir()
    }
    return Archive(p, zf, members, fh)


@contextmanager
def archive_at(path: str | os.PathLike[str], archive: Archive | None = None) -> Iterator[Archive]:
    """The package at `path` as an open Archive: `archive` when the caller holds it open (a
    check opens its package once and hands it down: it stays open), else opened here and closed
    on exit. The one way a reader that also stands alone (given a path) gets its archive."""
    if archive is not None:
        yield archive
        return
    with open_archive(path) as opened:
        yield opened


def _open_regular(p: Path) -> IO[bytes]:
    """Open `p` for reading without blocking: a FIFO or device put in its place after the stat
    (an --against baseline, a package path) is refused, never waited on (AOT001)."""
    try:
        fh = open(p, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK))
    except OSError as exc:
        raise CodedPackageError("AOT001", f"{p}: cannot open: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise CodedPackageError("AOT001", f"{p}: not a regular file")
    return fh


def _validate_names(path: Path, infos: list[zipfile.ZipInfo]) -> None:
    """Refuse member names that could escape an extraction folder, and duplicates (AOT003)."""
    if len(infos) > MAX_MEMBERS:
        raise CodedPackageError(
            "AOT007", f"{path}: {len(infos)} members, more than aotipre accepts ({MAX_MEMBERS})"
        )
    seen: set[str] = set()
    for info in infos:
        name = info.filename
        # zipfile cuts a name at its first NUL byte: judge the name as stored
        problem = unsafe_member_name(info.orig_filename) or unsafe_member_name(name)
        if problem is None and _is_symlink(info):
            problem = "is a symbolic link"
        if problem is not None:
            raise CodedPackageError(
                "AOT003",
                f"{path}: unsafe member {name!r}: {problem}",
                "a .pt2 never holds such members; do not deploy this file",
            )
        if name in seen:
            raise CodedPackageError("AOT003", f"{path}: duplicate member {name!r}")
        seen.add(name)


# --- the zip guard: every zip aotipre opens (packages, --inputs files, stored sample inputs) ----

ALLOWED_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
"""Compression methods torch's zip reader (miniz) accepts; torch itself writes only stored
members. bzip2, LZMA and the rest are refused before anything is inflated: torch cannot read
them, and zipfile inflates them without the bounds deflate gets here."""


class ZipRefused(Exception):
    """The guard refused a zip: a finding code, the reason (without the file name) and a hint."""

    def __init__(self, code: str, reason: str, hint: str = "") -> None:
        super().__init__(reason)
        self.code, self.reason, self.hint = code, reason, hint


def open_zip(
    fh: IO[bytes],
    file_size: int,
    check_names: Callable[[list[zipfile.ZipInfo]], object] | None = None,
) -> zipfile.ZipFile:
    """Open the zip in `fh` (of `file_size` bytes, measured, not declared) through one guard.

    Before zipfile parses anything: the end record is found exactly as zipfile finds it, and the
    central directory it points at must lie inside the file, be at most
    `MAX_CENTRAL_DIRECTORY_BYTES` and hold at most `MAX_MEMBERS` records (counted in the bytes,
    not read from the end record). After: every member must use an allowed compression method,
    be unencrypted, not overlap another, and not inflate past the bomb bounds, alone or together.
    `check_names`, if given, judges the member names first (it raises what the caller wants).
    Raises ZipRefused; zipfile's own errors (BadZipFile, ...) pass through for the caller.
    """
    _check_central_directory(fh, file_size)
    zf = zipfile.ZipFile(fh)
    try:
        if check_names is not None:
            check_names(zf.infolist())
        _check_members(zf.infolist())
    except BaseException:
        zf.close()
        raise
    return zf


def _signature_at(fh: IO[bytes], offset: int) -> bytes:
    fh.seek(max(0, offset))
    signature = fh.read(4)
    fh.seek(0)
    return signature


def _check_central_directory(fh: IO[bytes], file_size: int) -> None:
    """Bound what zipfile will build (one ZipInfo, ~0.5 KB, per record) from the real bytes."""
    find_end = getattr(zipfile, "_EndRecData", None)  # what zipfile itself will use
    if find_end is None:  # a future Python without it: refuse rather than go unguarded
        raise ZipRefused("AOT002", "this Python's zipfile cannot be guarded (no _EndRecData)")
    endrec = find_end(fh)
    fh.seek(0)
    if not endrec:
        return  # zipfile then says "File is not a zip file"
    # zipfile's endrec: [signature, disk, disk_cd, n_disk, n, cd_size, cd_offset, comment size,
    # comment, location of the end record]; a zip64 record (56 bytes) and locator (20) precede it
    cd_size, cd_end = endrec[5], endrec[9]
    if endrec[0] == b"PK\x06\x06" and _signature_at(fh, cd_end) != b"PK\x06\x06":
        # endrec[9] is the plain end record's place (CPython 3.11-3.13 as released); zipfiles
        # patched for CVE-2025-8291 (Ubuntu's 3.12.3, measured) give the zip64 record's place
        cd_end -= 56 + 20
    start = cd_end - cd_size
    if cd_size > MAX_CENTRAL_DIRECTORY_BYTES:
        raise ZipRefused(
            "AOT007",
            f"the zip directory is {cd_size} bytes, more than aotipre reads "
            f"({MAX_CENTRAL_DIRECTORY_BYTES}); too many members (zip bomb?)",
        )
    if start < 0 or cd_end > file_size:
        raise ZipRefused(
            "AOT002",
            f"the zip directory ({cd_size} bytes before offset {cd_end}) does not fit in the "
            f"file ({file_size} bytes): truncated or forged end record",
        )
    prefix = start - endrec[6]  # the directory's offset as written, against where it is
    if prefix > 0:
        raise ZipRefused(
            "AOT002",
            f"{prefix} bytes precede the zip archive (a concatenated or self-extracting file): "
            "torch's zip reader refuses it ('invalid header or archive is corrupted')",
            "deploy the archive torch wrote, without anything in front of it",
        )
    fh.seek(start)
    records = fh.read(cd_size).count(_CENTRAL_RECORD)
    fh.seek(0)
    if records > MAX_MEMBERS:
        raise ZipRefused("AOT007", f"{records} members, more than aotipre accepts ({MAX_MEMBERS})")


def _check_members(infos: list[zipfile.ZipInfo]) -> None:
    for info in infos:
        name = info.filename
        if info.flag_bits & 0x1:
            raise ZipRefused(
                "AOT004", f"member {name!r} is encrypted; torch never writes (nor reads) those"
            )
        if info.compress_type not in ALLOWED_METHODS:
            raise ZipRefused(
                "AOT030",
                f"member {name!r} uses compression method {info.compress_type} "
                f"({_METHOD_NAMES.get(info.compress_type, 'unknown')}); torch reads only stored "
                "and deflated members",
                "re-write the archive with torch (torch.save, torch.export.save or "
                "aoti_compile_and_package); do not deploy this file",
            )
        if info.is_dir():
            continue
        if info.file_size > MAX_MEMBER_BYTES or (
            info.compress_type != zipfile.ZIP_STORED
            and info.file_size >= BOMB_MIN_BYTES
            and info.file_size > MAX_RATIO * max(info.compress_size, 1)
        ):
            raise ZipRefused(
                "AOT007",
                f"member {name!r} inflates from {info.compress_size} to "
                f"{info.file_size} bytes (zip bomb?)",
                "torch writes members uncompressed; this file was not written by torch",
            )
    _check_overlap(infos)
    _check_total_inflation(infos)


_METHOD_NAMES = {
    zipfile.ZIP_BZIP2: "bzip2",
    zipfile.ZIP_LZMA: "LZMA",
    1: "shrunk",
    6: "imploded",
    9: "deflate64",
    93: "zstandard",
    95: "xz",
    98: "PPMd",
}


def _check_overlap(infos: list[zipfile.ZipInfo]) -> None:
    """Refuse members whose data overlap (two directory entries sharing bytes: a zip bomb that
    makes a small file read as many large ones); a zip written once never has them."""
    spans = sorted(
        (info for info in infos if not info.is_dir()), key=lambda info: info.header_offset
    )
    for first, second in zip(spans, spans[1:]):
        if second.header_offset < first.header_offset + _LOCAL_HEADER_BYTES + first.compress_size:
            raise ZipRefused(
                "AOT007",
                f"members {first.filename!r} and "
                f"{second.filename!r} overlap "
                "(their data share bytes of the file: zip bomb?)",
                "torch never writes such archives; do not deploy this file",
            )


def _check_total_inflation(infos: list[zipfile.ZipInfo]) -> None:
    """Refuse many compressed members that each stay under the bomb bound but together inflate
    past it (reading them all to verify CRCs would take minutes)."""
    packed = [i for i in infos if i.compress_type != zipfile.ZIP_STORED and not i.is_dir()]
    total = sum(i.file_size for i in packed)
    compressed = sum(i.compress_size for i in packed)
    if total >= BOMB_MIN_BYTES and total > MAX_RATIO * max(compressed, 1):
        raise ZipRefused(
            "AOT007",
            f"{len(packed)} compressed members inflate from {compressed} to {total} "
            "bytes in all (zip bomb?)",
            "torch writes members uncompressed; this file was not written by torch",
        )


def unsafe_member_name(name: str) -> str | None:
    """Why a member name could escape the extraction root, or None when it is safe."""
    if not name:
        return "empty name"
    if "\x00" in name:
        return "contains a NUL byte"
    if any(unicodedata.category(c) == "Cc" for c in name):
        # a newline or an escape sequence would break or forge every message that names it
        return "contains a control character"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/"):
        return "absolute path"
    if len(name) > 1 and name[1] == ":":
        return "drive-letter path"
    if any(part == ".." for part in name.split("/")):
        return "contains '..'"
    return None


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    mode = (info.external_attr >> 16) & 0xFFFF
    return info.create_system == 3 and stat.S_ISLNK(mode)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --- Extracted package folders ---
# A .pt2 package given as an already-extracted folder, read through the same Archive interface.
#
# torch 2.13's C++ loader (`AOTIModelPackageLoader`, and so `load_package`'s fallback) accepts a
# folder, and 2.15's Python `load_package` does too. Two layouts are accepted, as torch accepts
# them: the root folder itself (it holds `archive_format`), or a folder holding that one root
# folder. Member names are presented as in the zip (`<root>/data/...`), so everything downstream
# reads a folder exactly like an archive.
#
# Safety matches the zip reader's: nothing outside the folder is read (symbolic links are refused,
# not followed), the walk stops at the member limit, reads stop at the size limit. A folder has no
# CRCs: `crc_ok` is always true (nothing to compare).


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

    def file_descriptor(self) -> int:
        """A folder is no one file: its members are read from their own files (file_of)."""
        raise CodedPackageError("AOT008", f"{self.path}: a folder, read member by member")

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

    def chunks(self, name: str) -> Iterator[bytes]:
        """Stream one member's file in 1 MiB chunks (bounded memory)."""
        if name not in self.members:
            raise CodedPackageError("AOT006", f"member {name} is missing from the archive")
        try:
            with open(self.file_of(name), "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    yield chunk
        except OSError as exc:
            raise CodedPackageError(
                "AOT008", f"member {name} cannot be read: {exc.strerror}"
            ) from None

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
    if safeio.is_file(path / layout.ARCHIVE_FORMAT):  # a path too long to probe is not one
        base, root = path.parent, path.name
    else:
        roots = [
            entry.name
            for entry in _scandir(path)
            if entry.is_dir(follow_symlinks=False)
            and safeio.is_file(path / entry.name / layout.ARCHIVE_FORMAT)
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
