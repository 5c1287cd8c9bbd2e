"""The GPUs this run may use (nvidia-smi, torch-free) and the pool that lends one per package."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from aotipre.foundation.errors import UsageError

if TYPE_CHECKING:
    from aotipre.findings import Report
    from aotipre.fleet.placement import Job

PIN_ENV = "CUDA_VISIBLE_DEVICES"
"""What pins a package's workers to their GPU: set to the GPU's UUID, so that the mapping does
not depend on CUDA's device order (CUDA_DEVICE_ORDER) or an inherited renumbering."""
QUERY = ("--query-gpu=index,name,uuid", "--format=csv,noheader")
TIMEOUT_S = 10.0
"""nvidia-smi answers in well under a second; a hung driver must not hang the run."""

J = TypeVar("J", bound="Job")


@dataclass(frozen=True)
class Gpu:
    """One GPU the run may use."""

    index: int | None
    """nvidia-smi's index (what `nvidia-smi` and `--gpus` call it); None for a device of an
    inherited CUDA_VISIBLE_DEVICES that nvidia-smi cannot name (a MIG instance, or an index
    when CUDA's device order may differ from nvidia-smi's)."""
    name: str
    """e.g. `NVIDIA H100 80GB HBM3`; `?` when unknown."""
    uuid: str
    """`GPU-...`; for a device kept as given, the text CUDA_VISIBLE_DEVICES named it by. The
    value a pinned package's workers get as their CUDA_VISIBLE_DEVICES."""

    @property
    def label(self) -> str:
        """`0 NVIDIA H100 80GB HBM3 (GPU-5a1c...)`, or the text it was given as."""
        if self.index is None:
            return self.uuid if self.name == "?" else f"{self.name} ({self.uuid})"
        return f"{self.index} {self.name} ({self.uuid})"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid}


def visible_gpus(
    env: Mapping[str, str] | None = None, *, nvidia_smi: str = "nvidia-smi"
) -> list[Gpu]:
    """The GPUs a process started with `env` (default: this one's) can use, in CUDA's order:
    every GPU nvidia-smi lists, narrowed by an inherited CUDA_VISIBLE_DEVICES. No nvidia-smi,
    or one that fails or hangs: none. Never imports torch."""
    env = os.environ if env is None else env
    gpus = _nvidia_smi_gpus(nvidia_smi, env)
    setting = env.get(PIN_ENV)
    if setting is None or not gpus:
        return gpus
    return narrowed(gpus, setting, by_index=_same_order(gpus, env))


def narrowed(gpus: Sequence[Gpu], setting: str, *, by_index: bool = True) -> list[Gpu]:
    """What CUDA_VISIBLE_DEVICES=`setting` leaves of `gpus` (nvidia-smi's), as CUDA reads it:
    indices and UUIDs (whole, a unique prefix, with or without `GPU-`), in the order given, the
    list ending at the first entry that names no device; a MIG instance (`MIG-...`), or an index
    when `by_index` is False (the orders may differ), is kept as given."""
    out: list[Gpu] = []
    for entry in (e.strip() for e in setting.split(",")):
        if re.fullmatch(r"\d+", entry):
            if int(entry) >= len(gpus):
                break
            gpu = gpus[int(entry)] if by_index else Gpu(None, "?", entry)
        elif entry.startswith("MIG-"):
            gpu = Gpu(None, "MIG instance", entry)
        else:
            want = entry if entry.startswith("GPU-") else f"GPU-{entry}"
            found = [g for g in gpus if len(want) > 4 and g.uuid.startswith(want)]
            if len(found) != 1:
                break
            gpu = found[0]
        if gpu not in out:
            out.append(gpu)
    return out


def _nvidia_smi_gpus(exe: str, env: Mapping[str, str]) -> list[Gpu]:
    from aotipre.runner.proc import run_process

    path = shutil.which(exe, path=env.get("PATH"))
    if path is None:
        return []
    done = run_process([path, *QUERY], timeout_s=TIMEOUT_S, private_tmp=False)
    if not done.ok:
        return []
    out = []
    for line in done.stdout_tail.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit() or not parts[-1]:
            continue
        out.append(Gpu(int(parts[0]), ", ".join(parts[1:-1]) or "?", parts[-1]))
    return out


def _same_order(gpus: Sequence[Gpu], env: Mapping[str, str]) -> bool:
    """CUDA numbers devices as nvidia-smi does (PCI bus order) when told to, or when all GPUs
    are alike (its default, fastest first, breaks ties by PCI bus)."""
    return env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len({g.name for g in gpus}) <= 1


def gpu_indices(value: Any) -> tuple[int, ...]:
    """`--gpus 0,2,3` or the `gpus` key (`[0, 2, 3]` or `"0,2,3"`): nvidia-smi indices, each
    once. Raises ValueError saying what is wrong."""
    if isinstance(value, str):
        items: list[Any] = [p.strip() for p in value.split(",")]
        if not all(re.fullmatch(r"\d{1,4}", p) for p in items):
            raise ValueError("expected GPU indices as nvidia-smi numbers them, e.g. 0,2,3")
        items = [int(p) for p in items]
    elif isinstance(value, (list, tuple)) and value:
        items = list(value)
        if not all(type(i) is int and 0 <= i < 10_000 for i in items):
            raise ValueError("expected GPU indices as nvidia-smi numbers them, e.g. [0, 2, 3]")
    else:
        raise ValueError('expected GPU indices, e.g. [0, 2, 3] or "0,2,3"')
    twice = sorted({i for i in items if items.count(i) > 1})
    if twice:
        raise ValueError(f"GPU {twice[0]} is named twice")
    return tuple(items)


def parse_gpus(value: Any, visible: Sequence[Gpu]) -> list[Gpu]:
    """The GPUs `--gpus` (or the `gpus` key) picks of the `visible` ones. Raises UsageError,
    one line, for a bad value, a repeated index, no GPU at all, or an index not visible."""
    shown = value if isinstance(value, str) else ",".join(map(str, value))
    try:
        indices = gpu_indices(value)
    except ValueError as exc:
        raise UsageError(f"--gpus {shown}: {exc}") from None
    if not visible:
        raise UsageError(
            f"--gpus {shown}: no GPU is visible here (nvidia-smi lists none, or "
            "CUDA_VISIBLE_DEVICES hides them all)"
        )
    by_index = {g.index: g for g in visible if g.index is not None}
    for i in indices:
        if i not in by_index:
            known = ", ".join(str(k) for k in sorted(by_index)) or "none by index"
            raise UsageError(f"--gpus {shown}: GPU {i} is not visible here (visible: {known})")
    return [by_index[i] for i in indices]


class GpuPool:
    """Lends each GPU to one holder at a time, in the order they asked (threads)."""

    def __init__(self, gpus: Sequence[Gpu]) -> None:
        if not gpus:
            raise ValueError("GpuPool: no GPU to lend")
        self._free: deque[Gpu] = deque(gpus)
        self._waiting: deque[object] = deque()
        self._changed = threading.Condition()

    @property
    def free(self) -> int:
        """GPUs not lent now."""
        with self._changed:
            return len(self._free)

    @property
    def waiting(self) -> int:
        """Holders waiting for a GPU now."""
        with self._changed:
            return len(self._waiting)

    @contextmanager
    def lease(self) -> Iterator[Gpu]:
        """Wait for a free GPU (first come, first served), hold it for the block, give it back
        even when the block raises. A GPU given back goes last, so that work spreads over all."""
        ticket = object()
        with self._changed:
            self._waiting.append(ticket)
            try:
                while self._waiting[0] is not ticket or not self._free:
                    self._changed.wait()
            except BaseException:
                self._waiting.remove(ticket)
                self._changed.notify_all()
                raise
            self._waiting.popleft()
            gpu = self._free.popleft()
            self._changed.notify_all()  # the next in line may find another GPU free
        try:
            yield gpu
        finally:
            with self._changed:
                self._free.append(gpu)
                self._changed.notify_all()


def pinned_check(
    jobs: Sequence[J],
    workers: int,
    wanted: Any,
    check: Callable[[J], Report],
    *,
    visible: Callable[[], list[Gpu]] = visible_gpus,
) -> Callable[[J], Report]:
    """`check`, with each job that needs a GPU (placement.needs_gpu) run on one GPU of its own
    (a lease from a GpuPool) and its workers pinned to it (CUDA_VISIBLE_DEVICES=<its UUID>),
    the report naming the GPU (Report.gpu); other jobs as they are.

    Pinned when `wanted` (--gpus / the `gpus` key) is given, or when several jobs that need a
    GPU can run at once (`workers` > 1) on a host with several GPUs; else `check` itself (every GPU visible to
    every package, today's reports). A package whose device names a GPU (`cuda:N`) chose its
    GPU itself: with `wanted`, a UsageError; without, nothing is pinned. The lease covers the
    whole check (its workers, crash triage's and the host canary's), so a GPU is lent again only
    after every process of the package that held it has exited.
    """
    if wanted is None and min(workers, len(jobs)) <= 1:
        return check
    gpus = visible()
    if wanted is None and len(gpus) <= 1:
        return check  # nothing to spread (and no package opened only to learn its device)
    # imported here: one package, or one GPU, never asks where a package runs (start-up time)
    from aotipre.fleet.placement import needs_gpu

    on_gpu = [job for job in jobs if needs_gpu(job)]
    if wanted is None and min(workers, len(on_gpu)) <= 1:
        return check  # no two packages would share a GPU
    named = sorted({d for d in map(_device, on_gpu) if ":" in d})
    if wanted is not None:
        gpus = parse_gpus(wanted, gpus)
        if named:
            raise UsageError(
                f"--device {named[0]} and --gpus both choose the GPU: give one of them",
                hint="with --gpus each package sees its GPU as cuda:0, so use --device cuda",
            )
    elif named:
        return check
    if not on_gpu:
        return check
    pool = GpuPool(gpus)
    pinned = {id(job) for job in on_gpu}

    def run(job: J) -> Report:
        if id(job) not in pinned:
            return check(job)
        with pool.lease() as gpu:
            report = check(pinned_job(job, gpu))
        report.gpu = gpu.to_dict()
        return report

    return run


def pinned_job(job: J, gpu: Gpu) -> J:
    """`job` with its workers' CUDA_VISIBLE_DEVICES set to `gpu`."""
    dynamic = job.options.dynamic
    if dynamic is None:
        from aotipre.runner.stages.options import DynamicOptions

        dynamic = DynamicOptions()
    env = {**dynamic.extra_env, PIN_ENV: gpu.uuid}
    options = dataclasses.replace(job.options, dynamic=dataclasses.replace(dynamic, extra_env=env))
    return dataclasses.replace(job, options=options)  # type: ignore[type-var]


def _device(job: Job) -> str:
    dynamic = job.options.dynamic
    return (dynamic.device if dynamic is not None else None) or ""
