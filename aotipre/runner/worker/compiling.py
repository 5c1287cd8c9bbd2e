"""The compile step: aoti_compile_and_package over the ExportedProgram, with the inductor configs
checked against this torch and every Triton launch announced on stderr (user kernels by op)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

import torch

from .core import WorkerCore
from .host import users_tempdir
from .inputs import _has_leaves, to_device
from .protocol import not_available


def check_inductor_configs(configs: dict[str, Any]) -> None:
    """Every key of `configs` must be an inductor config of this torch (the crash-triage printer
    configs `aot_inductor.debug_intermediate_value_printer`/`filtered_kernel_names` exist in
    2.11-2.15; `aot_inductor.check_upperbound` only from 2.15)."""
    from torch._inductor import config as inductor_config

    for key in configs:
        obj: Any = inductor_config
        try:
            for part in key.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            raise not_available(f"the inductor config {key!r}") from None


USER_KERNEL_MARKER = "@@aotipre-kernel"
"""`@@aotipre-kernel start|end NAME OP` on stderr around each Triton launch while compiling."""


def kernel_name(kernel: Any) -> str:
    """The Python function name behind a JITFunction, Autotuner or inductor CachingAutotuner."""
    for _ in range(4):
        inner = getattr(kernel, "fn", None)
        if inner is None:
            break
        kernel = inner
    return str(getattr(kernel, "__name__", None) or type(kernel).__name__)


def user_kernel_owners(ep: Any) -> dict[str, str]:
    """{user Triton kernel name: the torch.library.triton_op that launches it} for the custom
    ops the ExportedProgram's graph calls (torch._library.triton keeps each op's kernels)."""
    try:
        from torch._library.triton import get_triton_kernels_for_op
    except ImportError:
        return {}
    owners: dict[str, str] = {}
    for node in ep.graph.nodes:
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or target.namespace == "aten":
            continue
        op = target._schema.name  # `ns::op`
        for kernel in get_triton_kernels_for_op(op):
            owners.setdefault(kernel_name(kernel), op)
    return owners


@contextlib.contextmanager
def traced_triton_launches(owners: dict[str, str]) -> Iterator[None]:
    """Announce every Triton launch on stderr (flushed) while the block runs: inductor's
    CachingAutotuner (run, bench: what autotuning at compile time calls) and the user's
    JITFunction.run. A compile that faults inside a kernel then names it in its log: the last
    `start` without an `end` (with CUDA_LAUNCH_BLOCKING=1 the faulting launch itself raises)."""
    patches: list[tuple[Any, str, Any]] = []

    def announce(what: str, kernel: Any) -> None:
        name = kernel_name(kernel)
        op = owners.get(name) or owners.get(re.sub(r"_\d+$", "", name)) or "-"
        with contextlib.suppress(OSError):
            os.write(2, f"{USER_KERNEL_MARKER} {what} {name} {op}\n".encode())

    def wrap(cls: Any, attr: str) -> None:
        original = getattr(cls, attr, None)
        if original is None:
            return

        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            announce("start", self)
            out = original(self, *args, **kwargs)
            announce("end", self)
            return out

        setattr(cls, attr, traced)
        patches.append((cls, attr, original))

    with contextlib.suppress(ImportError):
        from triton.runtime.jit import JITFunction

        wrap(JITFunction, "run")
    with contextlib.suppress(ImportError):
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner

        wrap(CachingAutotuner, "run")
        wrap(CachingAutotuner, "bench")
    try:
        yield
    finally:
        for cls, attr, original in reversed(patches):
            setattr(cls, attr, original)


class CompileOps(WorkerCore):
    """Step `compile`."""

    def op_compile(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        ep = self.get_ep()
        if ep.example_inputs is None or not _has_leaves(ep.example_inputs):
            ep.example_inputs = self.get_inputs(entry)
            entry["example_inputs"] = "sample inputs"
        else:
            ep.example_inputs = to_device(ep.example_inputs, self.device)
            entry["example_inputs"] = "archive"
        configs = dict(step.get("inductor_configs") or {})
        check_inductor_configs(configs)
        out = step["out"]
        os.makedirs(os.path.dirname(out), exist_ok=True)
        owners = user_kernel_owners(ep) if self.device.startswith("cuda") else {}
        entry["user_kernels"] = owners
        trace = bool(owners) or bool(step.get("trace_launches"))  # the fault re-run: every kernel
        with (
            users_tempdir(),
            traced_triton_launches(owners) if trace else contextlib.nullcontext(),
        ):
            path = torch._inductor.aoti_compile_and_package(
                ep, package_path=out, inductor_configs=configs
            )
        entry["package"] = str(path)
        entry["size"] = os.path.getsize(out)
