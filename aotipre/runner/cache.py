"""The compile cache: AOTI packages compiled from an archive's ExportedProgram, keyed by content."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import zipfile
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

MIN_FREE_BYTES = 256 * 1024 * 1024
"""A cache on a filesystem with less free space than this is not used: a compile writing into
it would fail with ENOSPC and read as the model's compile failing."""
CACHE_FORMAT = 2
"""Bumped whenever the key or the entry layout changes."""
ENTRY_FILE = "entry.json"
PACKAGE_FILE = "model.pt2"
STALE_TMP_S = 24 * 3600
_CHUNK = 1 << 20


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
    package's, already open) when given, else from the zip at `path`."""
    digest = hashlib.sha256()
    if archive is not None:
        for name in members:
            digest.update(f"{name}\0{archive.members[name].size}\0".encode())
            for chunk in archive.chunks(name):
                digest.update(chunk)
        return digest.hexdigest()
    with zipfile.ZipFile(path) as zf:
        for name in members:
            info = zf.getinfo(name)
            digest.update(f"{name}\0{info.file_size}\0".encode())
            with zf.open(info) as member:
                while chunk := member.read(_CHUNK):
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
        """The complete entry for `key`, or None. An entry whose package is missing, or whose
        size or sha256 differs from the recorded one (damaged on disk), is treated as absent."""
        directory = os.path.join(self.directory, key)
        package = os.path.join(directory, PACKAGE_FILE)
        try:
            with open(os.path.join(directory, ENTRY_FILE)) as f:
                meta = json.load(f)
            size = os.path.getsize(package)
            if not isinstance(meta, dict) or meta.get("size") != size or meta.get("key") != key:
                return None
            if meta.get("sha256") != file_sha256(package):
                return None
        except (OSError, ValueError):
            return None
        return CacheEntry(key, directory)

    def begin(self, key: str) -> PendingEntry:
        """A pending entry to compile into. Raises CacheUnavailable when the directory cannot
        be created or written, or its filesystem has less than MIN_FREE_BYTES free."""
        try:
            os.makedirs(self.directory, exist_ok=True)
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
        size = os.path.getsize(pending.package)
        meta = {
            "key": pending.key,
            "size": size,
            "sha256": file_sha256(pending.package),
            "created": time.time(),
            **dict(info or {}),
        }
        tmp = os.path.join(pending.directory, ENTRY_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(pending.directory, ENTRY_FILE))
        final = os.path.join(self.directory, pending.key)
        try:
            os.rename(pending.directory, final)
        except OSError:
            # another process published the same key first (or a broken entry sits there)
            existing = self.lookup(pending.key)
            if existing is not None:
                self.discard(pending)
                return existing
            with contextlib.suppress(OSError):
                shutil.rmtree(final)
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
    from aotipre import codes

    where = exc.filename or "the compile cache"
    return codes.get("AOT420").finding(
        f"the compile cache {where} cannot be used ({exc.strerror or exc}); compiled without it",
        model=model,
        stage="compile",
    )
