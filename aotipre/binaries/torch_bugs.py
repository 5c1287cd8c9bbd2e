"""Known bugs of the torch runtime a package will meet, fingerprinted offline in an installed
torch folder: its Python loader's source (read as text, never imported) and libtorch_cpu.so's
symbol names. A bug is reported only where the files really show it, with that evidence.

What each fingerprint reads (torch 2.11.0, 2.13.0, 2.14.1 and 2.15.0 all have all four):
- #194128, the C++ loader's JSON race: the function-local static `json_obj` of
  model_package_loader.cpp's `load_json_file` (its mangled name in libtorch_cpu's .strtab).
  C++ servers that construct several AOTIModelPackageLoaders at once.
- #191715, the compiler-based CPU-ISA probe on every Python load: `_load_aoti` calls
  `get_device_information()`, whose `pick_vec_isa()` builds and dlopens a test program per ISA
  (a fixed cpu_vec_isa.py reads the ISA list from cpuinfo: `cpuinfo_vec_isa_list`, PR #192394).
- #196026, every model of a multi-model package constructed: `load_package(path, name)` calls
  `load_pt2`, which builds a runner (extract, dlopen, copy the constants) for every
  data/aotinductor/<model>/ folder; a fixed `load_pt2` takes `aoti_model_names`.
- #196025, the metadata read twice per load: `_load_aoti` calls
  `load_metadata_from_package` (extract and parse wrapper_metadata.json) before constructing
  the loader, which reads it again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from aotipre.binaries.elf import ElfError, ElfFile
from aotipre.binaries.source import SourceError, open_file
from aotipre.foundation.errors import UsageError

_JSON_RACE = re.compile(rb"_ZZN5torch8inductor\w{0,40}14load_json_file\w{0,200}E8json_obj")
"""The mangled name of load_json_file's static `json_obj` (as runner/worker/cpp.py reads it)."""
MAX_SOURCE_BYTES = 1 << 20
"""A torch loader source file read (real: _package.py 2.15, 47 KB)."""
CHUNK = 8 << 20
"""Bytes of libtorch_cpu's .strtab searched at a time (real: 78 MB in 2.15.0)."""
MAX_STRTAB_BYTES = 1 << 30
"""A .strtab larger than this is not searched."""

PACKAGE_PY = ("export", "pt2_archive", "_package.py")
LOAD_PACKAGE_PY = ("_inductor", "package", "package.py")
VEC_ISA_PY = ("_inductor", "cpu_vec_isa.py")


@dataclass(frozen=True)
class KnownBug:
    """One known bug the files of a torch folder show."""

    issue: int
    """The pytorch/pytorch issue or PR number."""
    what: str
    """One line: what goes wrong."""
    evidence: str
    """Where the files show it: `file:line` and what is there, or the symbol."""
    applies_to: str
    """python (aoti_load_package / load_package) or cpp (a C++ AOTIModelPackageLoader)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "issue": self.issue,
            "what": self.what,
            "evidence": self.evidence,
            "applies_to": self.applies_to,
        }


def read_known_bugs(
    folder: str, lib_dir: str, resolve: Callable[[str], str] = os.path.normpath
) -> tuple[KnownBug, ...]:
    """The known bugs `folder` (a torch package folder, or a libtorch distribution: then only
    its libraries are read) shows. Unreadable files are skipped: a bug is only reported with
    its evidence."""
    found: list[KnownBug] = []
    race = _json_race(resolve(os.path.join(lib_dir, "libtorch_cpu.so")))
    if race:
        found.append(
            KnownBug(
                194128,
                "the C++ loader parses package JSON into one shared static object: "
                "AOTIModelPackageLoaders constructed at once in one process can corrupt the heap",
                f"libtorch_cpu.so defines {race}",
                "cpp",
            )
        )
    package = _source(folder, PACKAGE_PY, resolve)
    loader = _function(package, "_load_aoti") if package else None
    if loader is not None:
        at = _call_line(loader, "get_device_information(")
        vec = _source(folder, VEC_ISA_PY, resolve)
        if at is not None and vec is not None and "cpuinfo_vec_isa_list" not in vec:
            found.append(
                KnownBug(
                    191715,
                    "every aoti_load_package runs torch's compiler-based CPU-ISA probe: a test "
                    "program built and dlopened per ISA before the package is touched",
                    f"torch/{'/'.join(PACKAGE_PY)}:{at} _load_aoti calls "
                    "get_device_information() (pick_vec_isa)",
                    "python",
                )
            )
        meta = _call_line(loader, "load_metadata_from_package(")
        ctor = _call_line(loader, "AOTIModelPackageLoader(")
        if meta is not None and ctor is not None:
            found.append(
                KnownBug(
                    196025,
                    "each load opens the package and extracts and parses its metadata twice",
                    f"torch/{'/'.join(PACKAGE_PY)}:{meta} _load_aoti calls "
                    f"load_metadata_from_package before the loader (line {ctor}) reads it again",
                    "python",
                )
            )
    pt2 = _function(package, "load_pt2") if package else None
    entry = _source(folder, LOAD_PACKAGE_PY, resolve)
    load_package = _function(entry, "load_package") if entry else None
    if pt2 is not None and load_package is not None:
        signature = pt2.text.split(":\n", 1)[0]
        at = _call_line(load_package, "load_pt2(")
        if "aoti_model_names" not in signature and at is not None:
            found.append(
                KnownBug(
                    196026,
                    "load_package(path, name) constructs a runner for every model of a "
                    "multi-model package (extracts it, dlopens its .so, copies its constants)",
                    f"torch/{'/'.join(LOAD_PACKAGE_PY)}:{at} load_package calls load_pt2, "
                    "which takes no model filter",
                    "python",
                )
            )
    return tuple(found)


@dataclass(frozen=True)
class _Function:
    text: str
    first_line: int


def _source(folder: str, parts: tuple[str, ...], resolve: Callable[[str], str]) -> str | None:
    from aotipre.foundation.safeio import read_text

    path = resolve(os.path.join(folder, *parts))
    if not os.path.isfile(path):
        return None
    try:
        return read_text(path, path, MAX_SOURCE_BYTES)
    except UsageError:
        return None


def _function(source: str | None, name: str) -> _Function | None:
    """The text of top-level `def name(` up to the next top-level statement."""
    if source is None:
        return None
    m = re.search(rf"^def {re.escape(name)}\(", source, re.M)
    if m is None:
        return None
    end = re.search(r"^[A-Za-z_@]", source[m.end() :], re.M)
    text = source[m.start() : m.end() + end.start()] if end else source[m.start() :]
    return _Function(text, source.count("\n", 0, m.start()) + 1)


def _call_line(fn: _Function, call: str) -> int | None:
    """The line of the first `call` in `fn` outside comments."""
    for i, line in enumerate(fn.text.splitlines()):
        code = line.split("#", 1)[0]
        if call in code and not code.lstrip().startswith(("def ", '"', "'")):
            return fn.first_line + i
    return None


def _json_race(path: str) -> str | None:
    """The mangled name of load_json_file's static json_obj in `path`'s .strtab, or None."""
    try:
        with open_file(path) as source:
            elf = ElfFile(source)
            table = elf.section(".strtab")
            if table is None or table.size > MAX_STRTAB_BYTES:
                return None
            overlap = 512
            offset = 0
            while offset < table.size:
                size = min(CHUNK + overlap, table.size - offset)
                data = elf.section_bytes_at(table, offset, size)
                m = _JSON_RACE.search(data)
                if m is not None:
                    return m.group(0).decode("ascii", "replace")
                offset += CHUNK
    except (ElfError, SourceError, OSError):
        return None
    return None
