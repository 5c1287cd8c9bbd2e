"""Facts about a deployment host, torch-free: this machine's (detected) or a `--target` (described)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field

from aotipre.errors import UsageError

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


@dataclass(frozen=True)
class HostInfo:
    """What a host offers to an AOTI package."""

    description: str
    """`this machine` or the --target text."""
    device_types: frozenset[str]
    """Device types that can run: always cpu, plus cuda when a GPU is present."""
    compute_capabilities: tuple[str, ...] = ()
    """e.g. ('9.0',) for an H100; empty when unknown."""
    cpu_isa: frozenset[str] | None = None
    """ISA words (AOTI_CPU_ISA vocabulary) the CPU supports; None when unknown."""
    platform: str | None = None
    machine: str | None = None
    is_target: bool = False
    """True for a --target description, False for the detected local machine."""
    primary_device: str = "cpu"
    """The device type a --target deploys on."""
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        return {
            "description": self.description,
            "device_types": sorted(self.device_types),
            "compute_capabilities": list(self.compute_capabilities),
            "cpu_isa": None if self.cpu_isa is None else sorted(self.cpu_isa),
            "platform": self.platform,
            "machine": self.machine,
            "is_target": self.is_target,
        }


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
    return HostInfo(
        description="this machine",
        device_types=frozenset(devices),
        compute_capabilities=ccs,
        cpu_isa=_local_isa(),
        platform=platform.system().lower() or None,
        machine=platform.machine() or None,
        notes=tuple(notes),
    )


def parse_target(text: str) -> HostInfo:
    """Parse `--target`: `cuda`, `cpu`, `cuda,cc=9.0`, `cpu,isa=avx2`, `cuda,cc=8.0,isa=avx512`.

    The first word is the device type; `cc=` lists compute capabilities (`8.0+9.0`), `isa=` the
    CPU's best instruction set (avx2, avx512, avx512_vnni, amx_tile), `platform=`/`machine=`.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError("--target is empty; use e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'")
    device = parts[0].lower().split(":", 1)[0]
    if device not in ("cpu", "cuda", "xpu", "mps"):
        raise UsageError(f"--target device {parts[0]!r} is not one of cpu, cuda, xpu, mps")
    devices = {"cpu", device}
    ccs: tuple[str, ...] = ()
    isa: frozenset[str] | None = None
    plat = mach = None
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if not sep or not value:
            raise UsageError(f"--target item {part!r} is not key=value")
        if key == "cc":
            ccs = tuple(_norm_cc(v) for v in value.split("+"))
        elif key == "isa":
            isa = isa_up_to(value.upper())
        elif key == "platform":
            plat = value.lower()
        elif key == "machine":
            mach = value
        else:
            raise UsageError(f"--target key {key!r} is unknown (use cc, isa, platform, machine)")
    return HostInfo(
        description=f"target {text}",
        device_types=frozenset(devices),
        compute_capabilities=ccs,
        cpu_isa=isa,
        platform=plat,
        machine=mach,
        is_target=True,
        primary_device=device,
    )


def isa_up_to(best: str) -> frozenset[str]:
    """The ISA words implied by a best ISA (AVX512_VNNI implies AVX512 and AVX2)."""
    if best in ISA_RANK:
        return frozenset(ISA_RANK[: ISA_RANK.index(best) + 1])
    if best in ISA_FLAGS:
        return frozenset([best])
    raise UsageError(
        f"--target isa {best.lower()!r} is unknown (use one of "
        f"{', '.join(w.lower() for w in ISA_FLAGS)})"
    )


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


def _local_isa() -> frozenset[str] | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
            break
    return frozenset(w for w, need in ISA_FLAGS.items() if all(f in flags for f in need))


def _cuda_compute_capabilities() -> tuple[tuple[str, ...], str | None]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return (), None
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
