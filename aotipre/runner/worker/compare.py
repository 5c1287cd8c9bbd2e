"""Output comparison in the worker: leaf by leaf, structure, dtype, shape, max abs/rel error and
mismatch count, with default tolerances by dtype."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.utils._pytree as pytree

from .inputs import dtype_name

# Default comparison tolerances (rtol, atol) by dtype: looser than torch.testing's, because a
# compiled program legitimately reorders float reductions and fuses ops.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-5, 1e-7),
    "complex128": (1e-5, 1e-7),
    "float32": (1e-4, 1e-5),
    "complex64": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
    "float8_e4m3fn": (0.125, 0.0625),
    "float8_e5m2": (0.25, 0.125),
    "float8_e4m3fnuz": (0.125, 0.0625),
    "float8_e5m2fnuz": (0.25, 0.125),
}


def compare_outputs(
    aoti: Any, eager: Any, rtol: float | None, atol: float | None
) -> dict[str, Any]:
    """Leaf-by-leaf comparison: structure, dtype, shape, max abs/rel error, mismatch count."""
    a_leaves, a_spec = pytree.tree_flatten(aoti)
    e_leaves, e_spec = pytree.tree_flatten(eager)
    out: dict[str, Any] = {"structure": None, "outputs": []}
    if len(a_leaves) != len(e_leaves):
        out["structure"] = (
            f"the compiled model returns {len(a_leaves)} output(s), the ExportedProgram "
            f"{len(e_leaves)}"
        )
        out["counts"] = [len(a_leaves), len(e_leaves)]
        return out
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        out["outputs"].append(compare_leaf(i, a, e, rtol, atol))
    return out


def compare_leaf(i: int, a: Any, e: Any, rtol: float | None, atol: float | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"index": i}
    if isinstance(a, torch.Tensor) != isinstance(e, torch.Tensor):
        # a tensor on one side, a value on the other: a structure difference (`a == e` would
        # compare elementwise and fail on more than one element)
        rec.update(kind="tensor", structure=True)
        for key, x in (("", a), ("eager_", e)):
            is_t = isinstance(x, torch.Tensor)
            rec[f"{key}dtype"] = dtype_name(x.dtype) if is_t else type(x).__name__
            rec[f"{key}shape"] = list(x.shape) if is_t else ""
        return rec
    if not isinstance(a, torch.Tensor):
        rec.update(kind="value", equal=bool(a == e), aoti=repr(a)[:200], eager=repr(e)[:200])
        return rec
    rec.update(
        kind="tensor",
        dtype=dtype_name(a.dtype),
        eager_dtype=dtype_name(e.dtype),
        shape=list(a.shape),
        eager_shape=list(e.shape),
        numel=a.numel(),
    )
    if a.dtype != e.dtype or tuple(a.shape) != tuple(e.shape):
        rec["structure"] = True
        return rec
    d_rtol, d_atol = TOLERANCES.get(dtype_name(a.dtype), (0.0, 0.0))
    r = d_rtol if rtol is None else rtol
    t = d_atol if atol is None else atol
    rec.update(rtol=r, atol=t)
    a_c = a.detach().cpu()
    e_c = e.detach().cpu()
    if not (a.is_floating_point() or a.is_complex()):
        diff = a_c != e_c
        mism = int(diff.sum())
        rec.update(mismatches=mism, max_abs=None, max_rel=None)
        if mism:
            delta = (a_c.double() - e_c.double()).abs() if a.dtype != torch.bool else diff.double()
            rec["max_abs"] = float(delta.max())
        return rec
    wide = torch.complex128 if a.is_complex() else torch.float64
    a64, e64 = a_c.to(wide), e_c.to(wide)
    nan_a, nan_e = torch.isnan(a64), torch.isnan(e64)
    rec.update(
        nan=int(nan_a.sum()),
        inf=int(torch.isinf(a64).sum()),
        eager_nan=int(nan_e.sum()),
        eager_inf=int(torch.isinf(e64).sum()),
    )
    close = torch.isclose(a64, e64, rtol=r, atol=t, equal_nan=True)
    rec["mismatches"] = int((~close).sum())
    both_finite = torch.isfinite(a64) & torch.isfinite(e64)
    if bool(both_finite.any()):
        delta = (a64 - e64).abs()[both_finite]
        ref = e64.abs()[both_finite]
        rel = delta / ref.clamp_min(torch.finfo(torch.float64).tiny)
        rec["max_abs"] = float(delta.max())
        rec["max_rel"] = float(rel.max()) if math.isfinite(float(rel.max())) else None
        worst = int((a64 - e64).abs().nan_to_num(0.0).reshape(-1).argmax())
        rec["worst_index"] = list(_unravel(worst, tuple(a.shape)))
        rec["worst_aoti"] = _scalar(a64.reshape(-1)[worst])
        rec["worst_eager"] = _scalar(e64.reshape(-1)[worst])
    else:
        rec["max_abs"] = None
        rec["max_rel"] = None
    return rec


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(out))


def _scalar(t: torch.Tensor) -> Any:
    v = t.item()
    return str(v) if isinstance(v, complex) else float(v)
