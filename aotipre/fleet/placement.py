"""Where a package's check must run: does it need a GPU, and which kinds run its GPU code?
(batch's GPU leases, the Ray engine)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aotipre.foundation.errors import AotipreError

if TYPE_CHECKING:
    from aotipre.api import CheckOptions
    from aotipre.binaries.cuda import GpuImage


class Job(Protocol):
    """What placement reads of a job (batch.PackageJob), named structurally so that batch can
    use this module without an import cycle."""

    @property
    def package(self) -> str: ...

    @property
    def options(self) -> CheckOptions: ...


GPU_KINDS: dict[str, str] = {
    "K80": "3.7", "P100": "6.0", "P4": "6.1", "P40": "6.1", "V100": "7.0", "T4": "7.5",
    "A100": "8.0", "A800": "8.0", "A30": "8.0", "A10": "8.6", "A10G": "8.6", "A40": "8.6",
    "A16": "8.6", "A2": "8.6", "RTX-A6000": "8.6", "L4": "8.9", "L40": "8.9", "L40S": "8.9",
    "L20": "8.9", "H100": "9.0", "H800": "9.0", "H200": "9.0", "H20": "9.0", "GH200": "9.0",
    "B200": "10.0", "GB200": "10.0", "B300": "10.3", "GB300": "10.3", "RTX-PRO-6000": "12.0",
}  # fmt: skip
"""Ray's GPU kinds (the node's `accelerator_type:KIND` resource and `ray.io/accelerator-type`
label, from the NVML name: "NVIDIA H100 80GB HBM3" -> H100) -> compute capability (NVIDIA's
CUDA GPU list). A kind not here (a name Ray shares between generations, such as RTX-6000, or
a card newer than the table) is one aotipre cannot judge."""


@dataclass(frozen=True)
class GpuCode:
    """What a job's GPU code runs on: the images of each readable GPU code member (cubin,
    fatbin) of its CUDA models, else the compute capability its models were compiled for
    (metadata), else nothing known (any GPU may run it)."""

    members: tuple[tuple[GpuImage, ...], ...] = ()
    compiled: tuple[str, ...] = ()
    """Metadata compute capabilities ('90'), used only when no member could be read."""

    def runs_on(self, cc: str) -> bool | None:
        """Does every member have code for a GPU of compute capability `cc` ('9.0')? None:
        unknown. Judged as the static target check judges it (checks/target.py: AOT433,
        AOT402)."""
        if self.members:
            return all(any(i.runs_on(cc) for i in images) for images in self.members)
        if self.compiled:
            return cc.replace(".", "") in self.compiled
        return None

    @property
    def label(self) -> str:
        if self.members:
            return ", ".join(sorted({i.label for images in self.members for i in images}))
        return ", ".join(f"compiled for sm_{c}" for c in self.compiled) or "unknown"


@dataclass(frozen=True)
class Placement:
    """Where a job that needs a GPU goes on a cluster: `kind` (None: any GPU), or nowhere,
    with `why`."""

    kind: str | None = None
    why: str | None = None


def place(code: GpuCode, gpus: Mapping[str | None, float]) -> Placement:
    """The GPU kind a job must ask for, given the cluster's GPUs (kind -> how many; None: GPUs
    of no known kind).

    - Every judged kind runs its code (or none is judged): any GPU; its load then says whether
      the code runs where aotipre could not judge.
    - Some judged kinds do not: the kind that runs it with the most GPUs, the first by name of
      equals (a Ray task asks for one kind).
    - None does: nowhere, with why; a check on such a GPU would fail a package that works on
      its real fleet, and GPUs aotipre cannot judge are not guessed at.
    """
    runs: dict[str | None, bool | None] = {}
    for kind in gpus:
        cc = GPU_KINDS.get(kind) if kind is not None else None
        runs[kind] = code.runs_on(cc) if cc is not None else None
    bad = sorted(k for k, ok in runs.items() if ok is False and k is not None)
    if not bad:
        return Placement()
    good = [k for k, ok in runs.items() if ok and k is not None]
    if good:
        return Placement(kind=min(good, key=lambda k: (-gpus[k], k)))
    unjudged = sum(n for k, n in gpus.items() if runs[k] is None)
    has = ", ".join(f"{_count(gpus[k])} {k} (compute capability {GPU_KINDS[k]})" for k in bad)
    also = (
        f", and {_count(unjudged)} GPU(s) of a kind aotipre cannot judge, where it is not sent"
        if unjudged
        else ""
    )
    return Placement(
        why=f"no GPU of the Ray cluster runs its GPU code ({code.label}): it has {has}{also}"
    )


def _count(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else f"{n:g}"


def needs_gpu(job: Job) -> bool:
    """True when the job's workers will use CUDA (gpu_code: not None)."""
    return gpu_code(job) is not None


def gpu_code(job: Job) -> GpuCode | None:
    """None when the job's workers will not use CUDA; else what its GPU code runs on. CUDA:
    `--device cuda[:N]`, or no device given and a model of the package was compiled (or
    exported) for CUDA. A static-only job needs none.

    Reads the package's metadata and the headers of its GPU code members (no code is loaded);
    a package that cannot be read needs no GPU (its check reports the error without running a
    worker), unless `--device cuda` says so.
    """
    if job.options.static_only:
        return None
    dynamic = job.options.dynamic
    device = dynamic.device if dynamic is not None else None
    if device is not None and not device.startswith("cuda"):
        return None
    from aotipre.pt2.reader import read_package

    try:
        info = read_package(job.package, verify_crc=False)
    except (AotipreError, OSError):
        return GpuCode() if device is not None else None
    chosen = [m for m in info.models if job.options.model in (None, m.name)]
    cuda = [m for m in chosen if (m.device_type or "").startswith("cuda")]
    if not cuda and device is None:
        return None
    parts = [m.aoti for m in cuda if m.aoti is not None]
    members = tuple(
        g.images
        for part in parts
        for g in (part.binaries.gpu if part.binaries else ())
        if g.error is None and g.images
    )
    if members:
        return GpuCode(members=members)
    return GpuCode(
        compiled=tuple(sorted({p.compute_capability for p in parts if p.compute_capability}))
    )
