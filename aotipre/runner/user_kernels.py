"""Which Triton kernel a compile was launching when it faulted, from the worker's launch markers.

While it compiles an ExportedProgram that calls a torch.library.triton_op on CUDA, the worker
announces every Triton launch on stderr (`@@aotipre-kernel start|end NAME OP`, see
worker.traced_triton_launches): autotuning at compile time runs the user's kernels, and one that
indexes out of bounds faults inside aoti_compile_and_package. The last launch that started and
never ended is the faulting one when launches are synchronous (CUDA_LAUNCH_BLOCKING=1);
otherwise the error may surface at a later launch, and the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass

MARKER = "@@aotipre-kernel "


@dataclass(frozen=True)
class KernelLaunch:
    """One traced launch."""

    kernel: str
    op: str | None
    """The triton_op whose kernel it is (None: an inductor kernel, or unknown)."""
    ended: bool
    """It returned: with asynchronous launches a later error may still be its fault."""
    user: bool
    """The kernel belongs to a torch.library.triton_op of the model."""


def launches(log: str) -> list[KernelLaunch]:
    """Every traced launch in order, with whether it ended."""
    out: list[KernelLaunch] = []
    open_at: dict[str, list[int]] = {}
    for line in log.splitlines():
        if not line.startswith(MARKER):
            continue
        parts = line[len(MARKER) :].split()
        if len(parts) != 3 or parts[0] not in ("start", "end"):
            continue
        what, name, op = parts
        owner = None if op == "-" else op
        if what == "start":
            open_at.setdefault(name, []).append(len(out))
            out.append(KernelLaunch(name, owner, False, owner is not None))
        elif open_at.get(name):
            i = open_at[name].pop()
            out[i] = KernelLaunch(name, owner, True, owner is not None)
    return out


def faulting_launch(log: str) -> KernelLaunch | None:
    """The last launch that never ended; else the last user-kernel launch (asynchronous
    errors); None when the log holds no launch."""
    traced = launches(log)
    unfinished = [k for k in traced if not k.ended]
    if unfinished:
        return unfinished[-1]
    users = [k for k in traced if k.user]
    return users[-1] if users else None


def describe(launch: KernelLaunch) -> str:
    """`user Triton kernel bad_kernel (launched by probe::bad_double)` and how sure that is."""
    who = "user Triton kernel" if launch.user else "Triton kernel"
    by = f" (launched by {launch.op})" if launch.op else ""
    sure = (
        "the launch that never returned"
        if not launch.ended
        else "the last user kernel launched; launches were asynchronous, so the fault may be "
        "its or a later one's (re-run with CUDA_LAUNCH_BLOCKING=1)"
    )
    return f"{who} {launch.kernel}{by}: {sure}"
