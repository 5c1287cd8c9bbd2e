"""The compile cache: AOTI packages compiled from an archive's ExportedProgram, keyed by content;
and the trust checks of every cache whose content aotipre later loads or executes."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aotipre.findings import Finding
    from aotipre.pt2.archive import Archive

# Layout: `<cache_dir>/<key>/model.pt2` plus `<key>/entry.json` (what was compiled, when, how
# big). An entry is built in `<cache_dir>/.tmp-<key>-<random>/` and renamed into place in one
# step, so a reader sees either a complete entry or none: a half-written one (an interrupted
# compile) only ever exists under a `.tmp-` name and is never used. entry.json records the
# package's size and sha256; an entry whose package no longer matches them (damaged on disk) is
# treated as absent, and the next compile replaces it. Stale temporary folders are removed after
# a day. The default location is `${XDG_CACHE_HOME:-~/.cache}/aotipre/compile`.
#
# Trust (issue #30): what a cache holds is loaded or executed, so an entry is used only when it
# is aotipre's own: the entry folder and each of its files owned by this user, not writable by
# group or others, plain files and folders (no links), nothing in it but what its manifest lists,
# and every file's size and sha256 as the manifest recorded them after the build (`verify_entry`;
# the compile cache's manifest is entry.json). The cache folder itself must not be writable by
# others (unless sticky, as /tmp): else another user could swap an entry between its check and
# its use (`root_problem`). An entry that fails is never used: it is rebuilt in a fresh folder
# and renamed into place, or, where it cannot be moved away, the cache is not used.

MIN_FREE_BYTES = 256 * 1024 * 1024
"""A cache on a filesystem with less free space than this is not used: a compile writing into
it would fail with ENOSPC and read as the model's compile failing."""
CACHE_FORMAT = 2
"""Bumped whenever the key or the entry layout changes."""
ENTRY_FILE = "entry.json"
PACKAGE_FILE = "model.pt2"
STALE_TMP_S = 24 * 3600
_CHUNK = 1 << 20
MANIFEST_FORMAT = 1
_UNSAFE_BITS = stat.S_IWGRP | stat.S_IWOTH


def path_problem(path: str, *, folder: bool) -> str | None:
    """Why `path` is not aotipre's own cache content (None: it is): a link, not a plain file
    (or folder), another owner, or writable by group or others."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if folder and not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if not folder and not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user ({os.getuid()})"
    if st.st_mode & _UNSAFE_BITS:
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def root_problem(path: str) -> str | None:
    """Why the cache folder `path` cannot hold trusted entries (None: it can): it must be a
    folder owned by this user or root, not writable by group or others unless sticky (there,
    nobody may rename or remove another's entries). A missing folder is no problem."""
    try:
        st = os.stat(path)  # a link to the cache folder is fine: the folder is checked
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid not in (os.getuid(), 0):
        return f"{path} is owned by uid {st.st_uid}, not by this user ({os.getuid()})"
    if st.st_mode & _UNSAFE_BITS and not st.st_mode & stat.S_ISVTX:
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def make_private_root(path: str) -> None:
    """Create the cache folder `path` (and missing parents) readable and writable by this user
    only. Raises OSError."""
    os.makedirs(path, mode=0o700, exist_ok=True)


def seal_files(directory: str, names: Iterable[str]) -> None:
    """Take write permission from group and others on `directory` and its files `names` (a
    build writes with the user's umask, which may grant it). Raises OSError."""
    for path in (directory, *(os.path.join(directory, n) for n in names)):
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode & _UNSAFE_BITS:
            os.chmod(path, mode & ~_UNSAFE_BITS)


def file_record(path: str) -> dict[str, Any]:
    return {"size": os.path.getsize(path), "sha256": file_sha256(path)}


def write_manifest(
    directory: str, manifest_name: str, meta: Mapping[str, Any], files: Iterable[str]
) -> dict[str, Any]:
    """Write `<directory>/<manifest_name>` after a successful build: `meta` (what was built,
    from what inputs) plus `files`: name -> {size, sha256} of each file the entry holds. The
    files and the folder lose group and other write permission first. Raises OSError."""
    names = sorted(files)
    seal_files(directory, names)
    manifest = {
        "format": MANIFEST_FORMAT,
        **dict(meta),
        "files": {name: file_record(os.path.join(directory, name)) for name in names},
        "created": time.time(),
    }
    tmp = os.path.join(directory, manifest_name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(directory, manifest_name))
    return manifest


def verify_entry(
    directory: str, manifest_name: str, expect: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """Check a cache entry before its content is loaded or executed: (its manifest, None) when
    it is aotipre's own and intact, else (None, why not). The folder, the manifest and every
    file must pass `path_problem`; the folder holds exactly the manifest and the files it lists;
    each file has the recorded size and sha256; the manifest has each of `expect`'s values."""
    why = path_problem(directory, folder=True)
    if why is not None:
        return None, why
    manifest_path = os.path.join(directory, manifest_name)
    why = path_problem(manifest_path, folder=False)
    if why is not None:
        return None, why if os.path.lexists(manifest_path) else f"{directory} has no manifest"
    try:
        with open(manifest_path, "rb") as f:
            manifest = json.loads(f.read(1 << 20))
    except (OSError, ValueError) as exc:
        return None, f"{manifest_path} cannot be read: {exc}"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        return None, f"{manifest_path} lists no files"
    for name, value in expect.items():
        if manifest.get(name) != value:
            return None, f"{manifest_path}: {name} is {manifest.get(name)!r}, not {value!r}"
    try:
        present = set(os.listdir(directory)) - {manifest_name}
    except OSError as exc:
        return None, f"{directory}: {exc.strerror or exc}"
    if present != set(files):
        extra = sorted(present ^ set(files))
        return None, f"{directory} does not hold what its manifest lists ({', '.join(extra)})"
    for name, recorded in sorted(files.items()):
        path = os.path.join(directory, name)
        why = path_problem(path, folder=False)
        if why is not None:
            return None, why
        try:
            actual = file_record(path)
        except OSError as exc:
            return None, f"{path}: {exc.strerror or exc}"
        if not isinstance(recorded, dict) or any(recorded.get(k) != actual[k] for k in actual):
            return None, f"{path} is not the file that was built (its size or sha256 differs)"
    return manifest, None


def move_aside(path: str) -> None:
    """Rename the entry `path` out of the way under a `.tmp-` name in its folder (atomic: the
    name is free at once for a fresh entry), then remove it. Raises OSError when it cannot be
    renamed (e.g. another user's entry in a sticky folder)."""
    parent, name = os.path.split(path)
    aside = os.path.join(parent, f".tmp-untrusted-{name}-{os.urandom(4).hex()}")
    os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)


def free_bytes(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on `path`'s filesystem (None: unknown)."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "aotipre", "compile")


def exported_program_members(names: Iterable[str], root: str, model: str) -> list[str]:
    """The archive members a compile of `model` reads: its program JSON, weights, constants and
    stored sample inputs (the example inputs of the compile), sorted."""
    wanted = []
    program = f"{root}/models/{model}.json"
    for name in names:
        if (
            name == program
            or name.startswith((f"{root}/data/weights/", f"{root}/data/constants/"))
            or name == f"{root}/data/sample_inputs/{model}.pt"
        ):
            wanted.append(name)
    return sorted(wanted)


def hash_members(path: str, members: Iterable[str], archive: Archive | None = None) -> str:
    """sha256 over (name, size, bytes) of each member, read in chunks from `archive` (the
    package's, already open) when given, else from the package at `path` (PackageError when
    it cannot be read)."""
    from aotipre.pt2.archive import archive_at

    digest = hashlib.sha256()
    with archive_at(path, archive) as opened:
        for name in members:
            digest.update(f"{name}\0{opened.members[name].size}\0".encode())
            for chunk in opened.chunks(name):
                digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: str) -> str:
    """sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def torch_version() -> str | None:
    """The installed torch's version, from its distribution metadata (torch is not imported)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def compile_key(
    *,
    content_hash: str,
    torch_version: str | None,
    device: str,
    configs: Mapping[str, Any],
    host: Mapping[str, Any] | None = None,
    example_inputs: str | None = None,
) -> str:
    """The cache key: program content, torch version, target device (and host traits that
    change the generated code: CPU ISA, GPU architecture), inductor configs, example inputs."""
    payload = {
        "format": CACHE_FORMAT,
        "content": content_hash,
        "torch": torch_version,
        "device": device,
        "configs": {str(k): configs[k] for k in sorted(configs)},
        "host": dict(host or {}),
        "example_inputs": example_inputs,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def entry_problem(directory: str, key: str) -> str | None:
    """Why the compile-cache entry `directory` must not be used (None: it may): the folder,
    entry.json (its manifest, written after the compile) and model.pt2 must be this user's,
    not writable by group or others, with no links; entry.json names `key`, and the package has
    the size and sha256 it records."""
    package = os.path.join(directory, PACKAGE_FILE)
    record = os.path.join(directory, ENTRY_FILE)
    for path, folder in ((directory, True), (record, False), (package, False)):
        why = path_problem(path, folder=folder)
        if why is not None:
            return why
    try:
        with open(record, "rb") as f:
            meta = json.loads(f.read(1 << 20))
        size = os.path.getsize(package)
        if not isinstance(meta, dict) or meta.get("key") != key:
            return f"{record} is not this entry's record"
        if meta.get("size") != size or meta.get("sha256") != file_sha256(package):
            return f"{package} is not the package that was compiled (size or sha256 differs)"
    except (OSError, ValueError) as exc:
        return f"{record}: {exc}"
    return None


class CacheUnavailable(OSError):
    """The cache directory cannot be used (read-only, not a directory, no space left): the check
    goes on without it (an environment finding, AOT420), never blaming the model."""


@dataclass(frozen=True)
class CacheEntry:
    """A complete cache entry."""

    key: str
    directory: str

    @property
    def package(self) -> str:
        return os.path.join(self.directory, PACKAGE_FILE)


@dataclass(frozen=True)
class PendingEntry:
    """A temporary folder a compile writes into; `commit` publishes it, `discard` drops it."""

    key: str
    directory: str

    @property
    def package(self) -> str:
        return os.path.join(self.directory, PACKAGE_FILE)


class CompileCache:
    """Lookup, create and publish compile-cache entries under one directory."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = os.path.abspath(directory or default_cache_dir())

    def lookup(self, key: str) -> CacheEntry | None:
        """The complete entry for `key`, or None. An entry that is not aotipre's own (see
        `entry_problem`: owner, permissions, links), whose package is missing, or whose size or
        sha256 differs from the recorded one (damaged or replaced on disk), is treated as
        absent; so is every entry of a cache folder others may write to (`root_problem`)."""
        directory = os.path.join(self.directory, key)
        if root_problem(self.directory) is not None or entry_problem(directory, key) is not None:
            return None
        return CacheEntry(key, directory)

    def begin(self, key: str) -> PendingEntry:
        """A pending entry to compile into. Raises CacheUnavailable when the directory cannot
        be created or written, or its filesystem has less than MIN_FREE_BYTES free."""
        try:
            make_private_root(self.directory)
            why = root_problem(self.directory)
            if why is not None:
                raise CacheUnavailable(
                    errno.EPERM, f"not private to this user: {why}", self.directory
                )
            free = free_bytes(self.directory)
            if free is not None and free < MIN_FREE_BYTES:
                raise CacheUnavailable(
                    errno.ENOSPC,
                    f"only {free // (1024 * 1024)} MiB free (a compile needs room)",
                    self.directory,
                )
            self._sweep()
            directory = tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=self.directory)
        except CacheUnavailable:
            raise
        except OSError as exc:
            raise CacheUnavailable(
                exc.errno or errno.EIO, exc.strerror or str(exc), self.directory
            ) from None
        return PendingEntry(key, directory)

    def commit(self, pending: PendingEntry, info: Mapping[str, Any] | None = None) -> CacheEntry:
        """Publish a pending entry whose package was written; first writer wins a race.

        An OSError (e.g. the disk filled up) leaves the pending entry as it was: its package
        stays usable until `discard`."""
        seal_files(pending.directory, [PACKAGE_FILE])
        size = os.path.getsize(pending.package)
        meta = {
            "key": pending.key,
            "size": size,
            "sha256": file_sha256(pending.package),
            "created": time.time(),
            **dict(info or {}),
        }
        tmp = os.path.join(pending.directory, ENTRY_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(pending.directory, ENTRY_FILE))
        final = os.path.join(self.directory, pending.key)
        try:
            os.rename(pending.directory, final)
        except OSError:
            # another process published the same key first (or a broken or untrusted entry sits
            # there: moved aside whole, never repaired in place)
            existing = self.lookup(pending.key)
            if existing is not None:
                self.discard(pending)
                return existing
            with contextlib.suppress(OSError):
                move_aside(final)
            try:
                os.rename(pending.directory, final)
            except OSError:
                # another process replaced the damaged entry in between: use its entry
                existing = self.lookup(pending.key)
                if existing is None:
                    raise
                self.discard(pending)
                return existing
        return CacheEntry(pending.key, final)

    def discard(self, pending: PendingEntry) -> None:
        shutil.rmtree(pending.directory, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove temporary folders older than a day (left by killed compiles)."""
        now = time.time()
        with contextlib.suppress(OSError):
            for name in os.listdir(self.directory):
                if not name.startswith(".tmp-"):
                    continue
                path = os.path.join(self.directory, name)
                with contextlib.suppress(OSError):
                    if now - os.path.getmtime(path) > STALE_TMP_S:
                        shutil.rmtree(path, ignore_errors=True)


def cache_warning(exc: OSError, model: str | None = None) -> Finding:
    """The AOT420 finding for a cache that could not be used (the check went on without it)."""
    from aotipre.findings import codes

    where = exc.filename or "the compile cache"
    return codes.get("AOT420").finding(
        f"the compile cache {where} cannot be used ({exc.strerror or exc}); compiled without it",
        model=model,
        stage="compile",
    )
