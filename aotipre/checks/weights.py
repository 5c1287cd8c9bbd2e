"""Static check of a weight swap (`--weights FILE`): the file's tensors against the package's
constants (wrapper.cpp's constants_info_), by name, shape, dtype and device, torch-free.

What plain torch 2.13 does with each (measured; `AOTICompiledModel.load_constants`, keyed by
state_dict names): a missing constant is refused with check_full_update=True and silently kept
stale without it; an unknown name is refused (`Constant not found: NAME`); another shape or
dtype is copied unchecked (the model computes with garbage); a folded constant's value is
recomputed from its sources; small 0-d/1-d tensors were inlined into the kernels at compile
time (torch/_inductor/graph.py can_inline_constant) and have no constant at all."""

from __future__ import annotations

import difflib

from aotipre import codes
from aotipre.findings import Finding
from aotipre.inputs.meta import TensorMeta
from aotipre.inputs.weights import WeightsFile
from aotipre.pt2.spec import ConstantSpec, ModelInfo

INLINE_MAX = 8
"""Inductor inlines a 0-d tensor, or a 1-d one of at most this many elements, into the kernels
(graph.py: can_inline_constant) unless runtime constant folding keeps tensor constants."""


def inlinable(meta: TensorMeta) -> bool:
    return len(meta.shape) == 0 or (len(meta.shape) == 1 and meta.shape[0] <= INLINE_MAX)


def check_weights(model: ModelInfo, weights: WeightsFile) -> list[Finding]:
    """AOT060-AOT066 for one model; [] when the file matches (or the model has no AOTI code,
    whose constants are unknown until it is compiled: the dynamic weights stage then tells)."""
    if model.aoti is None or not model.constants:
        return []
    out: list[Finding] = []
    label = f"--weights {weights.path}"

    def add(code: str, message: str, **fields: object) -> None:
        out.append(
            codes.get(code).finding(message, model=model.name, stage="weights", **fields)  # type: ignore[arg-type]
        )

    by_fqn: dict[str, ConstantSpec] = {}
    for c in model.constants:
        by_fqn.setdefault(c.fqn or c.name, c)
    needed = [n for n, c in by_fqn.items() if c.swappable]
    missing = [n for n in needed if n not in weights.tensors]
    device = model.device_type or "cpu"
    for name, meta in weights.tensors.items():
        spec = by_fqn.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, missing, n=1, cutoff=0.6) or (
                difflib.get_close_matches(name, list(by_fqn), n=1, cutoff=0.6)
            )
            if not close and inlinable(meta):
                add(
                    "AOT066",
                    f"'{name}' ({meta.dtype}{list(meta.shape)}) of {label} is not a constant "
                    f"of the package: a tensor this small is inlined into the kernels at compile "
                    f"time, so its compiled value runs whatever the swap gives; load_constants "
                    f"refuses a swap naming it (Constant not found: {name})",
                    input=name,
                    actual=meta.describe(),
                )
                continue
            hint = f"; did you mean '{close[0]}'?" if close else ""
            add(
                "AOT061",
                f"'{name}' of {label} names no constant of the package{hint} "
                f"(load_constants refuses the swap: Constant not found: {name})",
                input=name,
                expected=close[0] if close else None,
                actual=name,
            )
            continue
        if not spec.swappable:
            add(
                "AOT065",
                f"'{name}' of {label} is a {spec.kind or 'folded'} constant: the compile folded "
                "it from other constants, so it is recomputed from them (runtime folding) or "
                "stays as compiled; the value the swap gives for it is not what runs",
                input=name,
            )
            continue
        if spec.shape is not None and tuple(spec.shape) != meta.shape:
            add(
                "AOT062",
                f"'{name}': {label} holds shape {list(meta.shape)}, the package's constant "
                f"{spec.name} has {list(spec.shape)} (load_constants copies it unchecked)",
                input=name,
                expected=list(spec.shape),
                actual=list(meta.shape),
            )
        if spec.dtype is not None and spec.dtype != meta.dtype:
            add(
                "AOT063",
                f"'{name}': {label} holds {meta.dtype}, the package's constant {spec.name} is "
                f"{spec.dtype} (load_constants copies the bytes unchecked)",
                input=name,
                expected=spec.dtype,
                actual=meta.dtype,
            )
        if meta.device not in (device, "meta") and weights.format == "torch.save":
            add(
                "AOT064",
                f"'{name}': {label} stores it on {meta.device}, the package's constants live "
                f"on {device}",
                input=name,
                expected=device,
                actual=meta.device,
            )
    for name in missing:
        spec = by_fqn[name]
        add(
            "AOT060",
            f"{label} lacks '{name}' ({spec.dtype}{list(spec.shape or ())}, a {spec.kind}) that "
            "the package's constants need: load_constants(check_full_update=True) refuses the "
            "swap, without the check the constant keeps its compiled value",
            input=name,
            expected=f"{spec.dtype}{list(spec.shape or ())}",
        )
    return out
