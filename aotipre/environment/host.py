"""Facts about a deployment host, torch-free: this machine's (detected) or a `--target`'s (described).

Longer than the ~600 lines of the other modules on purpose: a target is one record whether detected
here (/proc/cpuinfo, nvidia-smi, glibc, libstdc++, the installed torch) or described by `--target`
(its parser, libtorch and image folders), and the checks compare the two field by field; the
detection and the description of each fact sit side by side so that their spellings and units stay
one.

A target is what a package will meet: a device type, GPUs (compute capabilities, a driver), CPUs
(instruction-set extensions), a C library and a C++ runtime, and a torch (a release, whose shim
exports aotipre ships as data, or a libtorch folder whose exports are read). Unknown facts stay
None and the checks that need them are skipped with a note. Several targets may be checked in
one run (`;` between them); `[tool.aotipre.targets]` names them in the configuration.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from aotipre.foundation.errors import UsageError

if TYPE_CHECKING:
    from aotipre.binaries.torch_bugs import KnownBug

# AOTI_CPU_ISA words (torch/_inductor/cpu_vec_isa.py, upper-cased) -> /proc/cpuinfo flags they need
ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "AVX2": ("avx2", "fma"),
    "AVX512": ("avx512f", "avx512dq", "avx512vl", "avx512bw", "fma"),
    "AVX512_VNNI": ("avx512_vnni",),
    "AMX_TILE": ("amx_tile", "amx_bf16", "amx_int8"),
    "ASIMD": ("asimd",),
    "NEON": ("asimd",),
    "VSX": ("vsx",),
    "ZVECTOR": ("vx",),
}
ISA_RANK = ("AVX2", "AVX512", "AVX512_VNNI", "AMX_TILE")

_V2 = ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")
_V3 = (*_V2, "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")
_V4 = (*_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_BASE = ("sse", "sse2", "mmx", "fxsr", "cmov", "cx8")
ISA_LEVELS: dict[str, tuple[str, ...]] = {
    "x86-64": _BASE,
    "x86-64-v2": (*_BASE, *_V2),
    "avx": (*_BASE, *_V2, "avx", "xsave"),
    "x86-64-v3": (*_BASE, *_V3),
    "x86-64-v4": (*_BASE, *_V4),
    "avx2": (*_BASE, *_V3),
    "avx512": (*_BASE, *_V4),
    "avx512_vnni": (*_BASE, *_V4, "avx512_vnni"),
    "amx_tile": (*_BASE, *_V4, "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"),
    "amx": (*_BASE, *_V4, "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"),
}
"""`isa=` words -> the /proc/cpuinfo flags every CPU of such a fleet has (x86-64 psABI levels;
avx = v2 plus AVX as on Sandy Bridge; avx2 = v3 as on every AVX2 CPU since Haswell; avx512 = v4;
amx = Sapphire Rapids' AMX set)."""

FLAG_LEVELS: dict[str, str] = {
    "sse4_1": "x86-64-v2", "sse4_2": "x86-64-v2", "popcnt": "x86-64-v2",
    "fma": "avx", "f16c": "avx", "xsave": "avx", "vaes": "avx", "vpclmulqdq": "avx",
    "bmi2": "x86-64-v3", "avx_vnni": "x86-64-v3",
    "avx512f": "x86-64-v4", "avx512bw": "x86-64-v4", "avx512cd": "x86-64-v4",
    "avx512dq": "x86-64-v4", "avx512vl": "x86-64-v4", "avx512_bf16": "avx512_vnni",
    "amx_bf16": "amx", "amx_int8": "amx",
}  # fmt: skip
"""An `isa=` /proc/cpuinfo flag -> the level every CPU that has it also has (a flag that is a
level word is that level; other avx512* flags: x86-64-v4, amx_*: amx; any other known flag:
the x86-64 baseline). So `isa=avx512f` is an AVX-512 fleet, not a CPU with avx512f alone."""
NON_X86_FLAGS = ("asimd", "vsx", "vx")
"""The /proc/cpuinfo flags of AOTI_CPU_ISA's aarch64, POWER and s390x words (ISA_FLAGS)."""

TARGET_KEYS = (
    "cc",
    "isa",
    "torch",
    "libtorch",
    "glibc",
    "libstdcxx",
    "image",
    "driver",
    "checks-inputs",
)


TORCH_SYMBOLS = ("aoti_", "Sleef_", "_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch",
                 "_ZNK5torch")  # fmt: skip
"""Prefixes of the symbols a package's .so imports from libtorch: the `aoti_*` shim, SLEEF's
vector math (`Sleef_expf16_u10`: libtorch_cpu bundles and exports it), C++ c10/at/torch. Its
other unversioned imports (a CUDA driver's `cu*`, a custom op library's) come from elsewhere."""


@dataclass(frozen=True)
class TorchRuntime:
    """The torch a package will be loaded by."""

    version: str
    """A release (`2.12`) or a full version (`2.13.0+cpu`)."""
    source: str
    """Where it was learned: `--target torch=`, a libtorch folder, installed here."""
    exports: frozenset[str] | None = None
    """What its libraries export of what a package's .so can import from torch (TORCH_SYMBOLS:
    the `aoti_*` shim, the SLEEF vector math it bundles, c10/ATen/torch C++ symbols), when read
    from a folder; else None, and the shipped table of its release (the shim only) is used."""
    known_bugs: tuple[KnownBug, ...] = ()
    """Known runtime bugs its files show (binaries/torch_bugs.py), when read from a folder."""

    @property
    def release(self) -> str:
        parts = self.version.split("+")[0].split(".")
        return ".".join(parts[:2])


@dataclass(frozen=True)
class HostInfo:
    """What a host offers to an AOTI package."""

    description: str
    """`this machine` or the --target text."""
    device_types: frozenset[str]
    """Device types that can run: always cpu, plus cuda when a GPU is present."""
    compute_capabilities: tuple[str, ...] = ()
    """e.g. ('9.0',) for an H100; a fleet lists every GPU kind; empty when unknown."""
    cpu_isa: frozenset[str] | None = None
    """ISA words (AOTI_CPU_ISA vocabulary) the CPU supports; None when unknown."""
    platform: str | None = None
    machine: str | None = None
    is_target: bool = False
    """True for a --target description, False for the detected local machine."""
    primary_device: str = "cpu"
    """The device type a --target deploys on."""
    notes: tuple[str, ...] = field(default=())
    name: str | None = None
    """The target's name in `[tool.aotipre.targets]`, when it has one."""
    cpu_flags: frozenset[str] | None = None
    """/proc/cpuinfo flags every CPU of the target has (None: unknown)."""
    torch: TorchRuntime | None = None
    glibc: str | None = None
    """e.g. `2.31`."""
    glibcxx: str | None = None
    """The newest GLIBCXX_ version its libstdc++ defines, e.g. `3.4.29`."""
    cxxabi: str | None = None
    driver: str | None = None
    """NVIDIA driver version, e.g. `535.104.05` or `535`."""
    checks_inputs: bool | None = None
    """The deployment's serving process sets AOTI_RUNTIME_CHECK_INPUTS (`checks-inputs=yes`);
    None: the target does not say (judged as a default deployment, which does not)."""

    @property
    def label(self) -> str:
        """The target's name, its spec, or `this machine`."""
        return self.name or self.description.removeprefix("target ")

    def to_dict(self) -> dict[str, object]:
        return {
            "description": self.description,
            "name": self.name,
            "device_types": sorted(self.device_types),
            "compute_capabilities": list(self.compute_capabilities),
            "cpu_isa": None if self.cpu_isa is None else sorted(self.cpu_isa),
            "cpu_flags": None if self.cpu_flags is None else len(self.cpu_flags),
            "platform": self.platform,
            "machine": self.machine,
            "is_target": self.is_target,
            "torch": None
            if self.torch is None
            else {
                "version": self.torch.version,
                "source": self.torch.source,
                "known_bugs": [b.to_dict() for b in self.torch.known_bugs],
            },
            "glibc": self.glibc,
            "glibcxx": self.glibcxx,
            "checks_inputs": self.checks_inputs,
            "driver": self.driver,
        }


# ------------------------------------------------------------------------------ this machine


def detect_local(*, probe_cuda: bool = True) -> HostInfo:
    """Describe this machine without importing torch (reads /proc, asks nvidia-smi if present)."""
    devices = {"cpu"}
    ccs: tuple[str, ...] = ()
    notes = []
    if probe_cuda:
        ccs, note = _cuda_compute_capabilities()
        if ccs or os.path.exists("/proc/driver/nvidia/version"):
            devices.add("cuda")
        if note:
            notes.append(note)
    flags = _local_flags()
    glibcxx, cxxabi = _libstdcxx_versions(_local_libstdcxx())
    system, machine = _system_and_machine()
    return HostInfo(
        description="this machine",
        device_types=frozenset(devices),
        compute_capabilities=ccs,
        cpu_isa=None if flags is None else isa_words(flags),
        platform=system.lower() or None,
        machine=machine or None,
        notes=tuple(notes),
        cpu_flags=flags,
        torch=_local_torch(),
        glibc=_local_glibc(),
        glibcxx=glibcxx,
        cxxabi=cxxabi,
        driver=_local_driver(),
    )


def _system_and_machine() -> tuple[str, str]:
    """platform.system() and platform.machine(): os.uname()'s, which is what `platform` reads
    where there is one, without importing it (~1.5 ms of the static lane's start-up time)."""
    if hasattr(os, "uname"):
        uname = os.uname()
        return uname.sysname, uname.machine
    import platform

    return platform.system(), platform.machine()


def isa_words(flags: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w, need in ISA_FLAGS.items() if all(f in flags for f in need))


def _local_flags() -> frozenset[str] | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def _local_torch() -> TorchRuntime | None:
    """The torch installed next to aotipre: its torch/version.py, read as text (torch is not
    imported; importlib.metadata would take ~45 ms to scan the environment)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    version = _libtorch_version(list(spec.submodule_search_locations)[0])
    return None if version is None else TorchRuntime(version, "installed here")


def _local_glibc() -> str | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    found = re.fullmatch(r"glibc (\d+\.\d+(?:\.\d+)?)", text.strip())
    return found.group(1) if found else None


def _local_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as fh:
            text = fh.read(4096)
    except OSError:
        return None
    found = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


_LIBSTDCXX_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
    "/lib",
)


def _local_libstdcxx() -> str | None:
    """The libstdc++ a python process here loads: the environment's own first (conda), else
    the system's."""
    import sys

    for folder in (os.path.join(sys.prefix, "lib"), *_LIBSTDCXX_DIRS):
        path = os.path.join(folder, "libstdc++.so.6")
        if os.path.isfile(path):
            return path
    return None


def _libstdcxx_versions(path: str | None) -> tuple[str | None, str | None]:
    """The newest GLIBCXX_ and CXXABI_ versions a libstdc++.so.6 defines (its verdef table)."""
    versions = _defined_versions(path)
    return _newest(versions, "GLIBCXX_"), _newest(versions, "CXXABI_")


def _defined_versions(path: str | None) -> tuple[str, ...]:
    if path is None:
        return ()
    from aotipre.binaries.elf import ElfError, ElfFile
    from aotipre.binaries.source import SourceError, open_file

    try:
        with open_file(path) as source:
            return ElfFile(source).version_definitions()
    except (ElfError, SourceError):
        return ()


def _newest(versions: tuple[str, ...], prefix: str) -> str | None:
    from aotipre.binaries.elf import highest

    best = highest(versions, prefix)
    return None if best is None else best[len(prefix) :]


# ------------------------------------------------------------------------------ --target


def parse_targets(text: str | None, named: Mapping[str, str] | None = None) -> list[HostInfo]:
    """`--target`: one or more specs separated by `;`, each a spec or a name from
    `[tool.aotipre.targets]`. Without text, every named target (in the table's order)."""
    named = named or {}
    if text is None:
        return [replace(parse_target(spec), name=name) for name, spec in named.items()]
    out = []
    for item in (p.strip() for p in text.split(";")):
        if not item:
            continue
        if item in named:
            out.append(replace(parse_target(named[item]), name=item))
        elif is_target_name(item):
            known = ", ".join(named) or "none is configured"
            raise UsageError(
                f"--target {item!r} is neither a target spec (e.g. 'cuda,cc=9.0') nor a name "
                f"in [tool.aotipre.targets] ({known})"
            )
        else:
            out.append(parse_target(item))
    if not out:
        raise UsageError("--target is empty; use e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'")
    return out


def is_target_name(item: str) -> bool:
    """A bare word that is not a device type: a name from `[tool.aotipre.targets]`."""
    word = item.strip()
    return re.fullmatch(r"[A-Za-z0-9_.-]+", word) is not None and word.lower().split(":")[
        0
    ] not in ("cpu", "cuda", "xpu", "mps")


def parse_target(text: str) -> HostInfo:
    """Parse one target: `cuda,cc=8.0,8.6,9.0,driver=535,torch=2.12` or `cpu,isa=avx2,glibc=2.31`.

    The first word is the device type. Keys: `cc=` compute capabilities (a fleet: every GPU
    kind, separated by `,` or `+`), `isa=` what every CPU has (x86-64-v2/v3/v4, avx, avx2,
    avx512, avx512_vnni, amx, or /proc/cpuinfo flags joined by `+`, each with the level it
    implies: FLAG_LEVELS), `torch=` a release (2.11-2.15), `libtorch=PATH` a libtorch or
    site-packages folder whose exports are read, `glibc=`, `libstdcxx=` (GLIBCXX version, e.g.
    3.4.29), `image=PATH` an unpacked container root (its glibc, libstdc++ and torch are read),
    `driver=` the NVIDIA driver, `platform=`, `machine=`, `checks-inputs=yes|no` whether its
    serving process sets AOTI_RUNTIME_CHECK_INPUTS. Each key once (UsageError otherwise).
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError("--target is empty; use e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'")
    device = parts[0].lower().split(":", 1)[0]
    if device not in ("cpu", "cuda", "xpu", "mps"):
        raise UsageError(f"--target device {parts[0]!r} is not one of cpu, cuda, xpu, mps")
    fields: dict[str, object] = {}
    ccs: list[str] = []
    key = None
    seen: set[str] = set()
    for part in parts[1:]:
        name, sep, value = part.partition("=")
        if not sep and key == "cc":  # `cc=8.0,8.6,9.0`: the list goes on
            ccs.append(_norm_cc(part))
            continue
        key = name.strip().lower()
        value = value.strip()
        if not sep or not value:
            raise UsageError(f"--target item {part!r} is not key=value")
        if key in seen:
            raise UsageError(_repeated_key(key, text))
        seen.add(key)
        if key == "cc":
            ccs.extend(_norm_cc(v) for v in value.split("+"))
        else:
            fields.update(_target_value(key, value))
    flags = fields.pop("cpu_flags", None)
    return HostInfo(
        description=f"target {text.strip()}",
        device_types=frozenset({"cpu", device}),
        compute_capabilities=tuple(dict.fromkeys(ccs)),
        cpu_isa=None if flags is None else isa_words(flags),  # type: ignore[arg-type]
        is_target=True,
        primary_device=device,
        cpu_flags=flags,  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )


def _repeated_key(key: str, text: str) -> str:
    how = {
        "cc": " (list every GPU kind in one: cc=8.0,9.0)",
        "isa": " (join ISA words with '+' in one: isa=avx2+avx512_vnni)",
    }.get(key, "")
    return f"--target {text.strip()!r} gives {key}= twice; give each key once{how}"


_YES = ("yes", "true", "1", "on")
_NO = ("no", "false", "0", "off")


def _target_value(key: str, value: str) -> dict[str, object]:
    if key == "isa":
        return {"cpu_flags": isa_flags(value)}
    if key == "platform":
        return {"platform": value.lower()}
    if key == "machine":
        return {"machine": value}
    if key == "torch":
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?([+.\w]*)?", value):
            raise UsageError(f"--target torch={value!r} is not a torch version like 2.12")
        return {"torch": TorchRuntime(value, f"--target torch={value}")}
    if key == "libtorch":
        return {"torch": read_libtorch(value)}
    if key == "glibc":
        return {"glibc": _version_value(key, value.removeprefix("GLIBC_"))}
    if key == "libstdcxx":
        return {"glibcxx": _version_value(key, value.removeprefix("GLIBCXX_"))}
    if key == "driver":
        return {"driver": _version_value(key, value)}
    if key == "image":
        return read_image(value)
    if key == "checks-inputs":
        word = value.lower()
        if word not in _YES + _NO:
            raise UsageError(f"--target checks-inputs={value!r} is not yes or no")
        return {"checks_inputs": word in _YES}
    raise UsageError(
        f"--target key {key!r} is unknown (use {', '.join(TARGET_KEYS)}, platform, machine)"
    )


def _version_value(key: str, value: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)*", value):
        raise UsageError(f"--target {key}={value!r} is not a version number")
    return value


def isa_flags(value: str) -> frozenset[str]:
    """`isa=` value -> /proc/cpuinfo flags: level words and/or flags joined by `+`, each flag
    with the level it implies (FLAG_LEVELS). UsageError (one line) for an unknown word."""
    flags: set[str] = set()
    known = isa_flag_names()
    for word in (w.strip().lower() for w in value.split("+")):
        if word in ISA_LEVELS:
            flags.update(ISA_LEVELS[word])
        elif word in known:
            flags.update(ISA_LEVELS.get(_flag_level(word), ()))
            flags.add(word)
        else:
            raise UsageError(_unknown_isa(word, known))
    return frozenset(flags)


def isa_flag_names() -> frozenset[str]:
    """The /proc/cpuinfo flags `isa=` accepts: those of the levels, those a compiler flag
    enables (binaries.facts.GCC_FLAGS: what a package can need), and the non-x86 ones."""
    from aotipre.binaries.facts import GCC_FLAGS

    return frozenset(
        {f for level in ISA_LEVELS.values() for f in level}
        | set(GCC_FLAGS.values())
        | set(NON_X86_FLAGS)
    )


def _flag_level(flag: str) -> str:
    if flag in FLAG_LEVELS:
        return FLAG_LEVELS[flag]
    if flag.startswith("avx512"):
        return "x86-64-v4"
    if flag.startswith("amx"):
        return "amx"
    return "" if flag in NON_X86_FLAGS else "x86-64"


def _unknown_isa(word: str, known: frozenset[str]) -> str:
    import difflib

    if not word:
        return "--target isa= has an empty word (join ISA words with '+', e.g. isa=avx2+avx512f)"
    close = difflib.get_close_matches(word, [*ISA_LEVELS, *known], n=1, cutoff=0.8)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"--target isa {word!r} is unknown{guess}: use a level ({', '.join(ISA_LEVELS)}) or "
        f"/proc/cpuinfo flags joined by '+' ({', '.join(sorted(known - set(ISA_LEVELS)))})"
    )


def read_libtorch(path: str, *, image: _Image | None = None) -> TorchRuntime:
    """A libtorch distribution, a torch package folder or a site-packages folder: its version
    and what its libraries (libtorch*.so, libc10*.so) export of TORCH_SYMBOLS (their dynamic
    symbol tables). `image`: the unpacked image `path` lies in (its links resolve inside it)."""
    if image is None:
        root, shown = os.path.abspath(os.path.expanduser(path)), f"--target libtorch={path}"
        resolve: Callable[[str], str] = os.path.normpath
    else:
        root, shown, resolve = path, image.shown, image.path
    for folder in (root, os.path.join(root, "torch")):
        lib_dir = resolve(os.path.join(folder, "lib"))
        if os.path.isfile(resolve(os.path.join(lib_dir, "libtorch_cpu.so"))):
            break
    else:
        raise UsageError(f"{shown}: no lib/libtorch_cpu.so or torch/lib/ there")
    from aotipre.binaries.elf import ElfError, ElfFile
    from aotipre.binaries.source import SourceError, open_file
    from aotipre.binaries.torch_bugs import read_known_bugs

    try:
        names = sorted(os.listdir(lib_dir))
    except OSError as exc:
        raise UsageError(f"{shown}: cannot list {lib_dir}: {exc.strerror or exc}") from None
    exports: set[str] = set()
    for name in names:
        if not any(fnmatch.fnmatchcase(name, p) for p in ("libtorch*.so", "libc10*.so")):
            continue
        try:
            with open_file(resolve(os.path.join(lib_dir, name))) as source:  # a regular file
                symbols = ElfFile(source).dynamic_symbols()
        except (ElfError, SourceError) as exc:
            raise UsageError(f"{shown}: {name}: {exc}") from None
        exports.update(s.name for s in symbols if s.defined and s.name.startswith(TORCH_SYMBOLS))
    version = _libtorch_version(folder, shown, resolve) or "unknown"
    bugs = read_known_bugs(folder, lib_dir, resolve)
    return TorchRuntime(version, f"libtorch {path}", frozenset(exports), bugs)


_VERSION_FILES = (("build-version", 4096), ("version.txt", 4096), ("version.py", 1 << 16))
"""The files a torch folder records its version in, with the most bytes read of each."""


def _libtorch_version(
    folder: str, shown: str | None = None, resolve: Callable[[str], str] = os.path.normpath
) -> str | None:
    """The version `folder` records, each file read through safeio.read_text (a regular file,
    bounded, never blocking, strict UTF-8). `shown` names the folder in the one-line
    UsageError for a version file that is there but cannot be read (a FIFO, a directory, a
    link loop, not UTF-8); None (the torch installed here): such a file is skipped."""
    from aotipre.foundation.safeio import read_text

    for name, limit in _VERSION_FILES:
        path = resolve(os.path.join(folder, name))
        if not os.path.lexists(path):
            continue
        try:
            text = read_text(path, f"{shown}: {name}" if shown else path, limit)
        except UsageError:
            if shown is None:
                continue
            raise
        if name == "version.py":
            found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
            return found.group(1) if found else None
        if text.strip():
            return text.strip()[:100]
    return None


@dataclass(frozen=True)
class _Image:
    """An unpacked container root, whose paths are resolved as the image itself sees them."""

    root: str
    """The root, links resolved."""
    shown: str
    """`--target image=PATH` as given, for messages."""

    def path(self, path: str) -> str:
        """`path` (under the root) with every symbolic link in it resolved inside the image: an
        absolute target /lib/x is ROOT/lib/x, never this host's /lib/x. UsageError (one line)
        for a link that leads out of the root (`..` above it) or a link loop."""
        rel = os.path.relpath(path, self.root)
        todo = [p for p in rel.split(os.sep) if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if not done:
                    raise UsageError(
                        f"{self.shown}: {rel}: a symbolic link leads out of the image; refusing "
                        "to read this host's files for it"
                    )
                done.pop()
                continue
            try:
                link = os.readlink(os.path.join(self.root, *done, part))
            except OSError:  # not a link, or missing: looked up as it is
                done.append(part)
                continue
            hops += 1
            if hops > 40:
                raise UsageError(f"{self.shown}: {rel}: a symbolic link loop")
            if link.startswith("/"):
                done = []
            todo = [p for p in link.split("/") if p not in ("", ".")] + todo
        return os.path.join(self.root, *done)

    def glob(self, pattern: str) -> list[str]:
        """The existing paths matching `pattern` (relative to the root, `*` within a name),
        resolved inside the image."""
        found = [self.root]
        for part in pattern.split("/"):
            matched: list[str] = []
            for base in found:
                if not any(c in part for c in "*?["):
                    matched.append(self.path(os.path.join(base, part)))
                    continue
                try:
                    names = sorted(os.listdir(base))
                except OSError:
                    continue
                matched += [
                    self.path(os.path.join(base, n))
                    for n in names
                    if not n.startswith(".") and fnmatch.fnmatchcase(n, part)
                ]
            found = matched
        return sorted({p for p in found if os.path.exists(p)})


def read_image(path: str) -> dict[str, object]:
    """An unpacked container root: its glibc, libstdc++ and (when installed) torch. Its links
    are resolved inside it (`_Image`): an absolute link reads the image's file, not this
    host's."""
    given = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(given):
        raise UsageError(f"--target image={path}: not a folder (unpack the image first)")
    image = _Image(os.path.realpath(given), f"--target image={path}")
    out: dict[str, object] = {}
    libc = _first(image, ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib64",
                          "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib", "usr/lib"),
                  "libc.so.6")  # fmt: skip
    glibc = _newest(_defined_versions(libc), "GLIBC_")
    if glibc is None:
        raise UsageError(f"--target image={path}: no readable libc.so.6 in it")
    out["glibc"] = glibc
    conda = image.glob("opt/conda/lib")
    cxx = _first(image, (*(os.path.relpath(c, image.root) for c in conda),
                         "usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/aarch64-linux-gnu",
                         "usr/lib", "lib"),
                 "libstdc++.so.6")  # fmt: skip
    out["glibcxx"], out["cxxabi"] = _libstdcxx_versions(cxx)
    torches = sorted(
        image.glob("usr/local/lib/python3*/*-packages/torch")
        + image.glob("usr/lib/python3*/*-packages/torch")
        + image.glob("opt/conda/lib/python3*/site-packages/torch")
    )
    if torches:
        out["torch"] = read_libtorch(torches[0], image=image)
    return out


def _first(image: _Image, folders: tuple[str, ...], name: str) -> str | None:
    for folder in folders:
        path = image.path(os.path.join(image.root, folder, name))
        if os.path.isfile(path):
            return path
    return None


def _norm_cc(value: str) -> str:
    v = value.strip().lower().removeprefix("sm_").removeprefix("sm")
    if v.isdigit() and len(v) >= 2:
        v = f"{v[:-1]}.{v[-1]}"
    try:
        major, minor = v.split(".")
        int(major), int(minor)
    except ValueError:
        raise UsageError(f"--target cc {value!r} is not a compute capability like 9.0") from None
    return v


def _cuda_compute_capabilities() -> tuple[tuple[str, ...], str | None]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return (), None
    import subprocess  # imported here: only a host with nvidia-smi runs it (start-up time)

    try:
        out = subprocess.run(
            [exe, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return (), f"nvidia-smi failed: {exc}"
    if out.returncode != 0:
        return (), "nvidia-smi found no usable GPU"
    try:
        ccs = tuple(_norm_cc(line) for line in out.stdout.split() if line.strip())
    except UsageError:
        return (), f"nvidia-smi printed an unexpected compute capability: {out.stdout[:40]!r}"
    return ccs, None
