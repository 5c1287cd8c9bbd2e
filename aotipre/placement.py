"""Where a package's check must run: does it need a GPU? (batch's GPU leases, the Ray engine)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aotipre.errors import AotipreError

if TYPE_CHECKING:
    from aotipre.api import CheckOptions


class Job(Protocol):
    """What placement reads of a job (batch.PackageJob), named structurally so that batch can
    use this module without an import cycle."""

    @property
    def package(self) -> str: ...

    @property
    def options(self) -> CheckOptions: ...


def needs_gpu(job: Job) -> bool:
    """True when the job's workers will use CUDA: `--device cuda[:N]`, or no device given and a
    model of the package was compiled (or exported) for CUDA. A static-only job needs none.

    Reads the package's metadata (no code, no weights) when the device is not given; a package
    that cannot be read needs no GPU: its check reports the error without running a worker.
    """
    if job.options.static_only:
        return False
    dynamic = job.options.dynamic
    device = dynamic.device if dynamic is not None else None
    if device is not None:
        return device.startswith("cuda")
    from aotipre.pt2.reader import read_package

    try:
        info = read_package(job.package, verify_crc=False)
    except (AotipreError, OSError):
        return False
    chosen = [m for m in info.models if job.options.model in (None, m.name)]
    return any((m.device_type or "").startswith("cuda") for m in chosen)
