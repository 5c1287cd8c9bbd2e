"""The C-shim step: before compiling, which ATen ops of the ExportedProgram Inductor will run as
fallback kernels that have no C shim, so that the compiled code calls them through the proxy
executor (torch/_inductor/ir.py FallbackKernel.codegen warns "is missing a c-shim implementation,
using proxy executor as fallback" for each while compiling)."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from .compiling import check_inductor_configs
from .core import WorkerCore

MAX_SHIMLESS_OPS = 50
"""At most this many ops are recorded (the first in graph order)."""


def c_shim_names() -> frozenset[str] | None:
    """The ATen ops (`aten.name.overload`) this torch's C shim covers (torchgen's
    `inductor_fallback_ops`, what ir.py reads), or None when this torch has no such table."""
    try:
        from torchgen.aoti.fallback_ops import inductor_fallback_ops
    except ImportError:
        return None
    return frozenset(inductor_fallback_ops)


def is_fallback_kernel(op: Any, node: Any) -> bool:
    """Inductor runs `op` as an ATen fallback kernel: it has no lowering (an implicit fallback),
    its lowering is make_fallback's handler, or lite mode (`fallback_by_default`) falls back on
    the node. A lowering that falls back only for some inputs is not seen here (the compile's
    own warning tells those)."""
    from torch._inductor import lowering

    handler = lowering.lowerings.get(op)
    if handler is None:
        return True
    try:
        handler_code = lowering.fallback_handler(op, add_to_fallback_set=False).__code__
    except (AttributeError, TypeError):  # a torch whose lowering.py has no such handler
        return False
    if getattr(getattr(handler, "__wrapped__", handler), "__code__", None) is handler_code:
        return True
    with contextlib.suppress(ImportError, AttributeError, AssertionError):
        from torch._inductor.utils import should_fallback_by_default

        return bool(should_fallback_by_default(node))
    return False


def model_line(node: Any) -> str:
    """The model's source line of an FX node (`file:line in function`), from its stack trace."""
    trace = node.meta.get("stack_trace") or ""
    frames = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
    if not frames:
        return ""
    last = frames[-1]  # `File "x.py", line 12, in forward`
    parts = [p.strip() for p in last.split(",")]
    if len(parts) < 3:
        return last
    path = parts[0].removeprefix("File ").strip('"')
    return f"{path}:{parts[1].removeprefix('line ').strip()} in {parts[2].removeprefix('in ')}"


def shimless_ops(
    ep: Any, configs: dict[str, Any], limit: int = MAX_SHIMLESS_OPS
) -> list[dict[str, str]]:
    """Each ATen op of `ep` that Inductor, under the inductor `configs`, will run as a fallback
    kernel with no C shim in this torch, as {op, node, line} in graph order (at most `limit`);
    [] when this torch has no C-shim table. `ep` is decomposed with Inductor's decomposition
    table first, as the compile does (the original is left as it is)."""
    shims = c_shim_names()
    if shims is None:
        return []
    from torch._inductor import config as inductor_config
    from torch._inductor.decomposition import select_decomp_table

    check_inductor_configs(configs)
    found: list[dict[str, str]] = []
    seen: set[str] = set()
    with inductor_config.patch(configs):
        decomposed = ep.run_decompositions(select_decomp_table())
        for node in decomposed.graph.nodes:
            op = node.target
            if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
                continue
            if op.namespace != "aten" or str(op) in shims or str(op) in seen:
                continue
            if not is_fallback_kernel(op, node):
                continue
            seen.add(str(op))
            found.append({"op": str(op), "node": node.name, "line": model_line(node)})
            if len(found) >= limit:
                break
    return found


class ShimOps(WorkerCore):
    """Step `c_shims`."""

    def op_c_shims(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Record the ops of the ExportedProgram with no C shim (`ops`, see shimless_ops) under
        the compile's inductor configs; `shim_table` False when this torch has no table."""
        entry["shim_table"] = c_shim_names() is not None
        entry["ops"] = shimless_ops(self.get_ep(), dict(step.get("inductor_configs") or {}))
