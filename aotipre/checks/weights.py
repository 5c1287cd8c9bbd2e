"""Static check of a weight swap (`--weights FILE`): the file's tensors against the package's
constants (wrapper.cpp's constants_info_) and the ExportedProgram's state_dict, by name, shape,
dtype and device, torch-free.

What plain torch 2.13 does with each (measured; `AOTICompiledModel.load_constants`, keyed by
state_dict names): a missing constant is refused with check_full_update=True and silently kept
stale without it; an unknown name is refused (`Constant not found: NAME`); another shape or
dtype is copied unchecked (the model computes with garbage); a folded constant's value is
recomputed from its sources. Small 0-d/1-d tensors were inlined into the kernels at compile
time (torch/_inductor/graph.py get_attr, can_inline_constant) and have no constant at all:
naming one is refused like an unknown name, and leaving one out keeps its compiled value while
the rest change (ModelInfo.baked_state names them when the ExportedProgram is known).

The work is bounded by the file's size: a dictionary look-up per name, a fuzzy suggestion only
for the first SUGGESTED unknown names, one finding per unknown name only for the first SHOWN."""

from __future__ import annotations

import difflib

from aotipre.findings import Finding, Severity, codes
from aotipre.inputs.meta import TensorMeta
from aotipre.inputs.weights import WeightsFile
from aotipre.pt2.spec import ConstantSpec, ModelInfo, StateTensor, inlinable_shape

SHOWN = 10
"""Unknown names reported one finding each; the rest are counted in one more finding."""
SUGGESTED = SHOWN
"""Unknown names that get a "did you mean" (difflib against the names the file lacks)."""


def check_weights(model: ModelInfo, weights: WeightsFile) -> list[Finding]:
    """AOT060-AOT066 for one model; [] when the file matches (or the model has no AOTI code,
    whose constants are unknown until it is compiled: the dynamic weights stage then tells)."""
    if model.aoti is None or not (model.constants or model.baked_state):
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
    baked = {t.fqn: t for t in model.baked_state}
    needed = [n for n, c in by_fqn.items() if c.swappable]
    missing = [n for n in needed if n not in weights.tensors]
    device = model.device_type or "cpu"
    unknown: list[str] = []
    for name, meta in weights.tensors.items():
        spec = by_fqn.get(name)
        if spec is None:
            if name in baked:
                add("AOT066", _named_baked(baked[name], label), input=name, actual=meta.describe())
            else:
                unknown.append(name)
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
    for i, name in enumerate(unknown[:SHOWN]):
        meta = weights.tensors[name]
        close = _suggestion(name, missing) if i < SUGGESTED else None
        if close is None and _probably_inlined(model, meta):
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
        hint = f"; did you mean '{close}'?" if close else ""
        add(
            "AOT061",
            f"'{name}' of {label} names no constant of the package{hint} "
            f"(load_constants refuses the swap: Constant not found: {name})",
            input=name,
            expected=close,
            actual=name,
        )
    if len(unknown) > SHOWN:
        add(
            "AOT061",
            f"{len(unknown) - SHOWN:,} more names of {label} name no constant of the package "
            f"(the next: {', '.join(repr(n) for n in unknown[SHOWN : SHOWN + 3])}); "
            "load_constants refuses a swap naming any of them",
            input=unknown[SHOWN],
            actual=f"{len(unknown) - SHOWN} more",
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
    swapped = sum(1 for n in needed if n in weights.tensors)
    for t in model.baked_state:
        if swapped and t.inlinable and t.fqn not in weights.tensors:
            add(
                "AOT066",
                f"'{t.fqn}' ({t.describe()}, a {t.kind} of the ExportedProgram) was inlined "
                f"into the kernels at compile time and {label} lacks it: the swap changes "
                f"{swapped} tensor(s) and leaves '{t.fqn}' at its compiled value, which no "
                "weight update can change",
                input=t.fqn,
                expected=t.describe(),
            )
    if swapped and not model.state and model.lifted_without_constant:
        small = sum(1 for n in unknown if inlinable_shape(weights.tensors[n].shape))
        unnamed = model.lifted_without_constant - small
        if unnamed > 0:
            add(
                "AOT066",
                f"the compiled code keeps no constant for {unnamed} lifted tensor(s) "
                f"(parameters, buffers or tensor constants, inlined into the kernels or unused) "
                f"that {label} does not name: those that are parameters keep their compiled "
                "values whatever the swap gives; the ExportedProgram names them "
                "(--exported-program)",
                severity=Severity.WARNING,
                expected=f"{model.lifted_without_constant} lifted tensor(s) without a constant",
            )
    return out


def _named_baked(t: StateTensor, label: str) -> str:
    """AOT066's message for a file naming a state_dict tensor the compiled code has no
    constant for."""
    why = (
        "inlined into the kernels at compile time, so its compiled value runs whatever the "
        "swap gives"
        if t.inlinable
        else "kept as no constant by the compile (unused, or folded into another constant), so "
        "the swap cannot change what runs"
    )
    return (
        f"'{t.fqn}' ({t.describe()}) of {label} is a {t.kind} of the ExportedProgram that the "
        f"package has no constant for: {why}; load_constants refuses a swap naming it "
        f"(Constant not found: {t.fqn})"
    )


def _probably_inlined(model: ModelInfo, meta: TensorMeta) -> bool:
    """Without the program's state_dict: a name of no constant, small enough to have been
    inlined, in a package whose wrapper does not show that it kept every lifted tensor."""
    return not model.state and inlinable_shape(meta.shape) and model.lifted_without_constant != 0


def _suggestion(name: str, missing: list[str]) -> str | None:
    """The closest name the file lacks (a rename), if any is close: never a name the file
    already holds, which renaming to would only duplicate."""
    close = difflib.get_close_matches(name, missing, n=1, cutoff=0.6)
    return close[0] if close else None
