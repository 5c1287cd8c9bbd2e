"""The compile step: aoti_compile_and_package over the ExportedProgram, with the inductor configs
checked against this torch and every Triton launch announced on stderr (user kernels by op)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

import torch

from .compile_failure import failure_facts
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


def register_fallbacks(ops: list[str]) -> None:
    """Make each op (`aten.cummin.default`) an ATen fallback kernel in this process's Inductor
    lowering table, replacing its lowering: torch._inductor.lowering.make_fallback (2.13-2.15;
    no inductor config falls back one op). The compile-failure workaround's rebuild uses it."""
    from torch._inductor import lowering

    make_fallback = getattr(lowering, "make_fallback", None)
    if make_fallback is None:
        raise not_available("torch._inductor.lowering.make_fallback")
    for name in ops:
        op: Any = torch.ops
        try:
            for part in name.split("."):
                op = getattr(op, part)
        except AttributeError:
            raise not_available(f"the operator {name!r}") from None
        if not isinstance(op, torch._ops.OpOverload):
            raise not_available(f"the operator overload {name!r}")
        make_fallback(op, warn=False, override_decomp=True)


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


PHASE_HOOKS: tuple[tuple[str, str, str, str], ...] = (
    ("torch._inductor.graph", "GraphLowering", "run", "lowering"),
    ("torch._inductor.graph", "GraphLowering", "codegen", "code generation"),
    ("torch._inductor.graph", "GraphLowering", "codegen_with_cpp_wrapper", "code generation"),
    ("torch._inductor.select_algorithm", "AlgorithmSelectorCache", "__call__", "autotuning"),
    ("torch._inductor.cpp_builder", "CppBuilder", "build", "C++ build"),
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner", "precompile", "Triton build"),
)
"""(module, class, method, phase): what aoti_compile_and_package is doing while the method
runs. A method missing from a torch version is not hooked (its phase is then not told)."""


@contextlib.contextmanager
def compile_phases(record: Any) -> Iterator[None]:
    """Call `record(phase)` each time the compile enters or leaves one of PHASE_HOOKS' methods,
    the nested phases joined by ' > ' (`autotuning > C++ build`); `record("")` after the last.
    The parent reads the last phase recorded when the worker is killed (memory, time)."""
    import importlib
    import threading

    per_thread = threading.local()  # autotuning and C++ builds may run in Inductor's threads
    patches: list[tuple[Any, str, Any]] = []

    def hook(cls: Any, attr: str, name: str) -> None:
        original = cls.__dict__.get(attr)
        if original is None or not callable(original):
            return

        def phased(*args: Any, **kwargs: Any) -> Any:
            stack: list[str] = per_thread.__dict__.setdefault("stack", [])
            stack.append(name)
            record(" > ".join(stack))
            try:
                return original(*args, **kwargs)
            finally:
                stack.pop()
                record(" > ".join(stack))

        setattr(cls, attr, phased)
        patches.append((cls, attr, original))

    for module, cls_name, attr, name in PHASE_HOOKS:
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except (ImportError, AttributeError):
            continue
        hook(cls, attr, name)
    try:
        yield
    finally:
        for cls, attr, original in reversed(patches):
            setattr(cls, attr, original)


def peak_rss_mb() -> float:
    """The peak resident memory of this worker and of its finished children (the C++ compiler
    runs), in MiB (ru_maxrss is in KiB on Linux)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)


class CompileOps(WorkerCore):
    """Step `compile`."""

    def compile_phase(self, entry: dict[str, Any], name: str) -> None:
        """Record the compile's phase (`entry` and the result file's `current`, which the
        parent reads when the worker is killed) and the peak memory so far."""
        entry["peak_rss_mb"] = peak_rss_mb()
        current = self.rec.data.get("current")
        if isinstance(current, dict):
            current["peak_rss_mb"] = entry["peak_rss_mb"]
        self.phase(entry, f"compile: {name}" if name else "compile")

    def op_compile(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        ep = self.get_ep()
        if ep.example_inputs is None or not _has_leaves(ep.example_inputs):
            ep.example_inputs = self.get_inputs(entry)
            entry["example_inputs"] = "sample inputs"
        else:
            ep.example_inputs = to_device(ep.example_inputs, self.device)
            entry["example_inputs"] = "archive"
        configs = dict(step.get("inductor_configs") or {})
        if step.get("configs_by_fact"):  # accuracy triage's speculative rebuild
            from .accuracy import configs_by_facts

            entry["fact"], chosen = configs_by_facts(list(ep.graph.nodes), step["configs_by_fact"])
            configs.update(chosen)
        check_inductor_configs(configs)
        fallback_ops = [str(op) for op in step.get("fallback_ops") or ()]
        if fallback_ops:
            register_fallbacks(fallback_ops)
            # the FX graph cache's key does not cover the lowering table: no entry written
            # with these fallbacks may serve a later compile of the same graph
            configs["fx_graph_cache"] = False
            entry["fallback_ops"] = fallback_ops
        out = step["out"]
        os.makedirs(os.path.dirname(out), exist_ok=True)
        owners = user_kernel_owners(ep) if self.device.startswith("cuda") else {}
        entry["user_kernels"] = owners
        trace = bool(owners) or bool(step.get("trace_launches"))  # the fault re-run: every kernel
        with (
            users_tempdir(),
            traced_triton_launches(owners) if trace else contextlib.nullcontext(),
            compile_phases(lambda name: self.compile_phase(entry, name)),
        ):
            try:
                path = torch._inductor.aoti_compile_and_package(
                    ep, package_path=out, inductor_configs=configs
                )
            except Exception as exc:
                try:
                    entry["compile_failure"] = failure_facts(exc, ep.graph)
                except Exception as broken:  # the facts are extra: the compile's error stands
                    entry["compile_failure"] = {"facts_error": f"{type(broken).__name__}: {broken}"}
                raise
        entry["package"] = str(path)
        entry["size"] = os.path.getsize(out)
