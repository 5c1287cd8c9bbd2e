"""Sample inputs in the worker: loaded (weights_only) or synthesized from a plan, derived for
probes, moved to the device; and the summaries of tensors a step records (NaN/Inf rows, stats)."""

from __future__ import annotations

import ast
import io
import re
from typing import Any

import torch
import torch.utils._pytree as pytree

from .loading import read_member
from .protocol import StepError


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def normalize_inputs(obj: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The `(args, kwargs)` convention of torch.export's sample inputs (see aotipre.inputs)."""
    if isinstance(obj, (tuple, list)):
        if (
            len(obj) == 2
            and isinstance(obj[0], (tuple, list))
            and isinstance(obj[1], dict)
            and all(isinstance(k, str) for k in obj[1])
        ):
            return tuple(obj[0]), dict(obj[1])
        return tuple(obj), {}
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return (), dict(obj)
    return (obj,), {}


def load_inputs(spec: dict[str, Any], package: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    kind = spec.get("kind")
    if kind == "file":
        obj = torch.load(spec["path"], weights_only=True, map_location="cpu")
    elif kind == "member":
        obj = torch.load(
            io.BytesIO(read_member(package, spec["member"])), weights_only=True, map_location="cpu"
        )
    elif kind == "synth":
        gen = torch.Generator().manual_seed(int(spec.get("seed", 0)))
        tree = spec["tree"]
        args = tuple(synth_node(n, gen) for n in tree.get("args", []))
        kwargs = {k: synth_node(n, gen) for k, n in tree.get("kwargs", {}).items()}
        return args, kwargs
    else:
        raise ValueError(f"unknown inputs kind {kind!r}")
    return normalize_inputs(obj)


def lay_out_as_compiled(
    inputs: tuple[tuple[Any, ...], dict[str, Any]], compiled: list[Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`inputs` with each tensor named in `compiled` (`[[leaf, strides], ...]`: its position
    among the tensors in the order the sample holds them, and the dense strides the package was
    compiled for) copied into that layout: the same shape and values, the strides the compiled
    code reads."""
    leaves, spec = pytree.tree_flatten(inputs)
    tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    for leaf, strides in compiled:
        if not 0 <= int(leaf) < len(tensors):
            raise StepError(f"the inputs hold no tensor {leaf} to lay out as compiled")
        t = leaves[tensors[int(leaf)]]
        strides = tuple(int(s) for s in strides)
        if len(strides) != t.dim():
            raise StepError(f"compiled strides {strides} do not fit a tensor of rank {t.dim()}")
        out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
        out.copy_(t)
        leaves[tensors[int(leaf)]] = out
    args, kwargs = pytree.tree_unflatten(leaves, spec)
    return tuple(args), dict(kwargs)


def synth_node(node: dict[str, Any], gen: torch.Generator) -> Any:
    kind = node["kind"]
    if kind == "tensor":
        dtype = getattr(torch, node["dtype"])
        shape = tuple(int(s) for s in node["shape"])
        return random_tensor(shape, dtype, gen, node.get("low"), node.get("high"))
    if kind == "tuple":
        return tuple(synth_node(n, gen) for n in node["items"])
    if kind == "list":
        return [synth_node(n, gen) for n in node["items"]]
    if kind == "dict":
        return {k: synth_node(n, gen) for k, n in node["items"].items()}
    return node.get("value")


def random_tensor(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    gen: torch.Generator,
    low: float | None = None,
    high: float | None = None,
) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.float32 if dtype.itemsize < 4 or not dtype.is_floating_point else dtype
        if low is not None and high is not None:
            t = torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low
            return t.to(dtype)
        return torch.randn(shape, generator=gen, dtype=base).to(dtype)
    lo = 0 if low is None else int(low)
    hi = 2 if high is None else int(high)
    if hi <= lo:
        hi = lo + 1
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)


def derive_tensor(sample: torch.Tensor, shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """A tensor of `shape` with the sample's dtype, device, dim order and value range."""
    dtype = sample.dtype
    flat = sample.detach().reshape(-1).cpu()
    if flat.numel() and dtype != torch.bool and not dtype.is_complex:
        values = torch.unique(flat)
        if values.numel() <= 2:
            pick = torch.randint(0, values.numel(), tuple(shape), generator=gen)
            out = values[pick]
        elif dtype.is_floating_point:
            finite = flat[torch.isfinite(flat.float())].double()
            lo = float(finite.min()) if finite.numel() else -1.0
            hi = float(finite.max()) if finite.numel() else 1.0
            out = random_tensor(tuple(shape), dtype, gen, lo, hi)
        else:
            out = random_tensor(tuple(shape), dtype, gen, int(flat.min()), int(flat.max()) + 1)
    else:
        out = random_tensor(tuple(shape), dtype, gen)
    out = out.to(dtype)
    # keep the sample's memory layout (its dims ordered by stride) for static-stride models
    if sample.dim() == len(shape) and sample.dim() > 1 and not sample.is_contiguous():
        strides = sample.stride()
        order = sorted(range(sample.dim()), key=lambda d: -strides[d])
        permuted = out.permute(*order).contiguous()
        inverse = [order.index(d) for d in range(len(order))]
        out = permuted.permute(*inverse)
    return out.to(sample.device)


def to_device(tree: Any, device: str) -> Any:
    return pytree.tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, tree)


def tensor_summary(t: Any) -> dict[str, Any]:
    if not isinstance(t, torch.Tensor):
        return {"kind": type(t).__name__, "value": repr(t)[:200]}
    out: dict[str, Any] = {
        "kind": "tensor",
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "device": str(t.device),
    }
    if t.is_floating_point() or t.is_complex():
        d = t.detach()
        out["nan"] = int(torch.isnan(d).sum())
        out["inf"] = int(torch.isinf(d).sum())
        if d.dim() >= 1:
            # rows along dim 0 (the batch dim of most models) that hold them, so the report can
            # name the input rows that produce them; capped, the count says how many in all
            for key, mask in (("nan", torch.isnan(d)), ("inf", torch.isinf(d))):
                if out[key]:
                    rows = mask.reshape(d.shape[0], -1).any(dim=1).nonzero().reshape(-1)
                    out[f"{key}_rows"] = [int(r) for r in rows[:ROWS_CAP]]
                    out[f"{key}_row_count"] = int(rows.numel())
    return out


def tensor_stats(t: Any) -> dict[str, Any]:
    """What the intermediate value printer (level 2) shows of a tensor: dtype, shape, stride,
    numel, min/max/mean of its finite values, and its NaN and Inf counts."""
    if not isinstance(t, torch.Tensor):
        raise StepError(f"not a tensor: {type(t).__name__}")
    d = t.detach()
    out: dict[str, Any] = {
        "dtype": dtype_name(d.dtype),
        "shape": list(d.shape),
        "stride": list(d.stride()),
        "numel": d.numel(),
        "nan": 0,
        "inf": 0,
    }
    if d.is_complex() or d.dtype == torch.bool or d.numel() == 0:
        return out
    values = d.to(torch.float64) if d.is_floating_point() else d
    if d.is_floating_point():
        finite = torch.isfinite(values)
        out["nan"] = int(torch.isnan(values).sum())
        out["inf"] = int(torch.isinf(values).sum())
        values = values[finite]
        if values.numel() == 0:
            return out
    out["min"] = float(values.min())
    out["max"] = float(values.max())
    out["mean"] = float(values.to(torch.float64).mean())
    return out


def value_at(tree: dict[str, Any], path: str) -> Any:
    """The leaf of {"args": [...], "kwargs": {...}} at a path such as `kwargs['mask'][0]`."""
    head, _, rest = path.partition("[")
    node: Any = tree[head]
    for token in re.findall(r"\[([^\]]+)\]", "[" + rest if rest else ""):
        node = node[ast.literal_eval(token)]
    return node


ROWS_CAP = 32
"""At most this many row indices per output are recorded for NaN and for Inf."""


def flat_tensors(tree: Any) -> list[Any]:
    return pytree.tree_flatten(tree)[0]


def _state_summary(t: Any) -> dict[str, Any]:
    """tensor_summary with the element count and the first 4 values (a counter's value)."""
    out = tensor_summary(t)
    if isinstance(t, torch.Tensor):
        out["numel"] = t.numel()
        first = t.detach().reshape(-1)[:4].cpu().tolist()
        out["first"] = [str(v) if isinstance(v, complex) else v for v in first]
    return out


def _detached(tree: Any) -> Any:
    """A copy of a call's outputs on the CPU (the next call may reuse their memory)."""
    return pytree.tree_map(
        lambda x: x.detach().cpu().clone() if isinstance(x, torch.Tensor) else x, tree
    )


def _has_leaves(tree: Any) -> bool:
    return bool(pytree.tree_flatten(tree)[0])
