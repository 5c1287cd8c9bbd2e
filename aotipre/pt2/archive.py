"""Safe, bounded access to a .pt2 zip: member-name validation, size limits, CRC checks.

Nothing is extracted and no member is read whole unless it is small: a member that inflates to
gigabytes is refused from its declared size, and reads stop at a fixed limit whatever the header
claims. Every failure is a PackageError with a stable code and one clear line.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from aotipre.errors import PackageError

MAX_MEMBERS = 100_000
MAX_JSON_BYTES = 64 * 1024 * 1024
"""Largest metadata member (models/*.json, wrapper.cpp, ...) aotipre reads into memory."""
MAX_RATIO = 200
"""A compressed member inflating more than this many times is treated as a zip bomb."""
BOMB_MIN_BYTES = 256 * 1024 * 1024
MAX_MEMBER_BYTES = 1 << 40
"""No real member is a terabyte; a header that says so is forged."""
"""Only members at least this large (declared) can be refused as bombs."""
_CHUNK = 1 << 20


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
    """An open .pt2 zip whose member names have been validated."""

    def __init__(self, path: Path, zf: zipfile.ZipFile, members: dict[str, Member]) -> None:
        self.path = path
        self._zf = zf
        self.members = members

    def close(self) -> None:
        self._zf.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> list[str]:
        return list(self.members)

    def read(self, name: str, limit: int = MAX_JSON_BYTES) -> bytes:
        """Read one member, refusing it if it declares or turns out to exceed `limit` bytes."""
        member = self.members.get(name)
        if member is None:
            raise CodedPackageError("AOT006", f"member {name} is missing from the archive")
        if member.size > limit:
            raise CodedPackageError(
                "AOT007",
                f"member {name} declares {member.size} bytes, more than aotipre reads ({limit})",
            )
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
    if stat.S_ISDIR(st.st_mode):
        raise CodedPackageError("AOT001", f"{p}: is a directory, not a .pt2 file")
    if not stat.S_ISREG(st.st_mode):
        raise CodedPackageError("AOT001", f"{p}: not a regular file")
    if st.st_size == 0:
        raise CodedPackageError("AOT002", f"{p}: empty file, not a .pt2 archive")
    try:
        fh = open(p, "rb")
    except OSError as exc:
        raise CodedPackageError("AOT001", f"{p}: cannot open: {exc.strerror}") from None
    try:
        head = fh.read(4)
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
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
    try:
        members = _validate_members(p, zf)
    except BaseException:
        zf.close()
        raise
    return Archive(p, zf, members)


def _validate_members(path: Path, zf: zipfile.ZipFile) -> dict[str, Member]:
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise CodedPackageError(
            "AOT007", f"{path}: {len(infos)} members, more than aotipre accepts ({MAX_MEMBERS})"
        )
    members: dict[str, Member] = {}
    for info in infos:
        name = info.filename
        problem = unsafe_member_name(name)
        if problem is None and _is_symlink(info):
            problem = "is a symbolic link"
        if problem is not None:
            raise CodedPackageError(
                "AOT003",
                f"{path}: unsafe member {name!r}: {problem}",
                "a .pt2 never holds such members; do not deploy this file",
            )
        if name in members:
            raise CodedPackageError("AOT003", f"{path}: duplicate member {name!r}")
        if info.is_dir():
            continue
        if info.file_size > MAX_MEMBER_BYTES or (
            info.compress_type != zipfile.ZIP_STORED
            and info.file_size >= BOMB_MIN_BYTES
            and info.file_size > MAX_RATIO * max(info.compress_size, 1)
        ):
            raise CodedPackageError(
                "AOT007",
                f"{path}: member {name!r} inflates from {info.compress_size} to "
                f"{info.file_size} bytes (zip bomb?)",
                "torch writes .pt2 members uncompressed; this file was not written by torch",
            )
        members[name] = Member(
            name=name,
            size=info.file_size,
            compressed_size=info.compress_size,
            crc=info.CRC,
            compress_type=info.compress_type,
        )
    return members


def unsafe_member_name(name: str) -> str | None:
    """Why a member name could escape the extraction root, or None when it is safe."""
    if not name:
        return "empty name"
    if "\x00" in name:
        return "contains a NUL byte"
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
